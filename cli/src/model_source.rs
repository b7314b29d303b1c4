//! Where `ferroloop run` gets its model: a real endpoint when credentials are set, otherwise the
//! embedded replay model — a scripted conversation served over loopback HTTP by the replay
//! server, through the same client, decoder and loop as a real one.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use ferroloop::agent::Model;
use ferroloop::client::{Client, ClientConfig};
use ferroloop::decode::Provider;
use ferroloop_replay::{ReplayServer, Script, ServerOptions};

use crate::run::RunArgs;

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
            ModelSource::Replay { server, .. } => format!(
                "ferroloop run · replay model (no ANTHROPIC_API_KEY set): the model's answers are scripted and served from {}; the tools run for real in {}",
                server.base_url(),
                dir.display()
            ),
        }
    }
}

/// Picks the model source from the arguments and the environment.
pub async fn choose(args: &RunArgs) -> anyhow::Result<ModelSource> {
    let has_key = std::env::var_os("ANTHROPIC_API_KEY").is_some_and(|k| !k.is_empty());
    let real = !args.replay && (has_key || args.base_url.is_some());
    if args.provider != "anthropic" {
        bail!(
            "--provider {}: the agent loop speaks the Anthropic Messages API; OpenAI endpoints are supported by `ferroloop decode` and the client, not yet by `ferroloop run`",
            args.provider
        );
    }
    if real {
        let mut config = ClientConfig::from_env(Provider::Anthropic);
        if let Some(url) = &args.base_url {
            config = config.with_base_url(url.clone());
        }
        let base_url = config.base_url.clone();
        let client = Client::new(config).context("cannot configure the client")?;
        return Ok(ModelSource::Real {
            client: Arc::new(client),
            model: args
                .model
                .clone()
                .unwrap_or_else(|| "claude-sonnet-4-5".into()),
            base_url,
        });
    }
    // Small pieces a few milliseconds apart, so the stream is visibly a stream.
    let responder = crate::replay_agent_model::explore_directory_responder(64, 3);
    let options = ServerOptions {
        responder: Some(responder),
        ..ServerOptions::default()
    };
    let server = ReplayServer::start(&Script::default(), Path::new("."), options)
        .await
        .context("cannot start the replay server on 127.0.0.1")?;
    let config = ClientConfig::new(Provider::Anthropic)
        .with_base_url(server.base_url())
        .with_api_key("replay");
    let client = Client::new(config).context("cannot configure the client")?;
    Ok(ModelSource::Replay {
        client: Arc::new(client),
        server,
    })
}
