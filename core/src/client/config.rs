//! What a [`Client`](super::Client) talks to and how: provider, base URL, credentials, headers,
//! retry policy, timeouts, TLS roots, proxy.

use std::fmt;

use super::proxy::ProxyConfig;
use super::retry::RetryPolicy;
use super::watchdog::Timeouts;

pub use crate::decode::Provider;

/// Endpoints and environment variables of each provider (the client's side of
/// [`crate::decode::Provider`]).
impl Provider {
    /// The public endpoint used when no base URL is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::OpenAiChat | Provider::OpenAiResponses => "https://api.openai.com/v1",
        }
    }

    /// The path of the generation endpoint, appended to the base URL.
    pub fn messages_path(self) -> &'static str {
        match self {
            Provider::Anthropic => "/v1/messages",
            Provider::OpenAiChat => "/chat/completions",
            Provider::OpenAiResponses => "/responses",
        }
    }

    /// The environment variables holding the API key and the base URL.
    pub fn env_names(self) -> (&'static str, &'static str) {
        match self {
            Provider::Anthropic => ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
            Provider::OpenAiChat | Provider::OpenAiResponses => {
                ("OPENAI_API_KEY", "OPENAI_BASE_URL")
            }
        }
    }
}

/// TLS trust settings.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    /// Trust the operating system's certificate store as well as the embedded Mozilla roots.
    pub native_roots: bool,
    /// Extra trusted certificates (DER), e.g. a local gateway's or a test server's.
    pub extra_roots_der: Vec<Vec<u8>>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            native_roots: true,
            extra_roots_der: Vec::new(),
        }
    }
}

/// Everything a client needs. Build with [`ClientConfig::new`] or [`ClientConfig::from_env`],
/// then adjust the public fields.
#[derive(Clone)]
pub struct ClientConfig {
    /// The API spoken.
    pub provider: Provider,
    /// Scheme, host, port and optional path prefix, without a trailing slash. A query
    /// (`?api-version=...`) is kept after the endpoint's path; credentials (`user:pw@`) and a
    /// fragment (`#...`, never sent) are refused.
    pub base_url: String,
    /// The API key (`x-api-key` for Anthropic, `Authorization: Bearer` otherwise).
    pub api_key: Option<String>,
    /// The `anthropic-version` header.
    pub anthropic_version: String,
    /// `anthropic-beta` flags, sent comma-separated when not empty.
    pub anthropic_beta: Vec<String>,
    /// Extra headers sent with every request. A name given here replaces the default header of
    /// that name (`user-agent`, `x-api-key`, `authorization`, `anthropic-version`, ...); a name
    /// given twice is sent twice. `accept` is always the client's own.
    pub headers: Vec<(String, String)>,
    /// The `user-agent` header.
    pub user_agent: String,
    /// When and how to retry.
    pub retry: RetryPolicy,
    /// The watchdogs.
    pub timeouts: Timeouts,
    /// TLS trust.
    pub tls: TlsOptions,
    /// Proxies (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`).
    pub proxy: ProxyConfig,
    /// Speak HTTP/2 without negotiation on cleartext connections (h2c prior knowledge).
    /// Over TLS, HTTP/2 or HTTP/1.1 is chosen by ALPN regardless.
    pub http2_prior_knowledge: bool,
    /// The largest event the stream accepts, in bytes (the SSE parser's
    /// [`SseConfig::max_event_bytes`](crate::sse::SseConfig::max_event_bytes)): an event growing
    /// past it ends the request with [`ClientError::EventTooLarge`](super::ClientError::EventTooLarge)
    /// instead of buffering it, so a hostile endless event costs at most this much memory.
    /// Default [`DEFAULT_MAX_EVENT_BYTES`] (64 MiB); `None` disables the cap.
    pub max_event_bytes: Option<usize>,
    /// The largest non-streaming response body ([`Client::create`](super::Client::create),
    /// [`Client::post`](super::Client::post)) read, in bytes: a body growing past it (or whose
    /// `content-length` says it will) ends the request with a
    /// [`ClientError::Protocol`](super::ClientError::Protocol) naming the limit, not retried,
    /// and the rest is never read, so a hostile or runaway body costs at most this much memory.
    /// Default [`DEFAULT_MAX_RESPONSE_BYTES`] (64 MiB, the event cap's); `None` disables the cap.
    pub max_response_bytes: Option<usize>,
    /// Called for every retry as it is scheduled, before the wait (streams also yield it as
    /// [`StreamItem::Retry`](super::StreamItem::Retry); this reaches non-streaming requests too).
    pub on_retry: Option<RetryObserver>,
}

/// The default [`ClientConfig::max_event_bytes`]: 64 MiB, far above any event a provider sends
/// (Anthropic and OpenAI Chat events are deltas of a few KiB; the largest, OpenAI Responses'
/// `response.completed`, repeats the whole output, which stays in single MiB even with an
/// image in it) and far below what would hurt the host.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 64 << 20;

/// The default [`ClientConfig::max_response_bytes`]: 64 MiB, as [`DEFAULT_MAX_EVENT_BYTES`]. A
/// whole non-streaming answer is the size of the streamed one's final event: a few hundred KiB
/// at the largest output limits, single MiB with an image in it.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 << 20;

/// A callback told about every retry.
pub type RetryObserver = std::sync::Arc<dyn Fn(&super::RetryEvent) + Send + Sync>;

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("anthropic_version", &self.anthropic_version)
            .field("anthropic_beta", &self.anthropic_beta)
            .field("headers", &self.headers.len())
            .field("retry", &self.retry)
            .field("timeouts", &self.timeouts)
            .field("proxy", &self.proxy)
            .field("http2_prior_knowledge", &self.http2_prior_knowledge)
            .field("max_event_bytes", &self.max_event_bytes)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("on_retry", &self.on_retry.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    /// Defaults for `provider`, reading nothing from the environment (no key, no proxy).
    pub fn new(provider: Provider) -> Self {
        Self {
            provider,
            base_url: provider.default_base_url().to_owned(),
            api_key: None,
            anthropic_version: "2023-06-01".to_owned(),
            anthropic_beta: Vec::new(),
            headers: Vec::new(),
            user_agent: concat!("ferroloop/", env!("CARGO_PKG_VERSION")).to_owned(),
            retry: RetryPolicy::default(),
            timeouts: Timeouts::default(),
            tls: TlsOptions::default(),
            proxy: ProxyConfig::default(),
            http2_prior_knowledge: false,
            max_event_bytes: Some(DEFAULT_MAX_EVENT_BYTES),
            max_response_bytes: Some(DEFAULT_MAX_RESPONSE_BYTES),
            on_retry: None,
        }
    }

    /// Defaults for `provider` with the key, base URL and proxies taken from the process
    /// environment (`ANTHROPIC_API_KEY`/`ANTHROPIC_BASE_URL` or `OPENAI_API_KEY`/
    /// `OPENAI_BASE_URL`; `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, upper or lower
    /// case: see [`ProxyConfig::from_lookup`]).
    pub fn from_env(provider: Provider) -> Self {
        Self::from_lookup(provider, |name| std::env::var(name).ok())
    }

    /// Like [`ClientConfig::from_env`], reading variables through `lookup`.
    pub fn from_lookup(provider: Provider, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut config = Self::new(provider);
        let (key_var, url_var) = provider.env_names();
        config.api_key = lookup(key_var).filter(|key| !key.is_empty());
        if let Some(url) = lookup(url_var).filter(|url| !url.is_empty()) {
            config.base_url = url;
        }
        config.base_url = config.base_url.trim_end_matches('/').to_owned();
        config.proxy = ProxyConfig::from_lookup(&lookup);
        config
    }

    /// Sets the base URL (a trailing slash is dropped).
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn reads_anthropic_key_and_base_url_from_the_environment() {
        let config = ClientConfig::from_lookup(
            Provider::Anthropic,
            lookup(&[
                ("ANTHROPIC_API_KEY", "sk-ant-test"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
                ("OPENAI_API_KEY", "wrong"),
            ]),
        );
        assert_eq!(config.api_key.as_deref(), Some("sk-ant-test"));
        assert_eq!(config.base_url, "http://127.0.0.1:9");
    }

    #[test]
    fn reads_openai_variables_and_defaults_the_base_url() {
        let config = ClientConfig::from_lookup(
            Provider::OpenAiChat,
            lookup(&[("OPENAI_API_KEY", "sk-test"), ("ANTHROPIC_BASE_URL", "x")]),
        );
        assert_eq!(config.api_key.as_deref(), Some("sk-test"));
        assert_eq!(config.base_url, "https://api.openai.com/v1");
        assert_eq!(Provider::OpenAiResponses.messages_path(), "/responses");
    }

    #[test]
    fn debug_output_redacts_the_key() {
        let config = ClientConfig::new(Provider::Anthropic).with_api_key("sk-secret");
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-secret"));
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn events_are_capped_at_64_mib_by_default() {
        let config = ClientConfig::new(Provider::OpenAiResponses);
        assert_eq!(config.max_event_bytes, Some(64 * 1024 * 1024));
        assert_eq!(config.max_event_bytes, Some(DEFAULT_MAX_EVENT_BYTES));
    }
}
