//! Writes the seeded Anthropic-shaped workload to stdout, for benchmarks in other languages and
//! to check their own generators byte for byte:
//! `cargo run -p ferroloop-bench --example anthropic_workload -- [SEED] [BYTES] > stream.sse`
use std::io::Write;

use ferroloop_bench::workloads::anthropic_stream;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(42);
    let bytes: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6_000_000);
    std::io::stdout()
        .lock()
        .write_all(&anthropic_stream(seed, bytes))
}
