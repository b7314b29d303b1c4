//! End to end over loopback: the replay server streams the 6 MB Anthropic-shaped workload and
//! `ferroloop::client` receives it (hyper → SSE parser → owned events). Reports throughput
//! against the SSE parser alone on the same bytes, and the latency the transport adds per event
//! at 1,000 events/s (server send time stamped in the event id, same process clock).
//!
//! Latency is measured in several runs of 2,000 events, each followed by a run of the raw TCP
//! floor under the same load; every run reports its median and p99, and the run with the median
//! p99 is the one to quote (one noisy run on a shared machine moves neither).
//!
//! `cargo run --release -p ferroloop-bench --features client --example client_loopback`
//!
//! On a shared machine the tail is the scheduler's, not the code's: a sleeping reader woken on
//! another (virtual) core waits for that core. Running the whole process on one core at
//! real-time priority removes that noise for every path alike (the writer thread sleeps between
//! events, so the reader runs as soon as the write wakes it):
//! `CLIENT_LOOPBACK_ONLY=latency taskset -c 1 chrt -f 50 target/release/examples/client_loopback`.
//! `CLIENT_LOOPBACK_PATHS=direct,floor` measures only those paths.
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
/// Latency runs (each 2,000 events at 1,000 events/s: 2 s).
const LATENCY_RUNS: usize = 7;
const LATENCY_EVENTS: u64 = 2000;

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
                count: LATENCY_EVENTS,
                interval_us: 1000,
                data: r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there"}}"#.into(),
            };
            let latency_script = Script::repeat(paced);
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

    // `CLIENT_LOOPBACK_ONLY=latency` skips the throughput part (e.g. under `strace` or `chrt`).
    let latency_only = std::env::var("CLIENT_LOOPBACK_ONLY").is_ok_and(|only| only == "latency");
    if !latency_only {
        throughput(&runtime, throughput_url, &workload, mb);
    }
    latency(&runtime, latency_url);
}

/// Client, and client + decoder, end to end against the parser, and the decoder, alone.
fn throughput(
    runtime: &tokio::runtime::Runtime,
    throughput_url: String,
    workload: &bytes::Bytes,
    mb: f64,
) {
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
    let chunks = chunked(workload, 16 * 1024);
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
}

/// Latency at 1,000 events/s, client and raw TCP floor runs interleaved.
fn latency(runtime: &tokio::runtime::Runtime, latency_url: String) {
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(latency_url);
    config.tls.native_roots = false;
    let client = Client::new(config).unwrap();
    let mut client_runs = Vec::new();
    let mut direct_runs = Vec::new();
    let mut floor_runs = Vec::new();
    // `CLIENT_LOOPBACK_PATHS=direct,floor` (any of `replay`, `direct`, `floor`) measures only those.
    let paths =
        std::env::var("CLIENT_LOOPBACK_PATHS").unwrap_or_else(|_| "replay,direct,floor".into());
    let wanted = |path: &str| paths.split(',').any(|p| p == path);
    for _ in 0..LATENCY_RUNS {
        if wanted("replay") {
            let mut latencies = runtime.block_on(stamped_latencies(client.stream("{}")));
            assert_eq!(latencies.len() as u64, LATENCY_EVENTS);
            client_runs.push(summarize(&mut latencies));
        }
        if wanted("direct") {
            let mut direct = runtime.block_on(client_from_raw_server(
                LATENCY_EVENTS as usize,
                Duration::from_millis(1),
            ));
            direct_runs.push(summarize(&mut direct));
        }
        if wanted("floor") {
            let mut floor = runtime.block_on(raw_tcp_latencies(
                LATENCY_EVENTS as usize,
                Duration::from_millis(1),
            ));
            floor_runs.push(summarize(&mut floor));
        }
    }
    for (what, runs) in [
        ("client via the replay server", &mut client_runs),
        ("client via a raw socket writer", &mut direct_runs),
        ("raw TCP floor", &mut floor_runs),
    ] {
        if !runs.is_empty() {
            report(what, runs);
        }
    }
}

/// Median, p99 and max of one run.
#[derive(Debug, Clone, Copy)]
struct RunSummary {
    median: Duration,
    p99: Duration,
    max: Duration,
}

fn summarize(latencies: &mut [Duration]) -> RunSummary {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    RunSummary {
        median: at(0.5),
        p99: at(0.99),
        max: latencies[latencies.len() - 1],
    }
}

/// Prints the run with the median p99, and every run's p99.
fn report(what: &str, runs: &mut [RunSummary]) {
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let p99s: Vec<String> = runs
        .iter()
        .map(|r| format!("{:.1}", micros(r.p99)))
        .collect();
    runs.sort_by_key(|r| r.p99);
    let quoted = runs[runs.len() / 2];
    println!(
        "latency at 1000 events/s, {what}, {} runs of {LATENCY_EVENTS} events: median run: median {:.1} µs, p99 {:.1} µs, max {:.1} µs; p99 of each run (µs, in run order): {}",
        runs.len(),
        micros(quoted.median),
        micros(quoted.p99),
        micros(quoted.max),
        p99s.join(", "),
    );
}

/// The client alone: a server thread writes an HTTP/1.1 response head and then a stamped event
/// every `interval` straight on a loopback socket, exactly as the raw TCP floor writes its
/// stamps (no server-side HTTP stack, no channel), and `ferroloop::client` reads them. The
/// difference to the floor is what the client adds.
async fn client_from_raw_server(count: usize, interval: Duration) -> Vec<Duration> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut socket, _) = listener.accept().unwrap();
        socket.set_nodelay(true).unwrap();
        let mut head = Vec::new();
        let mut buffer = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = socket.read(&mut buffer).unwrap();
            assert!(read > 0);
            head.extend_from_slice(&buffer[..read]);
        }
        socket
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
            )
            .unwrap();
        let origin = clock_origin();
        let start = Instant::now();
        for index in 0..count {
            let due = start + interval * index as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let stamp = origin.elapsed().as_nanos();
            let event = format!(
                "id: {stamp}\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"Hello there\"}}}}\n\n"
            );
            socket.write_all(event.as_bytes()).unwrap();
        }
    });
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(format!("http://{addr}"));
    config.tls.native_roots = false;
    config.retry.max_retries = 0;
    let client = Client::new(config).unwrap();
    let latencies = stamped_latencies(client.stream("{}")).await;
    assert_eq!(latencies.len(), count);
    latencies
}

/// Receive time minus the send time stamped in each event's id, for every event of `stream`.
async fn stamped_latencies<S, E>(mut stream: S) -> Vec<Duration>
where
    S: futures::Stream<Item = Result<StreamItem, E>> + Unpin,
{
    let origin = clock_origin();
    let mut latencies = Vec::with_capacity(LATENCY_EVENTS as usize);
    while let Some(item) = stream.next().await {
        match item {
            Ok(StreamItem::Event(event)) => {
                let received = origin.elapsed().as_nanos();
                let sent: u128 = event.id.parse().unwrap();
                latencies.push(Duration::from_nanos((received - sent) as u64));
            }
            Ok(_) => {}
            // The paced bodies have no `message_stop`: the end is reported as truncated.
            Err(_) => break,
        }
    }
    latencies
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
