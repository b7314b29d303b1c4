//! Parses one SSE workload once with one implementation, for instruction counting under
//! `valgrind --tool=callgrind` (repeatable on a noisy machine, unlike time):
//! `cargo build --release -p ferroloop-bench --example sse_once &&
//!  valgrind --tool=callgrind target/release/examples/sse_once ferroloop 1460 [WORKLOAD]`
//!
//! Workloads: `anthropic` (default; the 6 MB Anthropic-shaped stream), `anthropic-prefix` (its
//! first 256 KiB, usually fed in 1-byte chunks) and `single` (one 16 MiB `data:` line).
//! The implementation `none` only generates and chunks the workload (the baseline to subtract);
//! `memcpy` copies the chunks into one buffer (the floor of the `single` workload).
#![allow(clippy::print_stdout)]

use ferroloop_bench::sse_peers::SseImpl;
use ferroloop_bench::workloads::{anthropic_stream, chunked, single_large_event};

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "ferroloop".into());
    let chunk: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1460);
    let workload = args.next().unwrap_or_else(|| "anthropic".into());
    let input = match workload.as_str() {
        "anthropic" => anthropic_stream(42, 6_000_000),
        "anthropic-prefix" => anthropic_stream(42, 6_000_000).slice(..256 * 1024),
        "single" => single_large_event(16 << 20),
        other => {
            eprintln!("unknown workload {other}");
            std::process::exit(2);
        }
    };
    let chunks = chunked(&input, chunk);
    if name == "none" {
        // The baseline: generating the workload only, subtracted from the others.
        println!("none {} chunks", chunks.len());
        return;
    }
    if name == "memcpy" {
        let mut copy = Vec::with_capacity(input.len());
        for chunk in &chunks {
            copy.extend_from_slice(chunk);
        }
        println!("memcpy {} bytes", std::hint::black_box(copy.len()));
        return;
    }
    let Some(imp) = SseImpl::ALL.into_iter().find(|i| i.name() == name) else {
        eprintln!("unknown implementation {name}");
        std::process::exit(2);
    };
    let tally = imp.parse(&chunks);
    println!(
        "{} {} events {} data bytes",
        imp.name(),
        tally.events,
        tally.data_bytes
    );
}
