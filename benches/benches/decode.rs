//! Stream decoding (SSE + JSON + accumulation) beside the naive `serde_json::Value`-per-event
//! baseline, in one run (criterion). Workload: the Anthropic-shaped 6 MB stream of
//! `ferroloop_bench::workloads::anthropic_stream` in 16 KiB chunks.
#![allow(missing_docs)] // criterion_group! generates an undocumented `benches` fn

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ferroloop_bench::decode_peers::{DecodeImpl, parser_choice};
use ferroloop_bench::workloads::{anthropic_stream, chunked};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn decode(c: &mut Criterion) {
    let stream = anthropic_stream(42, 6_000_000);
    let chunks = chunked(&stream, 16 * 1024);
    let (events, blocks) = DecodeImpl::NaiveValue.decode_anthropic(&chunks);
    for imp in DecodeImpl::ALL
        .into_iter()
        .filter(|i| *i != DecodeImpl::SseOnly)
    {
        assert_eq!(
            imp.decode_anthropic(&chunks).1,
            blocks,
            "{} disagrees",
            imp.name()
        );
    }
    eprintln!(
        "decode/anthropic-6MB: {} bytes, {events} SSE events, {blocks} blocks",
        stream.len()
    );
    let mut group = c.benchmark_group("decode/anthropic-6MB/16KiB");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    for imp in DecodeImpl::ALL {
        group.bench_with_input(
            BenchmarkId::from_parameter(imp.name()),
            &chunks,
            |b, chunks| {
                b.iter(|| black_box(imp.decode_anthropic(black_box(chunks))));
            },
        );
    }
    group.finish();

    // The JSON-parser choice alone (same framing and accumulation, different per-event parser).
    let mut parsers = c.benchmark_group("decode/json-parser/anthropic-6MB");
    parsers.throughput(Throughput::Bytes(stream.len() as u64));
    parsers.bench_function("serde_json borrowed struct", |b| {
        b.iter(|| black_box(parser_choice::serde_json_borrowed(black_box(&chunks))));
    });
    #[cfg(feature = "simd-json")]
    parsers.bench_function("simd-json borrowed struct", |b| {
        b.iter(|| black_box(parser_choice::simd_json_borrowed(black_box(&chunks))));
    });
    parsers.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(4));
    targets = decode
}
criterion_main!(benches);
