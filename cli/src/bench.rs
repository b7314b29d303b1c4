//! `ferroloop bench`: the streaming core against its peers, in interleaved rounds.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::anyhow;
use ferroloop_bench::runner::{self, Row, RunOptions};
use ferroloop_bench::suite;

/// Arguments of `ferroloop bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Smaller inputs and fewer rounds (a smoke run, not for publishing figures).
    #[arg(long)]
    pub quick: bool,
    /// Print the results as JSON (one array of rows) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Run only the workloads whose name contains NAME (e.g. `sse/`, `1460B`).
    #[arg(long, value_name = "NAME")]
    pub filter: Option<String>,
    /// Interleaved rounds (samples per implementation); default 11, or 3 with --quick.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..1000))]
    pub rounds: Option<u64>,
}

/// Runs `ferroloop bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let mut workloads = suite::suite(args.quick, args.filter.as_deref());
    if workloads.is_empty() {
        return Err(anyhow!(
            "no workload matches {:?}",
            args.filter.unwrap_or_default()
        ));
    }
    let mut options = RunOptions::new(args.quick);
    if let Some(rounds) = args.rounds {
        options.rounds = usize::try_from(rounds)?;
    }
    let draw = io::stderr().is_terminal();
    let rows = runner::run(&mut workloads, &options, |done, total, label| {
        progress(draw, done, total, label);
    })
    .map_err(|e| anyhow!(e))?;
    if draw {
        eprint!("\r\x1b[2K");
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows.iter().map(row_json).collect::<Vec<_>>())?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "ferroloop bench{} — {} rounds, interleaved; medians; \"ferroloop ×\" = how many times faster ferroloop is",
            if args.quick { " --quick" } else { "" },
            options.rounds
        )?;
        out.write_all(runner::table(&rows).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn progress(draw: bool, done: usize, total: usize, label: &str) {
    if !draw {
        return;
    }
    const WIDTH: usize = 30;
    let filled = (done * WIDTH)
        .checked_div(total)
        .unwrap_or(WIDTH)
        .min(WIDTH);
    eprint!(
        "\r\x1b[2K[{}{}] {done}/{total} {label}",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled)
    );
    let _ = io::stderr().flush();
}

fn row_json(row: &Row) -> serde_json::Value {
    serde_json::json!({
        "workload": row.workload,
        "implementation": row.implementation,
        "unit": row.unit,
        "median": row.median,
        "min": row.min,
        "max": row.max,
        "ferroloop_speedup": row.ferroloop_speedup,
        "allocs_per_event": row.allocs_per_event,
        "peak_rss_bytes": row.peak_rss,
        "rss_growth_bytes": row.rss_growth,
        "checksum": row.checksum,
        "samples": row.samples,
    })
}
