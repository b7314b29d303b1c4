//! The client's cost in instructions, for callgrind (repeatable on a noisy machine, unlike
//! time). One binary, two sides on the same 6 MB Anthropic-shaped bytes:
//!
//! - `client-decode URL N` / `client-sse URL N`: `N` streams from a server in another process
//!   (`ferroloop serve-replay`), through `ferroloop::client` (hyper → SSE → owned events), with
//!   the provider's decoder (`stream_message`) or without (`stream`);
//! - `decoder N` / `sse N`: `N` passes of the decoder (with its SSE parser) or of the SSE parser
//!   alone (events made owned) over the same bytes read from memory in 16 KiB chunks.
//!
//! `benches/callgrind-client.sh` runs each mode with `N = 1` and `N = 3` and takes the
//! difference over 2: the marginal cost of one 6 MB stream, with every setup cost (runtime,
//! client, TLS roots, workload generation, first connection) cancelled out.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use ferroloop::client::{Client, ClientConfig, MessageItem, Provider, StreamItem};
use ferroloop::decode::StreamDecoder;
use ferroloop::sse::{SseItem, SseParser};
use ferroloop_bench::workloads::{anthropic_stream, chunked};
use futures::StreamExt;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map_or("decoder", String::as_str);
    let count = |at: usize| -> usize { args.get(at).and_then(|s| s.parse().ok()).unwrap_or(1) };
    match mode {
        "client-decode" | "client-sse" => {
            let url = args.get(1).expect("client modes need the server URL");
            let (events, bytes) = client(url, mode == "client-decode", count(2));
            println!("{mode}: {events} events, {bytes} body bytes per stream");
        }
        "decoder" | "sse" => {
            let events = in_memory(mode == "decoder", count(1));
            println!("{mode}: {events} events per pass");
        }
        _ => {
            eprintln!("modes: client-decode URL N | client-sse URL N | decoder N | sse N");
            std::process::exit(2);
        }
    }
}

/// `passes` streams through the client; returns the events and body bytes of the last one.
fn client(url: &str, decode: bool, passes: usize) -> (u64, u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(url);
    config.tls.native_roots = false;
    config.retry.max_retries = 0;
    let client = Client::new(config).unwrap();
    runtime.block_on(async {
        let mut last = (0, 0);
        for _ in 0..passes {
            let mut events = 0u64;
            if decode {
                let mut stream = client.stream_message("{}");
                while let Some(item) = stream.next().await {
                    match item.unwrap() {
                        MessageItem::Event(event) => {
                            std::hint::black_box(event);
                            events += 1;
                        }
                        MessageItem::Message(message) => {
                            std::hint::black_box(message);
                        }
                        _ => {}
                    }
                }
                last = (events, stream.metrics().bytes_received);
            } else {
                let mut stream = client.stream("{}");
                while let Some(item) = stream.next().await {
                    if let StreamItem::Event(event) = item.unwrap() {
                        std::hint::black_box(event);
                        events += 1;
                    }
                }
                last = (events, stream.metrics().bytes_received);
            }
        }
        last
    })
}

/// `passes` over the workload in memory; returns the events of the last pass.
fn in_memory(decode: bool, passes: usize) -> u64 {
    let workload = anthropic_stream(42, 6_000_000);
    let chunks = chunked(&workload, 16 * 1024);
    let mut events = 0u64;
    for _ in 0..passes {
        events = 0;
        if decode {
            let mut decoder = StreamDecoder::for_provider(Provider::Anthropic);
            let mut out = Vec::new();
            for chunk in &chunks {
                decoder.feed_into(chunk.clone(), &mut out).unwrap();
                events += out.len() as u64;
                // Each typed event handed on, as the client hands them to its caller.
                for event in out.drain(..) {
                    std::hint::black_box(event);
                }
            }
            std::hint::black_box(decoder.finish().unwrap());
        } else {
            let mut parser = SseParser::new();
            for chunk in &chunks {
                parser.feed(chunk.clone());
                while let Some(item) = parser.next_item() {
                    if let SseItem::Event(event) = item {
                        std::hint::black_box(event.to_owned());
                        events += 1;
                    }
                }
            }
        }
    }
    events
}
