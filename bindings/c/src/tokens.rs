//! Token estimation: plain text, bytes, text fed in pieces, and whole request bodies.

use std::ffi::c_char;

use ferroloop_core::tokens::json_text::parse_json_for_counting;
use ferroloop_core::tokens::{
    Family, TextEstimator, estimate_bytes, estimate_request_body, estimate_text,
};
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
pub(crate) unsafe fn family_arg(name: *const c_char, len: usize) -> FfiResult<Family> {
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

/// Estimates the number of tokens of `len` raw bytes at `data` (NULL when `len` is 0) for the
/// tokenizer family named `tokenizer` (as for `fl_tokens_estimate_text`), and writes it into
/// `*tokens`. Bytes that are not UTF-8 are accepted and counted by their byte class like any
/// other byte (a binary file, a log with a stray byte); on UTF-8 text the result equals
/// `fl_tokens_estimate_text`'s. The streaming estimator (`fl_text_estimator_*`) gives this
/// function's result for the concatenation of its pieces.
///
/// Returns `FL_STATUS_INVALID_ARGUMENT` for an unknown family. Thread-safe.
///
/// # Safety
/// `data` must be valid for reads of `len` bytes, `tokenizer` for `tokenizer_len` bytes;
/// `tokens` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_tokens_estimate_bytes(
    data: *const u8,
    len: usize,
    tokenizer: *const c_char,
    tokenizer_len: usize,
    tokens: *mut u64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `data` and `tokenizer`.
        let (data, family) = unsafe {
            (
                text::bytes_arg(data, len, "data")?,
                family_arg(tokenizer, tokenizer_len)?,
            )
        };
        let tokens = Out::new(tokens, "tokens")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { tokens.write(estimate_bytes(data, family)) };
        Ok(())
    })
}

/// The token estimate of a text fed in pieces (opaque): a file read block by block, a tool's
/// output read from a pipe. Its estimate is the one `fl_tokens_estimate_bytes` (and, for UTF-8
/// text, `fl_tokens_estimate_text`) gives for the whole text, however the text was cut, even
/// inside a multibyte character. Memory stays bounded by the longest line (a line longer than
/// 1 MiB is counted in pieces, which may change its estimate by about a token per MiB).
///
/// Create it with `fl_text_estimator_new`, feed it with `fl_text_estimator_feed`, read the
/// estimate so far with `fl_text_estimator_estimate`, release it with `fl_text_estimator_free`.
///
/// Not thread-safe: use an estimator from one thread at a time (it may move between threads).
pub struct fl_text_estimator {
    estimator: TextEstimator,
}

/// Creates a streaming estimator for the tokenizer family named `tokenizer` (`tokenizer_len`
/// bytes; as for `fl_tokens_estimate_text`: `"claude"`, the default, also chosen by NULL /
/// length 0, `"claude-legacy"`, `"o200k"` or `"cl100k"`), before any text, and stores it in
/// `*out`. The caller owns it and releases it with `fl_text_estimator_free`.
///
/// Returns `FL_STATUS_INVALID_ARGUMENT` for an unknown family, `FL_STATUS_INVALID_UTF8` for a
/// name that is not UTF-8 (`*out` is then left unchanged). Thread-safe.
///
/// # Safety
/// `tokenizer` must be valid for reads of `tokenizer_len` bytes; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_text_estimator_new(
    tokenizer: *const c_char,
    tokenizer_len: usize,
    out: *mut *mut fl_text_estimator,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tokenizer`.
        let family = unsafe { family_arg(tokenizer, tokenizer_len) }?;
        let out = Out::new(out, "out")?;
        let estimator = Box::new(fl_text_estimator {
            estimator: TextEstimator::new(family),
        });
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(estimator)) };
        Ok(())
    })
}

/// Adds the next `len` bytes of the text (NULL when `len` is 0; 0 bytes change nothing). The
/// pieces may split a UTF-8 character anywhere, and bytes that are not UTF-8 are counted as
/// `fl_tokens_estimate_bytes` counts them (never an error: the estimator cannot tell a
/// character split between two pieces from a broken one). The bytes are not kept beyond the
/// unfinished line, so `data` may be reused as soon as this returns.
///
/// Returns `FL_STATUS_NULL_ARGUMENT` when `estimator` is NULL, or `data` is NULL with a non-zero
/// `len` (nothing is fed then).
///
/// # Safety
/// `estimator` must be a live estimator not used concurrently; `data` must be valid for reads of
/// `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_text_estimator_feed(
    estimator: *mut fl_text_estimator,
    data: *const u8,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `estimator` and `data`.
        let (estimator, data) = unsafe {
            (
                text::handle_mut(estimator, "estimator")?,
                text::bytes_arg(data, len, "data")?,
            )
        };
        estimator.estimator.feed(data);
        Ok(())
    })
}

/// Writes the estimate of the text fed so far into `*tokens`: 0 before any byte, at least 1
/// after one. Does not consume anything: feeding may go on, and the estimate after the next
/// pieces is that of the whole text again.
///
/// # Safety
/// `estimator` must be a live estimator not used concurrently; `tokens` must be valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_text_estimator_estimate(
    estimator: *const fl_text_estimator,
    tokens: *mut u64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `estimator`.
        let estimator = unsafe { text::handle_ref(estimator, "estimator") }?;
        let tokens = Out::new(tokens, "tokens")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { tokens.write(estimator.estimator.estimate()) };
        Ok(())
    })
}

/// Releases an estimator. NULL is accepted and ignored.
///
/// # Safety
/// `estimator` must be NULL or an estimator from `fl_text_estimator_new`, not freed yet; it must
/// not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_text_estimator_free(estimator: *mut fl_text_estimator) {
    boundary::run_void(|| {
        if !estimator.is_null() {
            // SAFETY: a pointer from `Box::into_raw` in `fl_text_estimator_new`, freed only once.
            drop(unsafe { Box::from_raw(estimator) });
        }
    });
}

/// Estimates a whole request body (`request_json`, `request_len` bytes of UTF-8 JSON: an
/// Anthropic Messages or OpenAI Chat request object with `system`, `tools`, `messages`, or an
/// OpenAI Responses one with `instructions`, `tools`, `input`; other fields cost nothing) for the tokenizer family named `tokenizer` (as for `fl_tokens_estimate_text`),
/// and writes the estimate per part into `*estimate`.
///
/// A lone surrogate escape in a string (`"\ud83d"`: JSON text of a string cut inside an emoji)
/// counts as U+FFFD, as in Python and Node; the tracker's JSON arguments read it the same way,
/// and so do the executor's and turns' tool uses, tool results and progress (as in Node).
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
        // A lone surrogate escape counts as U+FFFD, as in Python and Node.
        let body: Value = parse_json_for_counting(json)
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
    fn estimator_pieces_add_up_to_the_whole() {
        let text = "Hello, world! こんにちは\n{\"k\": [1, 2, 3]}\n\tend";
        let bytes = text.as_bytes();
        for family in ["o200k", "cl100k", "claude-legacy", "claude", ""] {
            let mut estimator: *mut fl_text_estimator = ptr::null_mut();
            // SAFETY: a literal and a local.
            let status = unsafe {
                fl_text_estimator_new(family.as_ptr().cast(), family.len(), &mut estimator)
            };
            assert_eq!(status, fl_status::FL_STATUS_OK);
            for piece in bytes.chunks(3) {
                // SAFETY: a live estimator and a slice of `bytes`.
                let status =
                    unsafe { fl_text_estimator_feed(estimator, piece.as_ptr(), piece.len()) };
                assert_eq!(status, fl_status::FL_STATUS_OK);
            }
            let mut tokens = u64::MAX;
            // SAFETY: a live estimator and a local.
            let status = unsafe { fl_text_estimator_estimate(estimator, &mut tokens) };
            assert_eq!(status, fl_status::FL_STATUS_OK);
            assert_eq!((fl_status::FL_STATUS_OK, tokens), estimate(text, family));
            // SAFETY: from `fl_text_estimator_new`, freed once.
            unsafe { fl_text_estimator_free(estimator) };
        }
        let mut estimator: *mut fl_text_estimator = ptr::null_mut();
        // SAFETY: a literal and a local.
        let status = unsafe { fl_text_estimator_new("gpt2".as_ptr().cast(), 4, &mut estimator) };
        assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT);
        assert!(estimator.is_null());
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
