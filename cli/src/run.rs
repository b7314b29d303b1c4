//! `ferroloop run`: the agent loop with the built-in tools, against a real endpoint when
//! credentials are set, otherwise against the embedded replay model (a scripted conversation
//! served over loopback HTTP; the tools run for real). Anthropic Messages or OpenAI Chat
//! Completions (`--provider openai`, translated by the core), with an optional fallback model.

use std::borrow::Cow;
use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicI32};
use std::time::{Duration, Instant};

use anyhow::Context;
use ferroloop::agent::{
    Agent, AgentConfig, AgentEvent, ContextAction, Model, StopReason, UsageCall,
};
use ferroloop::exec::{CancellationToken, ToolExecutor, ToolRegistry};
use ferroloop::tokens::{Family, Usage};
use futures::StreamExt;
use serde_json::Value;

use crate::model_source;
use crate::terminal_text::for_terminal;

/// Arguments of `ferroloop run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// What to ask (default: explore this directory; `-`: read it from stdin).
    pub prompt: Option<String>,
    /// Print the event stream as JSON lines instead of the terminal view.
    #[arg(long)]
    pub json: bool,
    /// The model name (default: claude-sonnet-4-5; gpt-4o with --provider openai, gpt-5 with
    /// openai-responses).
    #[arg(long)]
    pub model: Option<String>,
    /// The model to switch to when the model is overloaded (HTTP 529 / overloaded_error after
    /// the client's retries, or 3 consecutive overload retries, with or without a 529); the
    /// turn is retried once with it and it answers for the rest of the run (a compaction's
    /// summary call falls back the same way).
    #[arg(long, value_name = "MODEL")]
    pub fallback_model: Option<String>,
    /// The API spoken: anthropic (Messages; ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL), openai
    /// (Chat Completions, any compatible server) or openai-responses (the Responses API); both
    /// OpenAI ones read OPENAI_API_KEY and OPENAI_BASE_URL.
    #[arg(long, value_enum, default_value_t = RunProvider::Anthropic)]
    pub provider: RunProvider,
    /// A base URL for the real endpoint (a gateway or a local server; for openai, up to the
    /// `/v1`, e.g. http://localhost:11434/v1).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Use the embedded replay model even when credentials are set.
    #[arg(long, conflicts_with = "base_url")]
    pub replay: bool,
    /// The workspace the tools may touch (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Turns at most: model responses the loop goes on from. A request sent again for the same
    /// turn (a fallback model, a retried truncated stream, a raised output limit, a request
    /// field the server refused, a prompt refused as too long and compacted) counts once. 0:
    /// none, the run stops at once with max_turns; not "unlimited".
    #[arg(long, default_value_t = 20)]
    pub max_turns: u32,
}

impl RunArgs {
    /// Reads the prompt from stdin when it is `-`, then checks what clap cannot check alone: a
    /// prompt, a model name or a fallback model name that is empty or blank (the run would
    /// end with an error before any request, or, for the fallback, hours in, when it switches),
    /// a `--base-url` the client cannot use. A prompt that cannot be read is bad input, not a
    /// usage error ([`PrepareError`]).
    pub fn prepare(&mut self) -> Result<(), PrepareError> {
        if self.prompt.as_deref() == Some("-") {
            let mut bytes = Vec::new();
            // As `sse`, `decode` and `tokens` read it: an unreadable stdin (EBADF) is an error,
            // not an empty prompt.
            crate::input::stdin()
                .and_then(|mut stdin| stdin.read_to_end(&mut bytes))
                .map_err(|error| {
                    PrepareError::Input(format!("cannot read the prompt from stdin: {error}"))
                })?;
            let prompt = String::from_utf8(bytes).map_err(|_| {
                PrepareError::Input("the prompt read from stdin is not UTF-8".to_owned())
            })?;
            // A byte order mark is no part of the prompt, as `sse`, `decode` and `tokens` drop
            // it from their input.
            let prompt = match prompt.strip_prefix('\u{feff}') {
                Some(rest) => rest.to_owned(),
                None => prompt,
            };
            self.prompt = Some(prompt);
        }
        let usage = |message: &str| Err(PrepareError::Usage(message.to_owned()));
        let blank = |value: &Option<String>| value.as_deref().is_some_and(|v| v.trim().is_empty());
        if blank(&self.prompt) {
            return usage("the prompt is empty (leave it out for the default prompt)");
        }
        if blank(&self.model) {
            return usage("--model is empty");
        }
        if blank(&self.fallback_model) {
            return usage("--fallback-model is empty");
        }
        if let Some(url) = &self.base_url {
            let config =
                ferroloop::client::ClientConfig::new(model_source::provider(self.provider))
                    .with_base_url(url.clone());
            ferroloop::client::Client::new(config)
                .map_err(|error| PrepareError::Usage(format!("--base-url: {error}")))?;
        }
        Ok(())
    }
}

/// Why [`RunArgs::prepare`] refused the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepareError {
    /// A usage error (exit 2, with the usage line): an empty prompt or model, a bad URL.
    Usage(String),
    /// The prompt could not be read from stdin, or is not UTF-8 (exit 1, as bad input is for
    /// every subcommand).
    Input(String),
}

/// The API `ferroloop run` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RunProvider {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Chat Completions (and compatible servers).
    #[value(alias = "openai-chat")]
    Openai,
    /// The OpenAI Responses API (reasoning kept between turns; the Codex models).
    OpenaiResponses,
}

const DEFAULT_PROMPT: &str = "Explore this directory and tell me what it contains.";
const SYSTEM_PROMPT: &str = "You are a careful assistant working in a local directory through \
the tools you are given. Prefer several read-only tool calls in parallel. Be concise.";

/// Runs `ferroloop run` (its arguments [prepared](RunArgs::prepare)).
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: RunArgs) -> anyhow::Result<ExitCode> {
    // From the start: a signal during setup still stops the run cleanly once it begins.
    let signals = Signals::new().context("cannot listen for SIGINT and SIGTERM")?;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    // `read` may open the spill files the result previews point to.
    let workspace = ferroloop::tools::Workspace::new(&dir)
        .with_context(|| format!("cannot use {} as the workspace", dir.display()))?
        .also_readable(ferroloop::exec::BudgetConfig::default().spill_dir);
    let mut registry = ToolRegistry::new();
    for tool in ferroloop::tools::all(&workspace) {
        registry
            .register(tool)
            .context("cannot register the built-in tools")?;
    }
    let executor = Arc::new(ToolExecutor::new(registry));

    let source = model_source::choose(&args).await?;
    let mut config = AgentConfig::new(source.model_name());
    config.system = Some(SYSTEM_PROMPT.into());
    config.limits.max_turns = args.max_turns;
    config.fallback_model = args.fallback_model.clone();
    if args.provider != RunProvider::Anthropic {
        config.family = Family::O200k;
    }
    let model: Arc<dyn Model> = source.model();
    let agent = Agent::new(config, model, executor);
    let prompt = args.prompt.clone().unwrap_or_else(|| DEFAULT_PROMPT.into());

    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut view = TerminalView::new(io::stdout().is_terminal());
    if !args.json {
        writeln!(out, "{}", view.shown(&source.banner(&dir)))?;
        writeln!(out, "> {}\n", view.shown(&prompt))?;
        out.flush()?;
    }
    let started = Instant::now();
    let mut run = agent.run(prompt);
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    let mut stop_reason = StopReason::Error;
    let mut stop_error = None;
    // Signals are watched on a task of their own, not in the loop below: the loop may be stuck
    // in a write to a stdout nobody reads (a paused terminal, a full pipe), and Ctrl-C must
    // still act.
    let watch = SignalWatch::start(signals, run.cancellation_token().clone());
    let shown: anyhow::Result<()> = async {
        loop {
            tokio::select! {
                event = run.next() => {
                    let Some(event) = event else { break };
                    if let AgentEvent::Stop { reason, error, .. } = &event {
                        stop_reason = *reason;
                        stop_error.clone_from(error);
                    }
                    if args.json {
                        serde_json::to_writer(&mut out, &event)?;
                        writeln!(out)?;
                        out.flush()?;
                    } else {
                        view.show(&mut out, &event, started)?;
                    }
                }
                _ = ticker.tick(), if !args.json => view.tick(&mut out)?,
            }
        }
        out.flush()?;
        Ok(())
    }
    .await;
    let interrupted = watch.run_ended();
    if let Err(error) = shown {
        // A signal's status wins over the write that failed after it: with `ferroloop run |
        // jq`, Ctrl-C ends jq first, and writing the stop event then meets a closed pipe,
        // which alone would be a quiet success.
        return match interrupted {
            Some(signal) => Ok(signal_exit(signal)),
            None => Err(error),
        };
    }
    drop(source);
    if let Some(error) = stop_error {
        // Why the run failed, where a script looks for it; stdout is the transcript. The error
        // may quote a server's or a tool's text.
        let error = if io::stderr().is_terminal() {
            for_terminal(&error).into_owned()
        } else {
            error
        };
        crate::output::report(format_args!(
            "ferroloop run: stopped ({}): {error}",
            stop_reason.as_str()
        ));
    }
    Ok(match (interrupted, stop_reason) {
        (Some(signal), _) => signal_exit(signal),
        (None, StopReason::Error | StopReason::PromptTooLong) => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

/// The exit status of a run ended by `signal`: 128 + its number, as a shell reports a command
/// the signal killed (130 for SIGINT, 143 for SIGTERM).
fn signal_exit(signal: i32) -> ExitCode {
    ExitCode::from(u8::try_from(signal_status(signal)).unwrap_or(u8::MAX))
}

/// 128 + the signal's number.
fn signal_status(signal: i32) -> i32 {
    128 + signal
}

/// The signal watcher of a run. The first SIGINT or SIGTERM cancels the run, which still ends
/// with its `stop` event and summary; a second one, or one after the run ended (the last writes
/// may be blocked), ends the process at once with the signal's status.
struct SignalWatch {
    /// 0 while no signal came, else the number of the first one.
    first: Arc<AtomicI32>,
    run_over: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl SignalWatch {
    fn start(mut signals: Signals, cancel: CancellationToken) -> Self {
        let first = Arc::new(AtomicI32::new(0));
        let run_over = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (first, run_over) = (Arc::clone(&first), Arc::clone(&run_over));
            async move {
                loop {
                    let signal = signals.next().await;
                    let earlier = first.compare_exchange(0, signal, SeqCst, SeqCst);
                    if earlier.is_err() || run_over.load(SeqCst) {
                        // Whatever holds the main thread (a blocked write), stop now; the
                        // exit does not wait for stdout, whose lock that thread holds.
                        std::process::exit(signal_status(signal));
                    }
                    cancel.cancel();
                }
            }
        });
        Self {
            first,
            run_over,
            task,
        }
    }

    /// Marks the run as over and returns the signal that interrupted it, if any.
    fn run_ended(&self) -> Option<i32> {
        self.run_over.store(true, SeqCst);
        match self.first.load(SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for SignalWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignalWatch")
            .field("first", &self.first)
            .finish_non_exhaustive()
    }
}

/// SIGINT and SIGTERM, listened to for the whole run: a signal that arrives while an event is
/// being printed is kept for the next poll, not lost.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// The number of the next signal received.
    async fn next(&mut self) -> i32 {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => 2,
                _ = self.terminate.recv() => 15,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            2
        }
    }
}

/// The terminal view: streaming text, a spinner while tools run, a line per finished call, and
/// a closing summary.
struct TerminalView {
    tty: bool,
    running: Vec<(String, String)>,
    frame: usize,
    spinner_shown: bool,
    at_line_start: bool,
    /// The estimated input of every call with a `usage` event (the turns' and the
    /// summariser's), to set beside what was reported for them.
    estimated: u64,
    /// The input tokens the `usage` events report, over every call: the stop event's
    /// `input_tokens` whenever every call reported usage.
    reported_input: u64,
    /// Input and output tokens of the summariser's calls (included in the totals), shown so
    /// the cost of compaction is seen.
    compaction_tokens: Option<(u64, u64)>,
    /// The time to first token of the run's first turn call that measured one (a summary
    /// call's first token is not shown to anyone).
    first_token: Option<Duration>,
    retries: u32,
    /// The number of the last `turn_start`: the loop starts a turn again under the same number
    /// after a broken stream (or a model fallback, which says so itself).
    last_turn: u32,
    /// Whether the view said why the current turn is asked again (a model fallback, a raised
    /// output limit): the next `turn_start` under the same number is not a broken stream.
    repeat_explained: bool,
    /// Whether the current turn streamed text: a turn asked again without any (a request
    /// field a server refused, stale thinking) discarded nothing shown.
    turn_text_shown: bool,
    /// Whether a reactive compaction came since the last `turn_start`: the provider refused
    /// the turn as too long (mid-stream too, after text was shown) and the loop asks it again
    /// under its number once the history is compacted; nothing broke off.
    compacted_for_turn: bool,
}

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

impl TerminalView {
    fn new(tty: bool) -> Self {
        Self {
            tty,
            running: Vec::new(),
            frame: 0,
            spinner_shown: false,
            at_line_start: true,
            estimated: 0,
            reported_input: 0,
            compaction_tokens: None,
            first_token: None,
            retries: 0,
            last_turn: 0,
            repeat_explained: false,
            turn_text_shown: false,
            compacted_for_turn: false,
        }
    }

    /// Text from the model, a tool or a server as it may be printed: with its control
    /// characters made visible on a terminal (see `terminal_text`), exact otherwise.
    fn shown<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.tty {
            for_terminal(text)
        } else {
            Cow::Borrowed(text)
        }
    }

    fn clear_spinner(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.spinner_shown {
            write!(out, "\r\x1b[2K")?;
            self.spinner_shown = false;
        }
        Ok(())
    }

    fn tick(&mut self, out: &mut impl Write) -> io::Result<()> {
        if !self.tty || self.running.is_empty() {
            return Ok(());
        }
        self.frame = (self.frame + 1) % FRAMES.len();
        let names: Vec<&str> = self.running.iter().map(|(_, name)| name.as_str()).collect();
        write!(
            out,
            "\r\x1b[2K{} running {}: {}",
            FRAMES[self.frame],
            names.len(),
            names.join(", ")
        )?;
        self.spinner_shown = true;
        out.flush()
    }

    fn newline(&mut self, out: &mut impl Write) -> io::Result<()> {
        if !self.at_line_start {
            writeln!(out)?;
            self.at_line_start = true;
        }
        Ok(())
    }

    fn show(
        &mut self,
        out: &mut impl Write,
        event: &AgentEvent,
        started: Instant,
    ) -> io::Result<()> {
        self.clear_spinner(out)?;
        match event {
            AgentEvent::TextDelta { text } => {
                let text = self.shown(text);
                write!(out, "{text}")?;
                if !text.is_empty() {
                    self.at_line_start = text.ends_with('\n');
                    self.turn_text_shown = true;
                }
            }
            AgentEvent::ThinkingDelta { .. } => {}
            AgentEvent::ToolStarted {
                tool_use_id,
                name,
                input,
            } => {
                self.newline(out)?;
                if !self.tty {
                    writeln!(out, "  … {name} {}", brief(input))?;
                }
                let name = self.shown(name).into_owned();
                self.running.push((tool_use_id.clone(), name));
            }
            AgentEvent::ToolFinished {
                tool_use_id,
                name,
                is_error,
                status,
                duration,
            } => {
                self.newline(out)?;
                self.running.retain(|(id, _)| id != tool_use_id);
                let mark = if *is_error { "✗" } else { "✓" };
                let note = if *is_error {
                    format!(" ({status})")
                } else {
                    String::new()
                };
                let name = self.shown(name);
                writeln!(out, "  {mark} {name}{note} · {}", human(*duration))?;
            }
            AgentEvent::ToolProgress { .. } => {}
            AgentEvent::Retry {
                call,
                attempt,
                status,
                code,
                overloaded,
                wait,
            } => {
                self.newline(out)?;
                self.retries += 1;
                let status = retry_cause(*status, *code, *overloaded);
                let which = match call {
                    UsageCall::Turn => "",
                    UsageCall::Compaction => " of the compaction call",
                };
                // `attempt` is the attempt about to be made: the first retry is attempt 2.
                writeln!(
                    out,
                    "  ↻ retry {}{which} after {status}, waiting {}",
                    attempt.saturating_sub(1).max(1),
                    human(*wait)
                )?;
            }
            AgentEvent::ModelFallback {
                call,
                from,
                to,
                reason,
                error,
            } => {
                self.newline(out)?;
                self.repeat_explained = true;
                let (from, to, error) = (self.shown(from), self.shown(to), self.shown(error));
                let during = match call {
                    UsageCall::Turn => "",
                    UsageCall::Compaction => " during the compaction",
                };
                writeln!(
                    out,
                    "  ⇄ model {from} is overloaded{during} ({reason}: {error}); switching to {to} for the rest of the run"
                )?;
            }
            AgentEvent::MaxTokensRaised { from, to, .. } => {
                self.newline(out)?;
                self.repeat_explained = true;
                let discarded = if self.turn_text_shown {
                    " (the text above is discarded)"
                } else {
                    ""
                };
                writeln!(
                    out,
                    "  ↑ response cut at {from} output tokens; asking again with up to {to}{discarded}"
                )?;
            }
            AgentEvent::Context(action) => {
                self.newline(out)?;
                if let ContextAction::Compaction {
                    trigger: "reactive",
                    ..
                } = action
                {
                    self.compacted_for_turn = true;
                }
                let action = serde_json::to_string(action).unwrap_or_default();
                writeln!(out, "  ⋯ context: {}", self.shown(&action))?;
            }
            AgentEvent::CacheBreak {
                previous,
                current,
                changed,
            } => {
                self.newline(out)?;
                writeln!(
                    out,
                    "  ⚠ prompt cache break: {previous} → {current} cached tokens ({})",
                    self.shown(&changed.join(", "))
                )?;
            }
            AgentEvent::TurnStart { turn, .. } => {
                // The loop asks a turn again under its number after a broken stream, and
                // also after a refusal it can answer (a request field an OpenAI-compatible
                // server does not take), where nothing broke off and nothing was shown.
                // A turn refused as too long is asked again after the compaction, which the
                // context line above reported: the text it showed is discarded, and nothing
                // broke off.
                if *turn == self.last_turn && self.turn_text_shown {
                    if self.compacted_for_turn {
                        self.newline(out)?;
                        writeln!(
                            out,
                            "  ↻ the prompt was too long; asking the turn again after the compaction (the text above is discarded)"
                        )?;
                    } else if !self.repeat_explained {
                        self.newline(out)?;
                        writeln!(
                            out,
                            "  ↻ the response broke off; asking again (the text above is discarded)"
                        )?;
                    }
                }
                self.last_turn = *turn;
                self.repeat_explained = false;
                self.turn_text_shown = false;
                self.compacted_for_turn = false;
            }
            AgentEvent::Usage {
                call,
                usage,
                estimated_input_tokens,
                time_to_first_token,
                ..
            } => {
                // Every billed call has one event, the summariser's too: the sums are the
                // stop event's totals (over the calls that reported usage). Added as the loop
                // adds them, saturating: the counts are the server's.
                self.estimated = self.estimated.saturating_add(*estimated_input_tokens);
                let (input, output) =
                    Usage::from_json(usage).map_or((0, 0), |u| (u.input_total(), u.output_tokens));
                self.reported_input = self.reported_input.saturating_add(input);
                match call {
                    UsageCall::Compaction => {
                        let (spent_in, spent_out) = self.compaction_tokens.unwrap_or_default();
                        self.compaction_tokens = Some((
                            spent_in.saturating_add(input),
                            spent_out.saturating_add(output),
                        ));
                    }
                    UsageCall::Turn => {
                        if self.first_token.is_none() {
                            self.first_token = *time_to_first_token;
                        }
                    }
                }
            }
            AgentEvent::TurnEnd { .. } => {}
            AgentEvent::Stop {
                reason,
                turns,
                tool_calls,
                input_tokens,
                output_tokens,
                ..
            } => {
                // The error, if any, is reported on stderr once the view is done.
                self.newline(out)?;
                writeln!(out)?;
                let ttft = self.first_token.map_or("-".to_owned(), human);
                let compaction = self
                    .compaction_tokens
                    .map_or_else(String::new, |(input, output)| {
                        format!(" (compaction in {input} / out {output})")
                    });
                writeln!(
                    out,
                    "── {} · {turns} turns · {tool_calls} tool calls · tokens in {input_tokens} / out {output_tokens}{compaction} · estimated input {} vs reported {} · first token {ttft} · retries {} · wall {}",
                    reason.as_str(),
                    self.estimated,
                    self.reported_input,
                    self.retries,
                    human(started.elapsed()),
                )?;
            }
        }
        out.flush()
    }
}

/// What a retry line says caused the retry: the status, with the class when it adds
/// something ("HTTP 529 (overloaded)"); without a status, the class the client named (a
/// connection error, a timeout, an overload the provider reported in a 200 before anything was
/// delivered: Anthropic's `overloaded_error` event).
fn retry_cause(status: Option<u16>, code: Option<&str>, overloaded: bool) -> String {
    let code = if overloaded { Some("overloaded") } else { code };
    match (status, code) {
        (Some(status), Some("overloaded")) if status != 529 => {
            format!("HTTP {status} (overloaded)")
        }
        (Some(status), _) => format!("HTTP {status}"),
        (None, Some("overloaded")) => "an overloaded error (no HTTP status)".to_owned(),
        (None, Some("connection")) => "a connection error".to_owned(),
        (None, Some("timeout")) => "a timeout".to_owned(),
        (None, Some(code)) => format!("a {code} error (no HTTP status)"),
        (None, None) => "a connection error, timeout or error event".to_owned(),
    }
}

fn brief(input: &Value) -> String {
    let text = input.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

fn human(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1e3;
    if ms < 1.0 {
        format!("{:.0} µs", ms * 1e3)
    } else if ms < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

impl std::fmt::Debug for TerminalView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalView")
            .field("tty", &self.tty)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn shown_on(tty: bool, events: &[AgentEvent]) -> String {
        let mut view = TerminalView::new(tty);
        let mut out = Vec::new();
        for event in events {
            view.show(&mut out, event, Instant::now()).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    /// A retry line names what the loop waits out: a status when there is one (an overload
    /// that came with another status says so), else the class the client named.
    #[test]
    fn a_retry_line_names_its_cause() {
        assert_eq!(retry_cause(Some(529), Some("overloaded"), true), "HTTP 529");
        assert_eq!(
            retry_cause(Some(503), Some("overloaded"), true),
            "HTTP 503 (overloaded)"
        );
        assert_eq!(retry_cause(Some(500), Some("server"), false), "HTTP 500");
        assert_eq!(
            retry_cause(None, Some("overloaded"), true),
            "an overloaded error (no HTTP status)"
        );
        assert_eq!(
            retry_cause(None, None, true),
            "an overloaded error (no HTTP status)"
        );
        assert_eq!(
            retry_cause(None, Some("connection"), false),
            "a connection error"
        );
        assert_eq!(retry_cause(None, Some("timeout"), false), "a timeout");
        assert_eq!(
            retry_cause(None, Some("server"), false),
            "a server error (no HTTP status)"
        );
        assert_eq!(
            retry_cause(None, None, false),
            "a connection error, timeout or error event"
        );
    }

    /// A retry of the summariser's call says so: the wait is the compaction's, no turn's.
    #[test]
    fn a_compaction_call_s_retry_says_so() {
        let retry = |call| AgentEvent::Retry {
            call,
            attempt: 2,
            status: None,
            code: Some("connection"),
            overloaded: false,
            wait: std::time::Duration::from_millis(5),
        };
        let shown = shown_on(
            false,
            &[retry(UsageCall::Compaction), retry(UsageCall::Turn)],
        );
        assert!(
            shown.contains("↻ retry 1 of the compaction call after a connection error"),
            "{shown}"
        );
        assert!(
            shown.contains("↻ retry 1 after a connection error"),
            "{shown}"
        );
    }

    /// A switch to the fallback model made by the summariser's call says so: it is no turn
    /// asked again.
    #[test]
    fn a_fallback_during_the_compaction_says_so() {
        let fallback = |call| AgentEvent::ModelFallback {
            call,
            from: "big".into(),
            to: "small".into(),
            reason: "overloaded",
            error: "Overloaded".into(),
        };
        let shown = shown_on(
            false,
            &[fallback(UsageCall::Compaction), fallback(UsageCall::Turn)],
        );
        assert!(
            shown.contains("⇄ model big is overloaded during the compaction (overloaded: Overloaded); switching to small"),
            "{shown}"
        );
        assert!(
            shown
                .contains("⇄ model big is overloaded (overloaded: Overloaded); switching to small"),
            "{shown}"
        );
    }

    /// A turn asked again before it showed any text (a server refused `stream_options`, and
    /// the loop sent the turn without it) is not said to have broken off with its "text above"
    /// discarded: nothing broke off, nothing above is the turn's. One that streamed text is.
    #[test]
    fn a_turn_asked_again_is_said_to_have_broken_off_only_when_it_showed_text() {
        let start = |turn| AgentEvent::TurnStart {
            turn,
            estimated_input_tokens: 1,
        };
        let end = |turn| AgentEvent::TurnEnd {
            turn,
            stop_reason: None,
        };
        let refused = shown_on(false, &[start(1), end(1), start(1)]);
        assert!(!refused.contains("broke off"), "{refused:?}");
        let text = AgentEvent::TextDelta {
            text: "Hello".into(),
        };
        let broken = shown_on(false, &[start(1), text, end(1), start(1)]);
        assert!(broken.contains("broke off"), "{broken:?}");
    }

    /// A turn asked again with a higher output limit says so on its `↑` line (the cut text is
    /// discarded); it was also said to have broken off, which it had not.
    #[test]
    fn a_turn_asked_again_with_a_raised_limit_is_not_said_to_have_broken_off() {
        let start = |turn| AgentEvent::TurnStart {
            turn,
            estimated_input_tokens: 1,
        };
        let events = [
            start(1),
            AgentEvent::TextDelta {
                text: "The first half".into(),
            },
            AgentEvent::TurnEnd {
                turn: 1,
                stop_reason: Some("max_tokens".into()),
            },
            AgentEvent::MaxTokensRaised {
                turn: 1,
                from: 8_192,
                to: 64_000,
            },
            start(1),
            AgentEvent::TextDelta {
                text: "The whole".into(),
            },
        ];
        let shown = shown_on(false, &events);
        assert!(!shown.contains("broke off"), "{shown:?}");
        assert!(
            shown.contains(
                "↑ response cut at 8192 output tokens; asking again with up to 64000 (the text above is discarded)\nThe whole"
            ),
            "{shown:?}"
        );
    }

    /// The summary's "reported" input is the sum over every call's `usage` event, the
    /// summariser's too (so it is the stop event's "tokens in"), says what the summary calls
    /// cost, and takes the first token from the first turn's call, not the summary's. Absurd
    /// counts add up saturating instead of overflowing.
    #[test]
    fn the_summary_counts_compaction_calls_and_takes_the_first_token_from_a_turn() {
        let usage = |call, input: u64, ttft| AgentEvent::Usage {
            turn: 1,
            call,
            usage: serde_json::json!({"input_tokens": input, "cache_read_input_tokens": 5, "output_tokens": 7}),
            estimated_input_tokens: 10,
            time_to_first_token: Some(Duration::from_millis(ttft)),
        };
        let stop = AgentEvent::Stop {
            reason: StopReason::EndTurn,
            error: None,
            error_code: None,
            status: None,
            request_id: None,
            retry_after: None,
            messages: Vec::new(),
            turns: 1,
            tool_calls: 0,
            input_tokens: 3_010,
            output_tokens: 14,
        };
        let shown = shown_on(
            false,
            &[
                usage(UsageCall::Compaction, 2_000, 900),
                usage(UsageCall::Turn, 1_000, 40),
                stop,
            ],
        );
        let summary = shown.lines().last().unwrap();
        assert!(
            summary.contains("tokens in 3010 / out 14 (compaction in 2005 / out 7) · estimated input 20 vs reported 3010 · first token 40.0 ms"),
            "{summary}"
        );
        let absurd = shown_on(
            false,
            &[
                usage(UsageCall::Turn, u64::MAX, 1),
                usage(UsageCall::Turn, u64::MAX, 1),
            ],
        );
        assert!(absurd.is_empty(), "{absurd:?}");
    }

    /// Escape sequences the model repeats (from a file a tool read, say) are shown on a
    /// terminal, not obeyed; a pipe gets the exact text.
    #[test]
    fn a_terminal_is_not_driven_by_the_models_escape_sequences() {
        let text = "done\x1b]52;c;cm0gLXJmIH4=\x07\x1b[1A\x1b[2K\r\n";
        let events = [
            AgentEvent::TextDelta { text: text.into() },
            AgentEvent::ToolStarted {
                tool_use_id: "t1".into(),
                name: "re\x1b[2Jad".into(),
                input: serde_json::json!({}),
            },
            AgentEvent::ToolFinished {
                tool_use_id: "t1".into(),
                name: "re\x1b[2Jad".into(),
                is_error: true,
                status: "error".into(),
                duration: Duration::from_millis(1),
            },
        ];
        let tty = shown_on(true, &events);
        assert!(!tty.contains('\x1b') && !tty.contains('\x07'), "{tty:?}");
        assert!(
            tty.starts_with("done␛]52;c;cm0gLXJmIH4=␇␛[1A␛[2K\n"),
            "{tty:?}"
        );
        assert!(tty.contains("✗ re␛[2Jad (error)"), "{tty:?}");
        let piped = shown_on(false, &events);
        assert!(piped.starts_with(text), "{piped:?}");
    }
}
