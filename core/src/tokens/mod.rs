//! Token estimation and context budgeting.
//!
//! - [`estimate_text`]: one pass over the bytes counting character classes ([`classes`]; the
//!   scripts of non-Latin characters outside East Asia and Cyrillic, [`scripts`]), then a
//!   model per tokenizer [`Family`] (linear per text kind, the kinds gated by count ratios) whose
//!   coefficients are fitted offline against exact tokenizers by `tools/fit-tokens`.
//! - [`estimate_request`] / [`estimate_request_body`]: per-block rules for provider requests
//!   (text, thinking, tool use and results, images from dimensions, audio from its duration,
//!   documents, overheads).
//! - [`TextEstimator`]: the same estimate for a text fed in pieces, in memory bounded by its
//!   longest line.
//! - [`ContextTracker`]: usage anchoring with an online correction factor.
//! - [`ContextBudget`]: Claude Code's thresholds, configurable.
//! - `count_exact` and `ExactCounter` (feature `exact`): exact counts for `o200k` and `cl100k`,
//!   of a whole text or of one fed in pieces; [`has_exact`] tells which families, in every build.

pub mod audio;
pub mod budget;
pub mod classes;
mod coefficients;
mod common3;
pub mod defined_tools;
#[cfg(feature = "exact")]
pub mod exact;
pub mod images;
pub mod json_text;
pub mod model;
pub mod request;
pub mod scripts;
pub mod stream;
pub mod tracker;
pub mod vocabulary;

pub use budget::{
    BudgetState, CompactsAfterBlocking, ContextBudget, InvalidAutocompactPercent, ModelLimits,
    ModelTable,
};
pub use classes::{ClassCounts, FEATURE_COUNT, FEATURE_NAMES, count_classes};
#[cfg(feature = "exact")]
pub use exact::{ExactCounter, count_exact};
pub use model::{
    FAMILIES, Family, INPUT_COUNT, KIND_COUNT, KIND_NAMES, TERM_COUNT, UnknownFamily,
    estimate_bytes, estimate_counts, estimate_text, input_is_signed, model_inputs, term_name,
};
pub use request::{
    Overheads, RequestEstimate, TextCounter, count_request, count_request_body, estimate_block,
    estimate_content, estimate_message, estimate_request, estimate_request_body, estimate_tools,
    estimate_value, is_request_body,
};
pub use scripts::{SCRIPT_COUNT, SCRIPT_NAMES};
pub use stream::{LONGEST_LINE_KEPT, TextEstimator};
pub use tracker::{
    ContextTracker, CountMethod, InvalidCorrection, InvalidUsage, NotAMessage, NotARequestPart,
    TokenCount, Usage,
};
pub use vocabulary::{NoExactTokenizer, exact_family, has_exact};
