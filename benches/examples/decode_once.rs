//! Decodes the 6 MB Anthropic-shaped workload once with one implementation, for instruction
//! counting under callgrind (repeatable on a noisy machine, unlike time):
//! `cargo build --release -p ferroloop-bench --example decode_once &&
//!  valgrind --tool=callgrind --toggle-collect='*decode_anthropic*' \
//!    target/release/examples/decode_once naive`
//! Implementations: `events`, `accumulate`, `serde`, `naive`, `sse`, and the JSON-parser
//! comparison `serde-json-borrowed` / `simd-json-borrowed` (the latter with `--features simd-json`).
//! Count with `--toggle-collect='*decode_peers*'` to cover both.
#![allow(clippy::print_stdout)]

use ferroloop_bench::decode_peers::DecodeImpl;
use ferroloop_bench::workloads::{anthropic_stream, chunked};

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "events".into());
    let chunk: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16 * 1024);
    let input = anthropic_stream(42, 6_000_000);
    let chunks = chunked(&input, chunk);
    match name.as_str() {
        "serde-json-borrowed" => {
            println!(
                "{}",
                ferroloop_bench::decode_peers::parser_choice::serde_json_borrowed(&chunks)
            );
            return;
        }
        #[cfg(feature = "simd-json")]
        "simd-json-borrowed" => {
            println!(
                "{}",
                ferroloop_bench::decode_peers::parser_choice::simd_json_borrowed(&chunks)
            );
            return;
        }
        _ => {}
    }
    let imp = match name.as_str() {
        "events" => DecodeImpl::FerroloopEvents,
        "accumulate" => DecodeImpl::FerroloopAccumulate,
        "serde" => DecodeImpl::FerroloopSerdeOnly,
        "naive" => DecodeImpl::NaiveValue,
        "sse" => DecodeImpl::SseOnly,
        _ => {
            eprintln!("unknown implementation {name}");
            std::process::exit(2);
        }
    };
    let (events, blocks) = imp.decode_anthropic(&chunks);
    println!("{}: {events} events, {blocks} blocks", imp.name());
}
