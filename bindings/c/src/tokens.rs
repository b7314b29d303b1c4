//! Token estimation: plain text and whole request bodies.

use std::ffi::c_char;

use ferroloop_core::tokens::{Family, estimate_request_body, estimate_text};
use serde_json::Value;

use crate::boundary::{self, FfiError, FfiResult};
use crate::status::fl_status;
use crate::text::{self, Out};

/// The estimate of a request, per part. `total` is the sum of the other four.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct fl_request_estimate {
    /// The system prompt (top-level `system`, or `system` / `developer` messages in OpenAI
    /// shape).
    pub system: u64,
    /// Tool definitions, including the tool-use preamble.
    pub tools: u64,
    /// All messages, including per-message overheads.
    pub messages: u64,
    /// Per-request overhead.
    pub overhead: u64,
    /// The whole request.
    pub total: u64,
}

/// The tokenizer family named `name[..len]` (NULL or empty: the default, `claude`).
///
/// # Safety
/// `name` must be valid for reads of `len` bytes.
unsafe fn family_arg(name: *const c_char, len: usize) -> FfiResult<Family> {
    // SAFETY: forwarded from the caller.
    let name = unsafe { text::str_arg(name, len, "tokenizer") }?;
    if name.is_empty() {
        return Ok(Family::default());
    }
    name.parse::<Family>()
        .map_err(|error| FfiError::invalid(error.to_string()))
}

/// Estimates the number of tokens of `text` (`text_len` bytes of UTF-8) for the tokenizer family
/// named `tokenizer` (`tokenizer_len` bytes): `"claude"` (current Claude models; the default,
/// also chosen by NULL / length 0), `"claude-legacy"`, `"o200k"` or `"cl100k"`; and writes it
/// into `*tokens`. Empty text is 0 tokens. One pass over the bytes, no allocation.
///
/// Returns `FL_STATUS_INVALID_UTF8` for text that is not UTF-8 and `FL_STATUS_INVALID_ARGUMENT`
/// for an unknown family. Thread-safe.
///
/// # Safety
/// `text` must be valid for reads of `text_len` bytes, `tokenizer` for `tokenizer_len` bytes;
/// `tokens` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_tokens_estimate_text(
    text: *const c_char,
    text_len: usize,
    tokenizer: *const c_char,
    tokenizer_len: usize,
    tokens: *mut u64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `text` and `tokenizer`.
        let (text, family) = unsafe {
            (
                text::str_arg(text, text_len, "text")?,
                family_arg(tokenizer, tokenizer_len)?,
            )
        };
        let tokens = Out::new(tokens, "tokens")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { tokens.write(estimate_text(text, family)) };
        Ok(())
    })
}

/// Estimates a whole request body (`request_json`, `request_len` bytes of UTF-8 JSON: an
/// Anthropic Messages or OpenAI request object with `system`, `tools`, `messages`; other fields
/// cost nothing) for the tokenizer family named `tokenizer` (as for `fl_tokens_estimate_text`),
/// and writes the estimate per part into `*estimate`.
///
/// Returns `FL_STATUS_INVALID_UTF8`, or `FL_STATUS_INVALID_ARGUMENT` when the JSON does not parse,
/// is not an object, or the family is unknown. Thread-safe.
///
/// # Safety
/// `request_json` must be valid for reads of `request_len` bytes, `tokenizer` for
/// `tokenizer_len` bytes; `estimate` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_tokens_estimate_request(
    request_json: *const c_char,
    request_len: usize,
    tokenizer: *const c_char,
    tokenizer_len: usize,
    estimate: *mut fl_request_estimate,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `request_json` and `tokenizer`.
        let (json, family) = unsafe {
            (
                text::str_arg(request_json, request_len, "request_json")?,
                family_arg(tokenizer, tokenizer_len)?,
            )
        };
        let estimate = Out::new(estimate, "estimate")?;
        let body: Value = serde_json::from_str(json)
            .map_err(|error| FfiError::invalid(format!("request_json: {error}")))?;
        if !body.is_object() {
            return Err(FfiError::invalid("request_json must be a JSON object"));
        }
        let parts = estimate_request_body(&body, family);
        let result = fl_request_estimate {
            system: parts.system,
            tools: parts.tools,
            messages: parts.messages,
            overhead: parts.overhead,
            total: parts.total(),
        };
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { estimate.write(result) };
        Ok(())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::ptr;

    use super::*;

    fn estimate(text: &str, family: &str) -> (fl_status, u64) {
        let mut tokens = u64::MAX;
        // SAFETY: literals and a local.
        let status = unsafe {
            fl_tokens_estimate_text(
                text.as_ptr().cast(),
                text.len(),
                family.as_ptr().cast(),
                family.len(),
                &mut tokens,
            )
        };
        (status, tokens)
    }

    #[test]
    fn text_matches_the_core_and_families_are_checked() {
        let text = "Hello, world! こんにちは";
        for family in ["o200k", "cl100k", "claude-legacy", "claude"] {
            let expected = estimate_text(text, family.parse().unwrap());
            assert_eq!(estimate(text, family), (fl_status::FL_STATUS_OK, expected));
        }
        assert_eq!(estimate(text, ""), estimate(text, "claude"));
        assert_eq!(estimate("", "o200k"), (fl_status::FL_STATUS_OK, 0));
        assert_eq!(
            estimate(text, "gpt2").0,
            fl_status::FL_STATUS_INVALID_ARGUMENT
        );
    }

    #[test]
    fn request_parts_add_up() {
        let body = r#"{"system":"Be brief.","tools":[{"name":"read","description":"Read a file","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Summarise the README"}]}"#;
        let mut out = fl_request_estimate::default();
        // SAFETY: a literal, NULL family with length 0, and a local.
        let status = unsafe {
            fl_tokens_estimate_request(body.as_ptr().cast(), body.len(), ptr::null(), 0, &mut out)
        };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let core = estimate_request_body(&serde_json::from_str(body).unwrap(), Family::Claude);
        assert_eq!(
            (out.system, out.tools, out.messages, out.overhead, out.total),
            (
                core.system,
                core.tools,
                core.messages,
                core.overhead,
                core.total()
            )
        );
        assert!(out.system > 0 && out.tools > 0 && out.messages > 0);
        // SAFETY: a literal and a local.
        let status = unsafe {
            fl_tokens_estimate_request("[1]".as_ptr().cast(), 3, ptr::null(), 0, &mut out)
        };
        assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT);
    }
}
