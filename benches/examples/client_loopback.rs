//! End to end over loopback: the replay server streams the 6 MB Anthropic-shaped workload and
//! `ferroloop::client` receives it (hyper → SSE parser → owned events). Reports throughput
//! against the SSE parser alone on the same bytes, and the latency the transport adds per event
//! at 1,000 events/s (server send time stamped in the event id, same process clock).
//!
//! `cargo run --release -p ferroloop-bench --features client --example client_loopback`
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use ferroloop::client::{Client, ClientConfig, MessageItem, Provider, StreamItem};
use ferroloop::decode::StreamDecoder;
use ferroloop::sse::{SseItem, SseParser};
use ferroloop_bench::workloads::{anthropic_stream, chunked};
use ferroloop_replay::{ReplayServer, Script, ScriptBody, ServerOptions, clock_origin};
use futures::StreamExt;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RUNS: usize = 15;

fn main() {
    let workload = anthropic_stream(42, 6_000_000);
    let mb = workload.len() as f64 / 1e6;

    // The server runs on its own thread and runtime, like a separate process would.
    let (addr_sender, addr_receiver) = std::sync::mpsc::channel();
    let body = String::from_utf8(workload.to_vec()).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let script = Script::repeat(ScriptBody::Text(body));
            let throughput = ReplayServer::start(&script, Path::new("."), ServerOptions::default())
                .await
                .unwrap();
            let paced = ScriptBody::Paced {
                count: 2000,
                interval_us: 1000,
                data: r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there"}}"#.into(),
            };
            let latency_script = Script {
                responses: vec![ferroloop_replay::ScriptedResponse::ok(paced)],
                ..Script::default()
            };
            let latency = ReplayServer::start(&latency_script, Path::new("."), ServerOptions::default())
                .await
                .unwrap();
            addr_sender.send((throughput.base_url(), latency.base_url())).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let (throughput_url, latency_url) = addr_receiver.recv().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // Throughput: client end to end.
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(throughput_url);
    config.tls.native_roots = false;
    let client = Client::new(config).unwrap();
    let mut client_times = Vec::new();
    let mut events = 0;
    runtime.block_on(async {
        for _ in 0..RUNS {
            let started = Instant::now();
            let mut stream = client.stream("{}");
            events = 0;
            while let Some(item) = stream.next().await {
                if let StreamItem::Event(_) = item.unwrap() {
                    events += 1;
                }
            }
            client_times.push(started.elapsed());
        }
    });

    // The SSE parser alone on the same bytes in 16 KiB chunks, events made owned too.
    let chunks = chunked(&workload, 16 * 1024);
    let mut parser_times = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut parser = SseParser::new();
        let mut count = 0u64;
        for chunk in &chunks {
            parser.feed(chunk.clone());
            while let Some(item) = parser.next_item() {
                if let SseItem::Event(event) = item {
                    std::hint::black_box(event.to_owned());
                    count += 1;
                }
            }
        }
        assert_eq!(count, events);
        parser_times.push(started.elapsed());
    }
    let client_median = median(&mut client_times);
    let parser_median = median(&mut parser_times);
    println!(
        "throughput: {mb:.1} MB, {events} events; client end to end {:.0} MB/s (median of {RUNS}, {:.2} ms); SSE parser alone {:.0} MB/s ({:.2} ms); ratio {:.2}x",
        mb / client_median.as_secs_f64(),
        client_median.as_secs_f64() * 1e3,
        mb / parser_median.as_secs_f64(),
        parser_median.as_secs_f64() * 1e3,
        client_median.as_secs_f64() / parser_median.as_secs_f64(),
    );

    // Decoded: client + SSE + provider decoder, against the decoder (with its SSE parser) alone.
    let mut decoded_times = Vec::new();
    let mut decoded_events = 0u64;
    runtime.block_on(async {
        for _ in 0..RUNS {
            let started = Instant::now();
            let mut stream = client.stream_message("{}");
            decoded_events = 0;
            while let Some(item) = stream.next().await {
                match item.unwrap() {
                    MessageItem::Event(_) => decoded_events += 1,
                    MessageItem::Message(message) => {
                        std::hint::black_box(message);
                    }
                    _ => {}
                }
            }
            decoded_times.push(started.elapsed());
        }
    });
    let mut decoder_times = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut decoder = StreamDecoder::for_provider(Provider::Anthropic);
        let mut count = 0u64;
        for chunk in &chunks {
            count += decoder.feed(chunk.clone()).unwrap().len() as u64;
        }
        std::hint::black_box(decoder.finish().unwrap());
        assert_eq!(count, decoded_events);
        decoder_times.push(started.elapsed());
    }
    let decoded_median = median(&mut decoded_times);
    let decoder_median = median(&mut decoder_times);
    println!(
        "decoded: {decoded_events} typed events; client + decoder end to end {:.0} MB/s ({:.2} ms); SSE + decoder alone {:.0} MB/s ({:.2} ms); ratio {:.2}x",
        mb / decoded_median.as_secs_f64(),
        decoded_median.as_secs_f64() * 1e3,
        mb / decoder_median.as_secs_f64(),
        decoder_median.as_secs_f64() * 1e3,
        decoded_median.as_secs_f64() / decoder_median.as_secs_f64(),
    );

    // Latency at 1,000 events/s.
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(latency_url);
    config.tls.native_roots = false;
    let client = Client::new(config).unwrap();
    let origin = clock_origin();
    let mut latencies = Vec::new();
    runtime.block_on(async {
        let mut stream = client.stream("{}");
        while let Some(item) = stream.next().await {
            match item {
                Ok(StreamItem::Event(event)) => {
                    let received = origin.elapsed().as_nanos();
                    let sent: u128 = event.id.parse().unwrap();
                    latencies.push(Duration::from_nanos((received - sent) as u64));
                }
                Ok(_) => {}
                // The paced body has no `message_stop`: the end is reported as truncated.
                Err(_) => break,
            }
        }
    });
    report("client (hyper + SSE)", &mut latencies);
    let mut baseline = runtime.block_on(raw_tcp_latencies(2000, Duration::from_millis(1)));
    report("raw TCP floor", &mut baseline);
}

fn report(what: &str, latencies: &mut [Duration]) {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "latency at 1000 events/s, {what}, {} events: median {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        latencies.len(),
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        latencies[latencies.len() - 1].as_secs_f64() * 1e6,
    );
}

/// The floor under the same machine load: a server thread writes a send-time stamp every
/// `interval` on a bare loopback TCP socket; the client reads them. No HTTP, no SSE.
async fn raw_tcp_latencies(count: usize, interval: Duration) -> Vec<Duration> {
    use tokio::io::AsyncReadExt;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        let (mut socket, _) = listener.accept().unwrap();
        socket.set_nodelay(true).unwrap();
        let origin = clock_origin();
        let start = Instant::now();
        for index in 0..count {
            let due = start + interval * index as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let stamp = origin.elapsed().as_nanos() as u64;
            socket.write_all(&stamp.to_le_bytes()).unwrap();
        }
    });
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let origin = clock_origin();
    let mut latencies = Vec::with_capacity(count);
    let mut buffer = [0u8; 8];
    for _ in 0..count {
        socket.read_exact(&mut buffer).await.unwrap();
        let received = origin.elapsed().as_nanos() as u64;
        latencies.push(Duration::from_nanos(received - u64::from_le_bytes(buffer)));
    }
    latencies
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}
