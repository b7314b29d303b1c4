//! `Client` for JavaScript: the core streaming HTTP client (`ferroloop::client`).
//!
//! `stream(body)` and `create(body)` return an [`EventStream`](crate::pump::NativeEventStream)
//! of JSON items: for a stream, the typed decoder events (`{"type": "text_delta", ...}`), retries
//! (`{"type": "retry", ...}`) and stall notices, then one `{"type": "message", ...}` or one
//! `{"type": "error", ...}`; for `create`, one `{"type": "response", ...}` or one error. The
//! wrappers in `lib/client.js` present them as an async iterable and Promises.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferroloop::client::{Client, ClientConfig, ClientError, MessageItem, Provider, RequestMetrics};
use ferroloop::exec::CancellationToken;
use futures_util::StreamExt;
use napi_derive::napi;
use serde_json::{Map, Value, json};

use crate::error::{FerroloopError, invalid_json};
use crate::exec::{millis, small_count, timeout_millis};
use crate::guard;
use crate::js_tools::read_json;
use crate::pump::{self, ItemSink, NativeEventStream, OnAbort};

/// Watchdog timeouts, in milliseconds.
#[napi(object)]
#[derive(Debug, Default, Clone)]
pub struct ClientTimeouts {
    /// TCP (and proxy) connection (default 30,000).
    pub connect_ms: Option<f64>,
    /// From sending the request to the response headers (default 600,000).
    pub first_byte_ms: Option<f64>,
    /// From the headers to the first event (default 90,000).
    pub first_event_ms: Option<f64>,
    /// Between two events (default 90,000).
    pub idle_ms: Option<f64>,
    /// A gap this long between events is reported once as a `stalled` event (default 30,000).
    pub stall_notice_ms: Option<f64>,
    /// The whole request, retries included (default 600,000).
    pub total_ms: Option<f64>,
}

/// How a client is configured.
#[napi(object)]
#[derive(Debug, Default, Clone)]
pub struct ClientOptions {
    /// `anthropic` (default), `openai-chat` or `openai-responses`.
    pub provider: Option<String>,
    /// The API key (default: `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`).
    pub api_key: Option<String>,
    /// The endpoint (default: `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else the public one).
    pub base_url: Option<String>,
    /// Retries after the first attempt (default 10; 0 disables retries).
    pub max_retries: Option<f64>,
    /// The first backoff ceiling in milliseconds (default 500; doubles on each retry).
    pub retry_base_delay_ms: Option<f64>,
    /// The largest backoff ceiling in milliseconds (default 32,000).
    pub retry_max_delay_ms: Option<f64>,
    /// Watchdog timeouts.
    pub timeouts: Option<ClientTimeouts>,
    /// Extra headers sent with every request.
    pub headers: Option<HashMap<String, String>>,
    /// The `anthropic-version` header.
    pub anthropic_version: Option<String>,
    /// `anthropic-beta` flags.
    pub anthropic_beta: Option<Vec<String>>,
    /// Read the API key, base URL and proxies from the environment (default true).
    pub from_env: Option<bool>,
}

/// The core configuration for `options`: environment defaults, then the explicit options.
pub fn config_of(options: ClientOptions) -> Result<ClientConfig, FerroloopError> {
    let provider = match options.provider.as_deref() {
        None => Provider::Anthropic,
        Some(name) => Provider::from_name(name).ok_or_else(|| {
            FerroloopError::invalid_argument(format!(
                "unknown provider {name:?} (expected anthropic, openai-chat or openai-responses)"
            ))
        })?,
    };
    let mut config = if options.from_env.unwrap_or(true) {
        ClientConfig::from_env(provider)
    } else {
        ClientConfig::new(provider)
    };
    if let Some(url) = options.base_url {
        config = config.with_base_url(url);
    }
    if let Some(key) = options.api_key {
        config = config.with_api_key(key);
    }
    if let Some(retries) = options.max_retries {
        config.retry.max_retries = small_count(retries, 0, "maxRetries")?;
    }
    if let Some(ms) = options.retry_base_delay_ms {
        config.retry.base_delay = millis(ms, "retryBaseDelayMs")?;
    }
    if let Some(ms) = options.retry_max_delay_ms {
        config.retry.max_delay = millis(ms, "retryMaxDelayMs")?;
    }
    if let Some(t) = options.timeouts {
        let set = |slot: &mut Duration, ms: Option<f64>, what: &str| {
            if let Some(ms) = ms {
                // The core refuses a zero timeout too, without the JS name.
                *slot = timeout_millis(ms, what)?;
            }
            Ok::<_, FerroloopError>(())
        };
        set(
            &mut config.timeouts.connect,
            t.connect_ms,
            "timeouts.connectMs",
        )?;
        set(
            &mut config.timeouts.first_byte,
            t.first_byte_ms,
            "timeouts.firstByteMs",
        )?;
        set(
            &mut config.timeouts.first_event,
            t.first_event_ms,
            "timeouts.firstEventMs",
        )?;
        set(&mut config.timeouts.idle, t.idle_ms, "timeouts.idleMs")?;
        set(
            &mut config.timeouts.stall_notice,
            t.stall_notice_ms,
            "timeouts.stallNoticeMs",
        )?;
        set(&mut config.timeouts.total, t.total_ms, "timeouts.totalMs")?;
    }
    if let Some(headers) = options.headers {
        config.headers.extend(headers);
    }
    if let Some(version) = options.anthropic_version {
        config.anthropic_version = version;
    }
    if let Some(beta) = options.anthropic_beta {
        config.anthropic_beta = beta;
    }
    Ok(config)
}

fn ms(duration: Option<Duration>) -> Value {
    duration.map_or(Value::Null, |d| json!(d.as_secs_f64() * 1e3))
}

/// The request's measurements, in their JS shape.
pub fn metrics_json(metrics: &RequestMetrics) -> Value {
    json!({
        "requestId": metrics.request_id,
        "attempts": metrics.attempts,
        "retries": metrics.retries.len(),
        "httpVersion": metrics.http_version,
        "timeToHeadersMs": ms(metrics.time_to_headers),
        "timeToFirstEventMs": ms(metrics.time_to_first_event),
        "timeToFirstTokenMs": ms(metrics.time_to_first_token),
        "totalMs": ms(metrics.total),
        "bytesReceived": metrics.bytes_received,
        "events": metrics.events,
        "usage": metrics.usage,
    })
}

/// The error item of a failed request: `{"type": "error", "error": fields}`, the fields being
/// `error_fields`'s.
pub fn client_error_item(error: &ClientError) -> String {
    client_error_value(error).to_string()
}

/// [`client_error_item`] as a JSON value, for an item that carries more (a stream's metrics).
fn client_error_value(error: &ClientError) -> Value {
    json!({"type": "error", "error": error_fields(error)})
}

/// The fields of `error` as JS sees them: the code, message, status and request id, plus
/// `partial` (the message received before a truncation), `reason` (the code of a truncation's
/// cause) and `cause` (that cause's own fields), `errorType` (the provider's), `retryAfterMs`,
/// a timeout's `which` and `elapsedMs`, a prompt too long's `tokens` and `limit`, and an
/// oversized event's `limit` (a protocol error), where they apply.
///
/// A truncation's `cause` is built by this same function, so it carries every detail a
/// top-level error of its kind has (the README promises a timeout cause's `which` and
/// `elapsedMs`, a protocol cause's `limit`).
fn error_fields(error: &ClientError) -> Map<String, Value> {
    let mut fields = crate::pump::base_error_fields(&FerroloopError::from(error));
    if let ClientError::Truncated { partial, cause, .. } = error {
        fields.insert(
            "partial".into(),
            partial.message.as_deref().cloned().unwrap_or(Value::Null),
        );
        let root = cause.root();
        fields.insert(
            "reason".into(),
            json!(FerroloopError::from(root).code.as_str()),
        );
        // The breaking failure itself (JS: the error's `cause`; Python: `__cause__`). `root`
        // is never a truncation, so this recursion is one level deep.
        fields.insert("cause".into(), Value::Object(error_fields(root)));
    }
    if let Some(kind) = error.details().and_then(|d| d.error_type.as_deref()) {
        fields.insert("errorType".into(), json!(kind));
    }
    // A rate limit's, an overload's or a server error's `retry-after`, also through a truncated
    // stream's cause (Python's `retry_after`, in seconds there).
    if let Some(wait) = error.retry_after() {
        fields.insert("retryAfterMs".into(), json!(wait.as_secs_f64() * 1e3));
    }
    // The prompt's size and the model's limit when the provider's message said them
    // (Python's `PromptTooLongError.tokens` and `.limit`; `null` when it did not).
    if let ClientError::PromptTooLong { tokens, limit, .. } = error {
        fields.insert("tokens".into(), json!(tokens));
        fields.insert("limit".into(), json!(limit));
    }
    // The cap an oversized event hit (Python's `ProtocolError.limit`).
    if let ClientError::EventTooLarge { limit, .. } = error {
        fields.insert("limit".into(), json!(limit));
    }
    // Which watchdog fired and when (Python's `APITimeoutError.which` and `.elapsed`).
    if let ClientError::Timeout { which, elapsed, .. } = error {
        fields.insert("which".into(), json!(which.to_string()));
        fields.insert("elapsedMs".into(), json!(elapsed.as_secs_f64() * 1e3));
    }
    fields
}

/// A client for one provider endpoint; streams and requests run on napi's tokio runtime.
#[napi(js_name = "Client")]
pub struct NativeClient {
    inner: Arc<Client>,
}

#[napi]
impl NativeClient {
    /// A client configured by `options` (the environment supplies the key and URL defaults).
    #[napi(constructor)]
    pub fn new(options: ClientOptions) -> napi::Result<Self> {
        guard::sync(|| {
            let config = config_of(options)?;
            let inner = Client::new(config).map_err(|err| FerroloopError::from(&err))?;
            Ok(Self {
                inner: Arc::new(inner),
            })
        })
    }

    /// The provider spoken (`anthropic`, `openai-chat`, `openai-responses`).
    #[napi(getter)]
    pub fn provider(&self) -> napi::Result<String> {
        guard::sync(|| Ok(self.inner.config().provider.name().to_owned()))
    }

    /// The endpoint's base URL.
    #[napi(getter, js_name = "baseUrl")]
    pub fn base_url(&self) -> napi::Result<String> {
        guard::sync(|| Ok(self.inner.config().base_url.clone()))
    }

    /// Starts a streaming request (`body`: the provider's JSON request; `stream: true` is set).
    #[napi(js_name = "streamJson")]
    pub fn stream_json(&self, body: String) -> napi::Result<NativeEventStream> {
        guard::sync(|| {
            let (body, betas) = request_body(&body, true, self.inner.config().provider)?;
            let client = self.inner.clone();
            pump::start(OnAbort::DropProducer, false, move |sink, cancel| {
                produce_stream(client, body, betas, sink, cancel)
            })
        })
    }

    /// Starts a non-streaming request; the stream carries one `response` or `error` item.
    #[napi(js_name = "createJson")]
    pub fn create_json(&self, body: String) -> napi::Result<NativeEventStream> {
        guard::sync(|| {
            let (body, betas) = request_body(&body, false, self.inner.config().provider)?;
            let client = self.inner.clone();
            pump::start(
                OnAbort::DropProducer,
                false,
                move |sink, _cancel| async move {
                    match client.create_with_betas(body, &betas).await {
                        // A generation answer is a JSON object: another JSON value is a
                        // protocol error, as in Python and C.
                        Ok(response) => match response.json_object() {
                            Ok(json) => {
                                let item = json!({
                                    "type": "response",
                                    "status": response.status,
                                    "body": json,
                                    "metrics": metrics_json(&response.metrics),
                                });
                                sink.send_json(&item).await;
                            }
                            Err(error) => {
                                sink.send(client_error_item(&error)).await;
                            }
                        },
                        Err(error) => {
                            sink.send(client_error_item(&error)).await;
                        }
                    }
                },
            )
        })
    }
}

/// The request body with `"stream"` set as asked (whatever the caller gave), and, for
/// Anthropic, its `betas` taken out (they are sent as `anthropic-beta`).
fn request_body(
    body: &str,
    stream: bool,
    provider: Provider,
) -> Result<(String, Vec<String>), FerroloopError> {
    let mut value: Value = read_json(body).map_err(|err| invalid_json("the request", &err))?;
    if !value.is_object() {
        return Err(FerroloopError::invalid_argument(
            "the request must be a JSON object",
        ));
    }
    let betas = ferroloop::client::prepare_body(&mut value, stream, provider)
        .map_err(|error| FerroloopError::invalid_argument(error.to_string()))?;
    Ok((value.to_string(), betas))
}

async fn produce_stream(
    client: Arc<Client>,
    body: String,
    betas: Vec<String>,
    sink: ItemSink,
    _cancel: CancellationToken,
) {
    let mut stream = client.stream_with_betas(body, &betas).decode();
    while let Some(item) = stream.next().await {
        let delivered = match item {
            Ok(MessageItem::Event(event)) => sink.send_json(&event).await,
            Ok(MessageItem::Retry(retry)) => {
                let item = json!({
                    "type": "retry",
                    "attempt": retry.next_attempt(),
                    "status": retry.status,
                    // Why it waits when there is no status, in the agent's `retry` event's
                    // terms (one reading of an overload: the core's).
                    "code": retry.code,
                    "overloaded": retry.overloaded(),
                    "waitMs": retry.wait.as_secs_f64() * 1e3,
                    "reason": retry.reason,
                });
                sink.send_json(&item).await
            }
            Ok(MessageItem::Stalled { elapsed }) => {
                let item = json!({"type": "stalled", "elapsedMs": elapsed.as_secs_f64() * 1e3});
                sink.send_json(&item).await
            }
            Ok(MessageItem::Message(message)) => {
                let item = json!({
                    "type": "message",
                    "message": message,
                    "metrics": metrics_json(stream.metrics()),
                });
                sink.send_json(&item).await;
                return;
            }
            Err(error) => {
                // The measurements are final once the stream failed (attempts, retries, bytes,
                // timings up to the failure), as they are after a message: JS keeps them as
                // the stream's `metrics`.
                let mut item = client_error_value(&error);
                item["metrics"] = metrics_json(stream.metrics());
                sink.send_json(&item).await;
                return;
            }
        };
        if !delivered {
            return;
        }
    }
}

impl NativeClient {
    /// The client as the agent loop's model.
    pub fn model(&self) -> Arc<dyn ferroloop::agent::Model> {
        self.inner.clone()
    }
}

#[cfg(test)]
mod tests {
    use ferroloop::client::ErrorDetails;

    use super::*;

    /// The `error` object of an error item.
    fn fields(item: &str) -> Value {
        let parsed: Value = serde_json::from_str(item).unwrap_or_default();
        parsed["error"].clone()
    }

    #[test]
    fn a_prompt_too_long_item_carries_the_sizes_python_s_error_has() {
        let details = ErrorDetails {
            status: Some(400),
            error_type: Some("invalid_request_error".to_owned()),
            message: "prompt is too long".to_owned(),
            request_id: None,
        };
        let sized = ClientError::PromptTooLong {
            details: details.clone(),
            tokens: Some(210_000),
            limit: Some(200_000),
        };
        let item = fields(&client_error_item(&sized));
        assert_eq!(item["code"], "prompt_too_long");
        assert_eq!(
            (item["tokens"].clone(), item["limit"].clone()),
            (json!(210_000), json!(200_000))
        );
        let without_sizes = ClientError::PromptTooLong {
            details,
            tokens: None,
            limit: None,
        };
        let item = fields(&client_error_item(&without_sizes));
        assert_eq!(
            (item["tokens"].clone(), item["limit"].clone()),
            (Value::Null, Value::Null)
        );
    }

    #[test]
    fn an_oversized_event_item_is_a_protocol_error_with_its_limit() {
        let oversized = ClientError::EventTooLarge {
            limit: 1024,
            request_id: Some("req_1".to_owned()),
        };
        let item = fields(&client_error_item(&oversized));
        assert_eq!(item["code"], "protocol");
        assert_eq!(item["requestId"], "req_1");
        // Python's ProtocolError.limit.
        assert_eq!(item["limit"], 1024);
    }

    /// A truncation's cause carries the details a top-level error of its kind has: a timeout
    /// its `which` and `elapsedMs`, an oversized event its `limit`.
    #[test]
    fn a_truncation_s_cause_carries_its_details() {
        let truncated = |cause| ClientError::Truncated {
            partial: ferroloop::client::PartialResponse::default(),
            cause: Box::new(cause),
            request_id: Some("req_t".to_owned()),
        };
        let idle = ClientError::Timeout {
            which: ferroloop::client::TimeoutKind::Idle,
            elapsed: Duration::from_millis(250),
            request_id: Some("req_t".to_owned()),
        };
        let top = fields(&client_error_item(&idle));
        let item = fields(&client_error_item(&truncated(idle)));
        assert_eq!(item["reason"], "timeout");
        assert_eq!(item["cause"], top);
        assert_eq!(item["cause"]["which"], "idle");
        assert_eq!(item["cause"]["elapsedMs"], 250.0);
        let oversized = ClientError::EventTooLarge {
            limit: 1024,
            request_id: None,
        };
        let item = fields(&client_error_item(&truncated(oversized)));
        assert_eq!(item["reason"], "protocol");
        assert_eq!(item["cause"]["code"], "protocol");
        assert_eq!(item["cause"]["limit"], 1024);
    }

    /// `create()` asks for a JSON answer whatever the request said; `stream()` for events.
    #[test]
    fn the_stream_flag_is_set_as_the_call_needs() {
        let flag = |body: &str, stream: bool| {
            request_body(body, stream, Provider::Anthropic)
                .ok()
                .and_then(|(text, _)| serde_json::from_str::<Value>(&text).ok())
                .map(|value| value["stream"].clone())
        };
        assert_eq!(flag(r#"{"stream": true}"#, false), Some(json!(false)));
        assert_eq!(flag("{}", false), Some(json!(false)));
        assert_eq!(flag(r#"{"stream": false}"#, true), Some(json!(true)));
    }
}
