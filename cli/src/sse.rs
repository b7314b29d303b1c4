//! `ferroloop sse`: one JSON object per dispatched event, flushed as soon as it is complete.

use std::io::{self, BufWriter, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

use ferroloop::sse::{SseConfig, SseItem, SseParser};

use crate::{input, output};

/// Arguments of `ferroloop sse`.
#[derive(Debug, clap::Args)]
pub struct SseArgs {
    /// The stream to parse; stdin when absent or `-`.
    pub file: Option<PathBuf>,
    /// Feed the parser chunks of exactly N bytes (default: as the bytes arrive).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub chunk: Option<u64>,
    /// Drop any event that grows past N bytes (reported on stderr) and resume at the next blank
    /// line. What counts: the line being read, field name included (`data: b` is 7
    /// bytes), plus the data and event type gathered so far; a comment line never counts.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_event_bytes: Option<u64>,
}

/// Runs `ferroloop sse`.
pub fn run(args: SseArgs) -> anyhow::Result<ExitCode> {
    let config = SseConfig::default().max_event_bytes(args.max_event_bytes.map(saturating_usize));
    let mut parser = SseParser::with_config(config);
    let (reader, name) = input::open(args.file.as_deref())?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut dropped_reported = 0;
    input::for_each_chunk(reader, &name, args.chunk.map(saturating_usize), |chunk| {
        parser.feed(chunk);
        while let Some(item) = parser.next_item() {
            write_item(&mut out, &item)?;
        }
        let dropped = parser.dropped_events();
        if dropped > dropped_reported {
            output::report(format_args!(
                "ferroloop sse: dropped {} event(s) larger than {} bytes",
                dropped - dropped_reported,
                args.max_event_bytes.unwrap_or_default()
            ));
            dropped_reported = dropped;
        }
        // Flush per input chunk: every event completed by these bytes is visible at once.
        out.flush()?;
        Ok(ControlFlow::Continue(()))
    })?;
    parser.finish();
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn write_item(out: &mut impl Write, item: &SseItem<'_>) -> io::Result<()> {
    match item {
        SseItem::Event(event) => {
            out.write_all(b"{\"event\":")?;
            output::json_string(out, event.event_type())?;
            out.write_all(b",\"data\":")?;
            output::json_string(out, event.data())?;
            out.write_all(b",\"id\":")?;
            output::json_string(out, event.id())?;
            out.write_all(b"}\n")
        }
        SseItem::Retry(ms) => writeln!(out, "{{\"retry\":{ms}}}"),
    }
}

fn saturating_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
