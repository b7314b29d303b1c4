//! Library information and the deliberate panic used to test the boundary.

use std::ffi::c_char;

use crate::boundary;
use crate::status::fl_status;

/// The library version, NUL-terminated.
static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The version of the library (for example `"0.1.0"`): a static NUL-terminated string the
/// caller must not free. Never NULL. Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fl_version() -> *const c_char {
    VERSION.as_ptr().cast()
}

/// **For tests only.** Panics inside the library on purpose, to prove that a panic is caught at
/// the boundary: always returns `FL_STATUS_PANIC` and sets the thread's last error to a message
/// mentioning the panic. Never unwinds into the caller. Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fl_debug_panic() -> fl_status {
    boundary::run(|| panic!("fl_debug_panic: deliberate panic for tests"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliberate_panic_is_caught() {
        assert_eq!(fl_debug_panic(), fl_status::FL_STATUS_PANIC);
    }

    #[test]
    fn version_is_nul_terminated() {
        // SAFETY: `fl_version` returns a static NUL-terminated string.
        let version = unsafe { std::ffi::CStr::from_ptr(fl_version()) };
        assert_eq!(version.to_str().ok(), Some(env!("CARGO_PKG_VERSION")));
    }
}
