//! Parses the 6 MB Anthropic-shaped workload once with one implementation, for instruction
//! counting under `valgrind --tool=callgrind` (repeatable on a noisy machine, unlike time):
//! `cargo build --release -p ferroloop-bench --example sse_once &&
//!  valgrind --tool=callgrind target/release/examples/sse_once ferroloop 1460`
#![allow(clippy::print_stdout)]

use ferroloop_bench::sse_peers::SseImpl;
use ferroloop_bench::workloads::{anthropic_stream, chunked};

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "ferroloop".into());
    let chunk: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1460);
    let input = anthropic_stream(42, 6_000_000);
    let chunks = chunked(&input, chunk);
    if name == "none" {
        // The baseline: generating the workload only, subtracted from the others.
        println!("none {} chunks", chunks.len());
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
