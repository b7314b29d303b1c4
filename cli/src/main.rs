//! The `ferroloop` command line. Its outputs are a stable interface (see `DESIGN.md`, "The
//! command-line contract"): tests in every language parse them.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[cfg(feature = "bench")]
mod bench;
mod decode;
mod input;
mod model_source;
mod output;
mod replay_agent_model;
mod run;
mod serve_replay;
mod sse;
mod terminal_text;
mod tokens;

// With `bench`, allocations are counted (one relaxed atomic add each) for its allocs/event column.
#[cfg(feature = "bench")]
#[global_allocator]
static GLOBAL: ferroloop_bench::alloc::CountingAlloc<mimalloc::MiMalloc> =
    ferroloop_bench::alloc::CountingAlloc(mimalloc::MiMalloc);

#[cfg(not(feature = "bench"))]
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
    /// Run the agent loop with the built-in tools (a real endpoint when ANTHROPIC_API_KEY, or
    /// OPENAI_API_KEY with --provider openai or openai-responses, or a base URL is set;
    /// otherwise the embedded replay model).
    Run(run::RunArgs),
    /// Parse a Server-Sent-Events stream and print one JSON object per event.
    Sse(sse::SseArgs),
    /// Measure the streaming core against its peers, side by side, and print a table.
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
    /// Decode a provider's SSE stream and print the accumulated message as JSON.
    Decode(decode::DecodeArgs),
    /// Estimate (or count exactly) the tokens of files; one JSON object per file.
    Tokens(tokens::TokensArgs),
    /// Serve recorded or scripted provider responses with scripted faults on 127.0.0.1.
    ServeReplay(serve_replay::ServeReplayArgs),
}

fn main() -> ExitCode {
    init_tracing();
    let mut cli = Cli::parse();
    // Usage errors clap cannot see alone exit as clap's do (2, with the usage line).
    if let Command::Tokens(args) = &cli.command
        && let Err(message) = args.check()
    {
        usage_error("tokens", message);
    }
    if let Command::Run(args) = &mut cli.command {
        match args.prepare() {
            Ok(()) => {}
            Err(run::PrepareError::Usage(message)) => usage_error("run", message),
            Err(run::PrepareError::Input(message)) => {
                output::report(format_args!("ferroloop run: {message}"));
                return ExitCode::FAILURE;
            }
        }
    }
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Sse(args) => sse::run(args),
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench::run(args),
        Command::Decode(args) => decode::run(args),
        Command::Tokens(args) => tokens::run(args),
        Command::ServeReplay(args) => serve_replay::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) if output::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            output::report(format_args!("ferroloop: {}", output::describe(&error)));
            ExitCode::FAILURE
        }
    }
}

/// Exits as clap does on a usage error of `subcommand`: the message, that subcommand's usage
/// line, exit status 2.
fn usage_error(subcommand: &str, message: String) -> ! {
    let mut cli = Cli::command();
    cli.build();
    let command = match cli.find_subcommand_mut(subcommand) {
        Some(command) => command,
        None => &mut cli,
    };
    command
        .error(clap::error::ErrorKind::ArgumentConflict, message)
        .exit()
}

/// Diagnostics go to stderr, filtered by `RUST_LOG` (default: warnings, except the SSE
/// parser's record of each event it drops: `ferroloop sse` reports those itself, once per
/// input chunk, and a hostile stream would otherwise write a line per dropped event).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,ferroloop::sse=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}
