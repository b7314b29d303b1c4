//! The status codes every fallible function returns, and their messages.

use std::ffi::c_char;

use crate::boundary;
use crate::text;

/// The outcome of a call. Every fallible function returns one.
///
/// The numeric values are part of the ABI: they are never renumbered or reused, and new codes
/// are only ever appended. A failing call also records a detailed message, readable on the same
/// thread with `fl_last_error_message`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum fl_status {
    /// Success.
    FL_STATUS_OK = 0,
    /// A pointer argument that must not be NULL was NULL.
    FL_STATUS_NULL_ARGUMENT = 1,
    /// A text argument was not valid UTF-8.
    FL_STATUS_INVALID_UTF8 = 2,
    /// An argument was out of range or malformed (for example JSON that does not parse, or an
    /// unknown enum value).
    FL_STATUS_INVALID_ARGUMENT = 3,
    /// The input stream broke its provider's protocol (or an event was not valid JSON).
    FL_STATUS_PROTOCOL_ERROR = 4,
    /// The input ended before the message was complete.
    FL_STATUS_TRUNCATED = 5,
    /// The caller's buffer is too small. The text was truncated (and NUL-terminated when the
    /// buffer holds at least one byte); the `written` out-parameter holds the full length.
    FL_STATUS_BUFFER_TOO_SMALL = 6,
    /// ferroloop hit an internal bug (a Rust panic), caught at the boundary. The handle the
    /// call was made on may be in an inconsistent state: free it and do not use it again.
    FL_STATUS_PANIC = 7,
    /// The call is not valid in the object's current state (for example feeding a decoder after
    /// it finished, or running an executor that is already running).
    FL_STATUS_INVALID_STATE = 8,
    /// The operation was cancelled.
    FL_STATUS_CANCELLED = 9,
    /// The provider reported an error inside the stream (for example `overloaded_error` after
    /// HTTP 200), or answered a client request with an error status (HTTP 400, 429, 529, ...);
    /// the message names the provider's error type.
    FL_STATUS_PROVIDER_ERROR = 10,
    /// A request could not reach the provider, or its connection broke before the response
    /// began (refused, reset, closed before the headers, TLS or proxy failure).
    FL_STATUS_CONNECTION_ERROR = 11,
    /// A request's watchdog fired (connect, first byte, first event, idle or total timeout).
    FL_STATUS_TIMEOUT = 12,
}

/// Every status, in numeric order.
const ALL_STATUSES: [fl_status; 13] = [
    fl_status::FL_STATUS_OK,
    fl_status::FL_STATUS_NULL_ARGUMENT,
    fl_status::FL_STATUS_INVALID_UTF8,
    fl_status::FL_STATUS_INVALID_ARGUMENT,
    fl_status::FL_STATUS_PROTOCOL_ERROR,
    fl_status::FL_STATUS_TRUNCATED,
    fl_status::FL_STATUS_BUFFER_TOO_SMALL,
    fl_status::FL_STATUS_PANIC,
    fl_status::FL_STATUS_INVALID_STATE,
    fl_status::FL_STATUS_CANCELLED,
    fl_status::FL_STATUS_PROVIDER_ERROR,
    fl_status::FL_STATUS_CONNECTION_ERROR,
    fl_status::FL_STATUS_TIMEOUT,
];

impl fl_status {
    /// The status with numeric value `code`, if there is one.
    pub fn from_code(code: i32) -> Option<Self> {
        usize::try_from(code)
            .ok()
            .and_then(|index| ALL_STATUSES.get(index).copied())
    }

    /// A short, fixed description of the status.
    pub fn description(self) -> &'static str {
        match self {
            fl_status::FL_STATUS_OK => "ok",
            fl_status::FL_STATUS_NULL_ARGUMENT => "a required pointer argument was NULL",
            fl_status::FL_STATUS_INVALID_UTF8 => "a text argument was not valid UTF-8",
            fl_status::FL_STATUS_INVALID_ARGUMENT => "an argument was invalid",
            fl_status::FL_STATUS_PROTOCOL_ERROR => {
                "the stream broke its provider's protocol (or an event was not valid JSON)"
            }
            fl_status::FL_STATUS_TRUNCATED => "the stream ended before the message was complete",
            fl_status::FL_STATUS_BUFFER_TOO_SMALL => "the output buffer is too small",
            fl_status::FL_STATUS_PANIC => "internal error (a panic was caught at the C boundary)",
            fl_status::FL_STATUS_INVALID_STATE => "the call is not valid in the current state",
            fl_status::FL_STATUS_CANCELLED => "the operation was cancelled",
            fl_status::FL_STATUS_PROVIDER_ERROR => {
                "the provider reported an error (an error status, or an error event in the stream)"
            }
            fl_status::FL_STATUS_CONNECTION_ERROR => "the connection to the provider failed",
            fl_status::FL_STATUS_TIMEOUT => "a request timed out",
        }
    }
}

/// Writes the fixed description of `status` into `buf` as a NUL-terminated string.
///
/// `status` is taken as an `int` so that any value is safe to pass: a value that is no
/// `fl_status` yields `"unknown status"`.
///
/// `buf` may be NULL only when `len` is 0 (to query the length). `*written` receives the length
/// of the description in bytes, without the NUL. Returns `FL_STATUS_OK`, or
/// `FL_STATUS_BUFFER_TOO_SMALL` when `len` is not larger than that length (the text is then
/// truncated and NUL-terminated), or `FL_STATUS_NULL_ARGUMENT` when `written` is NULL.
///
/// Thread-safe. Does not change the thread's last error.
///
/// # Safety
/// `buf` must be valid for writes of `len` bytes; `written` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_status_message(
    status: i32,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> fl_status {
    boundary::quiet(|| {
        let text = fl_status::from_code(status).map_or("unknown status", fl_status::description);
        // SAFETY: the caller guarantees `buf` holds `len` writable bytes and `written` is
        // writable (or NULL, which is checked).
        unsafe { text::write_to_buffer(text, buf, len, written) }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_dense() {
        for (index, status) in ALL_STATUSES.iter().enumerate() {
            assert_eq!(*status as i32, index as i32);
            assert_eq!(fl_status::from_code(index as i32), Some(*status));
        }
        assert_eq!(fl_status::FL_STATUS_OK as i32, 0);
        assert_eq!(fl_status::FL_STATUS_PANIC as i32, 7);
        assert_eq!(fl_status::from_code(-1), None);
        assert_eq!(fl_status::from_code(ALL_STATUSES.len() as i32), None);
    }

    #[test]
    fn protocol_and_provider_errors_are_described_apart() {
        // A provider's error event is FL_STATUS_PROVIDER_ERROR, never FL_STATUS_PROTOCOL_ERROR.
        assert_eq!(
            fl_status::FL_STATUS_PROTOCOL_ERROR.description(),
            "the stream broke its provider's protocol (or an event was not valid JSON)"
        );
        let mut seen = std::collections::HashSet::new();
        for status in ALL_STATUSES {
            assert!(seen.insert(status.description()), "{status:?}");
        }
    }

    #[test]
    fn message_of_unknown_status() {
        let mut buf = [0 as c_char; 32];
        let mut written = 0usize;
        // SAFETY: `buf` has 32 writable bytes and `written` is a local.
        let status = unsafe { fl_status_message(1234, buf.as_mut_ptr(), buf.len(), &mut written) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(written, "unknown status".len());
    }
}
