//! The `ferroloop` command line. Its outputs are a stable interface (see `DESIGN.md`, "The
//! command-line contract"): tests in every language parse them.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod input;
mod output;
mod serve_replay;
mod sse;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The hot path of an LLM agent loop, from the command line.
#[derive(Debug, Parser)]
#[command(name = "ferroloop", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse a Server-Sent-Events stream and print one JSON object per event.
    Sse(sse::SseArgs),
    /// Serve recorded or scripted provider responses with scripted faults on 127.0.0.1.
    ServeReplay(serve_replay::ServeReplayArgs),
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sse(args) => sse::run(args),
        Command::ServeReplay(args) => serve_replay::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) if output::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ferroloop: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Diagnostics go to stderr, filtered by `RUST_LOG` (default: warnings).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}
