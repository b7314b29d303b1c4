//! `ferroloop serve-replay`: the loopback replay and fault-injection server, for the Python,
//! Node and C test suites. Prints `{"addr": "127.0.0.1:PORT", "url": ..., "tls": ...}` (plus
//! `"cert_pem"` with `--tls`) as its first stdout line, then, with `--log-requests`, one
//! `{"request": {...}}` line per request received. Exits when stdin reaches end of input or
//! after `--idle-exit-ms` without a request.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::CommandFactory;
use ferroloop::decode::Provider;
use ferroloop_replay::{ReplayServer, Script, ScriptBody, ServerOptions};

use crate::run::RunProvider;

/// Arguments of `ferroloop serve-replay`.
#[derive(Debug, clap::Args)]
pub struct ServeReplayArgs {
    /// A JSON script: `{"responses": [...], "when_exhausted": "error"|"repeat_last"}`.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "fixture",
        required_unless_present_any = ["fixture", "agent_model"]
    )]
    pub script: Option<PathBuf>,
    /// Serve this file (a recorded stream) with status 200 to every request.
    #[arg(long, value_name = "FILE")]
    pub fixture: Option<PathBuf>,
    /// Answer every request with the next turn of `ferroloop run`'s replay model (a scripted
    /// conversation exploring a directory with parallel `glob`, `grep` and `read` calls).
    #[arg(long, conflicts_with_all = ["script", "fixture"])]
    pub agent_model: bool,
    /// The wire format of `--agent-model`'s turns: Anthropic Messages events (default), OpenAI
    /// Chat Completions chunks (`openai`, alias `openai-chat`) or Responses events
    /// (`openai-responses`).
    #[arg(long, value_enum, value_name = "PROVIDER")]
    pub agent_model_provider: Option<RunProvider>,
    /// Directory relative fixture paths resolve against (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub base_dir: Option<PathBuf>,
    /// Serve HTTPS (HTTP/2 and HTTP/1.1 by ALPN) with a fresh self-signed certificate.
    #[arg(long)]
    pub tls: bool,
    /// Exit after this many milliseconds without a request (and no body being written).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub idle_exit_ms: u64,
    /// Keep running when stdin reaches end of input (by default that stops the server).
    #[arg(long)]
    pub ignore_stdin: bool,
    /// Print each request as a JSON line on stdout.
    #[arg(long)]
    pub log_requests: bool,
}

/// Runs `ferroloop serve-replay`.
pub fn run(args: ServeReplayArgs) -> anyhow::Result<ExitCode> {
    if args.agent_model_provider.is_some() && !args.agent_model {
        // A usage error like clap's own (exit 2): clap's `requires` cannot express it, since a
        // boolean flag always has a value.
        crate::Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--agent-model-provider applies to --agent-model only",
            )
            .exit();
    }
    let script = match (&args.script, &args.fixture) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read script {}", path.display()))?;
            Script::from_json(&text)?
        }
        (None, Some(path)) => Script::repeat(ScriptBody::Fixture(path.clone())),
        (None, None) if args.agent_model => Script::default(),
        (None, None) => anyhow::bail!("give --script, --fixture or --agent-model"),
    };
    let base_dir = match &args.base_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(script, base_dir, args))
}

async fn serve(
    script: Script,
    base_dir: PathBuf,
    args: ServeReplayArgs,
) -> anyhow::Result<ExitCode> {
    let (log_sender, mut log) = tokio::sync::mpsc::unbounded_channel();
    let agent_model_provider = match args.agent_model_provider {
        Some(RunProvider::Openai) => Provider::OpenAiChat,
        Some(RunProvider::OpenaiResponses) => Provider::OpenAiResponses,
        Some(RunProvider::Anthropic) | None => Provider::Anthropic,
    };
    let server = ReplayServer::start_with_log(
        &script,
        &base_dir,
        ServerOptions {
            tls: args.tls,
            responder: args.agent_model.then(|| {
                crate::replay_agent_model::explore_directory_responder(agent_model_provider, 64, 1)
            }),
        },
        args.log_requests.then_some(log_sender),
    )
    .await?;
    let mut banner = serde_json::json!({
        "addr": server.addr().to_string(),
        "url": server.base_url(),
        "tls": args.tls,
    });
    if let Some(pem) = server.cert_pem() {
        banner["cert_pem"] = serde_json::Value::String(pem.to_owned());
    }
    write_line(&banner)?;

    let stdin_closed = async {
        if args.ignore_stdin {
            return std::future::pending::<()>().await;
        }
        let (done, closed) = tokio::sync::oneshot::channel::<()>();
        // Blocking reads belong on their own thread; it ends with the process.
        std::thread::spawn(move || {
            let mut sink = [0u8; 4096];
            let mut stdin = io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            let _ = done.send(());
        });
        let _ = closed.await;
    };
    let idle = server.wait_until_idle(Duration::from_millis(args.idle_exit_ms));
    tokio::pin!(stdin_closed);
    tokio::pin!(idle);
    loop {
        tokio::select! {
            // Requests first: a request logged before stdin closed must not be lost to the
            // random choice among ready branches.
            biased;
            Some(request) = log.recv() => write_line(&serde_json::json!({"request": request}))?,
            () = &mut stdin_closed => break,
            () = &mut idle => break,
        }
    }
    // Whatever arrived while the loop was ending is still part of the log.
    while let Ok(request) = log.try_recv() {
        write_line(&serde_json::json!({"request": request}))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_line(value: &serde_json::Value) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}
