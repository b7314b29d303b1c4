//! Which families can be counted exactly: known in every build, so that a build without the
//! `exact` feature refuses a family no build can count as a build with it does, rather than
//! advising a build that would refuse it too.

use super::model::Family;

/// The family has no offline vocabulary (the Claude families).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no exact offline tokenizer for {0} (exact counting supports o200k and cl100k)")]
pub struct NoExactTokenizer(pub Family);

/// Whether exact counting (`count_exact`, feature `exact`) supports `family`.
pub fn has_exact(family: Family) -> bool {
    family.is_openai()
}

/// `Ok` for a family exact counting supports, else the error `count_exact` gives for it.
pub fn exact_family(family: Family) -> Result<Family, NoExactTokenizer> {
    if has_exact(family) {
        Ok(family)
    } else {
        Err(NoExactTokenizer(family))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_openai_families_have_a_vocabulary() {
        assert_eq!(exact_family(Family::O200k), Ok(Family::O200k));
        assert_eq!(exact_family(Family::Cl100k), Ok(Family::Cl100k));
        for family in [Family::Claude, Family::ClaudeLegacy] {
            assert_eq!(
                exact_family(family).map_err(|error| error.to_string()),
                Err(format!(
                    "no exact offline tokenizer for {family} (exact counting supports o200k and cl100k)"
                ))
            );
        }
    }
}
