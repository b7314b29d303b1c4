//! A comment line costs no memory whatever its length: its bytes are passed over, never kept,
//! at any chunking. Proved with an allocator that tracks the bytes alive (its own test binary, so no
//! other test's allocations run at the same time).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use ferroloop::sse::{SseItem, SseParser};

struct Tracking;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator unchanged; only counts the bytes alive.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        grew(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// How the comment is handed to the parser.
#[derive(Debug, Clone, Copy)]
enum Feed {
    Owned,
    Borrowed,
}

/// Parses a line of `line_len` bytes, `start` then `ccc…`, in `chunk`-byte chunks made one at a
/// time and dropped after their feed (as a network read loop does), then `data: y`; returns the
/// events' data, the comment count and the peak of the bytes alive above the start.
fn parse_long_line(
    start: &[u8],
    line_len: usize,
    chunk: usize,
    feed: Feed,
) -> (Vec<String>, u64, usize) {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let mut collect = |item: SseItem<'_>| {
        if let SseItem::Event(event) = item {
            events.push(event.data().to_owned());
        }
    };
    let mut buf = vec![b'c'; chunk];
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut sent = 0;
    while sent < line_len {
        let len = chunk.min(line_len - sent);
        buf.fill(b'c');
        for (at, &byte) in start.iter().enumerate().skip(sent).take(len) {
            buf[at - sent] = byte;
        }
        match feed {
            Feed::Owned => parser.feed_with(Bytes::copy_from_slice(&buf[..len]), &mut collect),
            Feed::Borrowed => parser.feed_borrowed(&buf[..len], &mut collect),
        }
        sent += len;
    }
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    parser.feed_with(Bytes::from_static(b"\ndata: y\n\n"), &mut collect);
    (events, parser.comments(), peak)
}

/// Comment lines: at the start of the stream, and after a BOM (split by the 3-byte chunks
/// from the colon that follows it).
const STARTS: [&[u8]; 2] = [b":", b"\xEF\xBB\xBF:"];

#[test]
fn a_huge_comment_line_is_never_buffered() {
    for (line_len, chunk, feed) in [
        (16 << 20, 64 << 10, Feed::Owned),
        (16 << 20, 64 << 10, Feed::Borrowed),
        (4 << 20, 1460, Feed::Owned),
        // Small chunks join the open line in `feed` itself.
        (2 << 20, 16, Feed::Owned),
        (2 << 20, 7, Feed::Borrowed),
        (1 << 20, 3, Feed::Owned),
    ] {
        for start in STARTS {
            let what = format!(
                "{line_len}-byte line {:?}… in {chunk}-byte chunks ({feed:?})",
                String::from_utf8_lossy(start)
            );
            let (events, comments, peak) = parse_long_line(start, line_len, chunk, feed);
            assert_eq!(events, ["y"], "{what}");
            assert_eq!(comments, 1, "{what}");
            // One chunk in flight and the parser's small bookkeeping; nothing that grows with
            // the line.
            assert!(
                peak < chunk + (256 << 10),
                "{what}: peak {peak} bytes alive"
            );
        }
    }
}
