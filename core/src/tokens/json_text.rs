//! JSON text read for counting: a lone surrogate escape reads as U+FFFD (see
//! [`crate::json_text`], where the rule lives for every reader of host JSON).

use serde_json::Value;

pub use crate::json_text::lone_surrogates_replaced;

/// The value of JSON `text` for estimating its tokens: a lone surrogate escape in a string
/// reads as U+FFFD (see [`crate::json_text::from_str_lossy`]); anything else invalid is refused.
pub fn parse_json_for_counting(text: &str) -> serde_json::Result<Value> {
    crate::json_text::from_str_lossy(text)
}
