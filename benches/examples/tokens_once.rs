//! Runs one token-counting implementation over the mixed corpus a few times, for profiling or
//! instruction counting (`perf stat`, `valgrind --tool=callgrind`):
//! `cargo build --release -p ferroloop-bench --example tokens_once &&
//!  perf stat target/release/examples/tokens_once estimate 50`. `bytecount` is the plain byte
//! pass (newlines) the estimator is compared with; `setup` only builds the corpus (subtract it);
//! `avx2`, `avx512` and `portable` run one class-counting kernel (a kernel the CPU lacks falls
//! back to the portable one); `check` prints the class counts and fails unless every kernel
//! agrees with the portable one on the corpus; `short` times `estimate_text` on three short
//! texts (a chat line, a JSON object, a line with non-ASCII), `ROUNDS` × 100,000 calls each, where
//! the fixed cost per call (the model's evaluation, the kernel's setup) is what counts.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use ferroloop::tokens::classes::{Kernel, count_classes_with};
use ferroloop::tokens::{Family, estimate_text};
use ferroloop_bench::token_corpus::mixed_corpus;

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "estimate".into());
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    if which == "short" {
        time_short_texts(rounds);
        return;
    }
    let corpus = mixed_corpus(4 << 20);
    // The corpus's ASCII characters alone (for the `*-ascii` modes: the kernels' ASCII loops).
    let ascii: String = if which.ends_with("-ascii") {
        corpus.chars().filter(char::is_ascii).collect()
    } else {
        String::new()
    };
    let started = Instant::now();
    let mut total = 0u64;
    for _ in 0..rounds {
        total += match which.as_str() {
            "estimate" => estimate_text(&corpus, Family::O200k),
            "setup" => 0,
            "bytecount" => bytecount::count(corpus.as_bytes(), b'\n') as u64,
            "portable" => count_classes_with(corpus.as_bytes(), Kernel::Portable).newlines,
            "avx2" => count_classes_with(corpus.as_bytes(), Kernel::Avx2).newlines,
            "avx512" => count_classes_with(corpus.as_bytes(), Kernel::Avx512).newlines,
            "portable-ascii" => count_classes_with(ascii.as_bytes(), Kernel::Portable).newlines,
            "avx2-ascii" => count_classes_with(ascii.as_bytes(), Kernel::Avx2).newlines,
            "avx512-ascii" => count_classes_with(ascii.as_bytes(), Kernel::Avx512).newlines,
            "check" => {
                // Every kernel over the whole corpus: every count must agree.
                let portable = count_classes_with(corpus.as_bytes(), Kernel::Portable);
                for kernel in [Kernel::Avx2, Kernel::Avx512] {
                    let vector = count_classes_with(corpus.as_bytes(), kernel);
                    if vector != portable {
                        eprintln!("{kernel:?} and portable disagree:\n{vector:?}\n{portable:?}");
                        std::process::exit(1);
                    }
                }
                println!("{portable:?}");
                portable.bytes
            }
            "ascii" => {
                let ascii: String = corpus.chars().filter(char::is_ascii).collect();
                estimate_text(&ascii, Family::O200k)
            }
            _ => {
                eprintln!("unknown implementation {which}");
                std::process::exit(2);
            }
        };
    }
    let elapsed = started.elapsed();
    println!(
        "{which}: {total} ({:.1} MiB/s)",
        (rounds * corpus.len()) as f64 / elapsed.as_secs_f64() / (1 << 20) as f64
    );
}

/// `short`: nanoseconds per `estimate_text` call on short texts.
fn time_short_texts(rounds: usize) {
    let texts = [
        "Hello, world! How are you today?",
        "{\"type\":\"text\",\"text\":\"ok\"}",
        "Ünïcödé tëxt with ├── boxes and 漢字 here and there, a bit longer than the others.",
    ];
    for text in texts {
        let calls = rounds * 100_000;
        let started = Instant::now();
        let mut total = 0u64;
        for _ in 0..calls {
            total += estimate_text(std::hint::black_box(text), Family::O200k);
        }
        println!(
            "short {} bytes: {:.1} ns per call ({total})",
            text.len(),
            started.elapsed().as_nanos() as f64 / calls as f64
        );
    }
}
