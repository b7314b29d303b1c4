//! The panic boundary and the thread-local last error.
//!
//! Every entry point runs its body through [`run`] (or [`quiet`]): a Rust panic never unwinds
//! into C; it becomes `FL_STATUS_PANIC`. A failing call stores its message in a thread-local slot
//! that `fl_last_error_message` reads, like `errno`: it is only overwritten by the next failing
//! call on the same thread.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::status::fl_status;
use crate::text;

/// A failed call: its status and a message for the thread's last error.
#[derive(Debug)]
pub(crate) struct FfiError {
    pub(crate) status: fl_status,
    pub(crate) message: String,
}

impl FfiError {
    /// An error with `status` and `message`.
    pub(crate) fn new(status: fl_status, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// A NULL pointer passed for the argument `name`.
    pub(crate) fn null(name: &str) -> Self {
        Self::new(
            fl_status::FL_STATUS_NULL_ARGUMENT,
            format!("argument `{name}` must not be NULL"),
        )
    }

    /// An invalid argument.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(fl_status::FL_STATUS_INVALID_ARGUMENT, message)
    }

    /// A call made in the wrong state.
    pub(crate) fn state(message: impl Into<String>) -> Self {
        Self::new(fl_status::FL_STATUS_INVALID_STATE, message)
    }
}

/// The result of an entry point's body.
pub(crate) type FfiResult<T = ()> = Result<T, FfiError>;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `body`, catching panics; a failure is recorded as the thread's last error.
pub(crate) fn run(body: impl FnOnce() -> FfiResult) -> fl_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => fl_status::FL_STATUS_OK,
        Ok(Err(error)) => {
            set_last_error(&error.message);
            error.status
        }
        Err(payload) => panicked(payload.as_ref()),
    }
}

/// Runs `body`, catching panics, without recording a failure as the last error (for the
/// functions that read messages: retrying them with a larger buffer must see the same text).
pub(crate) fn quiet(body: impl FnOnce() -> FfiResult) -> fl_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => fl_status::FL_STATUS_OK,
        Ok(Err(error)) => error.status,
        Err(payload) => panicked(payload.as_ref()),
    }
}

/// Runs `body` for a function that returns nothing (the `_free` functions): a panic is
/// recorded as the last error and otherwise ignored.
pub(crate) fn run_void(body: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(body)) {
        panicked(payload.as_ref());
    }
}

/// Records a caught panic and returns `FL_STATUS_PANIC`.
fn panicked(payload: &(dyn Any + Send)) -> fl_status {
    let detail = ferroloop_core::exec::panic_message(payload);
    tracing::error!(detail, "panic caught at the C boundary");
    set_last_error(&format!("internal error: panic: {detail}"));
    fl_status::FL_STATUS_PANIC
}

/// Replaces the thread's last error message.
pub(crate) fn set_last_error(message: &str) {
    // `try_with`: during thread teardown the slot may be gone; the message is then dropped.
    let _ = LAST_ERROR.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            slot.clear();
            // C reads the message as a NUL-terminated string: a NUL echoed from an argument
            // (`"anthropic\0"`) would hide the rest of it, so it is written out as `\0`.
            for (index, part) in message.split('\0').enumerate() {
                if index > 0 {
                    slot.push_str("\\0");
                }
                slot.push_str(part);
            }
        }
    });
}

/// The thread's last error message (for the unit tests of the entry points).
#[cfg(test)]
pub(crate) fn last_error_for_tests() -> String {
    LAST_ERROR.with(|slot| slot.borrow().clone())
}

/// Writes the message of the last failing call made on this thread into `buf` as a
/// NUL-terminated string (an empty string when no call has failed on this thread yet).
///
/// `buf` may be NULL only when `len` is 0 (to query the length). `*written` receives the length
/// of the message in bytes, without the NUL. Returns `FL_STATUS_OK`, or
/// `FL_STATUS_BUFFER_TOO_SMALL` when `len` is not larger than that length (the text is then
/// truncated at a character boundary and NUL-terminated), or `FL_STATUS_NULL_ARGUMENT` when
/// `written` is NULL.
///
/// The message is thread-local: it describes the last failure on the calling thread. This
/// function does not change it, so a call can be repeated with a larger buffer.
///
/// # Safety
/// `buf` must be valid for writes of `len` bytes; `written` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_last_error_message(
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> fl_status {
    quiet(|| {
        LAST_ERROR
            .try_with(|slot| {
                let message = slot.try_borrow().map(|m| m.clone()).unwrap_or_default();
                // SAFETY: the caller guarantees `buf` holds `len` writable bytes and `written`
                // is writable (or NULL, which is checked).
                unsafe { text::write_to_buffer(&message, buf, len, written) }
            })
            .unwrap_or_else(|_| Err(FfiError::state("thread is shutting down")))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn last_error() -> String {
        LAST_ERROR.with(|slot| slot.borrow().clone())
    }

    #[test]
    fn panics_become_a_status_and_a_message() {
        let status = run(|| panic!("boom {}", 42));
        assert_eq!(status, fl_status::FL_STATUS_PANIC);
        assert_eq!(last_error(), "internal error: panic: boom 42");
    }

    #[test]
    fn errors_are_recorded_successes_keep_the_last_error() {
        assert_eq!(
            run(|| Err(FfiError::null("parser"))),
            fl_status::FL_STATUS_NULL_ARGUMENT
        );
        assert_eq!(last_error(), "argument `parser` must not be NULL");
        assert_eq!(run(|| Ok(())), fl_status::FL_STATUS_OK);
        assert_eq!(last_error(), "argument `parser` must not be NULL");
    }

    #[test]
    fn nul_bytes_in_a_message_are_escaped() {
        set_last_error("unknown provider 'a\0b'\0");
        assert_eq!(last_error(), "unknown provider 'a\\0b'\\0");
    }

    #[test]
    fn quiet_failures_do_not_replace_the_last_error() {
        set_last_error("first");
        assert_eq!(
            quiet(|| Err(FfiError::invalid("second"))),
            fl_status::FL_STATUS_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "first");
    }

    #[test]
    fn last_error_message_can_be_read_twice() {
        set_last_error("a longer message");
        let mut small = [0 as c_char; 4];
        let mut written = 0usize;
        // SAFETY: `small` has 4 writable bytes; `written` is a local.
        let status =
            unsafe { fl_last_error_message(small.as_mut_ptr(), small.len(), &mut written) };
        assert_eq!(status, fl_status::FL_STATUS_BUFFER_TOO_SMALL);
        assert_eq!(written, "a longer message".len());
        let mut big = vec![0 as c_char; written + 1];
        // SAFETY: `big` has `written + 1` writable bytes; `written` is a local.
        let status = unsafe { fl_last_error_message(big.as_mut_ptr(), big.len(), &mut written) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let text: Vec<u8> = big[..written].iter().map(|&c| c as u8).collect();
        assert_eq!(text, b"a longer message");
        assert_eq!(big[written], 0);
    }
}
