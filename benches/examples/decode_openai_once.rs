//! Decodes the 6 MB OpenAI Chat workload (the `decode/openai-chat` bench's input) once, for
//! instruction counting under callgrind and an exact allocation count:
//! `cargo build --release -p ferroloop-bench --example decode_openai_once &&
//!  valgrind --tool=callgrind --toggle-collect='*decode_peers*' \
//!    target/release/examples/decode_openai_once accumulate`
//! (for `naive`, `--toggle-collect='*naive_openai_chat*'`: the naive decoder's functions are not
//! under `decode_peers` once inlined).
//! Implementations: `events`, `accumulate`, `serde` (accumulate, template fast path off),
//! `naive`; a third argument `obfuscated` decodes the workload with OpenAI's `obfuscation`
//! padding in every chunk. Prints the checksum and the allocations per
//! SSE event made while decoding (the bench's allocs/event column, counted on one run).
#![allow(clippy::print_stdout)]

use ferroloop_bench::alloc::{CountingAlloc, allocations};
use ferroloop_bench::decode_peers::{
    ferroloop_openai_chat, ferroloop_openai_chat_serde, naive_openai_chat,
};
use ferroloop_bench::sse_peers::SseImpl;
use ferroloop_bench::workloads::{chunked, openai_chat_stream, openai_chat_stream_obfuscated};

// The system allocator, so callgrind counts the same code every run.
#[global_allocator]
static GLOBAL: CountingAlloc<std::alloc::System> = CountingAlloc(std::alloc::System);

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "accumulate".into());
    let chunk: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16 * 1024);
    let input = if std::env::args().nth(3).as_deref() == Some("obfuscated") {
        openai_chat_stream_obfuscated(7, 6_000_000)
    } else {
        openai_chat_stream(7, 6_000_000)
    };
    let chunks = chunked(&input, chunk);
    let events = SseImpl::Ferroloop.parse(&chunks).events;
    let before = allocations();
    let checksum = match name.as_str() {
        "events" => ferroloop_openai_chat(&chunks, true),
        "accumulate" => ferroloop_openai_chat(&chunks, false),
        "serde" => ferroloop_openai_chat_serde(&chunks),
        "naive" => naive_openai_chat(&chunks),
        _ => {
            eprintln!("unknown implementation {name}");
            std::process::exit(2);
        }
    };
    let allocated = allocations() - before;
    println!(
        "{name}: checksum {checksum}, {events} events, {allocated} allocations, {:.3} allocs/event",
        allocated as f64 / events.max(1) as f64
    );
}
