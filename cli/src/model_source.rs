//! Where `ferroloop run` gets its model: a real endpoint when credentials or a base URL are set,
//! otherwise the embedded replay model — a scripted conversation served over loopback HTTP by
//! the replay server, in the chosen provider's wire format, through the same client, decoder,
//! translation and loop as a real one.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use ferroloop::agent::Model;
use ferroloop::client::{Client, ClientConfig};
use ferroloop::decode::Provider;
use ferroloop_replay::{ReplayServer, Script, ServerOptions};

use crate::run::{RunArgs, RunProvider};

/// The model of a run, and what keeps it alive.
pub enum ModelSource {
    /// A real endpoint.
    Real {
        /// The client.
        client: Arc<Client>,
        /// The model name.
        model: String,
        /// The endpoint.
        base_url: String,
    },
    /// The embedded replay model.
    Replay {
        /// The client, pointed at the server.
        client: Arc<Client>,
        /// The loopback server (stops when dropped).
        server: ReplayServer,
        /// Why the replay model answers: `--replay`, or which variable is unset.
        why: String,
    },
}

impl ModelSource {
    /// The model name for requests.
    pub fn model_name(&self) -> String {
        match self {
            ModelSource::Real { model, .. } => model.clone(),
            ModelSource::Replay { .. } => "ferroloop-replay".into(),
        }
    }

    /// The model for the loop.
    pub fn model(&self) -> Arc<dyn Model> {
        match self {
            ModelSource::Real { client, .. } | ModelSource::Replay { client, .. } => {
                client.clone() as Arc<dyn Model>
            }
        }
    }

    /// The first line of the terminal view: what answers, and that tools run for real.
    pub fn banner(&self, dir: &Path) -> String {
        match self {
            ModelSource::Real {
                model, base_url, ..
            } => {
                format!(
                    "ferroloop run · model {model} at {base_url} · tools run in {}",
                    dir.display()
                )
            }
            ModelSource::Replay { server, why, .. } => format!(
                "ferroloop run · replay model ({why}): the model's answers are scripted and served from {}; the tools run for real in {}",
                server.base_url(),
                dir.display()
            ),
        }
    }
}

/// The wire format of `provider`.
pub fn provider(provider: RunProvider) -> Provider {
    match provider {
        RunProvider::Anthropic => Provider::Anthropic,
        RunProvider::Openai => Provider::OpenAiChat,
        RunProvider::OpenaiResponses => Provider::OpenAiResponses,
    }
}

/// Picks the model source from the arguments and the environment: a real endpoint when the
/// provider's key (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`) or base URL (`ANTHROPIC_BASE_URL`,
/// `OPENAI_BASE_URL`, `--base-url`) is set and `--replay` is not.
pub async fn choose(args: &RunArgs) -> anyhow::Result<ModelSource> {
    let provider = provider(args.provider);
    let (key_var, url_var) = provider.env_names();
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let real = !args.replay && (set(key_var) || set(url_var) || args.base_url.is_some());
    if real {
        let mut config = ClientConfig::from_env(provider);
        if let Some(url) = &args.base_url {
            config = config.with_base_url(url.clone());
        }
        let base_url = config.base_url.clone();
        let client = Client::new(config).context("cannot configure the client")?;
        let default_model = match args.provider {
            RunProvider::Anthropic => "claude-sonnet-4-5",
            RunProvider::Openai => "gpt-4o",
            RunProvider::OpenaiResponses => "gpt-5",
        };
        return Ok(ModelSource::Real {
            client: Arc::new(client),
            model: args.model.clone().unwrap_or_else(|| default_model.into()),
            base_url,
        });
    }
    // Small pieces a few milliseconds apart, so the stream is visibly a stream.
    let responder = crate::replay_agent_model::explore_directory_responder(provider, 64, 3);
    let options = ServerOptions {
        responder: Some(responder),
        ..ServerOptions::default()
    };
    let server = ReplayServer::start(&Script::default(), Path::new("."), options)
        .await
        .context("cannot start the replay server on 127.0.0.1")?;
    let config = ClientConfig::new(provider)
        .with_base_url(server.base_url())
        .with_api_key("replay");
    let client = Client::new(config).context("cannot configure the client")?;
    let why = if args.replay {
        "--replay".to_owned()
    } else {
        format!("no {key_var} set")
    };
    Ok(ModelSource::Replay {
        client: Arc::new(client),
        server,
        why,
    })
}
