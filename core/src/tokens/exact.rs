//! Exact token counts for the families with an offline vocabulary (feature `exact`), through
//! `tiktoken-rs`, which embeds the `o200k_base` and `cl100k_base` vocabularies.

use super::model::Family;

/// The family has no offline vocabulary (the Claude families).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no exact offline tokenizer for {0} (exact counting supports o200k and cl100k)")]
pub struct NoExactTokenizer(pub Family);

/// Counts the tokens of `text` exactly (special-token text is counted as ordinary text).
pub fn count_exact(text: &str, family: Family) -> Result<u64, NoExactTokenizer> {
    let bpe = match family {
        Family::O200k => tiktoken_rs::o200k_base_singleton(),
        Family::Cl100k => tiktoken_rs::cl100k_base_singleton(),
        other => return Err(NoExactTokenizer(other)),
    };
    Ok(bpe.encode_ordinary(text).len() as u64)
}

/// Whether [`count_exact`] supports `family`.
pub fn has_exact(family: Family) -> bool {
    family.is_openai()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn counts_known_strings() {
        assert_eq!(count_exact("hello world", Family::O200k).unwrap(), 2);
        assert_eq!(count_exact("hello world", Family::Cl100k).unwrap(), 2);
        assert_eq!(count_exact("", Family::O200k).unwrap(), 0);
        assert_eq!(count_exact("<|endoftext|>", Family::Cl100k).unwrap(), 7);
        assert!(count_exact("x", Family::Claude).is_err());
    }
}
