//! Arguments and results crossing the boundary: pointer checks, byte and text inputs, text
//! written into caller buffers.

use std::ffi::c_char;

use crate::boundary::{FfiError, FfiResult};
use crate::status::fl_status;

/// The bytes `ptr[..len]`. `ptr` may be NULL only when `len` is 0.
///
/// A `len` past `isize::MAX` is `FL_STATUS_INVALID_ARGUMENT`: no object is that large, so it is
/// always a caller's bug (a negative length cast to `size_t`), and making a slice of it would be
/// undefined behaviour (a debug build aborts the host on it, past the panic boundary).
///
/// # Safety
/// When not NULL, `ptr` must be valid for reads of `len` bytes for the lifetime `'a`.
pub(crate) unsafe fn bytes_arg<'a>(ptr: *const u8, len: usize, name: &str) -> FfiResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(FfiError::null(name));
    }
    if isize::try_from(len).is_err() {
        return Err(FfiError::invalid(format!(
            "argument `{name}`: length {len} is larger than any object can be"
        )));
    }
    // SAFETY: `ptr` is not NULL, `len` is at most `isize::MAX`, and the caller guarantees `len`
    // readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The UTF-8 text `ptr[..len]`. `ptr` may be NULL only when `len` is 0.
///
/// # Safety
/// When not NULL, `ptr` must be valid for reads of `len` bytes for the lifetime `'a`.
pub(crate) unsafe fn str_arg<'a>(ptr: *const c_char, len: usize, name: &str) -> FfiResult<&'a str> {
    // SAFETY: forwarded from the caller.
    let bytes = unsafe { bytes_arg(ptr.cast::<u8>(), len, name) }?;
    std::str::from_utf8(bytes).map_err(|error| {
        FfiError::new(
            fl_status::FL_STATUS_INVALID_UTF8,
            format!(
                "argument `{name}` is not valid UTF-8 (at byte {})",
                error.valid_up_to()
            ),
        )
    })
}

/// A shared reference to the object behind a handle.
///
/// # Safety
/// When not NULL, `ptr` must point to a live `T` not mutated for the lifetime `'a`.
pub(crate) unsafe fn handle_ref<'a, T>(ptr: *const T, name: &str) -> FfiResult<&'a T> {
    // SAFETY: forwarded from the caller; NULL is handled by `as_ref`.
    unsafe { ptr.as_ref() }.ok_or_else(|| FfiError::null(name))
}

/// An exclusive reference to the object behind a handle.
///
/// # Safety
/// When not NULL, `ptr` must point to a live `T` not accessed elsewhere for the lifetime `'a`.
pub(crate) unsafe fn handle_mut<'a, T>(ptr: *mut T, name: &str) -> FfiResult<&'a mut T> {
    // SAFETY: forwarded from the caller; NULL is handled by `as_mut`.
    unsafe { ptr.as_mut() }.ok_or_else(|| FfiError::null(name))
}

/// The target of empty views: C code may pass any view's pointer to `memcpy` and friends.
static EMPTY: [u8; 1] = [0];

/// A view of `text` for C: a pointer that is never NULL (nor dangling, for empty text) and a
/// length.
pub(crate) fn view(text: &str) -> (*const c_char, usize) {
    if text.is_empty() {
        (EMPTY.as_ptr().cast(), 0)
    } else {
        (text.as_ptr().cast(), text.len())
    }
}

/// A checked out-parameter: a non-NULL pointer the result is written through.
pub(crate) struct Out<T>(*mut T);

impl<T> Out<T> {
    /// Checks `ptr` for NULL.
    pub(crate) fn new(ptr: *mut T, name: &str) -> FfiResult<Self> {
        if ptr.is_null() {
            Err(FfiError::null(name))
        } else {
            Ok(Self(ptr))
        }
    }

    /// Writes `value` without reading or dropping what was there (it may be uninitialised).
    ///
    /// # Safety
    /// The pointer must be valid for a write of `T` and suitably aligned.
    pub(crate) unsafe fn write(self, value: T) {
        // SAFETY: not NULL (checked in `new`); validity is the caller's promise.
        unsafe { self.0.write(value) }
    }
}

/// Writes the view of `terminated` (text ending with the NUL C reads up to) into `view`, and its
/// length without the NUL into `len`: how every getter hands out a string it keeps.
///
/// # Safety
/// Both out-pointers must be valid for writes; `terminated` must stay in place for as long as
/// the getter documents the view valid.
pub(crate) unsafe fn write_terminated(view: Out<*const c_char>, len: Out<usize>, terminated: &str) {
    debug_assert!(
        terminated.ends_with('\0'),
        "a view handed to C ends with a NUL"
    );
    let (pointer, length) = self::view(terminated);
    // SAFETY: both not NULL (checked by `Out::new`) and writable (the caller's promise).
    unsafe {
        view.write(pointer);
        len.write(length - 1);
    }
}

/// The arguments of a call that starts work on a handle (a run of an agent, a request of a
/// client): the handle, a UTF-8 text argument (a JSON body, a prompt) and an optional cancel
/// token, checked in that order, then `out` for NULL; `make` builds the handle of the work,
/// which is stored in `*out` (only on success).
///
/// # Safety
/// `handle` must be NULL or a live `H`; `text` must be valid for reads of `len` bytes; `cancel`
/// must be NULL or a live token; `out` must be NULL or valid for a write.
pub(crate) unsafe fn start_work<H, T>(
    (handle, handle_name): (*const H, &str),
    (text, len, text_name): (*const c_char, usize, &str),
    cancel: *const crate::exec::fl_cancel_token,
    out: *mut *mut T,
    make: impl FnOnce(&H, &str, Option<&crate::exec::fl_cancel_token>) -> FfiResult<Box<T>>,
) -> FfiResult<()> {
    // SAFETY: the caller's promises on `handle`, `text` and `cancel`.
    let (handle, text, cancel) = unsafe {
        (
            handle_ref(handle, handle_name)?,
            str_arg(text, len, text_name)?,
            cancel.as_ref(),
        )
    };
    let out = Out::new(out, "out")?;
    let work = make(handle, text, cancel)?;
    // SAFETY: not NULL (checked) and writable (the caller's promise).
    unsafe { out.write(Box::into_raw(work)) };
    Ok(())
}

/// Writes `text` into `buf` as a NUL-terminated string and its length (without the NUL) into
/// `*written`. A buffer of `text.len()` bytes or fewer receives the longest prefix that ends on a
/// character boundary and fits with its NUL, and the call fails with
/// `FL_STATUS_BUFFER_TOO_SMALL`. `buf` may be NULL only when `len` is 0.
///
/// # Safety
/// When not NULL, `buf` must be valid for writes of `len` bytes and `written` for a write.
pub(crate) unsafe fn write_to_buffer(
    text: &str,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> FfiResult {
    let written = Out::new(written, "written")?;
    if buf.is_null() && len != 0 {
        return Err(FfiError::null("buf"));
    }
    // SAFETY: checked not NULL; the caller guarantees it is writable.
    unsafe { written.write(text.len()) };
    if len == 0 {
        // Nowhere to put even the NUL: a length query.
        return Err(too_small(text.len(), 0));
    }
    let fits = text.len() < len;
    let mut end = text.len().min(len - 1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    // SAFETY: `buf` is not NULL (len != 0) and holds `len` > `end` writable bytes; the source
    // is `end` readable bytes of `text`; the two cannot overlap (the caller's buffer is not
    // part of a Rust string we own).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), end);
        buf.add(end).write(0);
    }
    if fits {
        Ok(())
    } else {
        Err(too_small(text.len(), len))
    }
}

fn too_small(needed: usize, len: usize) -> FfiError {
    FfiError::new(
        fl_status::FL_STATUS_BUFFER_TOO_SMALL,
        format!("buffer of {len} bytes is too small for {needed} bytes and a NUL"),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn write(text: &str, len: usize) -> (fl_status, Vec<u8>, usize) {
        let mut buf = vec![0x7f as c_char; len];
        let mut written = usize::MAX;
        let ptr = if len == 0 {
            std::ptr::null_mut()
        } else {
            buf.as_mut_ptr()
        };
        // SAFETY: `buf` has `len` writable bytes; `written` is a local.
        let status = match unsafe { write_to_buffer(text, ptr, len, &mut written) } {
            Ok(()) => fl_status::FL_STATUS_OK,
            Err(error) => error.status,
        };
        (status, buf.iter().map(|&c| c as u8).collect(), written)
    }

    #[test]
    fn exact_fit_needs_room_for_the_nul() {
        assert_eq!(
            write("abc", 4),
            (fl_status::FL_STATUS_OK, b"abc\0".to_vec(), 3)
        );
        let (status, buf, written) = write("abc", 3);
        assert_eq!(status, fl_status::FL_STATUS_BUFFER_TOO_SMALL);
        assert_eq!(buf, b"ab\0");
        assert_eq!(written, 3);
    }

    #[test]
    fn length_query_with_null_buffer() {
        let (status, _, written) = write("hello", 0);
        assert_eq!(status, fl_status::FL_STATUS_BUFFER_TOO_SMALL);
        assert_eq!(written, 5);
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        // "é" is two bytes: a 3-byte buffer holds "a" and the NUL, not half of "é".
        let (status, buf, written) = write("aé", 3);
        assert_eq!(status, fl_status::FL_STATUS_BUFFER_TOO_SMALL);
        assert_eq!(&buf[..2], b"a\0");
        assert_eq!(written, 3);
    }

    #[test]
    fn null_written_and_null_buffer_are_rejected() {
        let mut buf = [0 as c_char; 8];
        // SAFETY: NULL `written` is rejected before any write.
        let result = unsafe { write_to_buffer("x", buf.as_mut_ptr(), 8, std::ptr::null_mut()) };
        assert_eq!(
            result.unwrap_err().status,
            fl_status::FL_STATUS_NULL_ARGUMENT
        );
        let mut written = 0;
        // SAFETY: NULL `buf` with a non-zero length is rejected before any write.
        let result = unsafe { write_to_buffer("x", std::ptr::null_mut(), 8, &mut written) };
        assert_eq!(
            result.unwrap_err().status,
            fl_status::FL_STATUS_NULL_ARGUMENT
        );
    }

    #[test]
    fn inputs_null_and_utf8() {
        // SAFETY: NULL with length 0 is the empty input; NULL with a length is rejected.
        unsafe {
            assert_eq!(bytes_arg(std::ptr::null(), 0, "data").unwrap(), b"");
            assert_eq!(
                bytes_arg(std::ptr::null(), 3, "data").unwrap_err().status,
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
        }
        let data = [1u8, 2];
        for len in [isize::MAX as usize + 1, usize::MAX] {
            // SAFETY: the length is refused before the pointer is read.
            let error = unsafe { bytes_arg(data.as_ptr(), len, "data") }.unwrap_err();
            assert_eq!(error.status, fl_status::FL_STATUS_INVALID_ARGUMENT);
            assert!(error.message.contains("`data`"), "{}", error.message);
        }
        let bad = [b'a', 0xff, b'b'];
        // SAFETY: `bad` has 3 readable bytes.
        let error = unsafe { str_arg(bad.as_ptr().cast(), 3, "text") }.unwrap_err();
        assert_eq!(error.status, fl_status::FL_STATUS_INVALID_UTF8);
        assert!(error.message.contains("at byte 1"), "{}", error.message);
    }
}
