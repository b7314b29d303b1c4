//! Token estimation throughput, side by side in one run (criterion): ferroloop's estimator (the
//! kernel `Kernel::detect` picks) and its class-counting kernels (AVX2, AVX-512, portable; a
//! kernel the CPU lacks falls back to the portable one), tiktoken-rs exact o200k counting, and a
//! plain byte pass counting newlines with `bytecount` and `memchr` over the same buffer (the
//! memory-bandwidth floor).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferroloop::tokens::classes::{Kernel, count_classes_with};
use ferroloop::tokens::{Family, estimate_text};
use ferroloop_bench::token_corpus::mixed_corpus;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn tokens(c: &mut Criterion) {
    let corpus = mixed_corpus(4 << 20);
    assert!(!corpus.is_empty(), "tests/tokens/sample is missing");
    let bytes = corpus.as_bytes();
    let mut group = c.benchmark_group("tokens/mixed-4MiB");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("ferroloop-estimate", |b| {
        b.iter(|| estimate_text(black_box(&corpus), Family::O200k))
    });
    group.bench_function("ferroloop-avx2-kernel", |b| {
        b.iter(|| count_classes_with(black_box(bytes), Kernel::Avx2))
    });
    group.bench_function("ferroloop-avx512-kernel", |b| {
        b.iter(|| count_classes_with(black_box(bytes), Kernel::Avx512))
    });
    group.bench_function("ferroloop-portable-kernel", |b| {
        b.iter(|| count_classes_with(black_box(bytes), Kernel::Portable))
    });
    group.bench_function("bytecount-newlines", |b| {
        b.iter(|| bytecount::count(black_box(bytes), b'\n'))
    });
    group.bench_function("memchr-newlines", |b| {
        b.iter(|| memchr::memchr_iter(b'\n', black_box(bytes)).count())
    });
    let bpe = tiktoken_rs::o200k_base_singleton();
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("tiktoken-rs-o200k", |b| {
        b.iter(|| bpe.encode_ordinary(black_box(&corpus)).len())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = tokens
}
criterion_main!(benches);
