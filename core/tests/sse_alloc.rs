//! Zero allocations per event on single-line events, proved with a counting global allocator.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use ferroloop::sse::{SseItem, SseParser};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn single_line_events_allocate_nothing() {
    let one = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"héllo 世界 🌍\"}}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n";
    let input = Bytes::from(one.repeat(5_000));
    // One large chunk and many 1460-byte chunks, made before counting starts.
    let chunks: Vec<Bytes> = (0..input.len())
        .step_by(1460)
        .map(|start| input.slice(start..(start + 1460).min(input.len())))
        .collect();
    let mut parser = SseParser::new();
    // Warm up so the reusable buffers and the chunk queue have their capacity.
    parser.feed(input.clone());
    while parser.next_item().is_some() {}

    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut events = 0u64;
    let mut data_bytes = 0usize;
    parser.feed(input.clone());
    while let Some(item) = parser.next_item() {
        if let SseItem::Event(event) = item {
            events += 1;
            data_bytes += event.data().len();
            assert!(event.is_data_borrowed());
        }
    }
    let whole_chunk_allocs = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(events, 10_000);
    assert!(data_bytes > 0);
    assert_eq!(whole_chunk_allocs, 0, "one big chunk: no allocation at all");

    // Warm up the buffers for lines cut by chunk boundaries, then count a second pass.
    for chunk in &chunks {
        parser.feed(chunk.clone());
        while parser.next_item().is_some() {}
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut events = 0u64;
    for chunk in &chunks {
        parser.feed(chunk.clone());
        while let Some(item) = parser.next_item() {
            if let SseItem::Event(_) = item {
                events += 1;
            }
        }
    }
    let split_allocs = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(events, 10_000);
    // Lines cut by a chunk boundary go through the reusable line buffer, which is already
    // large enough: no allocation per event either.
    assert!(
        split_allocs <= 4,
        "{split_allocs} allocations for 10,000 events in 1460-byte chunks"
    );
}
