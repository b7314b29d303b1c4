//! The Server-Sent-Events parser: bytes in, borrowed event views out.

use std::cell::{Cell, UnsafeCell};
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::ops::ControlFlow;

use ferroloop_core::sse::{SseConfig, SseItem, SseOwnedItem, SseParser};

use crate::boundary::{self, FfiError, FfiResult};
use crate::status::fl_status;
use crate::text::{self, Out, view};

/// An SSE parser (opaque). Create it with `fl_sse_parser_new`, release it with
/// `fl_sse_parser_free`.
///
/// Not thread-safe: use a parser from one thread at a time (it may move between threads).
pub struct fl_sse_parser {
    /// Reached only through [`parser_mut`] / [`parser_ref`], which refuse while `delivering`.
    inner: UnsafeCell<Inner>,
    /// `fl_sse_parser_feed_each` is running its callback and holds the parser exclusively: any
    /// other call on this parser (from inside the callback) is refused.
    delivering: Cell<bool>,
}

/// The state behind a parser handle.
struct Inner {
    parser: SseParser,
    /// Complete items still pending when `fl_sse_parser_finish` ended the stream (fed and not
    /// drained yet, or left by a callback that stopped the delivery): the finish discards only
    /// the unterminated tail, so these are delivered first, before anything fed after it.
    kept: VecDeque<SseOwnedItem>,
    /// The kept item `fl_sse_parser_next` handed out last: its views point into it.
    current: Option<SseOwnedItem>,
}

impl fl_sse_parser {
    fn boxed(parser: SseParser) -> Box<Self> {
        Box::new(Self {
            inner: UnsafeCell::new(Inner {
                parser,
                kept: VecDeque::new(),
                current: None,
            }),
            delivering: Cell::new(false),
        })
    }
}

/// The error of a call made on a parser from inside its `fl_sse_parser_feed_each` callback.
fn reentrant() -> FfiError {
    FfiError::state("the parser is delivering items to its fl_sse_parser_feed_each callback")
}

/// The handle behind `ptr`, refused while its parser is delivering items to a callback.
///
/// # Safety
/// When not NULL, `ptr` must point to a live parser for the lifetime `'a`.
unsafe fn idle_handle<'a>(ptr: *const fl_sse_parser) -> FfiResult<&'a fl_sse_parser> {
    // SAFETY: forwarded from the caller. A shared reference is sound even while
    // `fl_sse_parser_feed_each` holds the parser: both fields are interior-mutable.
    let handle = unsafe { text::handle_ref(ptr, "parser") }?;
    if handle.delivering.get() {
        return Err(reentrant());
    }
    Ok(handle)
}

/// Exclusive access to the parser behind `ptr` (refused from inside a callback).
///
/// # Safety
/// When not NULL, `ptr` must point to a live parser not used concurrently for the lifetime `'a`.
unsafe fn parser_mut<'a>(ptr: *mut fl_sse_parser) -> FfiResult<&'a mut Inner> {
    // SAFETY: forwarded from the caller.
    let handle = unsafe { idle_handle(ptr) }?;
    // SAFETY: no other reference to the parser exists: not `delivering` (checked), so no
    // `fl_sse_parser_feed_each` holds it, and the caller promises no concurrent use.
    Ok(unsafe { &mut *handle.inner.get() })
}

/// Shared access to the parser behind `ptr` (refused from inside a callback).
///
/// # Safety
/// When not NULL, `ptr` must point to a live parser not used concurrently for the lifetime `'a`.
unsafe fn parser_ref<'a>(ptr: *const fl_sse_parser) -> FfiResult<&'a Inner> {
    // SAFETY: forwarded from the caller.
    let handle = unsafe { idle_handle(ptr) }?;
    // SAFETY: as in `parser_mut`: no exclusive reference to the parser exists.
    Ok(unsafe { &*handle.inner.get() })
}

/// What `fl_sse_parser_next` produced.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum fl_sse_item_kind {
    /// Nothing: every byte fed so far has been consumed. Feed more, or finish.
    FL_SSE_ITEM_NONE = 0,
    /// A dispatched event, in `fl_sse_item.event`.
    FL_SSE_ITEM_EVENT = 1,
    /// A valid `retry` field, in `fl_sse_item.retry_ms`, reported at the point it was read.
    FL_SSE_ITEM_RETRY = 2,
}

/// A dispatched event, as views into the parser's memory (no copy is made).
///
/// Each field is a pointer and a length in bytes: the text is valid UTF-8 and is **not**
/// NUL-terminated. The pointers are never NULL (an empty field points to a static empty
/// string). They stay valid until the next call on the same parser (`fl_sse_parser_feed`,
/// `fl_sse_parser_feed_each`, `fl_sse_parser_next`, `fl_sse_parser_finish`,
/// `fl_sse_parser_free`), and those passed to an `fl_sse_parser_feed_each` callback only until
/// the callback returns; copy what you need to keep. The caller never frees them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fl_sse_event {
    /// The event type (`message` when the stream named none).
    pub event_type: *const c_char,
    /// Length of `event_type` in bytes.
    pub event_type_len: usize,
    /// The data: its lines joined by LF, without the final LF.
    pub data: *const c_char,
    /// Length of `data` in bytes.
    pub data_len: usize,
    /// The last event id in force when the event was dispatched (empty when none).
    pub id: *const c_char,
    /// Length of `id` in bytes.
    pub id_len: usize,
}

/// One item produced by `fl_sse_parser_next` or passed to an `fl_sse_parser_feed_each` callback.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fl_sse_item {
    /// Which of the fields below is set.
    pub kind: fl_sse_item_kind,
    /// The event when `kind` is `FL_SSE_ITEM_EVENT` (all views empty otherwise).
    pub event: fl_sse_event,
    /// The reconnection time in milliseconds when `kind` is `FL_SSE_ITEM_RETRY` (0 otherwise).
    pub retry_ms: u64,
}

impl fl_sse_event {
    fn empty() -> Self {
        let (ptr, len) = view("");
        Self {
            event_type: ptr,
            event_type_len: len,
            data: ptr,
            data_len: len,
            id: ptr,
            id_len: len,
        }
    }
}

/// Creates a parser with no limit on the size of an event, and stores it in `*out`.
///
/// The caller owns the parser and releases it with `fl_sse_parser_free`. `*out` is left
/// unchanged on failure. Thread-safe.
///
/// # Safety
/// `out` must be valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_new(out: *mut *mut fl_sse_parser) -> fl_status {
    boundary::run(|| {
        let out = Out::new(out, "out")?;
        let parser = fl_sse_parser::boxed(SseParser::new());
        // SAFETY: `out` is not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(parser)) };
        Ok(())
    })
}

/// Creates a parser that drops any event growing past `max_event_bytes` (the line being read
/// plus the data and event type gathered so far; a comment line never counts); parsing resumes
/// after the next blank line.
/// Dropped events are counted by `fl_sse_parser_dropped_events`. `max_event_bytes` must not be
/// 0 (`FL_STATUS_INVALID_ARGUMENT`).
///
/// The caller owns the parser and releases it with `fl_sse_parser_free`. Thread-safe.
///
/// # Safety
/// `out` must be valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_new_with_max_event_bytes(
    max_event_bytes: usize,
    out: *mut *mut fl_sse_parser,
) -> fl_status {
    boundary::run(|| {
        let out = Out::new(out, "out")?;
        if max_event_bytes == 0 {
            return Err(FfiError::invalid("max_event_bytes must be at least 1"));
        }
        let config = SseConfig::default().max_event_bytes(Some(max_event_bytes));
        let parser = fl_sse_parser::boxed(SseParser::with_config(config));
        // SAFETY: `out` is not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(parser)) };
        Ok(())
    })
}

/// Releases a parser and every view it handed out. NULL is accepted and ignored. Called from
/// inside the parser's own `fl_sse_parser_feed_each` callback it does nothing (the parser is in
/// use) and records the thread's last error.
///
/// # Safety
/// `parser` must be NULL or a parser from `fl_sse_parser_new*` not freed yet; it must not be
/// used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_free(parser: *mut fl_sse_parser) {
    boundary::run_void(|| {
        // SAFETY: the caller passes NULL or a live parser.
        if let Ok(handle) = unsafe { text::handle_ref(parser, "parser") }
            && handle.delivering.get()
        {
            // Freed from inside its own callback: `fl_sse_parser_feed_each` still uses it.
            boundary::set_last_error(&reentrant().message);
            return;
        }
        if !parser.is_null() {
            // SAFETY: the caller passes a pointer from `Box::into_raw` in `fl_sse_parser_new*`,
            // freed only once.
            drop(unsafe { Box::from_raw(parser) });
        }
    });
}

/// Queues `len` bytes of the stream. Chunks may be split anywhere (inside a line, a CRLF pair,
/// a UTF-8 sequence or the BOM). The bytes are copied: the caller may reuse `data` at once.
/// Invalid UTF-8 in the stream becomes U+FFFD, never an error. `data` may be NULL when `len`
/// is 0.
///
/// Nothing is parsed yet: drain the completed items with `fl_sse_parser_next`. Invalidates the
/// views handed out by this parser.
///
/// # Safety
/// `parser` must be a live parser not used concurrently; `data` must be valid for reads of
/// `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_feed(
    parser: *mut fl_sse_parser,
    data: *const u8,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `parser` and `data`.
        let (inner, data) = unsafe { (parser_mut(parser)?, text::bytes_arg(data, len, "data")?) };
        inner.parser.feed_slice(data);
        Ok(())
    })
}

/// Parses on and writes the next completed item into `*item`: an event, a `retry` value, or
/// `FL_SSE_ITEM_NONE` when every byte fed so far has been consumed. Call it in a loop after
/// each feed until it yields `FL_SSE_ITEM_NONE`.
///
/// The event views point into the parser and stay valid until the next call on this parser.
///
/// # Safety
/// `parser` must be a live parser not used concurrently; `item` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_next(
    parser: *mut fl_sse_parser,
    item: *mut fl_sse_item,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `parser`.
        let inner = unsafe { parser_mut(parser) }?;
        let item = Out::new(item, "item")?;
        let result = match inner.kept.pop_front() {
            Some(kept) => c_owned_item(inner.current.insert(kept)),
            None => {
                inner.current = None;
                c_item(inner.parser.next_item())
            }
        };
        // SAFETY: `item` is not NULL (checked) and writable (the caller's promise).
        unsafe { item.write(result) };
        Ok(())
    })
}

/// The C form of an item of the core parser (`None`: `FL_SSE_ITEM_NONE`). The event views
/// borrow what `item` borrows.
fn c_item(item: Option<SseItem<'_>>) -> fl_sse_item {
    let mut result = fl_sse_item {
        kind: fl_sse_item_kind::FL_SSE_ITEM_NONE,
        event: fl_sse_event::empty(),
        retry_ms: 0,
    };
    match item {
        None => {}
        Some(SseItem::Retry(ms)) => {
            result.kind = fl_sse_item_kind::FL_SSE_ITEM_RETRY;
            result.retry_ms = ms;
        }
        Some(SseItem::Event(event)) => {
            // The views borrow the parser's chunks and buffers (or the caller's chunk during
            // `fl_sse_parser_feed_each`), untouched for as long as the views are documented
            // to live.
            result.kind = fl_sse_item_kind::FL_SSE_ITEM_EVENT;
            result.event = c_event(event.event_type(), event.data(), event.id());
        }
    }
    result
}

/// An event's views of `event_type`, `data` and `id` (valid as long as they are).
fn c_event(event_type: &str, data: &str, id: &str) -> fl_sse_event {
    let (event_type, event_type_len) = view(event_type);
    let (data, data_len) = view(data);
    let (id, id_len) = view(id);
    fl_sse_event {
        event_type,
        event_type_len,
        data,
        data_len,
        id,
        id_len,
    }
}

/// The C form of an item kept by `fl_sse_parser_finish`; the views borrow `item`.
fn c_owned_item(item: &SseOwnedItem) -> fl_sse_item {
    match item {
        SseOwnedItem::Retry(ms) => c_item(Some(SseItem::Retry(*ms))),
        SseOwnedItem::Event(event) => fl_sse_item {
            kind: fl_sse_item_kind::FL_SSE_ITEM_EVENT,
            event: c_event(
                event.event_type.as_str(),
                event.data.as_str(),
                event.id.as_str(),
            ),
            retry_ms: 0,
        },
    }
}

/// Receives one item from `fl_sse_parser_feed_each`: `userdata` is the pointer given to that
/// call, `item` is never NULL and its `kind` is `FL_SSE_ITEM_EVENT` or `FL_SSE_ITEM_RETRY`.
///
/// Returns 0 to go on with the next item, any other value to stop the delivery: the items not
/// delivered stay pending (see `fl_sse_parser_feed_each`).
///
/// `*item` and every view in it are valid only until the callback returns: copy what you need
/// to keep. The callback must return normally (no `longjmp`, no C++ exception). It may call
/// any function except the `fl_sse_parser_*` functions on the same parser, which fail with
/// `FL_STATUS_INVALID_STATE` (`fl_sse_parser_free` does nothing) while it runs; other parsers
/// may be used freely.
pub type fl_sse_item_callback =
    Option<unsafe extern "C" fn(userdata: *mut c_void, item: *const fl_sse_item) -> c_int>;

/// Clears a parser's `delivering` flag when `fl_sse_parser_feed_each` ends (also on a panic).
struct Delivering<'a>(&'a Cell<bool>);

impl Drop for Delivering<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// Feeds `len` bytes of the stream and calls `on_item(userdata, item)` for every item they
/// complete, in stream order, before returning: the zero-copy counterpart of
/// `fl_sse_parser_feed` followed by `fl_sse_parser_next` until `FL_SSE_ITEM_NONE` (or until the
/// callback asks to stop), with the same items. `data` is read in place during the call (not
/// copied, except what an unfinished line or event still needs, which the parser keeps): the
/// caller may reuse it once the call returns. `data` may be NULL when `len` is 0; such a call
/// delivers only the items already pending.
///
/// Items fed earlier with `fl_sse_parser_feed` (or kept by `fl_sse_parser_finish`) and not
/// drained yet are delivered first, so the two ways of feeding can be mixed freely. While the callback returns 0 every item is
/// delivered, and after the call no item is pending (`fl_sse_parser_next` yields
/// `FL_SSE_ITEM_NONE`). When it returns anything else, no further item is delivered and the call
/// still returns `FL_STATUS_OK`; nothing is lost: the parser keeps its own copy of `data`, and
/// the items not delivered come, in order, from `fl_sse_parser_next` or first from the next
/// `fl_sse_parser_feed_each`.
///
/// See `fl_sse_item_callback` for the lifetime of the items and the calls allowed inside the
/// callback. Returns `FL_STATUS_NULL_ARGUMENT` when `parser` or `on_item` is NULL (or `data`
/// with a non-zero `len`), `FL_STATUS_INVALID_STATE` when called from inside a callback of the
/// same parser; nothing is fed then.
///
/// # Safety
/// `parser` must be a live parser not used concurrently; `data` must be valid for reads of
/// `len` bytes and not written during the call; `on_item` must be safe to call with
/// `userdata`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_feed_each(
    parser: *mut fl_sse_parser,
    data: *const u8,
    len: usize,
    on_item: fl_sse_item_callback,
    userdata: *mut c_void,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `parser` and `data`.
        let (handle, data) = unsafe { (idle_handle(parser)?, text::bytes_arg(data, len, "data")?) };
        let on_item = on_item.ok_or_else(|| FfiError::null("on_item"))?;
        handle.delivering.set(true);
        let _delivering = Delivering(&handle.delivering);
        // SAFETY: the only reference to the parser: it was not `delivering` (checked), the
        // caller promises no concurrent use, and calls from inside the callback are refused
        // (they see `delivering`) before they touch it.
        let inner = unsafe { &mut *handle.inner.get() };
        inner.current = None;
        while let Some(kept) = inner.kept.pop_front() {
            let item = c_owned_item(&kept);
            // SAFETY: the caller's promise on `on_item` and `userdata`; `item` and the views
            // in it (into `kept`) live until the callback returns.
            if unsafe { on_item(userdata, &item) } != 0 {
                // Stopped: the chunk waits behind the kept items, in the parser's own copy.
                inner.parser.feed_slice(data);
                return Ok(());
            }
        }
        let _ = inner.parser.feed_borrowed_until(data, |item| {
            let item = c_item(Some(item));
            // SAFETY: the caller's promise on `on_item` and `userdata`; `item` and the views
            // in it live until the callback returns.
            match unsafe { on_item(userdata, &item) } {
                0 => ControlFlow::Continue(()),
                _ => ControlFlow::Break(()),
            }
        });
        Ok(())
    })
}

/// Ends the stream. An unterminated event (no blank line after it) is discarded, as the
/// specification requires, its `id` field included; `*discarded` (when `discarded` is not NULL)
/// tells whether anything was. Complete items not drained yet are not lost: they still come, in
/// order, from `fl_sse_parser_next` or `fl_sse_parser_feed_each`, before anything fed after the
/// finish. The parser may then be fed a new stream (a reconnection): the last event id (the one
/// the last blank line committed, see `fl_sse_parser_last_event_id`) and the retry value are
/// kept. Invalidates the views handed out by this parser.
///
/// # Safety
/// `parser` must be a live parser not used concurrently; `discarded` must be NULL or valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_finish(
    parser: *mut fl_sse_parser,
    discarded: *mut bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `parser`.
        let inner = unsafe { parser_mut(parser) }?;
        inner.current = None;
        // The complete items not drained yet are kept (as owned items: the finish resets the
        // buffers their views would point into); only the unterminated tail is discarded.
        while let Some(item) = inner.parser.next_item() {
            inner.kept.push_back(item.to_owned());
        }
        let was_discarded = inner.parser.finish();
        if let Ok(out) = Out::new(discarded, "discarded") {
            // SAFETY: not NULL (checked) and writable (the caller's promise).
            unsafe { out.write(was_discarded) };
        }
        Ok(())
    })
}

/// Writes the reconnection time set by the last valid `retry` field into `*retry_ms` and
/// whether there was one into `*has_retry` (`*retry_ms` is 0 when there was none).
///
/// # Safety
/// `parser` must be a live parser not used concurrently; `retry_ms` and `has_retry` must be
/// valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_retry(
    parser: *const fl_sse_parser,
    retry_ms: *mut u64,
    has_retry: *mut bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `parser`.
        let parser = &unsafe { parser_ref(parser) }?.parser;
        let retry_ms = Out::new(retry_ms, "retry_ms")?;
        let has_retry = Out::new(has_retry, "has_retry")?;
        let retry = parser.retry();
        // SAFETY: both not NULL (checked) and writable (the caller's promise).
        unsafe {
            retry_ms.write(retry.unwrap_or(0));
            has_retry.write(retry.is_some());
        }
        Ok(())
    })
}

/// Writes a view of the last event id (empty when none) into `*id` and `*id_len`: UTF-8, not
/// NUL-terminated, never NULL, valid until the next call that changes the parser
/// (`fl_sse_parser_feed`, `fl_sse_parser_feed_each`, `fl_sse_parser_next`,
/// `fl_sse_parser_finish`, `fl_sse_parser_free`).
///
/// It is the WHATWG "last event ID string", the value a reconnection sends in `Last-Event-ID`,
/// as of the bytes parsed so far: an `id` field takes effect at the blank line that ends its
/// event (also one with no data, which dispatches nothing), so until then the previous value is
/// returned, and an event cut off by `fl_sse_parser_finish` never changes it. An `id` field with
/// an empty value resets it.
///
/// # Safety
/// `parser` must be a live parser not used concurrently; `id` and `id_len` must be valid for
/// writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_last_event_id(
    parser: *const fl_sse_parser,
    id: *mut *const c_char,
    id_len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `parser`.
        let parser = &unsafe { parser_ref(parser) }?.parser;
        let id = Out::new(id, "id")?;
        let id_len = Out::new(id_len, "id_len")?;
        let (ptr, len) = view(parser.last_event_id());
        // SAFETY: both not NULL (checked) and writable (the caller's promise).
        unsafe {
            id.write(ptr);
            id_len.write(len);
        }
        Ok(())
    })
}

/// Writes into `*count` how many events were dropped for growing past the parser's
/// `max_event_bytes` (always 0 for a parser without a limit).
///
/// # Safety
/// `parser` must be a live parser not used concurrently; `count` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_sse_parser_dropped_events(
    parser: *const fl_sse_parser,
    count: *mut u64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `parser`.
        let parser = &unsafe { parser_ref(parser) }?.parser;
        let count = Out::new(count, "count")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { count.write(parser.dropped_events()) };
        Ok(())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::ptr;

    use ferroloop_core::Utf8Bytes;
    use ferroloop_core::sse::{SseEvent, SseOwnedItem, parse_all};

    use super::*;

    /// The text of a view.
    fn text(ptr: *const c_char, len: usize) -> String {
        assert!(!ptr.is_null());
        // SAFETY: views are valid for `len` bytes until the next call on the parser.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// Every item of `chunks` fed one by one, as strings like the CLI's lines.
    fn parse(chunks: &[&[u8]]) -> Vec<String> {
        let mut parser = ptr::null_mut();
        let mut out = Vec::new();
        // SAFETY: every pointer passed is a live local or the parser created here.
        unsafe {
            assert_eq!(fl_sse_parser_new(&mut parser), fl_status::FL_STATUS_OK);
            for chunk in chunks {
                let status = fl_sse_parser_feed(parser, chunk.as_ptr(), chunk.len());
                assert_eq!(status, fl_status::FL_STATUS_OK);
                loop {
                    let mut item = std::mem::MaybeUninit::<fl_sse_item>::uninit();
                    assert_eq!(
                        fl_sse_parser_next(parser, item.as_mut_ptr()),
                        fl_status::FL_STATUS_OK
                    );
                    let item = item.assume_init();
                    match item.kind {
                        fl_sse_item_kind::FL_SSE_ITEM_NONE => break,
                        fl_sse_item_kind::FL_SSE_ITEM_RETRY => {
                            out.push(format!("retry {}", item.retry_ms));
                        }
                        fl_sse_item_kind::FL_SSE_ITEM_EVENT => {
                            let event = item.event;
                            out.push(format!(
                                "{}|{}|{}",
                                text(event.event_type, event.event_type_len),
                                text(event.data, event.data_len),
                                text(event.id, event.id_len)
                            ));
                        }
                    }
                }
            }
            let mut discarded = false;
            assert_eq!(
                fl_sse_parser_finish(parser, &mut discarded),
                fl_status::FL_STATUS_OK
            );
            out.push(format!("discarded {discarded}"));
            fl_sse_parser_free(parser);
        }
        out
    }

    #[test]
    fn events_retry_and_split_chunks() {
        let items = parse(&[
            b"retry: 250\nid: 7\nevent: pi",
            b"ng\ndata: a\ndata: b\n\r",
            b"\ndata: x",
        ]);
        assert_eq!(items, vec!["retry 250", "ping|a\nb|7", "discarded true"]);
    }

    #[test]
    fn empty_fields_are_non_null_views() {
        let items = parse(&[b"data\n\n"]);
        assert_eq!(items, vec!["message||", "discarded false"]);
    }

    /// The owned form of a C item (`None` for `FL_SSE_ITEM_NONE`).
    ///
    /// # Safety
    /// The views of `item` must be valid.
    unsafe fn owned_item(item: &fl_sse_item) -> Option<SseOwnedItem> {
        match item.kind {
            fl_sse_item_kind::FL_SSE_ITEM_NONE => None,
            fl_sse_item_kind::FL_SSE_ITEM_RETRY => Some(SseOwnedItem::Retry(item.retry_ms)),
            fl_sse_item_kind::FL_SSE_ITEM_EVENT => {
                let e = item.event;
                Some(SseOwnedItem::Event(SseEvent {
                    event_type: Utf8Bytes::from(text(e.event_type, e.event_type_len)),
                    data: Utf8Bytes::from(text(e.data, e.data_len)),
                    id: Utf8Bytes::from(text(e.id, e.id_len)),
                }))
            }
        }
    }

    /// An `fl_sse_item_callback` that pushes the owned item onto the `Vec<SseOwnedItem>`
    /// behind `userdata`.
    unsafe extern "C" fn collect(userdata: *mut c_void, item: *const fl_sse_item) -> c_int {
        // SAFETY: the tests pass a live `Vec<SseOwnedItem>`; `item` is valid during the call.
        unsafe {
            let items = &mut *userdata.cast::<Vec<SseOwnedItem>>();
            items.push(owned_item(&*item).expect("feed_each delivers no NONE item"));
        }
        0
    }

    /// An `fl_sse_item_callback` that collects one item into the `Vec<SseOwnedItem>` behind
    /// `userdata` and stops the delivery.
    unsafe extern "C" fn collect_one(userdata: *mut c_void, item: *const fl_sse_item) -> c_int {
        // SAFETY: forwarded from the caller (as for `collect`).
        unsafe { collect(userdata, item) };
        1
    }

    #[test]
    fn a_callback_that_stops_leaves_the_rest_pending() {
        let mut parser = ptr::null_mut();
        let mut first: Vec<SseOwnedItem> = Vec::new();
        let mut rest: Vec<SseOwnedItem> = Vec::new();
        // SAFETY: every pointer is a live local or the parser created here; the chunk is
        // overwritten after the call, so a view left pointing into it would read garbage.
        unsafe {
            assert_eq!(fl_sse_parser_new(&mut parser), fl_status::FL_STATUS_OK);
            let mut chunk = b"data: one\n\nretry: 7\ndata: two\n\ndata: three, partial".to_vec();
            let status = fl_sse_parser_feed_each(
                parser,
                chunk.as_ptr(),
                chunk.len(),
                Some(collect_one),
                (&raw mut first).cast(),
            );
            assert_eq!(status, fl_status::FL_STATUS_OK);
            chunk.fill(b'#');
            // One pending item drained with `next`, the rest first from the next feed_each.
            let mut item = std::mem::zeroed::<fl_sse_item>();
            assert_eq!(
                fl_sse_parser_next(parser, &mut item),
                fl_status::FL_STATUS_OK
            );
            rest.extend(owned_item(&item));
            let tail = b" line\n\n";
            let status = fl_sse_parser_feed_each(
                parser,
                tail.as_ptr(),
                tail.len(),
                Some(collect),
                (&raw mut rest).cast(),
            );
            assert_eq!(status, fl_status::FL_STATUS_OK);
            assert_eq!(
                fl_sse_parser_next(parser, &mut item),
                fl_status::FL_STATUS_OK
            );
            assert_eq!(item.kind, fl_sse_item_kind::FL_SSE_ITEM_NONE);
            fl_sse_parser_free(parser);
        }
        let data = |items: &[SseOwnedItem]| -> Vec<String> {
            items
                .iter()
                .map(|item| match item {
                    SseOwnedItem::Event(e) => e.data.to_string(),
                    SseOwnedItem::Retry(ms) => format!("retry {ms}"),
                })
                .collect()
        };
        assert_eq!(data(&first), ["one"]);
        assert_eq!(data(&rest), ["retry 7", "two", "three, partial line"]);
    }

    /// The items of `chunks` through `fl_sse_parser_feed_each` where `each` (cycled) is set and
    /// through `fl_sse_parser_feed` + `fl_sse_parser_next` (drained after every feed only
    /// where `drain` is set, otherwise left pending) elsewhere.
    fn items_through_feed_each(
        chunks: &[Vec<u8>],
        each: &[bool],
        drain: bool,
    ) -> Vec<SseOwnedItem> {
        let mut parser = ptr::null_mut();
        let mut items: Vec<SseOwnedItem> = Vec::new();
        // SAFETY: every pointer is a live local or the parser created here; a scratch copy of
        // each chunk is overwritten after the call, so a view left pointing into it would
        // read garbage.
        unsafe {
            assert_eq!(fl_sse_parser_new(&mut parser), fl_status::FL_STATUS_OK);
            let mut scratch = Vec::new();
            for (turn, chunk) in chunks.iter().enumerate() {
                scratch.clear();
                scratch.extend_from_slice(chunk);
                if each[turn % each.len()] {
                    let status = fl_sse_parser_feed_each(
                        parser,
                        scratch.as_ptr(),
                        scratch.len(),
                        Some(collect),
                        (&raw mut items).cast(),
                    );
                    assert_eq!(status, fl_status::FL_STATUS_OK);
                    let mut item = std::mem::zeroed::<fl_sse_item>();
                    assert_eq!(
                        fl_sse_parser_next(parser, &mut item),
                        fl_status::FL_STATUS_OK
                    );
                    assert_eq!(item.kind, fl_sse_item_kind::FL_SSE_ITEM_NONE);
                } else {
                    let status = fl_sse_parser_feed(parser, scratch.as_ptr(), scratch.len());
                    assert_eq!(status, fl_status::FL_STATUS_OK);
                    let mut item = std::mem::zeroed::<fl_sse_item>();
                    if drain {
                        loop {
                            assert_eq!(
                                fl_sse_parser_next(parser, &mut item),
                                fl_status::FL_STATUS_OK
                            );
                            match owned_item(&item) {
                                Some(owned) => items.push(owned),
                                None => break,
                            }
                        }
                    }
                }
                scratch.fill(b'#');
            }
            let status = fl_sse_parser_feed_each(
                parser,
                ptr::null(),
                0,
                Some(collect),
                (&raw mut items).cast(),
            );
            assert_eq!(status, fl_status::FL_STATUS_OK);
            fl_sse_parser_finish(parser, ptr::null_mut());
            fl_sse_parser_free(parser);
        }
        items
    }

    /// The items of `chunks` through the C API, as owned core items.
    fn items_through_c(chunks: &[Vec<u8>]) -> Vec<SseOwnedItem> {
        let mut parser = ptr::null_mut();
        let mut items = Vec::new();
        // SAFETY: every pointer is a live local or the parser created here; views are read
        // before the next call on the parser.
        unsafe {
            assert_eq!(fl_sse_parser_new(&mut parser), fl_status::FL_STATUS_OK);
            for chunk in chunks {
                fl_sse_parser_feed(parser, chunk.as_ptr(), chunk.len());
                let mut item = std::mem::zeroed::<fl_sse_item>();
                loop {
                    assert_eq!(
                        fl_sse_parser_next(parser, &mut item),
                        fl_status::FL_STATUS_OK
                    );
                    match item.kind {
                        fl_sse_item_kind::FL_SSE_ITEM_NONE => break,
                        fl_sse_item_kind::FL_SSE_ITEM_RETRY => {
                            items.push(SseOwnedItem::Retry(item.retry_ms));
                        }
                        fl_sse_item_kind::FL_SSE_ITEM_EVENT => {
                            let e = item.event;
                            items.push(SseOwnedItem::Event(SseEvent {
                                event_type: Utf8Bytes::from(text(e.event_type, e.event_type_len)),
                                data: Utf8Bytes::from(text(e.data, e.data_len)),
                                id: Utf8Bytes::from(text(e.id, e.id_len)),
                            }));
                        }
                    }
                }
            }
            fl_sse_parser_finish(parser, ptr::null_mut());
            fl_sse_parser_free(parser);
        }
        items
    }

    proptest::proptest! {
        /// Any input split anywhere gives, through the C views, exactly the core's items.
        #[test]
        fn c_views_match_the_core(
            input in proptest::collection::vec(
                proptest::sample::select(b"data: ventid:ry\r\n\xff\xc3\xa9:1 ".to_vec()),
                0..200,
            ),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= input.len()).collect();
            cuts.push(0);
            cuts.push(input.len());
            cuts.sort_unstable();
            let chunks: Vec<Vec<u8>> = cuts.windows(2).map(|w| input[w[0]..w[1]].to_vec()).collect();
            proptest::prop_assert_eq!(items_through_c(&chunks), parse_all(input.clone()));
        }

        /// `fl_sse_parser_feed_each`, alone or mixed with `fl_sse_parser_feed` (drained or
        /// not), gives exactly the core's items, at any chunking.
        #[test]
        fn feed_each_matches_the_core(
            input in proptest::collection::vec(
                proptest::sample::select(b"data: ventid:ry\r\n\xff\xc3\xa9:1 ".to_vec()),
                0..600,
            ),
            cuts in proptest::collection::vec(0usize..600, 0..8),
            each in proptest::collection::vec(proptest::bool::weighted(0.7), 1..4),
            drain: bool,
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= input.len()).collect();
            cuts.push(0);
            cuts.push(input.len());
            cuts.sort_unstable();
            let chunks: Vec<Vec<u8>> = cuts.windows(2).map(|w| input[w[0]..w[1]].to_vec()).collect();
            proptest::prop_assert_eq!(
                items_through_feed_each(&chunks, &each, drain),
                parse_all(input.clone())
            );
        }

        /// Streams ended by `fl_sse_parser_finish` before their items were drained lose only
        /// their unterminated tails: drained at the very end (by `fl_sse_parser_next` or
        /// `fl_sse_parser_feed_each`), the items are the core's, stream after stream.
        #[test]
        fn finish_before_draining_loses_only_the_tail(
            tokens in proptest::collection::vec(
                proptest::sample::select(vec![
                    &b"data: x"[..], b"data", b"id: 1", b"id", b"retry: 5", b"event: e", b": c",
                    b"\n", b"\n", b"\r\n", b"\r", b"\xff", b"\xef\xbb\xbf",
                ]),
                0..80,
            ),
            cuts in proptest::collection::vec(0usize..400, 0..5),
            drain_with_next: bool,
        ) {
            let input = tokens.concat();
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= input.len()).collect();
            cuts.push(0);
            cuts.push(input.len());
            cuts.sort_unstable();
            let streams: Vec<&[u8]> = cuts.windows(2).map(|w| &input[w[0]..w[1]]).collect();

            let mut core = SseParser::new();
            let mut expected = Vec::new();
            for stream in &streams {
                core.feed_slice(stream);
                while let Some(item) = core.next_item() {
                    expected.push(item.to_owned());
                }
                core.finish();
            }

            let mut parser = ptr::null_mut();
            let mut items: Vec<SseOwnedItem> = Vec::new();
            // SAFETY: every pointer is a live local or the parser created here; views are
            // read before the next call on the parser.
            unsafe {
                proptest::prop_assert_eq!(fl_sse_parser_new(&mut parser), fl_status::FL_STATUS_OK);
                for stream in &streams {
                    fl_sse_parser_feed(parser, stream.as_ptr(), stream.len());
                    fl_sse_parser_finish(parser, ptr::null_mut());
                }
                if drain_with_next {
                    let mut item = std::mem::zeroed::<fl_sse_item>();
                    loop {
                        fl_sse_parser_next(parser, &mut item);
                        match owned_item(&item) {
                            Some(owned) => items.push(owned),
                            None => break,
                        }
                    }
                } else {
                    fl_sse_parser_feed_each(
                        parser,
                        ptr::null(),
                        0,
                        Some(collect),
                        (&raw mut items).cast(),
                    );
                }
                fl_sse_parser_free(parser);
            }
            proptest::prop_assert_eq!(items, expected);
        }
    }

    #[test]
    fn accessors_and_null_arguments() {
        let mut parser = ptr::null_mut();
        // SAFETY: every pointer passed is a live local, the parser created here, or NULL where
        // the test checks that NULL is rejected.
        unsafe {
            assert_eq!(
                fl_sse_parser_new_with_max_event_bytes(0, &mut parser),
                fl_status::FL_STATUS_INVALID_ARGUMENT
            );
            assert!(parser.is_null());
            assert_eq!(
                fl_sse_parser_new_with_max_event_bytes(8, &mut parser),
                fl_status::FL_STATUS_OK
            );
            let input = b"retry: 5\nid: abc\ndata: far too long for eight\n\ndata: ok\n\n";
            assert_eq!(
                fl_sse_parser_feed(parser, input.as_ptr(), input.len()),
                fl_status::FL_STATUS_OK
            );
            let mut item = std::mem::zeroed::<fl_sse_item>();
            let mut kinds = Vec::new();
            loop {
                assert_eq!(
                    fl_sse_parser_next(parser, &mut item),
                    fl_status::FL_STATUS_OK
                );
                if item.kind == fl_sse_item_kind::FL_SSE_ITEM_NONE {
                    break;
                }
                kinds.push(item.kind);
            }
            assert_eq!(
                kinds,
                vec![
                    fl_sse_item_kind::FL_SSE_ITEM_RETRY,
                    fl_sse_item_kind::FL_SSE_ITEM_EVENT
                ]
            );
            let mut dropped = 0;
            assert_eq!(
                fl_sse_parser_dropped_events(parser, &mut dropped),
                fl_status::FL_STATUS_OK
            );
            assert_eq!(dropped, 1);
            let (mut retry, mut has_retry) = (0, false);
            assert_eq!(
                fl_sse_parser_retry(parser, &mut retry, &mut has_retry),
                fl_status::FL_STATUS_OK
            );
            assert_eq!((retry, has_retry), (5, true));
            let (mut id, mut id_len) = (ptr::null(), 0);
            assert_eq!(
                fl_sse_parser_last_event_id(parser, &mut id, &mut id_len),
                fl_status::FL_STATUS_OK
            );
            assert_eq!(text(id, id_len), "abc");

            assert_eq!(
                fl_sse_parser_feed(ptr::null_mut(), input.as_ptr(), 1),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_sse_parser_feed(parser, ptr::null(), 1),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_sse_parser_feed(parser, ptr::null(), 0),
                fl_status::FL_STATUS_OK
            );
            assert_eq!(
                fl_sse_parser_next(parser, ptr::null_mut()),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_sse_parser_retry(parser, ptr::null_mut(), &mut has_retry),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_sse_parser_finish(parser, ptr::null_mut()),
                fl_status::FL_STATUS_OK
            );
            fl_sse_parser_free(parser);
            fl_sse_parser_free(ptr::null_mut());
        }
    }

    /// What `reenter` saw: the statuses of the calls it made on the parser under delivery.
    struct Reentry {
        parser: *mut fl_sse_parser,
        statuses: Vec<fl_status>,
        items: usize,
    }

    /// An `fl_sse_item_callback` that calls the parser delivering to it (all refused).
    unsafe extern "C" fn reenter(userdata: *mut c_void, _item: *const fl_sse_item) -> c_int {
        // SAFETY: the test passes a live `Reentry`; the calls below are refused before they
        // touch the parser.
        unsafe {
            let seen = &mut *userdata.cast::<Reentry>();
            seen.items += 1;
            let parser = seen.parser;
            let mut item = std::mem::zeroed::<fl_sse_item>();
            let mut count = 0;
            seen.statuses.push(fl_sse_parser_next(parser, &mut item));
            seen.statuses
                .push(fl_sse_parser_feed(parser, b"x".as_ptr(), 1));
            seen.statuses.push(fl_sse_parser_feed_each(
                parser,
                ptr::null(),
                0,
                Some(reenter),
                userdata,
            ));
            seen.statuses
                .push(fl_sse_parser_dropped_events(parser, &mut count));
            seen.statuses
                .push(fl_sse_parser_finish(parser, ptr::null_mut()));
            fl_sse_parser_free(parser);
        }
        0
    }

    #[test]
    fn calls_on_the_parser_from_its_callback_are_refused() {
        let mut parser = ptr::null_mut();
        // SAFETY: every pointer is a live local or the parser created here.
        unsafe {
            assert_eq!(fl_sse_parser_new(&mut parser), fl_status::FL_STATUS_OK);
            let mut seen = Reentry {
                parser,
                statuses: Vec::new(),
                items: 0,
            };
            let input = b"data: one\n\ndata: two\n\n";
            let status = fl_sse_parser_feed_each(
                parser,
                input.as_ptr(),
                input.len(),
                Some(reenter),
                (&raw mut seen).cast(),
            );
            assert_eq!(status, fl_status::FL_STATUS_OK);
            assert_eq!(seen.items, 2);
            assert_eq!(seen.statuses, [fl_status::FL_STATUS_INVALID_STATE; 10]);
            // The parser is whole and usable after the call (the free inside was refused).
            let mut items: Vec<SseOwnedItem> = Vec::new();
            let input = b"data: three\n\n";
            let status = fl_sse_parser_feed_each(
                parser,
                input.as_ptr(),
                input.len(),
                Some(collect),
                (&raw mut items).cast(),
            );
            assert_eq!(status, fl_status::FL_STATUS_OK);
            assert_eq!(
                items,
                parse_all(bytes::Bytes::from_static(b"data: three\n\n"))
            );
            fl_sse_parser_free(parser);
        }
    }

    #[test]
    fn feed_each_null_arguments_feed_nothing() {
        let mut parser = ptr::null_mut();
        let mut items: Vec<SseOwnedItem> = Vec::new();
        let input = b"data: kept\n\n";
        // SAFETY: every pointer is a live local, the parser created here, or NULL where the
        // test checks that NULL is rejected.
        unsafe {
            assert_eq!(fl_sse_parser_new(&mut parser), fl_status::FL_STATUS_OK);
            let userdata: *mut c_void = (&raw mut items).cast();
            assert_eq!(
                fl_sse_parser_feed_each(parser, input.as_ptr(), input.len(), None, userdata),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_sse_parser_feed_each(
                    ptr::null_mut(),
                    input.as_ptr(),
                    input.len(),
                    Some(collect),
                    userdata
                ),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_sse_parser_feed_each(parser, ptr::null(), 1, Some(collect), userdata),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert!(items.is_empty());
            let status = fl_sse_parser_feed_each(
                parser,
                input.as_ptr(),
                input.len(),
                Some(collect),
                userdata,
            );
            assert_eq!(status, fl_status::FL_STATUS_OK);
            assert_eq!(
                items,
                parse_all(bytes::Bytes::from_static(b"data: kept\n\n"))
            );
            fl_sse_parser_free(parser);
        }
    }
}
