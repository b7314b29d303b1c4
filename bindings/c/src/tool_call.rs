//! A tool call handed to C: the completion handle a C tool finishes from any thread, the
//! cancellation flag it polls, and the progress it reports.
//!
//! Both are the core's answer channel for the call, in hand-off mode
//! ([`ToolContext::answer_channel_in_hand_off`]): the handle holds the sender, the executor's
//! side ([`PendingCall`]) the receiver, and the hand-off ends when the tool callback returns. So
//! the order of a reply and the call's cancellation is judged by the core: a reply during the
//! callback, or after a cancellation that landed during the callback, stands; a reply after a
//! cancellation that landed once the callback returned is the cancellation's. The receiver being
//! dropped (the executor gave up on the call) is what `fl_tool_call_cancelled` reports besides
//! the token.
//!
//! Progress goes through the call's [`ProgressSender`] (the core's, as for Python and Node
//! tools): it becomes a `Progress` event of the call's turn when the turn produces events (a
//! streaming turn, an agent run), and is dropped otherwise (a batch run, a turn that has ended,
//! a call already answered).

use std::ffi::c_char;

use ferroloop_core::exec::{AnswerReceiver, AnswerSender, ProgressSender, ToolContext};
// A lone surrogate escape in tool data reads as U+FFFD, as in Node and in the tracker's and
// the estimates' JSON arguments (it was refused as "unexpected end of hex escape").
use ferroloop_core::json_text::from_str_lossy;

use crate::boundary::{self, FfiError};
use crate::status::fl_status;
use crate::text::{self, Out};

/// A pending tool call (opaque), handed to the tool callback. The tool finishes it with
/// `fl_tool_complete` (or `fl_tool_complete_json`) exactly once, from any thread, which also
/// releases it. Until then, `fl_tool_call_cancelled` may be polled and `fl_tool_call_progress`
/// called from any thread. A call never completed is never released (its turn, run or executor
/// may be freed meanwhile, but not the call's own few kilobytes): completing it is the only
/// release.
pub struct fl_tool_call {
    sender: AnswerSender<ToolReply>,
    progress: ProgressSender,
}

/// The content of a tool's reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReplyContent {
    /// Plain text.
    Text(String),
    /// A JSON value (a string, or an array of content blocks).
    Json(serde_json::Value),
}

/// A tool's reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolReply {
    pub(crate) content: ReplyContent,
    pub(crate) is_error: bool,
}

impl ToolReply {
    fn error(message: String) -> Self {
        Self {
            content: ReplyContent::Text(message),
            is_error: true,
        }
    }
}

/// The executor's side of a call: waits for the reply. Dropping it (the executor gave up on the
/// call) raises the call's cancellation flag.
#[derive(Debug)]
pub(crate) struct PendingCall {
    receiver: AnswerReceiver<ToolReply>,
}

impl PendingCall {
    /// A new call of `ctx`, being handed to the tool: the executor keeps the `PendingCall`, the C
    /// tool receives the handle (which it owns until it completes it).
    pub(crate) fn new(ctx: &ToolContext) -> (Self, *mut fl_tool_call) {
        let (sender, receiver) = ctx.answer_channel_in_hand_off();
        let handle = Box::new(fl_tool_call {
            sender,
            progress: ctx.progress_sender(),
        });
        (Self { receiver }, Box::into_raw(handle))
    }

    /// The tool callback returned: a cancellation from now until the reply is the call's
    /// outcome (one before is the tool's own doing, or counts as such).
    pub(crate) fn handed_over(&self) {
        self.receiver.handed_over();
    }

    /// The tool's reply (its order against the cancellation is reported to the executor as it
    /// is returned). Only a handle dropped without a reply (which C cannot do: completing is
    /// the only way to release it) yields an error reply.
    pub(crate) async fn reply(self) -> ToolReply {
        match self.receiver.await {
            Ok(reply) => reply,
            Err(_) => ToolReply::error("the tool released its call without completing it".into()),
        }
    }
}

/// Completes a tool call with `content` (UTF-8 text, `content_len` bytes) and releases `call`.
/// `is_error` marks the result as a failure the model should see.
///
/// Callable from any thread, exactly once per call, including after the call was cancelled (the
/// reply is then ignored). The order of the reply and the cancellation decides, not when the
/// executor next looks: a reply completed before the call was cancelled stands even if the turn
/// sees the cancellation first; one completed after a cancellation that came once the callback
/// had returned gets the cancellation's result. A cancellation that came while the callback ran
/// (the tool cancelling its own run, for example) leaves the reply standing. The handle is released by every call of this function with a
/// non-NULL `call`, whatever the status: when the content is invalid (NULL with a length, not
/// UTF-8, or a length above `PTRDIFF_MAX`, reported as `FL_STATUS_NULL_ARGUMENT` /
/// `FL_STATUS_INVALID_UTF8` / `FL_STATUS_INVALID_ARGUMENT`), the call completes with an error
/// result saying so. `call` must not be used afterwards.
///
/// # Safety
/// `call` must be a handle given to a tool callback and not completed yet; `content` must be
/// valid for reads of `content_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_tool_complete(
    call: *mut fl_tool_call,
    content: *const c_char,
    content_len: usize,
    is_error: bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `content`.
        let content = unsafe { text::str_arg(content, content_len, "content") };
        // SAFETY: the caller's promise on `call`.
        unsafe {
            complete(
                call,
                content.map(|text| ReplyContent::Text(text.to_owned())),
                is_error,
            )
        }
    })
}

/// Completes a tool call with `content_json` (`content_len` bytes of UTF-8 JSON: a string or an
/// array of content blocks such as `[{"type":"text","text":"..."}]`; an array holding anything
/// but blocks — objects with a string `"type"` — is sent as its JSON text, the providers
/// refusing it as content) and releases `call`.
///
/// Same rules as `fl_tool_complete`; JSON that does not parse completes the call with an error
/// result and returns `FL_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `call` must be a handle given to a tool callback and not completed yet; `content_json` must be
/// valid for reads of `content_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_tool_complete_json(
    call: *mut fl_tool_call,
    content_json: *const c_char,
    content_len: usize,
    is_error: bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `content_json`.
        let content = unsafe { text::str_arg(content_json, content_len, "content_json") }
            .and_then(|json| {
                from_str_lossy::<serde_json::Value>(json)
                    .map_err(|error| FfiError::invalid(format!("content_json: {error}")))
            })
            .and_then(|value| match value {
                serde_json::Value::String(_) | serde_json::Value::Array(_) => Ok(value),
                _ => Err(FfiError::invalid(
                    "content_json must be a string or an array of content blocks",
                )),
            });
        // SAFETY: the caller's promise on `call`.
        unsafe { complete(call, content.map(ReplyContent::Json), is_error) }
    })
}

/// Sends the reply (or an error reply describing why the content was refused) and releases the
/// handle.
///
/// # Safety
/// `call` must be NULL or a live handle from [`PendingCall::new`], not completed yet.
unsafe fn complete(
    call: *mut fl_tool_call,
    content: Result<ReplyContent, FfiError>,
    is_error: bool,
) -> Result<(), FfiError> {
    if call.is_null() {
        return Err(FfiError::null("call"));
    }
    // SAFETY: a live handle from `Box::into_raw` in `PendingCall::new`, completed (released)
    // only once per the contract.
    let call = unsafe { Box::from_raw(call) };
    let (reply, result) = match content {
        Ok(content) => (ToolReply { content, is_error }, Ok(())),
        Err(error) => (
            ToolReply::error(format!("the tool's reply was refused: {}", error.message)),
            Err(error),
        ),
    };
    // The executor may have stopped waiting (a cancelled call): the reply is then dropped.
    let _ = call.sender.send(reply);
    result
}

/// Writes into `*cancelled` whether the executor cancelled the call: the run was cancelled, the
/// call timed out, a sibling's failure cancelled it, or the executor stopped waiting for it. A tool should poll it during long work, stop early,
/// and still complete the call.
///
/// Callable from any thread until the call is completed.
///
/// # Safety
/// `call` must be a live handle, not completed yet; `cancelled` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_tool_call_cancelled(
    call: *const fl_tool_call,
    cancelled: *mut bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `call`.
        let call = unsafe { text::handle_ref(call, "call") }?;
        let cancelled = Out::new(cancelled, "cancelled")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { cancelled.write(call.sender.is_cancelled()) };
        Ok(())
    })
}

/// Reports progress of a call: `data_json` (`len` bytes of UTF-8) is one JSON value of any kind
/// (`{"done":3,"of":10}`, `"indexing"`, `0.5`), what Python's and Node's `ctx.progress(data)`
/// take. In a streaming turn it becomes an `FL_TURN_EVENT_PROGRESS` event of the call (its
/// `index` and `tool_use_id`; `json`: the value written compactly, object keys in their order);
/// in an agent run, a `tool_progress` event
/// (`{"type":"tool_progress","tool_use_id":"toolu_1","data":{"done":3,"of":10}}`). It is
/// delivered when the turn or run is next driven, in the order reported, and always before the
/// call's `FL_TURN_EVENT_FINISHED` (`tool_finished`).
///
/// Callable from any thread, any number of times, until the call is completed: in the tool
/// callback, or from a worker the call was handed to. Progress is a report nobody has to
/// receive: the function returns `FL_STATUS_OK` either way, and the progress is dropped
/// - in `fl_executor_run` (a batch run has no events);
/// - once the call's turn or run has ended, or was freed;
/// - once the call has ended without its tool: its cleanup grace ran out after a cancellation
///   or a timeout (`FL_TURN_EVENT_DETACHED`).
///
/// Progress reported after the call was cancelled (or timed out) is still delivered until the
/// call ends, which is when its tool completes it or its cleanup grace runs out: a tool may
/// report how it winds down.
///
/// Returns `FL_STATUS_NULL_ARGUMENT` when `call` is NULL, or `data_json` is NULL with a non-zero
/// `len`; `FL_STATUS_INVALID_UTF8` when the text is not UTF-8; `FL_STATUS_INVALID_ARGUMENT` when
/// it is not exactly one JSON value (an empty text is not; whitespace around the value is
/// fine), nests arrays or objects 128 deep or more, or `len` is above `PTRDIFF_MAX`. Nothing is
/// reported then, and the call goes on (it must still be completed).
///
/// # Safety
/// `call` must be NULL or a live handle, not completed yet (no `fl_tool_complete` on it may run
/// at the same time on another thread); `data_json` must be valid for reads of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_tool_call_progress(
    call: *const fl_tool_call,
    data_json: *const c_char,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `call` and `data_json`.
        let (call, json) = unsafe {
            (
                text::handle_ref(call, "call")?,
                text::str_arg(data_json, len, "data_json")?,
            )
        };
        let data = from_str_lossy::<serde_json::Value>(json)
            .map_err(|error| FfiError::invalid(format!("data_json is not valid JSON: {error}")))?;
        call.progress.send(data);
        Ok(())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use ferroloop_core::exec::CancellationToken;

    /// A call outside any turn, cancelled by `token`.
    fn new_call(token: &CancellationToken) -> (PendingCall, *mut fl_tool_call) {
        PendingCall::new(&ToolContext::standalone("t", token.clone()))
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    fn cancelled(call: *const fl_tool_call) -> bool {
        let mut flag = false;
        assert_eq!(
            // SAFETY: a live handle and a local.
            unsafe { fl_tool_call_cancelled(call, &mut flag) },
            fl_status::FL_STATUS_OK
        );
        flag
    }

    #[test]
    fn completion_from_another_thread() {
        let (pending, handle) = new_call(&CancellationToken::new());
        let handle = handle as usize;
        let worker = std::thread::spawn(move || {
            let text = "done";
            // SAFETY: the handle is completed once, here.
            unsafe { fl_tool_complete(handle as *mut fl_tool_call, text.as_ptr().cast(), 4, false) }
        });
        let reply = block_on(pending.reply());
        assert_eq!(worker.join().unwrap(), fl_status::FL_STATUS_OK);
        assert_eq!(
            reply,
            ToolReply {
                content: ReplyContent::Text("done".into()),
                is_error: false
            }
        );
    }

    #[test]
    fn token_cancels() {
        let token = CancellationToken::new();
        let (pending, handle) = new_call(&token);
        assert!(!cancelled(handle));
        token.cancel();
        assert!(cancelled(handle));
        // SAFETY: completed once, with 2 readable bytes.
        let status = unsafe { fl_tool_complete(handle, "ok".as_ptr().cast(), 2, false) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(
            block_on(pending.reply()).content,
            ReplyContent::Text("ok".into())
        );
    }

    #[test]
    fn dropping_the_pending_call_cancels_and_late_completion_is_fine() {
        let (pending, handle) = new_call(&CancellationToken::new());
        assert!(!cancelled(handle));
        drop(pending);
        assert!(cancelled(handle));
        // SAFETY: completed once; the reply is dropped since nobody waits.
        let status = unsafe { fl_tool_complete(handle, std::ptr::null(), 0, true) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
    }

    #[test]
    fn invalid_content_still_completes_with_an_error() {
        let (pending, handle) = new_call(&CancellationToken::new());
        let bad = [0xffu8];
        // SAFETY: completed once with one readable byte.
        let status = unsafe { fl_tool_complete(handle, bad.as_ptr().cast(), 1, false) };
        assert_eq!(status, fl_status::FL_STATUS_INVALID_UTF8);
        let reply = block_on(pending.reply());
        assert!(reply.is_error);

        let (pending, handle) = new_call(&CancellationToken::new());
        let json = "{\"not\": \"blocks\"}";
        // SAFETY: completed once with `json.len()` readable bytes.
        let status =
            unsafe { fl_tool_complete_json(handle, json.as_ptr().cast(), json.len(), false) };
        assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT);
        assert!(block_on(pending.reply()).is_error);

        let (pending, handle) = new_call(&CancellationToken::new());
        let json = "[{\"type\":\"text\",\"text\":\"hi\"}]";
        // SAFETY: completed once with `json.len()` readable bytes.
        let status =
            unsafe { fl_tool_complete_json(handle, json.as_ptr().cast(), json.len(), true) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let reply = block_on(pending.reply());
        assert!(reply.is_error);
        assert_eq!(
            reply.content,
            ReplyContent::Json(serde_json::json!([{"type": "text", "text": "hi"}]))
        );
    }

    fn progress(call: *const fl_tool_call, data: &[u8]) -> fl_status {
        // SAFETY: a live handle (or NULL); `data` readable for its length.
        unsafe { fl_tool_call_progress(call, data.as_ptr().cast(), data.len()) }
    }

    /// Outside a turn, progress goes nowhere; bad data is refused with its status and message,
    /// and leaves the call as it was.
    #[test]
    fn progress_arguments_are_checked() {
        let (pending, handle) = new_call(&CancellationToken::new());
        for data in [
            &b"{\"done\":1,\"of\":2}"[..],
            b"\"indexing\"",
            b"0.5",
            b"null",
            b"[1,[2]]",
            b" true\n",
        ] {
            assert_eq!(progress(handle, data), fl_status::FL_STATUS_OK, "{data:?}");
        }
        let refused: [(&[u8], fl_status, &str); 5] = [
            (b"", fl_status::FL_STATUS_INVALID_ARGUMENT, "not valid JSON"),
            (
                b"{\"a\":",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "not valid JSON",
            ),
            (
                b"1 2",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "trailing characters",
            ),
            (
                b"{a:1}",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "not valid JSON",
            ),
            (
                b"\"\xff\"",
                fl_status::FL_STATUS_INVALID_UTF8,
                "`data_json` is not valid UTF-8",
            ),
        ];
        for (data, status, message) in refused {
            assert_eq!(progress(handle, data), status, "{data:?}");
            let error = crate::boundary::last_error_for_tests();
            assert!(error.contains(message), "{data:?}: {error}");
        }
        // Nesting: 127 levels are fine, 128 reach the parser's recursion limit.
        let deep = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        assert_eq!(
            progress(handle, deep(127).as_bytes()),
            fl_status::FL_STATUS_OK
        );
        assert_eq!(
            progress(handle, deep(128).as_bytes()),
            fl_status::FL_STATUS_INVALID_ARGUMENT
        );
        // SAFETY: NULL with a length, and an impossible length, are checked before any read.
        unsafe {
            assert_eq!(
                fl_tool_call_progress(handle, std::ptr::null(), 1),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                crate::boundary::last_error_for_tests(),
                "argument `data_json` must not be NULL"
            );
            assert_eq!(
                fl_tool_call_progress(handle, std::ptr::null(), 0),
                fl_status::FL_STATUS_INVALID_ARGUMENT
            );
            assert_eq!(
                fl_tool_call_progress(handle, "1".as_ptr().cast(), usize::MAX),
                fl_status::FL_STATUS_INVALID_ARGUMENT
            );
            assert_eq!(
                fl_tool_call_progress(std::ptr::null(), "1".as_ptr().cast(), 1),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                crate::boundary::last_error_for_tests(),
                "argument `call` must not be NULL"
            );
        }
        // The call goes on: not cancelled, completed as usual.
        assert!(!cancelled(handle));
        // SAFETY: completed once, with 2 readable bytes.
        let status = unsafe { fl_tool_complete(handle, "ok".as_ptr().cast(), 2, false) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(
            block_on(pending.reply()).content,
            ReplyContent::Text("ok".into())
        );
    }

    /// A cancelled call, and one the executor gave up on, still take progress (it goes
    /// nowhere here).
    #[test]
    fn progress_after_cancellation_is_accepted() {
        let token = CancellationToken::new();
        let (pending, handle) = new_call(&token);
        token.cancel();
        assert_eq!(progress(handle, b"\"stopping\""), fl_status::FL_STATUS_OK);
        drop(pending);
        assert!(cancelled(handle));
        assert_eq!(progress(handle, b"\"stopped\""), fl_status::FL_STATUS_OK);
        // SAFETY: completed once; the reply is dropped since nobody waits.
        let status = unsafe { fl_tool_complete(handle, std::ptr::null(), 0, false) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
    }

    #[test]
    fn null_call_is_rejected() {
        // SAFETY: NULL is checked before use.
        unsafe {
            assert_eq!(
                fl_tool_complete(std::ptr::null_mut(), std::ptr::null(), 0, false),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            let mut flag = false;
            assert_eq!(
                fl_tool_call_cancelled(std::ptr::null(), &mut flag),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
        }
    }
}
