//! A streaming HTTP client for Anthropic Messages and OpenAI-compatible endpoints (feature
//! `client`): hyper over tokio, rustls, a connection pool, retries with exponential backoff and
//! full jitter honouring `retry-after`, watchdogs on the stream, one typed error, metrics per
//! request.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ferroloop::client::ClientError> {
//! use ferroloop::client::{Client, ClientConfig, Provider, StreamItem};
//! use futures::StreamExt;
//!
//! let client = Client::new(ClientConfig::from_env(Provider::Anthropic))?;
//! let body = r#"{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,
//!               "messages":[{"role":"user","content":"Hi"}]}"#;
//! let mut stream = client.stream(body);
//! while let Some(item) = stream.next().await {
//!     match item? {
//!         StreamItem::Event(event) => println!("{}: {}", &*event.event_type, &*event.data),
//!         StreamItem::Retry(retry) => eprintln!("retrying in {:?}", retry.wait),
//!         StreamItem::Stalled { elapsed } => eprintln!("no event for {elapsed:?}"),
//!     }
//! }
//! println!("{:?}", stream.metrics());
//! # Ok(()) }
//! ```

mod agent_model;
mod config;
mod error;
mod message_stream;
mod metrics;
mod proxy;
mod retry;
mod send;
mod stream;
mod transport;
mod watchdog;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use tokio::time::Instant;

pub use config::{
    ClientConfig, DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES, Provider, RetryObserver,
    TlsOptions,
};
pub use error::{ClientError, ErrorDetails, PartialResponse};
pub use message_stream::{MessageItem, MessageStream};
pub use metrics::RequestMetrics;
pub use proxy::ProxyConfig;
pub use retry::{RetryEvent, RetryPolicy, is_retryable_status, retry_after};
pub use stream::{ResponseStream, StreamItem};
pub use watchdog::{TimeoutKind, Timeouts};

use send::{PreparedRequest, Progress, Sender};
use transport::HttpClient;

/// A client for one provider endpoint. Cheap to clone; clones share the connection pool.
/// Requests must run inside a tokio runtime.
#[derive(Clone)]
pub struct Client {
    config: Arc<ClientConfig>,
    http: HttpClient,
    base_headers: Arc<HeaderMap>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A complete (non-streaming) response.
#[derive(Debug, Clone)]
pub struct ClientResponse {
    /// The HTTP status (always a success).
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// Measurements.
    pub metrics: RequestMetrics,
}

/// A non-streaming request that failed ([`Client::create_with_metrics`]), with what was
/// measured of it: the attempts and retries made, the body bytes read, the time taken, and,
/// when a success's headers had arrived (a 200 whose body failed), its request id, HTTP
/// version and time to headers, as a failed stream's [`RequestMetrics`] have them.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct RequestFailure {
    /// Why the request failed (what [`Client::create`] returns).
    pub error: ClientError,
    /// What was measured of it.
    pub metrics: RequestMetrics,
}

impl From<Box<RequestFailure>> for ClientError {
    fn from(failure: Box<RequestFailure>) -> Self {
        failure.error
    }
}

impl ClientResponse {
    /// The body parsed as JSON.
    pub fn json(&self) -> Result<serde_json::Value, ClientError> {
        serde_json::from_slice(&self.body).map_err(|error| {
            // A login page or a proxy's notice is recognised by its type and first words.
            let content_type = self
                .headers
                .get(CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("no content type");
            let excerpt = error::body_excerpt(&self.body, false);
            ClientError::Protocol {
                message: format!(
                    "response body is not JSON ({error}); it is {content_type}: {excerpt}"
                ),
                request_id: self.metrics.request_id.clone(),
            }
        })
    }

    /// The body parsed as a JSON object: a generation endpoint's answer. Another JSON value (an
    /// array, a string) is [`ClientError::Protocol`], as a body that is not JSON is.
    pub fn json_object(&self) -> Result<serde_json::Value, ClientError> {
        let json = self.json()?;
        if json.is_object() {
            return Ok(json);
        }
        Err(ClientError::Protocol {
            message: format!(
                "response body is not a JSON object (it is {}): a generation response is an \
                 object",
                crate::message::json_kind(&json)
            ),
            request_id: self.metrics.request_id.clone(),
        })
    }
}

impl Client {
    /// A client for `config` (loads the TLS roots once).
    pub fn new(mut config: ClientConfig) -> Result<Self, ClientError> {
        config.proxy = config.proxy.normalized();
        if let Some(name) = config.timeouts.first_zero() {
            return Err(ClientError::Config(format!(
                "timeouts.{name} is 0: a request could not wait at all; give a positive \
                 duration (there is no \"no timeout\": a very long one does that)"
            )));
        }
        let http = transport::build(&config)?;
        let base_headers = base_headers(&config)?;
        // Fail on a bad base URL or proxy now rather than on the first request.
        let path = config.provider.messages_path();
        let base = config.base_url.split('?').next().unwrap_or_default();
        if base.trim_end_matches('/').ends_with(path) {
            // The endpoint pasted as the base would be requested as `{path}{path}`: a 404.
            return Err(ClientError::Config(format!(
                "the base URL ends with the endpoint path {path}: give the base (such as \
                 https://api.openai.com/v1), the client appends {path}"
            )));
        }
        let uri = endpoint(&config, path)?;
        config.proxy.check(&uri)?;
        Ok(Self {
            config: Arc::new(config),
            http,
            base_headers: Arc::new(base_headers),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Starts a streaming generation request. `body` is the provider's JSON request, sent as
    /// is (it must ask for streaming: `"stream": true`). Nothing happens until the stream is
    /// polled.
    pub fn stream(&self, body: impl Into<Bytes>) -> ResponseStream {
        self.stream_with_betas(body, &[])
    }

    /// [`stream`](Self::stream) with more `anthropic-beta` flags for this request only, after
    /// the configured ones (a flag already configured is not repeated).
    pub fn stream_with_betas(&self, body: impl Into<Bytes>, betas: &[String]) -> ResponseStream {
        let path = self.config.provider.messages_path();
        match self.sender(path, body.into(), "text/event-stream", betas) {
            Ok(sender) => ResponseStream::new(sender, self.config.provider),
            Err(error) => ResponseStream::failed(self.unsent_sender(), self.config.provider, error),
        }
    }

    /// Starts a streaming generation request decoded by the provider's decoder: typed events,
    /// then the final message ([`MessageItem::Message`]).
    pub fn stream_message(&self, body: impl Into<Bytes>) -> MessageStream {
        self.stream(body).decode()
    }

    /// A non-streaming generation request; returns the provider's JSON response. `body` is the
    /// provider's JSON request, sent as is (the client never parses or rewrites it): it must not
    /// ask for streaming (`"stream": true` gets an event stream back, which is not JSON). The
    /// bindings' `create` build the body and set `"stream": false` themselves.
    pub async fn create(&self, body: impl Into<Bytes>) -> Result<ClientResponse, ClientError> {
        self.create_with_betas(body, &[]).await
    }

    /// [`create`](Self::create) with more `anthropic-beta` flags for this request only.
    pub async fn create_with_betas(
        &self,
        body: impl Into<Bytes>,
        betas: &[String],
    ) -> Result<ClientResponse, ClientError> {
        Ok(self.create_with_metrics(body, betas).await?)
    }

    /// [`create_with_betas`](Self::create_with_betas) that keeps the metrics of a failed
    /// request with its error (a binding reports them as it does a failed stream's: the
    /// attempts and retries made before the final failure, ...).
    pub async fn create_with_metrics(
        &self,
        body: impl Into<Bytes>,
        betas: &[String],
    ) -> Result<ClientResponse, Box<RequestFailure>> {
        self.post_with_betas(self.config.provider.messages_path(), body, betas)
            .await
    }

    /// Anthropic's token counting endpoint: the `input_tokens` of a Messages request body.
    pub async fn count_tokens(&self, body: impl Into<Bytes>) -> Result<u64, ClientError> {
        if self.config.provider != Provider::Anthropic {
            return Err(ClientError::Config(
                "count_tokens is an Anthropic endpoint".to_owned(),
            ));
        }
        let response = self.post("/v1/messages/count_tokens", body).await?;
        response
            .json()?
            .get("input_tokens")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| ClientError::Protocol {
                message: "count_tokens response has no input_tokens".to_owned(),
                request_id: response.metrics.request_id.clone(),
            })
    }

    /// POSTs `body` to `path` (appended to the base URL) with retries and returns the whole
    /// response (at most [`ClientConfig::max_response_bytes`] of body).
    pub async fn post(
        &self,
        path: &str,
        body: impl Into<Bytes>,
    ) -> Result<ClientResponse, ClientError> {
        Ok(self.post_with_betas(path, body, &[]).await?)
    }

    async fn post_with_betas(
        &self,
        path: &str,
        body: impl Into<Bytes>,
        betas: &[String],
    ) -> Result<ClientResponse, Box<RequestFailure>> {
        let sender = self
            .sender(path, body.into(), "application/json", betas)
            .map_err(|error| {
                Box::new(RequestFailure {
                    error,
                    metrics: RequestMetrics::default(),
                })
            })?;
        // The latest success's headers, for the metrics of a request that fails after them
        // (a 200 whose body breaks or is a provider error), as a stream's metrics keep them.
        let mut seen: Option<SuccessHeaders> = None;
        loop {
            let response = match sender.clone().send().await {
                Ok(response) => response,
                Err(error) => {
                    let metrics = whole_metrics(&sender, seen.as_ref());
                    return Err(Box::new(RequestFailure { error, metrics }));
                }
            };
            let (parts, body) = response.into_parts();
            let request_id = error::request_id(&parts.headers);
            seen = Some(SuccessHeaders {
                request_id: request_id.clone(),
                version: metrics::version_label(parts.version),
                at: Instant::now(),
            });
            let read = send::read_whole(body, &sender, request_id.clone()).await;
            // A success whose JSON body is a provider error (a gateway's way of reporting its
            // upstream's failure) is that error, as in a stream, and retried when its class is
            // transient: nothing was generated.
            let read =
                read.and_then(
                    |body| match ClientError::from_json_error_body(&body, request_id) {
                        Some(error) => {
                            let retryable = error.is_transient_provider_error();
                            Err((error, retryable))
                        }
                        None => Ok(body),
                    },
                );
            let failure = match read {
                Ok(body) => {
                    // The body bytes of every attempt (error bodies included) were counted
                    // as they were read, this body's too.
                    let metrics = whole_metrics(&sender, seen.as_ref());
                    return Ok(ClientResponse {
                        status: parts.status.as_u16(),
                        headers: parts.headers,
                        body,
                        metrics,
                    });
                }
                Err(failure) => failure,
            };
            let (error, retryable) = failure;
            let attempt = sender.current_attempt();
            match sender.schedule_retry(attempt, &error, retryable, None) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => {
                    let metrics = whole_metrics(&sender, seen.as_ref());
                    return Err(Box::new(RequestFailure { error, metrics }));
                }
            }
        }
    }

    fn sender(
        &self,
        path: &str,
        body: Bytes,
        accept: &'static str,
        betas: &[String],
    ) -> Result<Sender, ClientError> {
        let mut headers = (*self.base_headers).clone();
        add_betas(&mut headers, betas)?;
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        let uri = endpoint(&self.config, path)?;
        // A plain-HTTP request through a proxy goes to the proxy itself, so its credentials
        // travel as a header (an HTTPS request sends them in the CONNECT instead).
        if uri.scheme_str() == Some("http")
            && let Some(credentials) = self
                .config
                .proxy
                .proxy_for(&uri)
                .and_then(|proxy| proxy.parse::<Uri>().ok())
                .and_then(|proxy| proxy::proxy_authorization(&proxy))
        {
            let mut value = HeaderValue::from_str(&credentials)
                .map_err(|_| ClientError::Config("bad proxy credentials".to_owned()))?;
            value.set_sensitive(true);
            headers.insert(http::header::PROXY_AUTHORIZATION, value);
        }
        let request = PreparedRequest {
            uri,
            headers,
            body,
            event_stream: accept == "text/event-stream",
        };
        Ok(Sender {
            http: self.http.clone(),
            config: Arc::clone(&self.config),
            request: Arc::new(request),
            progress: Arc::new(Mutex::new(Progress::default())),
            start: Instant::now(),
        })
    }

    /// A sender that is never used to send (for a stream that failed before starting).
    fn unsent_sender(&self) -> Sender {
        Sender {
            http: self.http.clone(),
            config: Arc::clone(&self.config),
            request: Arc::new(PreparedRequest {
                uri: Uri::from_static("http://127.0.0.1/"),
                headers: HeaderMap::new(),
                body: Bytes::new(),
                event_stream: false,
            }),
            progress: Arc::new(Mutex::new(Progress::default())),
            start: Instant::now(),
        }
    }
}

/// What a non-streaming request keeps of a success's headers for its metrics.
struct SuccessHeaders {
    request_id: Option<String>,
    version: &'static str,
    /// When they arrived.
    at: Instant,
}

/// The metrics of a non-streaming request so far: attempts, retries and body bytes from the
/// sender's progress (every attempt's, error bodies included), the time taken, and what the
/// latest success's headers said (none before one arrived, as for a stream).
fn whole_metrics(sender: &Sender, seen: Option<&SuccessHeaders>) -> RequestMetrics {
    let progress = sender
        .progress
        .lock()
        .map(|p| (p.attempts, p.retries.clone(), p.body_bytes));
    let (attempts, retries, bytes_received) = progress.unwrap_or_default();
    RequestMetrics {
        request_id: seen.and_then(|seen| seen.request_id.clone()),
        attempts,
        retries,
        http_version: seen.map(|seen| seen.version),
        time_to_headers: seen.map(|seen| seen.at - sender.start),
        total: Some(sender.start.elapsed()),
        bytes_received,
        ..RequestMetrics::default()
    }
}

/// A request's `betas` that is neither a flag (a string) nor an array of flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("betas must be a flag or an array of flags (strings): {0}")]
pub struct NotBetas(String);

/// Makes a request body (a JSON object) ready to send: its `"stream"` flag set to what the
/// call reads (`true` for [`Client::stream_with_betas`], `false` for
/// [`Client::create_with_betas`], whatever the caller gave: a `create` given `stream: true`
/// would get an event stream back), and, for Anthropic, its `betas` taken out (see
/// [`take_betas`]) and returned, to go as `anthropic-beta`. Another provider sends `betas` in
/// the body as given. A body that is not an object is left unchanged.
pub fn prepare_body(
    request: &mut serde_json::Value,
    stream: bool,
    provider: Provider,
) -> Result<Vec<String>, NotBetas> {
    if let Some(fields) = request.as_object_mut() {
        fields.insert("stream".to_owned(), serde_json::Value::Bool(stream));
    }
    if provider == Provider::Anthropic {
        take_betas(request)
    } else {
        Ok(Vec::new())
    }
}

/// Removes a request body's `betas` (the SDKs' parameter: an array of `anthropic-beta` flags,
/// or one flag) and returns its flags, for [`Client::stream_with_betas`] and
/// [`Client::create_with_betas`]: the API refuses a body that holds it.
///
/// A `betas` that is neither a string nor an array of strings (nor null, as absent) is refused
/// (and left in the body): dropping what is not a flag would send the request without the features it asked
/// for, and without a word.
pub fn take_betas(request: &mut serde_json::Value) -> Result<Vec<String>, NotBetas> {
    use crate::message::json_kind;
    use serde_json::Value;
    let Some(fields) = request.as_object_mut() else {
        return Ok(Vec::new());
    };
    let flags = match fields.get("betas") {
        None => return Ok(Vec::new()),
        // As an absent one (the API would refuse the key all the same).
        Some(Value::Null) => Vec::new(),
        Some(Value::String(flag)) => vec![flag.clone()],
        Some(Value::Array(flags)) => flags
            .iter()
            .enumerate()
            .map(|(at, flag)| {
                flag.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| NotBetas(format!("item {at} is {}", json_kind(flag))))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(NotBetas(format!("it is {}", json_kind(other)))),
    };
    fields.remove("betas");
    Ok(flags)
}

/// Appends `betas` to the request's `anthropic-beta` header (creating it), skipping flags
/// already there.
fn add_betas(headers: &mut HeaderMap, betas: &[String]) -> Result<(), ClientError> {
    if betas.is_empty() {
        return Ok(());
    }
    let mut flags: Vec<String> = headers
        .get("anthropic-beta")
        .and_then(|value| value.to_str().ok())
        .map(|value| {
            value
                .split(',')
                .map(|flag| flag.trim().to_owned())
                .filter(|flag| !flag.is_empty())
                .collect()
        })
        .unwrap_or_default();
    for beta in betas {
        let beta = beta.trim();
        if !beta.is_empty() && !flags.iter().any(|flag| flag == beta) {
            flags.push(beta.to_owned());
        }
    }
    let value = header_value(&flags.join(","))
        .ok_or_else(|| ClientError::Config(format!("bad anthropic-beta flags {betas:?}")))?;
    headers.insert("anthropic-beta", value);
    Ok(())
}

fn endpoint(config: &ClientConfig, path: &str) -> Result<Uri, ClientError> {
    if !config.base_url.contains("://") {
        // Not shown: a value without a scheme is as likely a key given in the wrong place
        // (swapped arguments) as a URL, and this message ends up in logs.
        return Err(ClientError::Config(format!(
            "bad base URL (a {}-character value without a scheme, not shown): expected \
             http(s)://host",
            config.base_url.chars().count()
        )));
    }
    if config.base_url.contains('#') {
        // A fragment is never sent, and the endpoint path appended after it would be part of
        // it: `http://host/p#frag` would request `/p`. (Not shown: whatever follows `#` is not
        // meant for a server, nor for logs.)
        return Err(ClientError::Config(
            "the base URL has a fragment (#...), which is never sent and would swallow the \
             endpoint path appended after it: remove it"
                .to_owned(),
        ));
    }
    // A query in the base URL (Azure's `?api-version=`) stays at the end.
    let (base, query) = match config.base_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (config.base_url.as_str(), None),
    };
    let mut url = format!("{}{path}", base.trim_end_matches('/'));
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    let uri: Uri = url.parse().map_err(|error| {
        let url = proxy::redacted(&url);
        ClientError::Config(format!("bad URL {url:?}: {error}"))
    })?;
    if uri
        .authority()
        .is_some_and(|authority| authority.as_str().contains('@'))
    {
        // hyper would drop them without a word, and the server would answer 401.
        return Err(ClientError::Config(
            "the base URL carries credentials, which are never sent: give the key as api_key \
             or in headers"
                .to_owned(),
        ));
    }
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(uri),
        _ => Err(ClientError::Config(format!(
            "bad URL {url:?}: expected http(s)://host"
        ))),
    }
}

/// `text` as a header value, or `None` when it holds a control character or a non-ASCII one.
/// `HeaderValue::from_str` takes any byte from 0x80 up (the obsolete Latin-1 "obs-text"), so a
/// non-ASCII character went out as its UTF-8 bytes, which a server reads as two or more Latin-1
/// characters: a version, flag or key the server does not recognise, with nothing saying why.
fn header_value(text: &str) -> Option<HeaderValue> {
    if !text.is_ascii() {
        return None;
    }
    HeaderValue::from_str(text).ok()
}

fn base_headers(config: &ClientConfig) -> Result<HeaderMap, ClientError> {
    // Names the header, never the value (it may be a token): "bad extra header" left a caller
    // with several headers guessing which one.
    let value = |text: &str, name: &str| {
        header_value(text).ok_or_else(|| {
            ClientError::Config(format!(
                "the value of header {name:?} cannot be sent: it contains a control character \
                 (a trailing newline?) or a non-ASCII one"
            ))
        })
    };
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(USER_AGENT, value(&config.user_agent, "user-agent")?);
    if let Some(key) = &config.api_key
        && header_value(key).is_none()
    {
        // Never echo the key; say what is usually wrong with it.
        return Err(ClientError::Config(
            "the API key cannot be sent in a header: it contains a control character (a \
             trailing newline?) or a non-ASCII one"
                .to_owned(),
        ));
    }
    match config.provider {
        Provider::Anthropic => {
            if let Some(key) = &config.api_key {
                let mut key = value(key, "x-api-key")?;
                key.set_sensitive(true);
                headers.insert("x-api-key", key);
            }
            headers.insert(
                "anthropic-version",
                value(&config.anthropic_version, "anthropic-version")?,
            );
            if !config.anthropic_beta.is_empty() {
                headers.insert(
                    "anthropic-beta",
                    value(&config.anthropic_beta.join(","), "anthropic-beta")?,
                );
            }
        }
        Provider::OpenAiChat | Provider::OpenAiResponses => {
            if let Some(key) = &config.api_key {
                let mut bearer = value(&format!("Bearer {key}"), "authorization")?;
                bearer.set_sensitive(true);
                headers.insert(AUTHORIZATION, bearer);
            }
        }
    }
    // An extra header replaces a default of the same name (a gateway's own key or version,
    // an application's user agent): two values would reach the server otherwise.
    let mut given: Vec<HeaderName> = Vec::new();
    for (name, text) in &config.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ClientError::Config(format!("bad header name {name:?}")))?;
        let value = value(text, name.as_str())?;
        if !given.contains(&name) {
            headers.remove(&name);
            given.push(name.clone());
        }
        headers.append(name, value);
    }
    Ok(headers)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A generation answer is a JSON object: another JSON value is a protocol error naming it.
    #[test]
    fn json_object_refuses_other_json_values() {
        let response = |body: &'static str| ClientResponse {
            status: 200,
            headers: HeaderMap::new(),
            body: Bytes::from_static(body.as_bytes()),
            metrics: RequestMetrics::default(),
        };
        assert_eq!(
            response(r#"{"id":"msg_1"}"#).json_object().unwrap(),
            json!({"id": "msg_1"})
        );
        for (body, kind) in [
            ("[1, 2]", "an array"),
            ("\"text\"", "a string"),
            ("null", "null"),
        ] {
            let refused = response(body).json_object().unwrap_err();
            assert!(
                matches!(&refused, ClientError::Protocol { message, .. } if message.contains(kind)),
                "{body}: {refused}"
            );
        }
    }

    /// A header value is sent as bytes: a non-ASCII character goes out as its UTF-8 bytes,
    /// which servers read as Latin-1 (mangled). Each is refused naming the header, never
    /// showing the value (it may be a secret).
    #[test]
    fn non_ascii_header_values_are_refused_naming_the_header() {
        let mut version = ClientConfig::new(Provider::Anthropic);
        version.anthropic_version = "2023-06-01\u{e9}".to_owned();
        let mut extra = ClientConfig::new(Provider::Anthropic);
        extra.headers = vec![("x-token".to_owned(), "s\u{e9}cret".to_owned())];
        let mut key = ClientConfig::new(Provider::OpenAiChat);
        key.api_key = Some("sk-\u{e9}".to_owned());
        for (config, name) in [
            (version, "header \"anthropic-version\""),
            (extra, "header \"x-token\""),
            (key, "API key"),
        ] {
            let refused = base_headers(&config).unwrap_err().to_string();
            assert!(refused.contains(name), "{refused}");
            assert!(refused.contains("non-ASCII"), "{refused}");
            assert!(!refused.contains('\u{e9}'), "{refused}");
        }
        let mut betas = HeaderMap::new();
        assert!(add_betas(&mut betas, &["fl\u{e4}g".to_owned()]).is_err());
        assert!(betas.is_empty());
    }

    /// `betas` that are not flags are refused and stay in the body; before, they were dropped
    /// (`["ok", 123]` sent only `ok`, `5` sent nothing) and the request went out without them.
    #[test]
    fn betas_are_a_flag_or_an_array_of_flags() {
        let mut one = json!({"model": "m", "betas": "a-1"});
        assert_eq!(take_betas(&mut one).unwrap(), ["a-1"]);
        assert_eq!(one, json!({"model": "m"}));
        let mut many = json!({"betas": ["a-1", "b-2"]});
        assert_eq!(take_betas(&mut many).unwrap(), ["a-1", "b-2"]);
        assert_eq!(many, json!({}));
        assert!(take_betas(&mut json!({"model": "m"})).unwrap().is_empty());
        // `prepare_body` sets the flag either way and takes betas for Anthropic only.
        let mut body = json!({"stream": true, "betas": ["a-1"]});
        assert_eq!(
            prepare_body(&mut body, false, Provider::Anthropic).unwrap(),
            ["a-1"]
        );
        assert_eq!(body, json!({"stream": false}));
        let mut body = json!({"betas": ["a-1"]});
        assert!(
            prepare_body(&mut body, true, Provider::OpenAiChat)
                .unwrap()
                .is_empty()
        );
        assert_eq!(body, json!({"stream": true, "betas": ["a-1"]}));
        let mut null = json!({"model": "m", "betas": null});
        assert!(take_betas(&mut null).unwrap().is_empty());
        assert_eq!(null, json!({"model": "m"}));
        for (betas, why) in [
            (json!(["ok", 123]), "item 1 is a number"),
            (json!(5), "it is a number"),
            (json!({"flag": 1}), "it is an object"),
        ] {
            let mut request = json!({"betas": betas.clone()});
            let refused = take_betas(&mut request).unwrap_err();
            assert_eq!(
                refused.to_string(),
                format!("betas must be a flag or an array of flags (strings): {why}")
            );
            assert_eq!(
                request,
                json!({"betas": betas}),
                "the body is left as it was"
            );
        }
    }
}
