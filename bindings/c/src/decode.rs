//! The provider stream decoder: raw SSE bytes in, typed events and the message out, as JSON.

use std::collections::VecDeque;
use std::ffi::{CStr, c_char};

use ferroloop_core::decode::{
    DecodeError, DecodeEvent, EventDecoder, Provider, ProviderErrorKind, StreamDecoder,
};

use crate::boundary::{self, FfiError, FfiResult};
use crate::status::fl_status;
use crate::text::{self, Out};

/// A stream decoder for one provider (opaque): feed it the raw bytes of a streamed response and
/// read the typed events and the accumulated message as JSON. Create it with `fl_decoder_new`,
/// release it with `fl_decoder_free`.
///
/// Not thread-safe: use a decoder from one thread at a time (it may move between threads).
pub struct fl_decoder {
    decoder: StreamDecoder,
    /// Events completed and not yet returned by `fl_decoder_next_event`.
    events: VecDeque<DecodeEvent>,
    /// Scratch for `feed_into`.
    scratch: Vec<DecodeEvent>,
    /// The JSON (NUL-terminated) behind the last view handed out.
    view: Vec<u8>,
    finished: bool,
    /// The stable code of the error the last `fl_decoder_feed` / `fl_decoder_finish` returned
    /// (`fl_decoder_error_code`); `None` after a call that succeeded.
    error_code: Option<&'static CStr>,
}

impl fl_decoder {
    /// Moves the events of `scratch` to the queue.
    fn queue_scratch(&mut self) {
        self.events.extend(self.scratch.drain(..));
    }

    /// Stores `value` as the current view's JSON and returns the view.
    fn set_view(&mut self, value: &impl serde::Serialize) -> FfiResult<(*const c_char, usize)> {
        self.view.clear();
        serde_json::to_writer(&mut self.view, value)
            .map_err(|error| FfiError::invalid(format!("cannot serialise to JSON: {error}")))?;
        Ok(self.terminate_view())
    }

    /// Stores JSON text the decoder already serialized as the current view and returns the view.
    fn set_view_text(&mut self, json: &str) -> (*const c_char, usize) {
        self.view.clear();
        self.view.extend_from_slice(json.as_bytes());
        self.terminate_view()
    }

    /// NUL-terminates the view's JSON and returns the view (the length excludes the NUL).
    fn terminate_view(&mut self) -> (*const c_char, usize) {
        let len = self.view.len();
        self.view.push(0);
        (self.view.as_ptr().cast(), len)
    }
}

/// The stable code of a decoder error, the one Node's `err.code` carries (a provider error
/// event's class from [`DecodeError::provider_kind`]).
fn error_code(error: &DecodeError) -> &'static CStr {
    match error.provider_kind() {
        Some(ProviderErrorKind::Overloaded) => c"overloaded",
        Some(ProviderErrorKind::RateLimited) => c"rate_limited",
        Some(ProviderErrorKind::QuotaExceeded) => c"quota_exceeded",
        Some(ProviderErrorKind::PromptTooLong) => c"prompt_too_long",
        Some(ProviderErrorKind::Authentication) => c"authentication",
        Some(ProviderErrorKind::Permission) => c"permission",
        Some(ProviderErrorKind::NotFound) => c"not_found",
        Some(ProviderErrorKind::InvalidRequest) => c"invalid_request",
        Some(ProviderErrorKind::Server) => c"server",
        Some(ProviderErrorKind::Other) => c"provider_error",
        None => match error {
            DecodeError::Truncated { .. } => c"stream_truncated",
            DecodeError::Finished => c"invalid_state",
            _ => c"protocol",
        },
    }
}

/// The status and message of a decoder error.
fn decode_error(error: &DecodeError) -> FfiError {
    let status = match error {
        DecodeError::Truncated { .. } => fl_status::FL_STATUS_TRUNCATED,
        DecodeError::Provider { .. } => fl_status::FL_STATUS_PROVIDER_ERROR,
        DecodeError::Finished => fl_status::FL_STATUS_INVALID_STATE,
        DecodeError::InvalidJson { .. } | DecodeError::Protocol(_) => {
            fl_status::FL_STATUS_PROTOCOL_ERROR
        }
    };
    FfiError::new(status, error.to_string())
}

/// Creates a decoder for `provider` (UTF-8, `provider_len` bytes): `"anthropic"`,
/// `"openai-chat"` or `"openai-responses"` (anything else is `FL_STATUS_INVALID_ARGUMENT`), and
/// stores it in `*out`. The caller owns it and releases it with `fl_decoder_free`. Thread-safe.
///
/// # Safety
/// `provider` must be valid for reads of `provider_len` bytes; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_new(
    provider: *const c_char,
    provider_len: usize,
    out: *mut *mut fl_decoder,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `provider`.
        let name = unsafe { text::str_arg(provider, provider_len, "provider") }?;
        let out = Out::new(out, "out")?;
        let provider = Provider::from_name(name).ok_or_else(|| {
            FfiError::invalid(format!(
                "unknown provider '{name}' (expected anthropic, openai-chat or openai-responses)"
            ))
        })?;
        let decoder = Box::new(fl_decoder {
            decoder: StreamDecoder::for_provider(provider),
            events: VecDeque::new(),
            scratch: Vec::new(),
            view: Vec::new(),
            finished: false,
            error_code: None,
        });
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(decoder)) };
        Ok(())
    })
}

/// Releases a decoder and every view it handed out. NULL is accepted and ignored.
///
/// # Safety
/// `decoder` must be NULL or a decoder from `fl_decoder_new`, not freed yet; it must not be used
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_free(decoder: *mut fl_decoder) {
    boundary::run_void(|| {
        if !decoder.is_null() {
            // SAFETY: a pointer from `Box::into_raw` in `fl_decoder_new`, freed only once.
            drop(unsafe { Box::from_raw(decoder) });
        }
    });
}

/// Turns the recording of typed events on or off (on by default). Off, the decoder only
/// accumulates the message, with no per-event allocation, and `fl_decoder_next_event` yields
/// only the tool-call sealing events (`tool_use_ready`, `tool_use_invalid`,
/// `tool_use_truncated`), which a host needs to start calls while the message streams.
///
/// # Safety
/// `decoder` must be a live decoder not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_set_record_events(
    decoder: *mut fl_decoder,
    record: bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `decoder`.
        let decoder = unsafe { text::handle_mut(decoder, "decoder") }?;
        decoder.decoder.decoder_mut().set_record_events(record);
        Ok(())
    })
}

/// Feeds `len` raw bytes of the streamed response (split anywhere; NULL when `len` is 0) and
/// decodes every SSE event they complete. The typed events are queued for
/// `fl_decoder_next_event`. The bytes are read in place and only what an unfinished event still
/// needs is copied, so `data` may be reused as soon as this returns.
///
/// Returns `FL_STATUS_PROVIDER_ERROR` when the provider sent an error event (for example
/// `overloaded_error`), `FL_STATUS_PROTOCOL_ERROR` when an event broke the provider's protocol
/// or was not valid JSON, with the details in `fl_last_error_message` and the error's stable
/// code (`"overloaded"`, `"rate_limited"`, ...) in `fl_decoder_error_code`. The events completed
/// before the failing one are still queued, and `fl_decoder_message` still shows what arrived;
/// the SSE events after it in `data` are kept and decoded (their typed events queued) by the
/// next `fl_decoder_feed` (`NULL`, 0 will do) or by `fl_decoder_finish`. Feeding after `fl_decoder_finish` is `FL_STATUS_INVALID_STATE`. Invalidates the views handed
/// out by this decoder.
///
/// # Safety
/// `decoder` must be a live decoder not used concurrently; `data` must be valid for reads of
/// `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_feed(
    decoder: *mut fl_decoder,
    data: *const u8,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `decoder` and `data`.
        let (decoder, data) = unsafe {
            (
                text::handle_mut(decoder, "decoder")?,
                text::bytes_arg(data, len, "data")?,
            )
        };
        if decoder.finished {
            decoder.error_code = Some(error_code(&DecodeError::Finished));
            return Err(FfiError::state("the decoder was finished"));
        }
        let mut scratch = std::mem::take(&mut decoder.scratch);
        // Read in place: the parser copies only what an unfinished event still needs, so `data`
        // may still be reused as soon as this returns.
        let result = decoder.decoder.feed_borrowed_into(data, &mut scratch);
        decoder.scratch = scratch;
        decoder.queue_scratch();
        decoder.error_code = result.as_ref().err().map(error_code);
        result.map_err(|error| decode_error(&error))
    })
}

/// Writes the next queued typed event into `*json` / `*json_len` as a JSON object with a `type`
/// field (for example `{"type":"text_delta","index":0,"text":"Hi"}`) and sets `*has_event`; when
/// the queue is empty, `*has_event` is false and `*json` is NULL.
///
/// The view is NUL-terminated (the length excludes the NUL), owned by the decoder, and valid
/// until the next call on this decoder.
///
/// # Safety
/// `decoder` must be a live decoder not used concurrently; `json`, `json_len` and `has_event`
/// must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_next_event(
    decoder: *mut fl_decoder,
    json: *mut *const c_char,
    json_len: *mut usize,
    has_event: *mut bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `decoder`.
        let decoder = unsafe { text::handle_mut(decoder, "decoder") }?;
        let json = Out::new(json, "json")?;
        let json_len = Out::new(json_len, "json_len")?;
        let has_event = Out::new(has_event, "has_event")?;
        let (ptr, len, has) = match decoder.events.pop_front() {
            Some(event) => {
                let (ptr, len) = decoder.set_view(&event)?;
                (ptr, len, true)
            }
            None => (std::ptr::null(), 0, false),
        };
        // SAFETY: all three not NULL (checked) and writable (the caller's promise).
        unsafe {
            json.write(ptr);
            json_len.write(len);
            has_event.write(has);
        }
        Ok(())
    })
}

/// Writes a snapshot of the message accumulated so far, in the provider's non-streaming
/// response shape, into `*json` / `*json_len` (`null` before the stream's first event). The view
/// is NUL-terminated, owned by the decoder, and valid until the next call on this decoder.
///
/// # Safety
/// `decoder` must be a live decoder not used concurrently; `json` and `json_len` must be valid
/// for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_message(
    decoder: *mut fl_decoder,
    json: *mut *const c_char,
    json_len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `decoder`.
        let decoder = unsafe { text::handle_mut(decoder, "decoder") }?;
        let json = Out::new(json, "json")?;
        let json_len = Out::new(json_len, "json_len")?;
        let message = decoder.decoder.message_json();
        let (ptr, len) = decoder.set_view_text(&message);
        // SAFETY: both not NULL (checked) and writable (the caller's promise).
        unsafe {
            json.write(ptr);
            json_len.write(len);
        }
        Ok(())
    })
}

/// Writes into `*complete` whether the stream reached its end marker (`message_stop`, `[DONE]`,
/// `response.completed`).
///
/// # Safety
/// `decoder` must be a live decoder not used concurrently; `complete` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_is_complete(
    decoder: *const fl_decoder,
    complete: *mut bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `decoder`.
        let decoder = unsafe { text::handle_ref(decoder, "decoder") }?;
        let complete = Out::new(complete, "complete")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { complete.write(decoder.decoder.is_complete()) };
        Ok(())
    })
}

/// Ends the input and writes the final message into `*json` / `*json_len` (NUL-terminated,
/// owned by the decoder, valid until the next call on this decoder). Events completed at the end
/// are queued for `fl_decoder_next_event`.
///
/// Returns `FL_STATUS_OK` with the final message; `FL_STATUS_TRUNCATED` when the stream stopped
/// before the message completed (the view then holds the partial message);
/// `FL_STATUS_PROVIDER_ERROR` / `FL_STATUS_PROTOCOL_ERROR` as for `fl_decoder_feed` (the view then
/// holds the message as it stood) when an event of the stream failed: the first such failure,
/// the same one `fl_decoder_feed` returned, even when the later events completed the message
/// (which lacks the failed event). On these statuses the view is written too. Bytes after the
/// last complete SSE event are discarded.
///
/// May be called again: it answers the same (the same status, view, `fl_decoder_error_code`
/// and last error message), as Python's and Node's `finish()` do; only a feed after it is
/// refused (`FL_STATUS_INVALID_STATE`), since only a feed could change the answer. The events
/// still pending when the input ends are all decoded (and queued) by the first call; a failure
/// among them is the answer when no earlier event failed.
///
/// # Safety
/// `decoder` must be a live decoder not used concurrently; `json` and `json_len` must be valid
/// for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_finish(
    decoder: *mut fl_decoder,
    json: *mut *const c_char,
    json_len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `decoder`.
        let decoder = unsafe { text::handle_mut(decoder, "decoder") }?;
        let json = Out::new(json, "json")?;
        let json_len = Out::new(json_len, "json_len")?;
        decoder.finished = true;
        // The SSE events still pending (those behind an event that failed in
        // `fl_decoder_feed`) are decoded by the first call, with their typed events queued; a
        // later call queues nothing and answers the same (the core's rule).
        let mut scratch = std::mem::take(&mut decoder.scratch);
        let result = decoder.decoder.finish_json_into(&mut scratch);
        decoder.scratch = scratch;
        decoder.queue_scratch();
        decoder.error_code = result.as_ref().err().map(error_code);
        let (ptr, len, error) = match result {
            Ok(message) => {
                let (ptr, len) = decoder.set_view_text(&message);
                (ptr, len, None)
            }
            Err(error) => {
                let status = decode_error(&error);
                let (ptr, len) = match error {
                    DecodeError::Truncated { partial, .. } => decoder.set_view(&*partial)?,
                    _ => {
                        let message = decoder.decoder.message_json();
                        decoder.set_view_text(&message)
                    }
                };
                (ptr, len, Some(status))
            }
        };
        // SAFETY: both not NULL (checked) and writable (the caller's promise).
        unsafe {
            json.write(ptr);
            json_len.write(len);
        }
        error.map_or(Ok(()), Err)
    })
}

/// Writes into `*code` the stable code of the error the decoder's last `fl_decoder_feed` or
/// `fl_decoder_finish` returned, the code Node's `err.code` carries for it (Python's class
/// follows it too): for `FL_STATUS_PROVIDER_ERROR` the class of the provider's error event —
/// `"overloaded"`, `"rate_limited"`, `"quota_exceeded"`, `"prompt_too_long"`,
/// `"authentication"`, `"permission"`, `"not_found"`, `"invalid_request"`, `"server"`, else
/// `"provider_error"` — so that a host can tell a wait-and-retry from a give-up without parsing
/// `fl_last_error_message`; otherwise `"stream_truncated"`, `"protocol"` or `"invalid_state"`.
/// `*code` is NULL when that call succeeded (or none was made). The string is static and
/// NUL-terminated: it stays valid after the decoder is freed.
///
/// # Safety
/// `decoder` must be a live decoder not used concurrently; `code` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_decoder_error_code(
    decoder: *const fl_decoder,
    code: *mut *const c_char,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `decoder`.
        let decoder = unsafe { text::handle_ref(decoder, "decoder") }?;
        let code = Out::new(code, "code")?;
        let value = decoder.error_code.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { code.write(value) };
        Ok(())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::ptr;

    use serde_json::Value;

    use super::*;

    /// `fl_decoder_error_code` spells each provider error class as the core does
    /// (`ProviderErrorKind::code`, what Node's `err.code` and the client say): the C strings
    /// are a copy, so every class is compared here, not only those the C test feeds.
    #[test]
    fn error_codes_are_the_core_s_spellings() {
        let mut kinds = std::collections::HashSet::new();
        for error_type in [
            "overloaded_error",
            "rate_limit_error",
            "insufficient_quota",
            "context_length_exceeded",
            "authentication_error",
            "permission_error",
            "not_found_error",
            "invalid_request_error",
            "api_error",
            "a_type_nobody_names",
        ] {
            let error = DecodeError::Provider {
                error_type: error_type.into(),
                message: "m".into(),
                raw: serde_json::json!({"type": "error", "error": {"type": error_type, "message": "m"}}),
            };
            let kind = error.provider_kind().unwrap();
            kinds.insert(kind);
            assert_eq!(
                error_code(&error).to_str().unwrap(),
                kind.code(),
                "{error_type}"
            );
        }
        assert_eq!(kinds.len(), 10, "every ProviderErrorKind is compared");
        for error in [
            DecodeError::Finished,
            DecodeError::Truncated {
                reason: "cut".into(),
                partial: Box::new(Value::Null),
            },
        ] {
            assert_eq!(error_code(&error).to_str().unwrap(), error.code());
        }
    }

    fn view(ptr: *const c_char, len: usize) -> Value {
        // SAFETY: views are valid for `len` bytes until the next call on the decoder.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn anthropic_text_stream_events_and_message() {
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",",
            "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],",
            "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,",
            "\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,",
            "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,",
            "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        );
        let mut decoder = ptr::null_mut();
        let (mut json, mut len, mut has) = (ptr::null(), 0, false);
        // SAFETY: every pointer is a local, a literal or the decoder created here.
        unsafe {
            assert_eq!(
                fl_decoder_new("anthropic".as_ptr().cast(), 9, &mut decoder),
                fl_status::FL_STATUS_OK
            );
            assert_eq!(
                fl_decoder_feed(decoder, stream.as_ptr(), stream.len()),
                fl_status::FL_STATUS_OK
            );
            let mut types = Vec::new();
            loop {
                assert_eq!(
                    fl_decoder_next_event(decoder, &mut json, &mut len, &mut has),
                    fl_status::FL_STATUS_OK
                );
                if !has {
                    assert!(json.is_null());
                    break;
                }
                types.push(view(json, len)["type"].as_str().unwrap().to_owned());
            }
            assert!(types.contains(&"text_delta".to_owned()), "{types:?}");
            assert_eq!(
                fl_decoder_message(decoder, &mut json, &mut len),
                fl_status::FL_STATUS_OK
            );
            assert_eq!(view(json, len)["content"][0]["text"], "Hi");
            assert_eq!(
                fl_decoder_finish(decoder, &mut json, &mut len),
                fl_status::FL_STATUS_TRUNCATED
            );
            assert_eq!(view(json, len)["content"][0]["text"], "Hi");
            // A second finish answers the same.
            assert_eq!(
                fl_decoder_finish(decoder, &mut json, &mut len),
                fl_status::FL_STATUS_TRUNCATED
            );
            assert_eq!(view(json, len)["content"][0]["text"], "Hi");
            assert_eq!(
                fl_decoder_feed(decoder, ptr::null(), 0),
                fl_status::FL_STATUS_INVALID_STATE
            );
            fl_decoder_free(decoder);
        }
    }

    #[test]
    fn provider_error_and_unknown_provider() {
        let stream = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let mut decoder = ptr::null_mut();
        // SAFETY: every pointer is a local, a literal or the decoder created here.
        unsafe {
            assert_eq!(
                fl_decoder_new("openai".as_ptr().cast(), 6, &mut decoder),
                fl_status::FL_STATUS_INVALID_ARGUMENT
            );
            assert_eq!(
                fl_decoder_new("anthropic".as_ptr().cast(), 9, &mut decoder),
                fl_status::FL_STATUS_OK
            );
            assert_eq!(
                fl_decoder_feed(decoder, stream.as_ptr(), stream.len()),
                fl_status::FL_STATUS_PROVIDER_ERROR
            );
            fl_decoder_free(decoder);
        }
    }
}
