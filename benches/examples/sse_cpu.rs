//! SSE parse times by CPU time: each implementation parses the same chunks in alternating runs,
//! each run timed with the thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`), so that time the
//! process spends descheduled on a shared machine does not count (wall-clock medians there
//! swing with the other tenants' load). Prints medians and each one's ratio to the first row.
//!
//! `cargo run --release -p ferroloop-bench --example sse_cpu [WORKLOAD] [CHUNK] [RUNS]`
//! - `anthropic` (default; the 6 MB Anthropic-shaped stream): ferroloop and `sse-stream`, the
//!   fastest peer.
//! - `single` (one 16 MiB `data:` line): ferroloop (a fresh parser per run, as in
//!   `ferroloop bench`) and a plain copy of the same chunks into a reused buffer (the bench's
//!   floor) and into a fresh one (what a fresh parser has to fill).
#![allow(clippy::print_stdout)]

use bytes::Bytes;
use ferroloop_bench::sse_peers::SseImpl;
use ferroloop_bench::workloads::{anthropic_stream, chunked, single_large_event};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The calling thread's CPU time, in milliseconds.
fn thread_cpu_ms() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable `timespec`; the clock id is a constant Linux defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if rc != 0 {
        eprintln!("clock_gettime failed");
        std::process::exit(1);
    }
    now.tv_sec as f64 * 1e3 + now.tv_nsec as f64 * 1e-6
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One row: a name and the job, which returns a checksum (kept from the optimiser).
type Job<'a> = (&'static str, Box<dyn FnMut() -> u64 + 'a>);

fn parser_job(imp: SseImpl, chunks: &[Bytes]) -> Job<'_> {
    (imp.name(), Box::new(move || imp.parse(chunks).data_bytes))
}

/// The line-end search of a chunk (`memchr2`, standing in for the parser's own search).
fn search(chunk: &[u8]) -> u64 {
    memchr::memchr2(b'\r', b'\n', chunk).map_or(0, |end| end as u64 + 1)
}

/// `SSE_CPU_PARTS=1`: the parts of parsing one long line, timed alone, to show where the time
/// of the 16 MiB event goes (BENCHMARKS.md, "Long lines copied as they arrive").
fn part_jobs(chunks: &[Bytes], len: usize) -> Vec<Job<'_>> {
    let mut jobs: Vec<Job<'_>> = Vec::new();
    jobs.push((
        "search only",
        Box::new(move || chunks.iter().map(|chunk| search(chunk)).sum()),
    ));
    jobs.push((
        "search all, then copy all",
        Box::new(move || {
            let found: u64 = chunks.iter().map(|chunk| search(chunk)).sum();
            let mut copy = Vec::with_capacity(len);
            for chunk in chunks {
                copy.extend_from_slice(chunk);
            }
            std::hint::black_box(&copy);
            found + copy.len() as u64
        }),
    ));
    jobs.push((
        "search+copy, doubling",
        Box::new(move || {
            let mut grown = Vec::new();
            let found: u64 = chunks
                .iter()
                .map(|chunk| {
                    grown.extend_from_slice(chunk);
                    search(chunk)
                })
                .sum();
            std::hint::black_box(&grown);
            found + grown.len() as u64
        }),
    ));
    // Copying each chunk right after its search, into a buffer with room: with and without
    // the atomic reference-count updates of owned chunks (`feed(chunk.clone())`), and with the
    // destination prefetched one chunk ahead.
    for (name, owned, prefetch) in [
        ("search+copy, reserved", false, false),
        ("+ clone/drop per chunk", true, false),
        ("+ prefetch ahead", true, true),
    ] {
        let mut line: Vec<u8> = Vec::with_capacity(len);
        jobs.push((
            name,
            Box::new(move || {
                line.clear();
                let mut found = 0;
                for chunk in chunks {
                    let held = owned.then(|| std::hint::black_box(chunk.clone()));
                    if prefetch {
                        prefetch_for_write(&line, chunk.len());
                    }
                    found += search(chunk);
                    line.extend_from_slice(chunk);
                    drop(held);
                }
                std::hint::black_box(&line);
                found + line.len() as u64
            }),
        ));
    }
    jobs
}

/// Prefetches, for writing, the spare capacity of `line` one chunk of `chunk_len` ahead.
fn prefetch_for_write(line: &Vec<u8>, chunk_len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch};
        let spare = line.capacity() - line.len();
        let base = line.as_ptr().wrapping_add(line.len());
        let mut offset = chunk_len;
        while offset < spare.min(2 * chunk_len) {
            // SAFETY: a prefetch never faults and writes nothing; the address is inside the
            // vector's allocation.
            unsafe { _mm_prefetch::<_MM_HINT_ET0>(base.wrapping_add(offset).cast()) };
            offset += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (line, chunk_len);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let workload = args.next().unwrap_or_else(|| "anthropic".into());
    let chunk: usize = args.next().and_then(|arg| arg.parse().ok()).unwrap_or(1460);
    let runs: usize = args.next().and_then(|arg| arg.parse().ok()).unwrap_or(41);
    let input = match workload.as_str() {
        "anthropic" => anthropic_stream(42, 6_000_000),
        "single" => single_large_event(16 << 20),
        other => {
            eprintln!("unknown workload {other}");
            std::process::exit(2);
        }
    };
    let chunks = chunked(&input, chunk);
    let mut reused = Vec::with_capacity(input.len());
    let mut jobs: Vec<Job<'_>> = vec![parser_job(SseImpl::Ferroloop, &chunks)];
    if workload == "single" {
        let chunks = &chunks;
        jobs.push((
            "memcpy (reused buffer)",
            Box::new(move || {
                reused.clear();
                for chunk in chunks {
                    reused.extend_from_slice(chunk);
                }
                std::hint::black_box(&reused);
                reused.len() as u64
            }),
        ));
        let len = input.len();
        jobs.push((
            "memcpy (fresh buffer)",
            Box::new(move || {
                let mut copy = Vec::with_capacity(len);
                for chunk in chunks {
                    copy.extend_from_slice(chunk);
                }
                std::hint::black_box(&copy);
                copy.len() as u64
            }),
        ));
        if std::env::var_os("SSE_CPU_PARTS").is_some() {
            jobs.extend(part_jobs(chunks, len));
        }
    } else {
        jobs.push(parser_job(SseImpl::SseStream, &chunks));
    }
    let mut samples = vec![Vec::with_capacity(runs); jobs.len()];
    for _ in 0..runs {
        for ((_, job), times) in jobs.iter_mut().zip(&mut samples) {
            let start = thread_cpu_ms();
            std::hint::black_box(job());
            times.push(thread_cpu_ms() - start);
        }
    }
    println!("{workload}, {chunk} B chunks: median thread CPU time of {runs} alternating runs");
    let medians: Vec<f64> = samples.into_iter().map(median).collect();
    let first = medians.first().copied().unwrap_or(f64::NAN);
    for ((name, _), ms) in jobs.iter().zip(&medians) {
        println!("{name:24} {ms:8.2} ms   {:5.2}x ferroloop", ms / first);
    }
}
