//! Whole numbers in JSON as hosts write them.

use serde_json::Value;

/// 2^64, exactly representable: every `f64` below it with no fraction converts exactly.
const TWO_TO_64: f64 = 18_446_744_073_709_551_616.0;

/// `value` as a whole number of at least 0: an unsigned JSON integer, or a float with no
/// fraction below 2^64 (`2.0`, what a Python `float` or a C host's JSON holds, and what JSON
/// Schema calls an integer). `None` for anything else: a fraction, a negative number, a larger
/// one, or no number.
pub(crate) fn whole_u64(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|float| float.fract() == 0.0 && (0.0..TWO_TO_64).contains(float))
            .map(|float| float as u64)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::whole_u64;

    #[test]
    fn whole_numbers_written_either_way_are_read_and_others_are_not() {
        for (value, whole) in [
            (json!(0), Some(0)),
            (json!(2.0), Some(2)),
            (json!(u64::MAX), Some(u64::MAX)),
            (
                json!(18_446_744_073_709_549_568.0),
                Some(18_446_744_073_709_549_568),
            ),
            (json!(18_446_744_073_709_551_616.0), None),
            (json!(2.5), None),
            (json!(-1), None),
            (json!(-0.0), Some(0)),
            (json!(1e300), None),
            (json!("2"), None),
            (json!(null), None),
        ] {
            assert_eq!(whole_u64(&value), whole, "{value}");
        }
    }
}
