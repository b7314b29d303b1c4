//! SSE parsing, ferroloop beside its peers in one run (criterion).
#![allow(missing_docs)] // criterion_group! generates undocumented items
//!
//! Workloads (issue "Foundation"): (a) an Anthropic-shaped 6 MB / ~50,000-event stream in 16 KiB,
//! 1460 B and 64 B chunks; (b) one 16 MiB `data:` line in 1460 B chunks, beside a plain copy of
//! the same bytes (the floor); (c) (a)'s first 256 KiB in 1-byte chunks.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ferroloop_bench::sse_peers::SseImpl;
use ferroloop_bench::workloads::{anthropic_stream, chunked, single_large_event};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn group(c: &mut Criterion, name: &str, input: &Bytes, chunk: usize, impls: &[SseImpl]) {
    let chunks = chunked(input, chunk);
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(input.len() as u64));
    for &imp in impls {
        group.bench_with_input(
            BenchmarkId::from_parameter(imp.name()),
            &chunks,
            |b, chunks| {
                b.iter(|| black_box(imp.parse(black_box(chunks))));
            },
        );
    }
    group.finish();
}

fn sse(c: &mut Criterion) {
    let stream = anthropic_stream(42, 6_000_000);
    for (label, chunk) in [("16KiB", 16 * 1024), ("1460B", 1460), ("64B", 64)] {
        group(
            c,
            &format!("sse/anthropic-6MB/{label}"),
            &stream,
            chunk,
            &SseImpl::ALL,
        );
    }
    group(
        c,
        "sse/anthropic-256KiB/1B",
        &stream.slice(..256 * 1024),
        1,
        &SseImpl::ALL,
    );

    let large = single_large_event(16 << 20);
    // eventsource-stream re-buffers the pending line per chunk (quadratic): a 16 MiB line takes
    // it minutes per iteration, so it is left out here as in `ferroloop bench`.
    let linear: Vec<SseImpl> = SseImpl::ALL
        .into_iter()
        .filter(|imp| *imp != SseImpl::EventsourceStream)
        .collect();
    group(c, "sse/single-16MiB/1460B", &large, 1460, &linear);
    let chunks = chunked(&large, 1460);
    let mut floor = c.benchmark_group("sse/single-16MiB/1460B");
    floor.throughput(Throughput::Bytes(large.len() as u64));
    floor.bench_function("memcpy (floor)", |b| {
        let mut dst = Vec::with_capacity(large.len());
        b.iter(|| {
            dst.clear();
            for chunk in &chunks {
                dst.extend_from_slice(chunk);
            }
            // The whole copy is kept (not only its length), like the parser's assembled line.
            black_box(&dst);
        });
    });
    floor.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = sse
}
criterion_main!(benches);
