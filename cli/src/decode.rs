//! `ferroloop decode`: decode and accumulate a provider's SSE stream, print the final message.
//!
//! With `--events`, the typed events are printed first, one JSON object per line, flushed as
//! each input chunk is decoded. The message is then printed as one JSON document on one line.
//! A mid-stream provider error, a protocol error or a truncated stream exits with status 1 and a
//! message on stderr (the partial message is still printed on stdout when there is one).

use std::io::{self, BufWriter, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

use ferroloop::decode::{DecodeError, DecodeEvent, EventDecoder, Provider, StreamDecoder};

use crate::input;

/// The providers `--provider` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderArg {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions (alias `openai`, the name `run` and `serve-replay` use).
    #[value(alias = "openai")]
    OpenaiChat,
    /// OpenAI Responses.
    OpenaiResponses,
}

impl From<ProviderArg> for Provider {
    fn from(arg: ProviderArg) -> Self {
        match arg {
            ProviderArg::Anthropic => Self::Anthropic,
            ProviderArg::OpenaiChat => Self::OpenAiChat,
            ProviderArg::OpenaiResponses => Self::OpenAiResponses,
        }
    }
}

/// Arguments of `ferroloop decode`.
#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// Which provider's streaming protocol the input follows.
    #[arg(long, value_enum)]
    pub provider: ProviderArg,
    /// The raw SSE stream; stdin when absent or `-`.
    pub file: Option<PathBuf>,
    /// Feed the decoder chunks of exactly N bytes (default: as the bytes arrive).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub chunk: Option<u64>,
    /// Print the typed events as JSON lines before the message.
    #[arg(long)]
    pub events: bool,
}

/// Runs `ferroloop decode`.
pub fn run(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    let provider = Provider::from(args.provider);
    let mut decoder = StreamDecoder::for_provider(provider);
    decoder.decoder_mut().set_record_events(args.events);
    let (reader, name) = input::open(args.file.as_deref())?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut events: Vec<DecodeEvent> = Vec::new();
    let mut failure: Option<DecodeError> = None;
    let chunk = args.chunk.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    input::for_each_chunk(reader, &name, chunk, |bytes| {
        let result = decoder.feed_into(bytes, &mut events);
        write_events(&mut out, &mut events, args.events)?;
        out.flush()?;
        // A failed stream is reported at once: the rest of the input is not waited for (on a
        // pipe its writer keeps open, the error was not seen until the writer closed it).
        Ok(match result {
            Ok(()) => ControlFlow::Continue(()),
            Err(error) => {
                failure = Some(error);
                ControlFlow::Break(())
            }
        })
    })?;
    let outcome = match failure {
        Some(error) => Err(error),
        None => {
            let result = decoder.finish();
            let mut tail = Vec::new();
            decoder.decoder_mut().drain_events(&mut tail);
            write_events(&mut out, &mut tail, args.events)?;
            result
        }
    };
    let (message, error) = match outcome {
        Ok(message) => (message, None),
        Err(DecodeError::Truncated { reason, partial }) => {
            (*partial, Some(format!("truncated stream: {reason}")))
        }
        Err(error) => (decoder.message(), Some(error.to_string())),
    };
    if !message.is_null() {
        serde_json::to_writer(&mut out, &message)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    match error {
        None => Ok(ExitCode::SUCCESS),
        Some(error) => {
            crate::output::report(format_args!(
                "ferroloop decode ({}): {error}",
                provider.name()
            ));
            Ok(ExitCode::FAILURE)
        }
    }
}

fn write_events(
    out: &mut impl Write,
    events: &mut Vec<DecodeEvent>,
    print: bool,
) -> anyhow::Result<()> {
    if print {
        for event in events.iter() {
            serde_json::to_writer(&mut *out, event)?;
            out.write_all(b"\n")?;
        }
    }
    events.clear();
    Ok(())
}
