//! JSON text as hosts write it: what `JSON.stringify` makes of any JavaScript string, lone
//! surrogates included, reads back as the string with each lone surrogate replaced by U+FFFD.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use ferroloop::json_text::{MAX_NESTING, from_str_lossy, lone_surrogates_replaced};
use proptest::prelude::*;

proptest! {
    /// Whatever UTF-16 a JavaScript string holds, its JSON text parses, to the string with
    /// each lone surrogate replaced by U+FFFD (as napi converts a plain string).
    #[test]
    fn any_js_string_parses_to_its_lossy_utf8(
        units in proptest::collection::vec(
            prop_oneof![
                any::<u16>(),
                0xd800u16..0xe000,
                Just(u16::from(b'\\')),
                Just(u16::from(b'u')),
                Just(u16::from(b'd')),
            ],
            0..40,
        ),
    ) {
        let text = common::js_stringify(&units);
        let fixed = lone_surrogates_replaced(&text);
        let parsed: String = serde_json::from_str(&fixed).unwrap();
        prop_assert_eq!(parsed, String::from_utf16_lossy(&units));
    }
}

/// `MAX_NESTING` is the depth serde_json reads: arrays nested that deep parse, one more does not.
#[test]
fn max_nesting_is_the_depth_serde_json_reads() {
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(from_str_lossy::<serde_json::Value>(&nested(MAX_NESTING)).is_ok());
    let err = from_str_lossy::<serde_json::Value>(&nested(MAX_NESTING + 1)).unwrap_err();
    assert!(
        err.to_string().starts_with("recursion limit exceeded"),
        "{err}"
    );
}
