//! The client against the loopback replay server: every retry, timeout, fault and transport
//! behaviour. Nothing here leaves 127.0.0.1; every test is bounded in time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferroloop::client::{
    Client, ClientConfig, ClientError, Provider, ResponseStream, StreamItem, TimeoutKind,
};
use ferroloop::sse::{SseOwnedItem, parse_all};
use ferroloop_replay::{
    Fault, ReplayServer, Script, ScriptBody, ScriptEvent, ScriptedResponse, ServerOptions,
};
use futures::StreamExt;
use serde_json::json;

const BODY: &str = r#"{"model":"m","max_tokens":8,"stream":true,"messages":[]}"#;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture(path: &str) -> ScriptBody {
    ScriptBody::Fixture(PathBuf::from("tests/fixtures").join(path))
}

fn fixture_events(path: &str) -> Vec<(String, String)> {
    let bytes = std::fs::read(repo_root().join("tests/fixtures").join(path)).unwrap();
    parse_all(bytes)
        .into_iter()
        .filter_map(|item| match item {
            SseOwnedItem::Event(event) => {
                Some((event.event_type.to_string(), event.data.to_string()))
            }
            SseOwnedItem::Retry(_) => None,
        })
        .collect()
}

fn script(responses: Vec<ScriptedResponse>) -> Script {
    Script {
        responses,
        ..Script::default()
    }
}

async fn serve(script: &Script) -> ReplayServer {
    ReplayServer::start(script, &repo_root(), ServerOptions::default())
        .await
        .unwrap()
}

/// Small timeouts and fast retries, so fault tests take milliseconds.
fn config(provider: Provider, server: &ReplayServer) -> ClientConfig {
    let mut config = ClientConfig::new(provider)
        .with_base_url(server.base_url())
        .with_api_key("test-key");
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(20);
    config.timeouts.connect = Duration::from_secs(2);
    config.timeouts.first_byte = Duration::from_secs(5);
    config.timeouts.first_event = Duration::from_secs(5);
    config.timeouts.idle = Duration::from_secs(5);
    config.timeouts.stall_notice = Duration::from_secs(5);
    config.timeouts.total = Duration::from_secs(20);
    config.tls.native_roots = false;
    config
}

#[derive(Debug, Default)]
struct Collected {
    events: Vec<(String, String)>,
    retries: Vec<ferroloop::client::RetryEvent>,
    stalls: Vec<Duration>,
    error: Option<ClientError>,
}

async fn collect(mut stream: ResponseStream) -> (Collected, ResponseStream) {
    let mut out = Collected::default();
    let run = async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(StreamItem::Event(event)) => out
                    .events
                    .push((event.event_type.to_string(), event.data.to_string())),
                Ok(StreamItem::Retry(retry)) => out.retries.push(retry),
                Ok(StreamItem::Stalled { elapsed }) => out.stalls.push(elapsed),
                Err(error) => {
                    out.error = Some(error);
                    // The stream must end after its error.
                    assert!(stream.next().await.is_none());
                    break;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("stream did not end in time");
    (out, stream)
}

fn anthropic_events(events: &[(&str, serde_json::Value)]) -> ScriptBody {
    ScriptBody::Events(
        events
            .iter()
            .map(|(name, data)| ScriptEvent {
                event: Some((*name).to_owned()),
                data: data.clone(),
                id: None,
            })
            .collect(),
    )
}

#[tokio::test]
async fn streams_a_fixture_with_headers_metrics_and_usage() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/tool_use_response.sse"))
            .header("request-id", "req_abc"),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.anthropic_beta = vec!["a-1".into(), "b-2".into()];
    config.headers.push(("x-extra".into(), "yes".into()));
    let client = Client::new(config).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(
        got.events,
        fixture_events("anthropic/tool_use_response.sse")
    );
    assert!(stream.is_complete());

    let metrics = stream.metrics();
    assert_eq!(metrics.request_id.as_deref(), Some("req_abc"));
    assert_eq!(metrics.attempts, 1);
    assert_eq!(metrics.http_version, Some("HTTP/1.1"));
    assert_eq!(metrics.events, got.events.len() as u64);
    let file_len =
        std::fs::metadata(repo_root().join("tests/fixtures/anthropic/tool_use_response.sse"))
            .unwrap()
            .len();
    assert_eq!(metrics.bytes_received, file_len);
    assert!(metrics.time_to_first_event.is_some());
    assert!(metrics.time_to_first_token >= metrics.time_to_first_event);
    assert!(metrics.total >= metrics.time_to_first_token);
    let usage = metrics.usage.as_ref().unwrap();
    assert!(usage.contains_key("output_tokens"), "{usage:?}");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.body, BODY);
    assert_eq!(request.header("x-api-key"), Some("test-key"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("anthropic-beta"), Some("a-1,b-2"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(request.header("x-extra"), Some("yes"));
    assert_eq!(request.header("authorization"), None);
}

#[tokio::test]
async fn speaks_openai_chat_with_a_bearer_token_and_ends_at_done() {
    let name = "openai-chat/173417d55340.sse";
    let server = serve(&script(vec![ScriptedResponse::ok(fixture(name))])).await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.events, fixture_events(name));
    assert_eq!(got.events.last().map(|e| e.1.as_str()), Some("[DONE]"));
    assert!(stream.is_complete());
    let request = &server.requests()[0];
    assert_eq!(request.path, "/chat/completions");
    assert_eq!(request.header("authorization"), Some("Bearer test-key"));
    assert_eq!(request.header("x-api-key"), None);
}

#[tokio::test]
async fn retries_429_honouring_retry_after_ms_and_reports_it() {
    let server = serve(&script(vec![
        ScriptedResponse::with_status(
            429,
            ScriptBody::Json(
                json!({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}),
            ),
        )
        .header("retry-after-ms", "40"),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let started = std::time::Instant::now();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert!(started.elapsed() >= Duration::from_millis(40));
    assert_eq!(got.retries.len(), 1);
    let retry = &got.retries[0];
    assert_eq!(retry.attempt, 1);
    assert_eq!(retry.status, Some(429));
    assert_eq!(retry.wait, Duration::from_millis(40));
    assert!(retry.reason.contains("slow down"), "{}", retry.reason);
    assert_eq!(got.events, fixture_events("anthropic/basic_response.sse"));
    assert_eq!(stream.metrics().attempts, 2);
    assert_eq!(stream.metrics().retries, got.retries);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn openai_insufficient_quota_429_is_not_retried_and_says_quota_exceeded() {
    // OpenAI's billing 429 ("You exceeded your current quota"): the account has no credit, so
    // retrying only waits through every backoff. The class is named in `type`, in `code`, or
    // in both; a 200 stream's error event saying it is the same error.
    let message = "You exceeded your current quota, please check your plan and billing details.";
    let bodies = [
        json!({"error":{"message": message,"type":"insufficient_quota","param":null,"code":"insufficient_quota"}}),
        json!({"error":{"message": message,"type":"insufficient_quota","param":null,"code":null}}),
        json!({"error":{"message": message,"type":"requests","param":null,"code":"insufficient_quota"}}),
    ];
    for body in bodies {
        let server = serve(&script(vec![
            ScriptedResponse::with_status(429, ScriptBody::Json(body.clone()))
                .header("retry-after-ms", "5"),
            ScriptedResponse::ok(fixture("openai-chat/173417d55340.sse")),
        ]))
        .await;
        let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.expect("the quota error");
        assert_eq!(error.code(), "quota_exceeded", "{body}: {error:?}");
        assert!(matches!(error, ClientError::QuotaExceeded(_)), "{error:?}");
        assert_eq!(error.status(), Some(429));
        assert!(
            error.to_string().contains("exceeded your current quota"),
            "{error}"
        );
        assert!(got.retries.is_empty(), "{:?}", got.retries);
        assert_eq!(server.requests().len(), 1, "{body}");
    }

    // A plain OpenAI 429 is still retried.
    let server = serve(&script(vec![
        ScriptedResponse::with_status(
            429,
            ScriptBody::Json(json!({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}})),
        )
        .header("retry-after-ms", "5"),
        ScriptedResponse::ok(fixture("openai-chat/173417d55340.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries.len(), 1);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retries_529_and_500_then_succeeds() {
    let server = serve(&script(vec![
        ScriptedResponse::with_status(
            529,
            ScriptBody::Json(
                json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
            ),
        ),
        ScriptedResponse::with_status(500, ScriptBody::Text("boom".into())),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    let statuses: Vec<_> = got.retries.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![Some(529), Some(500)]);
    let attempts: Vec<_> = got.retries.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, vec![1, 2]);
    for retry in &got.retries {
        assert!(retry.wait <= Duration::from_millis(20), "{retry:?}");
    }
    assert_eq!(stream.metrics().attempts, 3);
}

#[tokio::test]
async fn gives_up_after_max_retries_with_the_last_error() {
    let server = serve(&Script {
        responses: vec![
            ScriptedResponse::with_status(503, ScriptBody::Text("down".into()))
                .header("x-request-id", "req_z"),
        ],
        when_exhausted: ferroloop_replay::WhenExhausted::RepeatLast,
    })
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.retry.max_retries = 2;
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.retries.len(), 2);
    let error = got.error.unwrap();
    assert!(matches!(error, ClientError::Server { .. }), "{error:?}");
    assert_eq!(error.status(), Some(503));
    assert_eq!(error.request_id(), Some("req_z"));
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn never_retries_other_client_errors() {
    let cases: Vec<(u16, serde_json::Value, &str)> = vec![
        (
            400,
            json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}}),
            "invalid_request",
        ),
        (
            401,
            json!({"type":"error","error":{"type":"authentication_error","message":"key"}}),
            "authentication",
        ),
        (
            403,
            json!({"type":"error","error":{"type":"permission_error","message":"no"}}),
            "permission",
        ),
        (
            404,
            json!({"type":"error","error":{"type":"not_found_error","message":"model"}}),
            "not_found",
        ),
        (
            413,
            json!({"type":"error","error":{"type":"request_too_large","message":"big"}}),
            "invalid_request",
        ),
    ];
    for (status, body, code) in cases {
        let server = serve(&script(vec![
            ScriptedResponse::with_status(status, ScriptBody::Json(body.clone())),
            ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
        ]))
        .await;
        let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert_eq!(error.code(), code, "{status}: {error:?}");
        assert_eq!(error.status(), Some(status));
        assert!(got.retries.is_empty());
        assert_eq!(server.requests().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn parses_prompt_too_long() {
    let server = serve(&script(vec![ScriptedResponse::with_status(
        400,
        ScriptBody::Json(
            json!({"type":"error","error":{"type":"invalid_request_error",
            "message":"prompt is too long: 201234 tokens > 200000 maximum"}}),
        ),
    )]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let error = client.create(BODY).await.unwrap_err();
    let ClientError::PromptTooLong {
        tokens,
        limit,
        details,
    } = error
    else {
        panic!("{error:?}")
    };
    assert_eq!((tokens, limit), (Some(201_234), Some(200_000)));
    assert_eq!(details.status, Some(400));
}

#[tokio::test]
async fn x_should_retry_header_overrides_the_status() {
    let server = serve(&script(vec![
        ScriptedResponse::with_status(400, ScriptBody::Text("try again".into()))
            .header("x-should-retry", "true"),
        ScriptedResponse::with_status(503, ScriptBody::Text("do not".into()))
            .header("x-should-retry", "false"),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.retries.len(), 1);
    assert_eq!(got.retries[0].status, Some(400));
    assert_eq!(got.error.unwrap().status(), Some(503));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retries_a_connection_reset_before_headers() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(ScriptBody::Empty).fault(Fault::ResetBeforeHeaders),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries.len(), 1);
    assert_eq!(got.retries[0].status, None);
    assert_eq!(got.events, fixture_events("anthropic/basic_response.sse"));
    assert_eq!(stream.metrics().attempts, 2);
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut config =
        ClientConfig::new(Provider::Anthropic).with_base_url(format!("http://127.0.0.1:{port}"));
    config.retry.max_retries = 1;
    config.retry.base_delay = Duration::from_millis(1);
    config.tls.native_roots = false;
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.retries.len(), 1);
    let error = got.error.unwrap();
    assert!(matches!(error, ClientError::Connection { .. }), "{error:?}");
}

#[tokio::test]
async fn a_disconnect_after_events_is_truncated_not_replayed() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse"))
            .fault(Fault::DisconnectAfter { bytes: 700 }),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    let ClientError::Truncated { partial, cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(!got.events.is_empty());
    assert_eq!(partial.events, got.events.len() as u64);
    assert_eq!(partial.bytes, 700);
    assert_eq!(
        partial.last_event_type.as_deref(),
        got.events.last().map(|e| e.0.as_str())
    );
    assert!(
        matches!(**cause, ClientError::Connection { .. }),
        "{cause:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_disconnect_before_the_first_event_is_retried() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse"))
            .fault(Fault::DisconnectAfter { bytes: 10 }),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries.len(), 1);
    assert_eq!(got.events, fixture_events("anthropic/basic_response.sse"));
    assert_eq!(stream.metrics().attempts, 2);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_stall_is_noticed_then_times_out_as_idle() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")).fault(Fault::StallAfter {
            bytes: 700,
            ms: 3000,
        }),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.timeouts.stall_notice = Duration::from_millis(80);
    config.timeouts.idle = Duration::from_millis(250);
    let client = Client::new(config).unwrap();
    // Without the idle timeout the stall would end after 3 s and the stream complete: the
    // truncation below is what shows the timeout cut it.
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.stalls.len(), 1);
    assert!(got.stalls[0] >= Duration::from_millis(80));
    let error = got.error.unwrap();
    let ClientError::Truncated { cause, .. } = &error else {
        panic!("{error:?}")
    };
    let ClientError::Timeout { which, elapsed, .. } = **cause else {
        panic!("{cause:?}")
    };
    assert_eq!(which, TimeoutKind::Idle);
    assert!(elapsed >= Duration::from_millis(250));
}

#[tokio::test]
async fn a_stall_shorter_than_the_idle_timeout_is_survived() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")).fault(Fault::StallAfter {
            bytes: 700,
            ms: 150,
        }),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.timeouts.stall_notice = Duration::from_millis(50);
    config.timeouts.idle = Duration::from_millis(1000);
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.stalls.len(), 1);
    assert_eq!(got.events, fixture_events("anthropic/basic_response.sse"));
}

#[tokio::test]
async fn no_first_event_in_time_is_a_first_event_timeout() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse"))
            .fault(Fault::StallAfter { bytes: 0, ms: 3000 }),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.timeouts.first_event = Duration::from_millis(150);
    config.retry.max_retries = 0;
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    let ClientError::Timeout { which, elapsed, .. } = error else {
        panic!("{error:?}")
    };
    assert_eq!(which, TimeoutKind::FirstEvent);
    assert!(elapsed >= Duration::from_millis(150));
}

#[tokio::test]
async fn slow_headers_are_a_first_byte_timeout() {
    let mut slow = ScriptedResponse::ok(fixture("anthropic/basic_response.sse"));
    slow.headers_delay_ms = 3000;
    let server = serve(&script(vec![slow])).await;
    let mut config = config(Provider::Anthropic, &server);
    config.timeouts.first_byte = Duration::from_millis(150);
    config.retry.max_retries = 0;
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert!(
        matches!(
            error,
            ClientError::Timeout {
                which: TimeoutKind::FirstByte,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_total_timeout_bounds_a_dripping_stream() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")).chunked(1, 5),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.timeouts.total = Duration::from_millis(300);
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert!(
        matches!(
            error.root(),
            ClientError::Timeout {
                which: TimeoutKind::Total,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_one_byte_drip_yields_the_same_events() {
    let name = "anthropic/tool_use_response.sse";
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture(name)).chunked(1, 0),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.events, fixture_events(name));
    assert!(stream.is_complete());
}

#[tokio::test]
async fn a_mid_stream_error_event_is_a_typed_error() {
    let start = json!({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":1}}});
    let overloaded =
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
    let server = serve(&script(vec![
        ScriptedResponse::ok(anthropic_events(&[
            ("message_start", start),
            ("error", overloaded.clone()),
        ]))
        .header("request-id", "req_mid"),
        ScriptedResponse::ok(anthropic_events(&[("error", overloaded)])),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.events.len(), 1);
    let error = got.error.unwrap();
    assert_eq!(error.code(), "stream_truncated");
    assert_eq!(error.root().code(), "overloaded");
    assert_eq!(error.request_id(), Some("req_mid"));
    assert_eq!(server.requests().len(), 1, "an error event is not replayed");

    // The same error as the very first event: no partial message, the error itself (retried
    // when retries are allowed: see `a_transient_error_as_the_first_event_is_retried_...`).
    let mut config = config(Provider::Anthropic, &server);
    config.retry.max_retries = 0;
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.events.is_empty());
    assert!(
        matches!(got.error, Some(ClientError::Overloaded { .. })),
        "{:?}",
        got.error
    );
}

#[tokio::test]
async fn malformed_json_in_a_data_line_passes_the_transport_untouched() {
    // The transport does not parse event JSON (the decoder does, and reports it there); the
    // bytes must arrive exactly as sent.
    let server = serve(&script(vec![ScriptedResponse::ok(ScriptBody::Text(
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"x\"\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
    ))]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(
        got.events[0].1,
        "{\"type\":\"content_block_delta\",\"delta\":{\"text\":\"x\""
    );
}

#[tokio::test]
async fn an_ended_stream_without_its_final_event_is_truncated() {
    let server = serve(&script(vec![ScriptedResponse::ok(ScriptBody::Text(
        "event: ping\ndata: {\"type\":\"ping\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n"
            .into(),
    ))]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.events.len(), 2);
    let error = got.error.unwrap();
    assert_eq!(error.code(), "stream_truncated");
    assert_eq!(error.root().code(), "protocol");
}

#[tokio::test]
async fn a_json_or_html_body_under_a_generic_content_type_is_not_retried() {
    // A server that ignored `"stream": true` and labels its answer text/plain (or nothing):
    // the same request gets the same answer, each one possibly a billed generation.
    for (body, what) in [
        (
            "\n {\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}",
            "a JSON document",
        ),
        (
            "<html><body>maintenance</body></html>",
            "an HTML or XML page",
        ),
    ] {
        let server = serve(&Script::repeat(ScriptBody::Text(body.into()))).await;
        let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert_eq!(error.code(), "protocol", "{error:?}");
        let text = error.to_string();
        assert!(text.contains(what), "{text}");
        assert!(text.contains("stream"), "{text}");
        assert!(got.retries.is_empty(), "{:?}", got.retries);
        assert_eq!(server.requests().len(), 1);
    }
    // A JSON body carrying a provider error is that error, as an event would be (and, being
    // transient, retried as the event would be).
    let server = serve(&Script::repeat(ScriptBody::Text(
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
    )))
    .await;
    let mut config_once = config(Provider::Anthropic, &server);
    config_once.retry.max_retries = 1;
    let client = Client::new(config_once).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert_eq!(error.code(), "overloaded", "{error:?}");
    assert_eq!(got.retries.len(), 1);
    assert_eq!(server.requests().len(), 2);
    // A body of comments only is still an event stream that broke off: retried.
    let server = serve(&script(vec![
        ScriptedResponse::ok(ScriptBody::Text(": keep-alive\n\n".into())),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries.len(), 1);
}

/// The start of the stream-ended error's message, as it was before bodies were described.
const ENDED_EARLY: &str = "protocol error: the stream ended before the provider's final event";

#[tokio::test]
async fn a_plain_text_page_in_place_of_the_stream_is_named_in_the_error() {
    // A proxy's 200 error page under text/plain: no SSE field line at all. Still a broken
    // stream, retried (text/plain is let through for servers that stream real events under
    // it), but the error now says what came instead of only that the stream ended early.
    let page = "Service Unavailable: the upstream is down\n";
    let server = serve(&Script::repeat(ScriptBody::Text(page.into()))).await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert_eq!(error.code(), "protocol", "{error:?}");
    let text = error.to_string();
    assert_eq!(
        text,
        format!(
            "{ENDED_EARLY}: the response (200, text/plain) held no event: \
             \"Service Unavailable: the upstream is down\""
        )
    );
    assert!(!got.retries.is_empty());
    assert_eq!(server.requests().len(), got.retries.len() + 1);
    for retry in &got.retries {
        assert_eq!(retry.reason, text);
    }

    // Without a content type, a long page is cut to a short excerpt, its control characters
    // shown, not written raw into the message.
    let body = format!(
        "\u{1b}[31mBad gateway\u{1b}[0m\r\nupstream: {}\n",
        "x".repeat(100_000)
    );
    let response = format!("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n{body}");
    let (url, requests) = raw_server_closing(vec![response.into_bytes()]).await;
    let mut once = raw_config(url);
    once.retry.max_retries = 1;
    let client = Client::new(once).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert_eq!(error.code(), "protocol", "{error:?}");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "{ENDED_EARLY}: the response (200, no content type) held no event: \
             \"\\u{{1b}}[31mBad gateway\\u{{1b}}[0m\\r\\nupstream: xxx"
        )),
        "{text}"
    );
    assert!(text.len() < 600, "{} bytes: {text}", text.len());
    // Cut to its excerpt, and marked so.
    assert!(text.ends_with("xxx…\""), "{text}");
    assert_eq!(got.retries.len(), 1);
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 2);

    // A stream that shows a field line, or is labelled an event stream, is a stream that broke
    // off: today's message. Comments do not count as a field line.
    for (response, expected) in [
        (
            ScriptedResponse::ok(ScriptBody::Text("event: message_start\n".into())),
            ENDED_EARLY.to_owned(),
        ),
        (
            ScriptedResponse::ok(ScriptBody::Text(": keep-alive\n\nid: 7\n\n".into())),
            ENDED_EARLY.to_owned(),
        ),
        (
            ScriptedResponse::ok(ScriptBody::Text(page.into()))
                .header("content-type", "text/event-stream"),
            ENDED_EARLY.to_owned(),
        ),
        (
            ScriptedResponse::ok(ScriptBody::Text(": keep-alive\n\n".into())),
            format!(
                "{ENDED_EARLY}: the response (200, text/plain) held no event: \": keep-alive\""
            ),
        ),
    ] {
        let server = serve(&script(vec![response])).await;
        let mut once = config(Provider::Anthropic, &server);
        once.retry.max_retries = 0;
        let client = Client::new(once).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert_eq!(error.code(), "protocol", "{error:?}");
        assert_eq!(error.to_string(), expected);
    }
}

#[tokio::test]
async fn reuses_pooled_connections() {
    let server = serve(&Script::repeat(fixture("anthropic/basic_response.sse"))).await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    for _ in 0..3 {
        let (got, _) = collect(client.stream(BODY)).await;
        assert!(got.error.is_none(), "{:?}", got.error);
    }
    assert_eq!(server.requests().len(), 3);
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn dropping_the_stream_aborts_the_connection() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/tool_use_response.sse")).chunked(64, 20),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let mut stream = client.stream(BODY);
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert!(matches!(first, Some(Ok(StreamItem::Event(_)))), "{first:?}");
    drop(stream);
    let aborted = async {
        while server.aborted_bodies() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), aborted)
        .await
        .expect("the server never saw the client go away");
}

#[tokio::test]
async fn create_and_count_tokens_are_non_streaming() {
    let message = json!({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}]});
    let server = serve(&script(vec![
        ScriptedResponse::with_status(529, ScriptBody::Text("busy".into())),
        ScriptedResponse::ok(ScriptBody::Json(message.clone())).header("request-id", "req_c"),
        ScriptedResponse::ok(ScriptBody::Json(json!({"input_tokens": 1234}))),
    ]))
    .await;
    let observed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&observed);
    let mut config = config(Provider::Anthropic, &server);
    config.on_retry = Some(std::sync::Arc::new(
        move |retry: &ferroloop::client::RetryEvent| {
            sink.lock().unwrap().push(retry.clone());
        },
    ));
    let client = Client::new(config).unwrap();
    let response = client.create(BODY).await.unwrap();
    assert_eq!(*observed.lock().unwrap(), response.metrics.retries);
    assert_eq!(response.metrics.retries[0].status, Some(529));
    assert_eq!(response.json().unwrap(), message);
    assert_eq!(response.metrics.attempts, 2);
    assert_eq!(response.metrics.retries.len(), 1);
    assert_eq!(response.metrics.request_id.as_deref(), Some("req_c"));
    assert_eq!(client.count_tokens(BODY).await.unwrap(), 1234);
    let requests = server.requests();
    assert_eq!(requests[1].header("accept"), Some("application/json"));
    assert_eq!(requests[2].path, "/v1/messages/count_tokens");

    let openai = Client::new(self::config(Provider::OpenAiChat, &server)).unwrap();
    assert!(matches!(
        openai.count_tokens(BODY).await,
        Err(ClientError::Config(_))
    ));
}

#[tokio::test]
async fn speaks_http2_with_prior_knowledge() {
    let server = serve(&script(vec![ScriptedResponse::ok(fixture(
        "anthropic/basic_response.sse",
    ))]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.http2_prior_knowledge = true;
    let client = Client::new(config).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.events, fixture_events("anthropic/basic_response.sse"));
    assert_eq!(stream.metrics().http_version, Some("HTTP/2.0"));
    assert_eq!(server.requests()[0].version, "HTTP/2.0");
}

async fn serve_tls(script: &Script) -> ReplayServer {
    ReplayServer::start(
        script,
        &repo_root(),
        ServerOptions {
            tls: true,
            ..ServerOptions::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn negotiates_http2_over_tls_with_a_trusted_self_signed_certificate() {
    let server = serve_tls(&script(vec![
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
        // Small pieces, paced: h2 (rightly) treats a flood of tiny unread DATA frames as abuse.
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")).chunked(8, 1),
    ]))
    .await;
    assert!(server.base_url().starts_with("https://"));
    let mut config = config(Provider::Anthropic, &server);
    config
        .tls
        .extra_roots_der
        .push(server.cert_der().unwrap().to_vec());
    let client = Client::new(config).unwrap();
    for _ in 0..2 {
        let (got, stream) = collect(client.stream(BODY)).await;
        assert!(got.error.is_none(), "{:?} {:?}", got.error, got.retries);
        assert_eq!(got.events, fixture_events("anthropic/basic_response.sse"));
        assert_eq!(stream.metrics().http_version, Some("HTTP/2.0"));
    }
    assert_eq!(server.requests()[0].version, "HTTP/2.0");
    assert_eq!(
        server.connections(),
        1,
        "HTTP/2 multiplexes on one connection"
    );
}

#[tokio::test]
async fn rejects_an_untrusted_certificate_without_retrying() {
    let server = serve_tls(&script(vec![ScriptedResponse::ok(fixture(
        "anthropic/basic_response.sse",
    ))]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert!(matches!(error, ClientError::Connection { .. }), "{error:?}");
    assert!(got.retries.is_empty(), "{:?}", got.retries);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_bad_base_url_is_a_config_error() {
    let config = ClientConfig::new(Provider::Anthropic).with_base_url("not a url");
    assert!(matches!(Client::new(config), Err(ClientError::Config(_))));
}

/// A zero timeout failed every request at once (the total and first-byte ones) or raced the
/// network (the others: a stream whose events arrived in one read got through, any other
/// broke); a host writing 0 most likely meant "no timeout", as Node's and curl's 0 does.
#[tokio::test]
async fn a_zero_timeout_is_a_config_error_naming_it() {
    type Slot = fn(&mut ferroloop::client::Timeouts) -> &mut Duration;
    let slots: [(&str, Slot); 6] = [
        ("connect", |t| &mut t.connect),
        ("first_byte", |t| &mut t.first_byte),
        ("first_event", |t| &mut t.first_event),
        ("idle", |t| &mut t.idle),
        ("stall_notice", |t| &mut t.stall_notice),
        ("total", |t| &mut t.total),
    ];
    for (name, slot) in slots {
        let mut config = ClientConfig::new(Provider::Anthropic);
        *slot(&mut config.timeouts) = Duration::ZERO;
        match Client::new(config) {
            Err(ClientError::Config(message)) => {
                assert!(
                    message.contains(&format!("timeouts.{name} is 0")),
                    "{message}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
        // The shortest positive timeout is the host's call.
        let mut config = ClientConfig::new(Provider::Anthropic);
        *slot(&mut config.timeouts) = Duration::from_nanos(1);
        assert!(Client::new(config).is_ok(), "{name}");
    }
}

#[tokio::test]
async fn goes_through_an_http_proxy_in_absolute_form() {
    let server = serve(&script(vec![ScriptedResponse::ok(fixture(
        "anthropic/basic_response.sse",
    ))]))
    .await;
    // The destination host does not exist: only the proxy (the replay server) is contacted.
    let mut config =
        config(Provider::Anthropic, &server).with_base_url("http://api.example.invalid:81");
    config.proxy.http = Some(server.base_url().replace("http://", "http://user:pw@"));
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    let request = &server.requests()[0];
    assert_eq!(request.uri, "http://api.example.invalid:81/v1/messages");
    // base64("user:pw")
    assert_eq!(
        request.header("proxy-authorization"),
        Some("Basic dXNlcjpwdw==")
    );
}

/// A CONNECT proxy on loopback that only tunnels to 127.0.0.1 and records request lines.
async fn connect_proxy() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let log = std::sync::Arc::clone(&log);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let line = head.lines().next().unwrap_or_default().to_owned();
                log.lock().unwrap().push(line.clone());
                let target = line.split(' ').nth(1).unwrap_or_default().to_owned();
                let port = target.rsplit(':').next().unwrap_or_default().to_owned();
                let Ok(mut upstream) =
                    tokio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await
                else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                let _ = client
                    .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (format!("http://user:pw@{addr}"), seen)
}

#[tokio::test]
async fn tunnels_https_through_a_connect_proxy() {
    let server = serve_tls(&Script::repeat(fixture("anthropic/basic_response.sse"))).await;
    let (proxy, seen) = connect_proxy().await;
    let port = server.addr().port();
    let mut config =
        config(Provider::Anthropic, &server).with_base_url(format!("https://localhost:{port}"));
    config
        .tls
        .extra_roots_der
        .push(server.cert_der().unwrap().to_vec());
    config.proxy.https = Some(proxy);
    let client = Client::new(config).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.events, fixture_events("anthropic/basic_response.sse"));
    assert_eq!(stream.metrics().http_version, Some("HTTP/2.0"));
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![format!("CONNECT localhost:{port} HTTP/1.1")]
    );

    // NO_PROXY sends the same request directly.
    let mut direct = self::config(Provider::Anthropic, &server)
        .with_base_url(format!("https://localhost:{port}"));
    direct
        .tls
        .extra_roots_der
        .push(server.cert_der().unwrap().to_vec());
    direct.proxy.https = Some("http://127.0.0.1:9".into());
    direct.proxy.no_proxy = vec!["localhost".into()];
    let client = Client::new(direct).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn the_shared_example_script_serves_a_multi_turn_conversation() {
    let text =
        std::fs::read_to_string(repo_root().join("tests/replay/overloaded_then_tool_use.json"))
            .unwrap();
    let server = serve(&Script::from_json(&text).unwrap()).await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();

    let (turn, stream) = collect(client.stream(BODY)).await;
    assert!(turn.error.is_none(), "{:?}", turn.error);
    assert_eq!(turn.retries.len(), 1);
    assert_eq!(turn.retries[0].wait, Duration::from_millis(10));
    assert_eq!(
        turn.events,
        fixture_events("anthropic/tool_use_response.sse")
    );
    assert_eq!(stream.metrics().request_id.as_deref(), Some("req_replay_2"));

    let (turn, stream) = collect(client.stream(BODY)).await;
    assert!(turn.error.is_none(), "{:?}", turn.error);
    assert_eq!(turn.events, fixture_events("anthropic/basic_response.sse"));
    assert_eq!(stream.metrics().request_id.as_deref(), Some("req_replay_3"));

    let (turn, _) = collect(client.stream(BODY)).await;
    let error = turn.error.unwrap();
    assert_eq!(error.status(), Some(410));
    assert_eq!(
        error.details().and_then(|d| d.error_type.as_deref()),
        Some("replay_exhausted")
    );
}

// ---- Decoded streams (client + SSE + provider decoder) ----

use ferroloop::client::{MessageItem, MessageStream};
use ferroloop::decode::{DecodeEvent, StreamDecoder};

#[derive(Debug, Default)]
struct Decoded {
    events: Vec<DecodeEvent>,
    retries: usize,
    message: Option<serde_json::Value>,
    error: Option<ClientError>,
}

async fn collect_decoded(stream: MessageStream) -> Decoded {
    collect_decoded_keeping(stream).await.0
}

/// [`collect_decoded`], giving the stream back (for its metrics).
async fn collect_decoded_keeping(mut stream: MessageStream) -> (Decoded, MessageStream) {
    let mut out = Decoded::default();
    let run = async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(MessageItem::Event(event)) => out.events.push(event),
                Ok(MessageItem::Retry(_)) => out.retries += 1,
                Ok(MessageItem::Stalled { .. }) => {}
                Ok(MessageItem::Message(message)) => {
                    assert!(out.message.is_none());
                    out.message = Some(message);
                }
                Err(error) => {
                    out.error = Some(error);
                    assert!(stream.next().await.is_none());
                    break;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("stream did not end in time");
    (out, stream)
}

fn decode_offline(provider: Provider, path: &str) -> (Vec<DecodeEvent>, serde_json::Value) {
    let bytes = std::fs::read(repo_root().join("tests/fixtures").join(path)).unwrap();
    let mut decoder = StreamDecoder::for_provider(provider);
    let events = decoder.feed(bytes::Bytes::from(bytes)).unwrap();
    (events, decoder.finish().unwrap())
}

#[tokio::test]
async fn decodes_a_streamed_tool_use_into_the_final_message() {
    let name = "anthropic/tool_use_response.sse";
    let server = serve(&script(vec![
        ScriptedResponse::with_status(529, ScriptBody::Text("busy".into())),
        ScriptedResponse::ok(fixture(name)).chunked(7, 0),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let got = collect_decoded(client.stream_message(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries, 1);
    let (events, message) = decode_offline(Provider::Anthropic, name);
    assert_eq!(got.events, events);
    assert_eq!(got.message.as_ref(), Some(&message));
    assert!(
        got.events
            .iter()
            .any(|event| matches!(event, DecodeEvent::ToolUseReady { .. }))
    );
}

#[tokio::test]
async fn decodes_openai_chat() {
    let name = "openai-chat/4cc50a6135d2.sse";
    let server = serve(&script(vec![ScriptedResponse::ok(fixture(name))])).await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let got = collect_decoded(client.stream_message(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    let (events, message) = decode_offline(Provider::OpenAiChat, name);
    assert_eq!(got.events, events);
    assert_eq!(got.message, Some(message));
}

#[tokio::test]
async fn malformed_json_is_a_protocol_error_with_the_partial_message() {
    let start = json!({"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":1,"output_tokens":1}}});
    let block =
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}});
    let delta =
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}});
    let mut events = match anthropic_events(&[
        ("message_start", start),
        ("content_block_start", block),
        ("content_block_delta", delta),
    ]) {
        ScriptBody::Events(events) => events,
        _ => unreachable!(),
    };
    events.push(ScriptEvent {
        event: Some("content_block_delta".into()),
        data: serde_json::Value::String("{\"type\":\"content_block_delta\",\"index\":0,".into()),
        id: None,
    });
    let server = serve(&script(vec![ScriptedResponse::ok(ScriptBody::Events(
        events,
    ))]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let got = collect_decoded(client.stream_message(BODY)).await;
    assert!(got.message.is_none());
    let error = got.error.unwrap();
    let ClientError::Truncated { partial, cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(matches!(**cause, ClientError::Protocol { .. }), "{cause:?}");
    let message = partial.message.as_ref().unwrap();
    assert_eq!(message["id"], "msg_x");
    assert_eq!(message["content"][0]["text"], "Hel");
    assert!(
        got.events
            .iter()
            .any(|event| matches!(event, DecodeEvent::TextDelta { text, .. } if text == "Hel"))
    );
}

#[tokio::test]
async fn a_disconnect_mid_message_carries_the_partial_message() {
    let name = "anthropic/tool_use_response.sse";
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture(name)).fault(Fault::DisconnectAfter { bytes: 1200 }),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let got = collect_decoded(client.stream_message(BODY)).await;
    let error = got.error.unwrap();
    let ClientError::Truncated { partial, cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(
        matches!(**cause, ClientError::Connection { .. }),
        "{cause:?}"
    );
    let message = partial.message.as_ref().unwrap();
    assert_eq!(message["type"], "message");
    assert!(!got.events.is_empty());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_mid_stream_error_event_in_a_decoded_stream_keeps_the_partial_message() {
    let start = json!({"type":"message_start","message":{"id":"msg_e","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":1,"output_tokens":1}}});
    let overloaded =
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
    let server = serve(&script(vec![ScriptedResponse::ok(anthropic_events(&[
        ("message_start", start),
        ("error", overloaded),
    ]))]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let got = collect_decoded(client.stream_message(BODY)).await;
    let error = got.error.unwrap();
    assert_eq!(error.root().code(), "overloaded");
    let ClientError::Truncated { partial, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(partial.message.as_ref().unwrap()["id"], "msg_e");
}

// ---- The client as the agent loop's model ----

use ferroloop::agent::{Model, ModelError, ModelEvent};

async fn model_events(client: &Client, request: serde_json::Value) -> Vec<ModelEvent> {
    let stream = Model::stream(client, request);
    tokio::time::timeout(Duration::from_secs(20), stream.collect::<Vec<_>>())
        .await
        .expect("model stream did not end in time")
}

#[tokio::test]
async fn the_client_is_an_agent_model() {
    let name = "anthropic/tool_use_response.sse";
    let server = serve(&script(vec![
        ScriptedResponse::with_status(429, ScriptBody::Text("slow".into()))
            .header("retry-after-ms", "5"),
        ScriptedResponse::ok(fixture(name)).header("request-id", "req_model"),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let events = model_events(
        &client,
        json!({"model": "m", "max_tokens": 8, "messages": []}),
    )
    .await;
    assert!(
        matches!(
            events.first(),
            Some(ModelEvent::Retry {
                attempt: 2,
                status: Some(429),
                code: Some("rate_limited"),
                overloaded: false,
                ..
            })
        ),
        "{events:?}"
    );
    let (decoded, message) = decode_offline(Provider::Anthropic, name);
    let got: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::Decoded(event) => Some(event.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(got, decoded);
    let Some(ModelEvent::Completed {
        message: got_message,
        request_id,
        time_to_first_token,
    }) = events.last()
    else {
        panic!("{:?}", events.last())
    };
    assert_eq!(got_message, &message);
    assert_eq!(request_id.as_deref(), Some("req_model"));
    assert!(time_to_first_token.is_some());
    let sent: serde_json::Value = serde_json::from_str(&server.requests()[1].body).unwrap();
    assert_eq!(sent["stream"], true);
}

/// A request's `betas` (the SDKs' parameter) travels as the `anthropic-beta` header, after the
/// configured flags, and never in the body (which the API would refuse with it).
#[tokio::test]
async fn a_requests_betas_go_in_the_anthropic_beta_header() {
    let name = "anthropic/tool_use_response.sse";
    let server = serve(&script(vec![
        ScriptedResponse::ok(fixture(name)),
        ScriptedResponse::ok(fixture(name)),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.anthropic_beta = vec!["a-1".into()];
    let client = Client::new(config).unwrap();
    let request = json!({
        "model": "m", "max_tokens": 8, "messages": [],
        "betas": ["thinking-binding-controls-2026-08-01", "a-1"],
    });
    let events = model_events(&client, request).await;
    assert!(
        matches!(events.last(), Some(ModelEvent::Completed { .. })),
        "{events:?}"
    );
    let events = model_events(
        &client,
        json!({"model": "m", "max_tokens": 8, "messages": []}),
    )
    .await;
    assert!(matches!(events.last(), Some(ModelEvent::Completed { .. })));
    let requests = server.requests();
    assert_eq!(
        requests[0].header("anthropic-beta"),
        Some("a-1,thinking-binding-controls-2026-08-01")
    );
    let sent: serde_json::Value = serde_json::from_str(&requests[0].body).unwrap();
    assert!(sent.get("betas").is_none(), "{sent}");
    // Per request only: the next request has the configured flags alone.
    assert_eq!(requests[1].header("anthropic-beta"), Some("a-1"));
}

#[tokio::test]
async fn model_failures_map_to_the_loop_classes() {
    let too_long = json!({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 5 tokens > 4 maximum"}});
    let server = serve(&script(vec![
        ScriptedResponse::with_status(400, ScriptBody::Json(too_long)),
        ScriptedResponse::ok(fixture("anthropic/tool_use_response.sse"))
            .fault(Fault::DisconnectAfter { bytes: 1200 }),
        ScriptedResponse::with_status(401, ScriptBody::Text("no".into())),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let request = json!({"model": "m", "max_tokens": 8, "messages": []});

    let events = model_events(&client, request.clone()).await;
    assert!(
        matches!(
            events.last(),
            Some(ModelEvent::Failed(ModelError::PromptTooLong { .. }))
        ),
        "{events:?}"
    );

    let events = model_events(&client, request.clone()).await;
    let Some(ModelEvent::Failed(ModelError::Truncated { partial, .. })) = events.last() else {
        panic!("{:?}", events.last())
    };
    assert_eq!(partial["type"], "message");

    let events = model_events(&client, request).await;
    assert!(
        matches!(
            events.last(),
            Some(ModelEvent::Failed(ModelError::Other { .. }))
        ),
        "{events:?}"
    );
    assert_eq!(events.len(), 1);
}

// ---- Issue 6 gaps: connect timeout, every retryable status, every retry-after form ----

#[tokio::test]
async fn a_connect_that_hangs_is_a_connect_timeout() {
    // A listener that never accepts, with its accept queue full: Linux then drops every further
    // SYN (no SYN-ACK, no RST), so a connect hangs until the client's own timeout.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut queued = Vec::new();
    loop {
        match tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            Ok(Ok(stream)) => queued.push(stream),
            Ok(Err(error)) => panic!("filling the accept queue: {error}"),
            Err(_) => break,
        }
        assert!(queued.len() < 64, "the accept queue never filled");
    }

    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(format!("http://{addr}"));
    config.tls.native_roots = false;
    config.timeouts.connect = Duration::from_millis(300);
    config.retry.max_retries = 1;
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(5);
    let client = Client::new(config.clone()).unwrap();
    let started = std::time::Instant::now();
    let (got, _) = collect(client.stream(BODY)).await;
    let elapsed = started.elapsed();
    let error = got.error.unwrap();
    let ClientError::Timeout {
        which,
        elapsed: reported,
        ..
    } = error
    else {
        panic!("{error:?}")
    };
    assert_eq!(which, TimeoutKind::Connect);
    assert!(reported >= config.timeouts.connect, "{reported:?}");
    // Connect timeouts are retried like any connection failure.
    assert_eq!(got.retries.len(), 1);
    assert_eq!(got.retries[0].status, None);
    // The configured connect timeout cut both attempts: the default one (30 s) or the
    // system's would take far longer. (A bound, not a measurement: a loaded machine may add
    // scheduling delay, never tens of seconds.)
    let bound = Duration::from_secs(10);
    assert!(elapsed < bound, "{elapsed:?} >= {bound:?}");
    assert!(elapsed >= config.timeouts.connect * 2, "{elapsed:?}");
    drop(queued);
}

#[tokio::test]
async fn retries_408_and_409_honouring_retry_after_in_seconds_and_as_a_date() {
    // Three seconds ahead: after the first retry's one-second wait (and a slow machine's
    // delays) the date is still in the future, so the second wait is a real one.
    let in_three_seconds =
        httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3));
    let server = serve(&script(vec![
        ScriptedResponse::with_status(408, ScriptBody::Text("timeout".into()))
            .header("retry-after", "1"),
        ScriptedResponse::with_status(409, ScriptBody::Text("conflict".into()))
            .header("retry-after", &in_three_seconds),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let started = std::time::Instant::now();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    let statuses: Vec<_> = got.retries.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![Some(408), Some(409)]);
    assert_eq!(got.retries[0].wait, Duration::from_secs(1));
    // An HTTP date has whole seconds: three seconds ahead, minus the part of the current
    // second already gone, minus the time to get here (the first retry's second included).
    let date_wait = got.retries[1].wait;
    assert!(
        date_wait > Duration::ZERO && date_wait <= Duration::from_secs(2),
        "{date_wait:?}"
    );
    assert!(started.elapsed() >= Duration::from_secs(1) + date_wait);
    assert_eq!(stream.metrics().attempts, 3);
    assert_eq!(got.events, fixture_events("anthropic/basic_response.sse"));
}

#[tokio::test]
async fn streams_openai_responses_to_response_completed() {
    let path = "tests/decode/streams/openai-responses/text_and_function_call.sse";
    let server = serve(&script(vec![
        ScriptedResponse::with_status(500, ScriptBody::Text("boom".into())),
        ScriptedResponse::ok(ScriptBody::Fixture(PathBuf::from(path))).chunked(100, 0),
    ]))
    .await;
    let client = Client::new(config(Provider::OpenAiResponses, &server)).unwrap();
    let got = collect_decoded(client.stream_message(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries, 1);
    let bytes = std::fs::read(repo_root().join(path)).unwrap();
    let mut decoder = StreamDecoder::for_provider(Provider::OpenAiResponses);
    let events = decoder.feed(bytes::Bytes::from(bytes)).unwrap();
    assert_eq!(got.events, events);
    assert_eq!(got.message, Some(decoder.finish().unwrap()));
    let request = &server.requests()[1];
    assert_eq!(request.path, "/responses");
    assert_eq!(request.header("authorization"), Some("Bearer test-key"));
}

// ---- The event size cap (a hostile endless event) ----

/// A loopback HTTP/1.1 server that answers one request with a `message_start` event and then
/// one event that never ends: `data: xxxx…` generated 64 KiB at a time until the client goes
/// away. Returns the base URL and a receiver of the body bytes written.
async fn endless_event_server() -> (String, tokio::sync::oneshot::Receiver<u64>) {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (written_sender, written) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        assert!(read_request_head(&mut socket).await);
        let start = json!({"type":"message_start","message":{"id":"msg_big","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":1,"output_tokens":1}}});
        let prelude = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
             event: message_start\ndata: {start}\n\nevent: content_block_delta\ndata: "
        );
        socket.write_all(prelude.as_bytes()).await.unwrap();
        let block = vec![b'x'; 64 * 1024];
        let mut total = 0u64;
        while socket.write_all(&block).await.is_ok() {
            total += block.len() as u64;
        }
        let _ = written_sender.send(total);
    });
    (format!("http://{addr}"), written)
}

#[tokio::test]
async fn an_endless_event_ends_in_event_too_large_with_bounded_reading() {
    const LIMIT: usize = 1 << 20;
    let (url, written) = endless_event_server().await;
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(url);
    config.tls.native_roots = false;
    config.max_event_bytes = Some(LIMIT);
    let client = Client::new(config).unwrap();
    let mut stream = client.stream_message(BODY);
    let mut events = 0;
    let error = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match stream.next().await {
                Some(Ok(MessageItem::Event(_))) => events += 1,
                Some(Ok(other)) => panic!("{other:?}"),
                Some(Err(error)) => return error,
                None => panic!("the stream ended without an error"),
            }
        }
    })
    .await
    .expect("the endless event was read for ever");
    assert!(stream.next().await.is_none());
    assert!(events > 0);
    let ClientError::Truncated { partial, cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(
        matches!(**cause, ClientError::EventTooLarge { limit: LIMIT, .. }),
        "{cause:?}"
    );
    assert_eq!(error.root().code(), "event_too_large");
    assert_eq!(partial.message.as_ref().unwrap()["id"], "msg_big");
    // The client stopped within one read of the limit (hyper reads at most a few hundred KiB
    // at a time): it neither buffered nor drained the rest of the event.
    let received = stream.metrics().bytes_received;
    assert!(received > LIMIT as u64, "{received}");
    assert!(received < (LIMIT as u64) * 2, "{received}");
    drop(stream);
    // The server sees the connection go away and stops generating.
    let written = tokio::time::timeout(Duration::from_secs(10), written)
        .await
        .expect("the server kept writing")
        .unwrap();
    assert!(written >= received - 4096, "{written} {received}");

    // A limit below the first event's size: the error itself, not truncated, and not retried.
    let (url, _written) = endless_event_server().await;
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(url);
    config.tls.native_roots = false;
    config.max_event_bytes = Some(100);
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.events.is_empty());
    assert!(got.retries.is_empty());
    let error = got.error.unwrap();
    assert!(
        matches!(error, ClientError::EventTooLarge { limit: 100, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("100-byte limit"), "{error}");
}

#[tokio::test]
async fn no_event_after_an_oversized_one_in_the_same_frame_is_delivered() {
    // One small body, so the events before and after the oversized one arrive in one frame and
    // are parsed in one batch.
    let start = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}"#;
    let big = format!(
        r#"{{"type":"content_block_start","index":0,"content_block":{{"type":"text","text":"{}"}}}}"#,
        "x".repeat(4000)
    );
    let after =
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
    let body = format!(
        "event: message_start\ndata: {start}\n\nevent: content_block_start\ndata: {big}\n\nevent: content_block_start\ndata: {after}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
    );
    let server = serve(&Script::repeat(ScriptBody::Text(body))).await;
    let mut config = config(Provider::Anthropic, &server);
    config.max_event_bytes = Some(1000);
    let client = Client::new(config).unwrap();

    let (got, _) = collect(client.stream(BODY)).await;
    let types: Vec<&str> = got.events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["message_start"]);
    let error = got.error.unwrap();
    assert_eq!(error.code(), "stream_truncated");
    assert_eq!(error.root().code(), "event_too_large");

    let got = collect_decoded(client.stream_message(BODY)).await;
    assert!(
        matches!(got.events.as_slice(), [DecodeEvent::MessageStart { .. }]),
        "{:?}",
        got.events
    );
    let error = got.error.unwrap();
    let ClientError::Truncated { partial, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(error.root().code(), "event_too_large");
    assert_eq!(partial.events, 1);
    assert_eq!(partial.last_event_type.as_deref(), Some("message_start"));
    assert_eq!(partial.message.as_ref().unwrap()["id"], "msg_1");
}

/// A script whose every request gets `response` (so a wrongly retried request shows up as
/// more than one request).
fn always(response: ScriptedResponse) -> Script {
    Script {
        responses: vec![response],
        when_exhausted: ferroloop_replay::WhenExhausted::RepeatLast,
    }
}

#[tokio::test]
async fn a_200_that_is_json_or_html_is_a_clear_error_and_not_retried() {
    // A gateway that ignored `"stream": true` answers with the whole message as JSON; a
    // captive portal or SSO proxy answers with a login page. Neither is an event stream, and
    // sending the request again (a billed generation) would get the same answer.
    let message = json!({"id":"msg_1","type":"message","role":"assistant","content":[]});
    let cases = [
        (
            ScriptedResponse::ok(ScriptBody::Json(message)),
            "application/json",
        ),
        (
            ScriptedResponse::ok(ScriptBody::Text(
                "<!DOCTYPE html>\r\n<html><body>Sign in</body></html>\n".into(),
            ))
            .header("content-type", "text/html; charset=utf-8"),
            "text/html",
        ),
    ];
    for (response, content_type) in cases {
        let server = serve(&always(response.header("request-id", "req_ct"))).await;
        let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert!(matches!(error, ClientError::Protocol { .. }), "{error:?}");
        let text = error.to_string();
        assert!(text.contains(content_type), "{text}");
        assert!(text.contains("event stream"), "{text}");
        // The body's excerpt is quoted, its line breaks escaped: one line in a log.
        assert!(!text.contains('\n') && !text.contains('\r'), "{text}");
        assert_eq!(error.request_id(), Some("req_ct"));
        assert!(got.retries.is_empty(), "{:?}", got.retries);
        assert_eq!(server.requests().len(), 1, "{content_type}");
    }
}

#[tokio::test]
async fn a_cut_excerpt_of_an_unexpected_body_says_it_was_cut() {
    // An excerpt ended where it was cut without a sign of it: "Service Unav" read as the
    // page's whole text. A cut excerpt ends with "…"; a whole one does not.
    let long = format!("<html><body>{}</body></html>", "Sign in ".repeat(100));
    for (body, marked) in [
        (long.clone(), true),
        ("<html><body>Sign in</body></html>".to_owned(), false),
    ] {
        let server = serve(&always(
            ScriptedResponse::ok(ScriptBody::Text(body)).header("content-type", "text/html"),
        ))
        .await;
        let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let text = got.error.unwrap().to_string();
        assert_eq!(text.ends_with("…\""), marked, "{text}");
        assert!(text.ends_with("\""), "{text}");
    }

    // An unlabelled plain page whose text starts late in the kept bytes (after a run of
    // blank space): the excerpt stops at the kept bytes, mid-word, and says so.
    let body = format!(
        "{}Service Unavailable: the upstream is down\n",
        " ".repeat(790)
    );
    let response = format!("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n{body}");
    let (url, _requests) = raw_server_closing(vec![response.into_bytes()]).await;
    let mut once = raw_config(url);
    once.retry.max_retries = 0;
    let client = Client::new(once).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let text = got.error.unwrap().to_string();
    assert_eq!(
        text,
        format!(
            "{ENDED_EARLY}: the response (200, no content type) held no event: \"Service Un…\""
        )
    );
}

#[tokio::test]
async fn a_200_json_error_body_is_classified_like_an_error_event() {
    let server = serve(&always(ScriptedResponse::ok(ScriptBody::Json(
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
    ))))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.retry.max_retries = 0;
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert_eq!(error.code(), "overloaded", "{error:?}");
    assert_eq!(
        error.details().map(|details| details.message.as_str()),
        Some("Overloaded")
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_compressed_event_stream_is_a_clear_error_and_not_retried() {
    // Nothing asked for compression; a server that compresses anyway sends bytes the event
    // parser cannot read.
    let server = serve(&always(
        ScriptedResponse::ok(ScriptBody::Text("\u{1f}\u{8b}\u{8}garbage".into()))
            .header("content-type", "text/event-stream")
            .header("content-encoding", "gzip"),
    ))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert!(matches!(error, ClientError::Protocol { .. }), "{error:?}");
    assert!(error.to_string().contains("gzip"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn openai_context_length_exceeded_is_prompt_too_long_whatever_the_message() {
    // The Responses API says so only in `code`; its message names no "maximum context length".
    let server = serve(&script(vec![ScriptedResponse::with_status(
        400,
        ScriptBody::Json(json!({"error": {
            "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}})),
    )]))
    .await;
    let client = Client::new(config(Provider::OpenAiResponses, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    let ClientError::PromptTooLong {
        tokens,
        limit,
        details,
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!((*tokens, *limit), (None, None));
    assert_eq!(details.error_type.as_deref(), Some("invalid_request_error"));
    assert!(
        details.message.starts_with("Your input exceeds"),
        "{details:?}"
    );
}

#[tokio::test]
async fn error_bodies_of_other_json_shapes_yield_their_message() {
    let cases = [
        // vLLM and other OpenAI-compatible servers.
        (
            json!({"object": "error", "message": "The model `x` does not exist.",
                   "type": "NotFoundError", "param": null, "code": 404}),
            "The model `x` does not exist.",
            Some("NotFoundError"),
        ),
        // Gateways that put a bare string in `error`.
        (json!({"error": "model not found"}), "model not found", None),
        // FastAPI-style servers.
        (
            json!({"detail": "Not authenticated"}),
            "Not authenticated",
            None,
        ),
    ];
    for (body, message, error_type) in cases {
        let server = serve(&script(vec![ScriptedResponse::with_status(
            404,
            ScriptBody::Json(body.clone()),
        )]))
        .await;
        let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert_eq!(error.code(), "not_found", "{error:?}");
        let details = error.details().unwrap();
        assert_eq!(details.message, message, "{body}");
        assert_eq!(details.error_type.as_deref(), error_type, "{body}");
    }
}

#[tokio::test]
async fn extra_headers_replace_the_defaults_of_the_same_name() {
    let server = serve(&Script::repeat(fixture("anthropic/basic_response.sse"))).await;
    let mut config = config(Provider::Anthropic, &server);
    config.headers = vec![
        ("User-Agent".into(), "my-app/2".into()),
        ("anthropic-version".into(), "2099-01-01".into()),
        ("x-api-key".into(), "gateway-key".into()),
        ("x-tag".into(), "a".into()),
        ("x-tag".into(), "b".into()),
    ];
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    let request = &server.requests()[0];
    let values = |name: &str| -> Vec<&str> {
        request
            .headers
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .collect()
    };
    assert_eq!(values("user-agent"), ["my-app/2"]);
    assert_eq!(values("anthropic-version"), ["2099-01-01"]);
    assert_eq!(values("x-api-key"), ["gateway-key"]);
    // A name the defaults do not set keeps every value given.
    assert_eq!(values("x-tag"), ["a", "b"]);
}

#[tokio::test]
async fn a_proxy_without_a_scheme_is_an_http_proxy() {
    // `HTTPS_PROXY=proxy.corp:3128` is common; curl reads it as http://.
    let server = serve(&script(vec![ScriptedResponse::ok(fixture(
        "anthropic/basic_response.sse",
    ))]))
    .await;
    let mut config =
        config(Provider::Anthropic, &server).with_base_url("http://api.example.invalid:81");
    config.proxy.http = Some(format!("user:pw@{}", server.addr()));
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    let request = &server.requests()[0];
    assert_eq!(request.uri, "http://api.example.invalid:81/v1/messages");
    assert_eq!(
        request.header("proxy-authorization"),
        Some("Basic dXNlcjpwdw==")
    );
}

#[tokio::test]
async fn an_unsupported_proxy_is_a_config_error_not_retried_connection_errors() {
    for proxy in [
        "socks5://user:secret@127.0.0.1:1080",
        "https://127.0.0.1:3128",
        "http://",
        "http://proxy:port",
    ] {
        let mut config = ClientConfig::new(Provider::Anthropic);
        config.proxy.https = Some(proxy.to_owned());
        match Client::new(config) {
            Err(ClientError::Config(message)) => {
                assert!(message.contains("proxy"), "{proxy}: {message}");
                assert!(!message.contains("secret"), "{message}");
            }
            other => panic!("{proxy}: {other:?}"),
        }
    }
    // A proxy for the other scheme is never used, so it does not matter.
    let mut config = ClientConfig::new(Provider::Anthropic);
    config.proxy.http = Some("socks5://127.0.0.1:1080".to_owned());
    assert!(Client::new(config).is_ok());
}

#[tokio::test]
async fn a_huge_error_body_is_read_bounded_and_keeps_its_beginning() {
    // A gateway's 502 page far larger than any error the client keeps (1 MiB).
    let page = format!(
        "<html><title>502 Bad Gateway</title>{}</html>",
        "x".repeat(3 << 20)
    );
    let server = serve(&script(vec![
        ScriptedResponse::with_status(502, ScriptBody::Text(page))
            .header("content-type", "text/html"),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.retry.max_retries = 0;
    let client = Client::new(config).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert_eq!(error.code(), "server");
    let message = &error.details().unwrap().message;
    // An HTML page is named by its title (see `an_html_502_from_a_proxy_is_retried_and_reported_by_its_title`).
    assert!(
        message.starts_with("502 Bad Gateway (an HTML page"),
        "{message:.80}"
    );
    assert!(message.len() <= 2000 * 4, "{}", message.len());
    // The page's 3 MiB of filler is not what the error keeps.
    assert!(!message.contains(&"x".repeat(4096)), "{}", message.len());
    assert!(stream.metrics().total.is_some());
}

#[tokio::test]
async fn an_error_body_that_stalls_is_cut_at_the_idle_timeout_and_retried() {
    let server = serve(&script(vec![
        ScriptedResponse::with_status(503, ScriptBody::Text("temporarily unavailable".into()))
            .fault(Fault::StallAfter {
                bytes: 4,
                ms: 15_000,
            }),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.timeouts.idle = Duration::from_millis(300);
    config.timeouts.total = Duration::from_secs(60);
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries.len(), 1);
    assert_eq!(got.retries[0].status, Some(503));
    // Cut at the idle timeout, not read to its end after the stall: what the retry reports
    // is the body's first bytes only (no stopwatch: the difference is in what was read).
    let reason = &got.retries[0].reason;
    assert!(!reason.contains("temporarily unavailable"), "{reason}");
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_names_where_it_points() {
    let server = serve(&always(
        ScriptedResponse::with_status(301, ScriptBody::Text("Moved Permanently".into()))
            .header("location", "https://api.example.com/v1/messages"),
    ))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert_eq!(error.status(), Some(301));
    let text = error.to_string();
    assert!(
        text.contains("https://api.example.com/v1/messages"),
        "{text}"
    );
    assert!(text.contains("Moved Permanently"), "{text}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_zero_or_past_retry_after_falls_back_to_the_backoff() {
    // Both SDKs ignore a zero wait: retrying at once would hammer a server that is limiting.
    let server = serve(&script(vec![
        ScriptedResponse::with_status(429, ScriptBody::Empty).header("retry-after", "0"),
        ScriptedResponse::with_status(429, ScriptBody::Empty)
            .header("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries.len(), 2);
    for retry in &got.retries {
        assert!(retry.wait > Duration::ZERO, "{retry:?}");
        assert!(retry.wait <= Duration::from_millis(20), "{retry:?}");
    }
}

#[tokio::test]
async fn a_base_url_with_a_query_keeps_it_after_the_endpoint_path() {
    // Azure OpenAI's deployment URLs carry `?api-version=...`.
    let server = serve(&Script::repeat(fixture("openai-chat/173417d55340.sse"))).await;
    let base = format!(
        "{}/openai/deployments/gpt/?api-version=2024-10-21",
        server.base_url()
    );
    let client = Client::new(config(Provider::OpenAiChat, &server).with_base_url(base)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(
        server.requests()[0].path,
        "/openai/deployments/gpt/chat/completions?api-version=2024-10-21"
    );
}

#[tokio::test]
async fn a_key_given_as_the_base_url_is_not_echoed_in_the_error() {
    // Swapped arguments (`Client(base_url=key, api_key=url)`): the message, which ends up in
    // logs, must not carry the key.
    let key = "sk-ant-api03-AbCdEfGh0123456789";
    for base in [key.to_owned(), format!("{key}/v1"), format!(" {key}")] {
        let config = ClientConfig::new(Provider::Anthropic)
            .with_base_url(base.as_str())
            .with_api_key("https://api.anthropic.com");
        match Client::new(config) {
            Err(ClientError::Config(message)) => {
                assert!(!message.contains("AbCdEfGh"), "{message}");
                assert!(message.contains("http(s)://"), "{message}");
            }
            other => panic!("{base}: {other:?}"),
        }
    }
    // A URL with a scheme is still shown: it is what the user needs to see to fix it.
    let config = ClientConfig::new(Provider::Anthropic).with_base_url("ftp://gw.example");
    match Client::new(config) {
        Err(ClientError::Config(message)) => assert!(message.contains("ftp://gw.example")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn credentials_in_the_base_url_are_a_config_error_not_silently_dropped() {
    let config =
        ClientConfig::new(Provider::OpenAiChat).with_base_url("https://user:secret@gw.example/v1");
    match Client::new(config) {
        Err(ClientError::Config(message)) => {
            assert!(message.contains("credentials"), "{message}");
            assert!(!message.contains("secret"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// Reads a request's head from `socket`, up to its blank line; false if the connection ended
/// (or failed) before it did.
async fn read_request_head(socket: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut request = Vec::new();
    let mut buffer = [0u8; 4096];
    while !request.windows(4).any(|window| window == b"\r\n\r\n") {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return false,
            Ok(read) => request.extend_from_slice(&buffer[..read]),
        }
    }
    true
}

/// A loopback server that answers every request with `head` and `body` written raw, then keeps
/// the connection open (a chunked body is never terminated) until the client goes away.
async fn raw_server_holding_open(head: &'static str, body: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                if !read_request_head(&mut socket).await {
                    return;
                }
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
                // Hold the connection until the client closes it.
                let mut buffer = [0u8; 4096];
                while matches!(socket.read(&mut buffer).await, Ok(read) if read > 0) {}
            });
        }
    });
    format!("http://{addr}")
}

/// A response head of more than 100 headers does not parse, and the same server sends the same
/// head again: a connection error, not retried. It was retried like a dropped connection (about
/// 80 s of backoff with the default policy before the error).
#[tokio::test]
async fn a_response_head_with_too_many_headers_is_not_retried() {
    let mut head = String::from("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n");
    for i in 0..120 {
        head.push_str(&format!("x-header-{i}: {i}\r\n"));
    }
    head.push_str("content-length: 0\r\n\r\n");
    let (url, requests) = raw_server_closing(vec![head.into_bytes()]).await;
    let client = Client::new(raw_config(url)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    match &got.error {
        Some(ClientError::Connection { message, .. }) => {
            assert!(message.contains("too large"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(got.retries.is_empty(), "{:?}", got.retries);
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_complete_stream_whose_body_never_ends_finishes_promptly_without_error() {
    // A gateway that sends the final event and then neither ends the chunked body nor closes
    // the connection: the answer is whole, so waiting for the idle timeout and then
    // reporting it truncated would be wrong twice.
    let events = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let body = format!("{:x}\r\n{events}\r\n", events.len());
    let base = raw_server_holding_open(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        body,
    )
    .await;
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(base);
    config.timeouts.idle = Duration::from_secs(30);
    config.timeouts.stall_notice = Duration::from_secs(20);
    config.timeouts.total = Duration::from_secs(60);
    let client = Client::new(config).unwrap();

    // Waiting for the body's end would hit the idle timeout and report the stream truncated
    // (an error), after a stall notice: neither may happen.
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert!(got.stalls.is_empty());
    assert_eq!(got.events.len(), 3);
    assert!(stream.is_complete());

    let decoded = collect_decoded(client.stream_message(BODY)).await;
    assert!(decoded.error.is_none(), "{:?}", decoded.error);
    assert!(decoded.message.is_some());
}

#[tokio::test]
async fn a_proxy_refusing_connect_with_a_4xx_is_not_retried() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Wrong proxy credentials (407) or a blocked destination (403) stay so on every try.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = socket.read(&mut buffer).await;
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                          proxy-authenticate: Basic\r\ncontent-length: 0\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    let mut config = ClientConfig::new(Provider::Anthropic).with_api_key("k");
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(20);
    config.tls.native_roots = false;
    config.proxy.https = Some(format!("http://{addr}"));
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert_eq!(error.code(), "connection", "{error:?}");
    assert!(error.to_string().contains("407"), "{error}");
    assert!(got.retries.is_empty(), "{:?}", got.retries);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_api_key_with_a_newline_is_a_config_error_that_says_so() {
    // A key read from a file keeps its trailing newline.
    for provider in [Provider::Anthropic, Provider::OpenAiChat] {
        let config = ClientConfig::new(provider).with_api_key("sk-test-123\n");
        match Client::new(config) {
            Err(ClientError::Config(message)) => {
                assert!(message.contains("API key"), "{message}");
                assert!(message.contains("newline"), "{message}");
                assert!(!message.contains("sk-test"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn no_proxy_ip_ranges_reach_a_local_server_directly() {
    // Corporate settings list networks: NO_PROXY=localhost,10.0.0.0/8,127.0.0.0/8.
    let server = serve(&Script::repeat(fixture("anthropic/basic_response.sse"))).await;
    let mut config = config(Provider::Anthropic, &server);
    let lookup = |name: &str| match name {
        "HTTP_PROXY" => Some("http://127.0.0.1:9".to_owned()),
        "NO_PROXY" => Some("localhost,10.0.0.0/8,127.0.0.0/8".to_owned()),
        _ => None,
    };
    config.proxy = ferroloop::client::ProxyConfig::from_lookup(&lookup);
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert!(got.retries.is_empty());
}

#[tokio::test]
async fn a_proxy_that_never_answers_connect_is_a_connect_timeout() {
    // The proxy accepts the TCP connection and then says nothing (a black-holing proxy).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let mut config = ClientConfig::new(Provider::Anthropic).with_api_key("k");
    config.tls.native_roots = false;
    config.proxy.https = Some(format!("http://{addr}"));
    config.timeouts.connect = Duration::from_millis(300);
    config.timeouts.first_byte = Duration::from_secs(60);
    config.timeouts.total = Duration::from_secs(60);
    config.retry.max_retries = 0;
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    // The connect timeout (300 ms), not the first-byte one (60 s), ended it.
    assert!(
        matches!(
            error,
            ClientError::Timeout {
                which: TimeoutKind::Connect,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn create_on_a_body_that_is_not_json_says_what_it_got() {
    let server = serve(&script(vec![
        ScriptedResponse::ok(ScriptBody::Text(
            "<html><body>Please sign in</body></html>".into(),
        ))
        .header("content-type", "text/html"),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let error = client.create(BODY).await.unwrap().json().unwrap_err();
    let text = error.to_string();
    assert_eq!(error.code(), "protocol");
    assert!(text.contains("text/html"), "{text}");
    assert!(text.contains("Please sign in"), "{text}");
}

#[tokio::test]
async fn a_non_streaming_body_that_stalls_is_an_idle_timeout_and_retried() {
    let message = json!({"id":"msg_1","type":"message","role":"assistant","content":[]});
    let server = serve(&script(vec![
        ScriptedResponse::ok(ScriptBody::Json(message.clone())).fault(Fault::StallAfter {
            bytes: 5,
            ms: 30_000,
        }),
        ScriptedResponse::ok(ScriptBody::Json(message.clone())),
    ]))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.timeouts.idle = Duration::from_millis(300);
    config.timeouts.total = Duration::from_secs(60);
    let client = Client::new(config).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.create(BODY))
        .await
        .expect("the stalled body held the request")
        .unwrap();
    assert_eq!(response.json().unwrap(), message);
    assert_eq!(response.metrics.attempts, 2);
    let reason = &response.metrics.retries[0].reason;
    assert!(reason.contains("idle"), "{reason}");
}

#[tokio::test]
async fn prompt_too_long_reads_the_limit_wherever_the_server_puts_it() {
    let cases = [
        // Mistral: the size first, then the limit before the words.
        (
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
            (Some(40_000), Some(32_768)),
        ),
        // OpenAI and vLLM with the breakdown of the request.
        (
            "This model's maximum context length is 8192 tokens. However, you requested 9,000 tokens (8000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
            (Some(9_000), Some(8_192)),
        ),
    ];
    for (message, expected) in cases {
        let server = serve(&script(vec![ScriptedResponse::with_status(
            400,
            ScriptBody::Json(
                json!({"error": {"message": message, "type": "invalid_request_error"}}),
            ),
        )]))
        .await;
        let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        let ClientError::PromptTooLong { tokens, limit, .. } = error else {
            panic!("{error:?}")
        };
        assert_eq!((tokens, limit), expected, "{message}");
    }
}

#[tokio::test]
async fn percent_encoded_proxy_credentials_are_decoded() {
    // A user name with an @ or a password with a : must be percent-encoded in the URL; the
    // proxy expects the decoded text, as curl sends it.
    let server = serve(&script(vec![ScriptedResponse::ok(fixture(
        "anthropic/basic_response.sse",
    ))]))
    .await;
    let mut config =
        config(Provider::Anthropic, &server).with_base_url("http://api.example.invalid:81");
    config.proxy.http = Some(format!("http://me%40corp:p%3Aw%25d@{}", server.addr()));
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    // base64("me@corp:p:w%d")
    assert_eq!(
        server.requests()[0].header("proxy-authorization"),
        Some("Basic bWVAY29ycDpwOnclZA==")
    );
}

#[tokio::test]
async fn a_bad_base_url_error_does_not_echo_credentials() {
    let config = ClientConfig::new(Provider::OpenAiChat)
        .with_base_url("https://user:top secret@gw.example/v1");
    match Client::new(config) {
        Err(ClientError::Config(message)) => {
            assert!(!message.contains("top secret"), "{message}");
            assert!(message.contains("gw.example"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn debug_output_does_not_show_proxy_passwords() {
    let mut config = ClientConfig::new(Provider::Anthropic).with_api_key("sk-secret");
    config.proxy.https = Some("http://me:hunter2@proxy.corp:3128".into());
    config.proxy.http = Some("http://me:hunter3@proxy.corp:3128".into());
    let shown = format!("{config:?}");
    let client = Client::new(config).unwrap();
    for text in [shown, format!("{client:?}")] {
        assert!(!text.contains("hunter"), "{text}");
        assert!(!text.contains("sk-secret"), "{text}");
        assert!(text.contains("proxy.corp:3128"), "{text}");
    }
}

#[tokio::test]
async fn a_base_url_that_is_the_whole_endpoint_is_a_config_error_that_says_so() {
    // Pasting the endpoint instead of the base would request .../chat/completions/chat/completions.
    let cases = [
        (
            Provider::OpenAiChat,
            "https://gw.example/v1/chat/completions/",
        ),
        (Provider::OpenAiResponses, "https://gw.example/v1/responses"),
        (Provider::Anthropic, "https://gw.example/v1/messages"),
    ];
    for (provider, base) in cases {
        match Client::new(ClientConfig::new(provider).with_base_url(base)) {
            Err(ClientError::Config(message)) => {
                assert!(message.contains(provider.messages_path()), "{message}");
            }
            other => panic!("{base}: {other:?}"),
        }
    }
}

/// A Chat Completions server that ends the body after the `finish_reason` without
/// `data: [DONE]` (some OpenAI-compatible servers do) delivered a whole answer: one request,
/// the final message, no error. Before, every such stream was retried (no event yet) or
/// reported truncated. Without a `finish_reason` the stream is still cut.
#[tokio::test]
async fn a_chat_stream_without_done_ends_well_after_its_finish_reason() {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let whole = format!(
        "{}{}",
        chunk(
            json!({"role": "assistant", "content": "Hello"}),
            json!(null)
        ),
        chunk(json!({}), json!("stop"))
    );
    let cut = chunk(json!({"role": "assistant", "content": "Hel"}), json!(null));
    let server = serve(&script(vec![
        ScriptedResponse::ok(ScriptBody::Text(whole)),
        ScriptedResponse::ok(ScriptBody::Text(cut)),
    ]))
    .await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let got = collect_decoded(client.stream_message(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    let message = got.message.unwrap();
    assert_eq!(message["choices"][0]["message"]["content"], "Hello");
    assert_eq!(message["choices"][0]["finish_reason"], "stop");
    assert_eq!(server.requests().len(), 1);

    let got = collect_decoded(client.stream_message(BODY)).await;
    let error = got.error.expect("a stream without a finish_reason is cut");
    assert_eq!(error.code(), "stream_truncated", "{error:?}");
    assert_eq!(
        server.requests().len(),
        2,
        "events were delivered: not replayed"
    );
}

/// A server that sends keep-alive comments while the model works (OpenRouter's
/// `: OPENROUTER PROCESSING` while a reasoning model thinks, WHATWG's suggested practice) is
/// alive: the first-event and idle timeouts start again at each comment. Before, such a stream
/// ended in a first-event timeout (and was retried, paying for the generation again).
#[tokio::test]
async fn keep_alive_comments_hold_off_the_first_event_and_idle_timeouts() {
    keep_alives_hold_off_the_timeouts(": OPENROUTER PROCESSING\n\n").await;
}

/// Some servers and proxies keep a stream alive with bare blank lines instead of comments: the
/// same signs of life. Before, they timed out where comments did not.
#[tokio::test]
async fn blank_line_keep_alives_hold_off_the_first_event_and_idle_timeouts() {
    keep_alives_hold_off_the_timeouts("\n").await;
}

/// A stream with six `keep_alive`s 100 ms apart before its first event and again before the
/// rest, against 250 ms first-event and idle timeouts: it must complete, unretried.
async fn keep_alives_hold_off_the_timeouts(keep_alive: &'static str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                if !read_request_head(&mut socket).await {
                    return;
                }
                let chunk = |text: &str| format!("{:x}\r\n{text}\r\n", text.len());
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                let _ = socket.write_all(head.as_bytes()).await;
                // Six comments 100 ms apart: 600 ms of silence but for them, against
                // 250 ms timeouts; the same again between the first event and the rest.
                let comments = async |socket: &mut tokio::net::TcpStream| {
                    for _ in 0..6 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let _ = socket.write_all(chunk(keep_alive).as_bytes()).await;
                    }
                };
                comments(&mut socket).await;
                let first = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";
                let _ = socket.write_all(chunk(first).as_bytes()).await;
                comments(&mut socket).await;
                let last = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
                let _ = socket.write_all(chunk(last).as_bytes()).await;
                let _ = socket.write_all(b"0\r\n\r\n").await;
                let mut buffer = [0u8; 4096];
                while matches!(socket.read(&mut buffer).await, Ok(read) if read > 0) {}
            });
        }
    });
    let mut config = ClientConfig::new(Provider::OpenAiChat)
        .with_base_url(format!("http://{addr}"))
        .with_api_key("test-key");
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(20);
    config.timeouts.first_event = Duration::from_millis(250);
    config.timeouts.idle = Duration::from_millis(250);
    config.timeouts.stall_notice = Duration::from_millis(200);
    let client = Client::new(config).unwrap();
    let got = collect_decoded(client.stream_message(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(
        got.message.unwrap()["choices"][0]["message"]["content"],
        "Hi"
    );
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no retry"
    );
}

/// A loopback server that answers request number n (from 0) with `responses[n]` (the last one
/// once they run out), written raw, then closes the connection; returns its base URL and the
/// count of requests it read.
async fn raw_server_closing(
    responses: Vec<Vec<u8>>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let served = std::sync::Arc::clone(&count);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            // Answered (and counted) even when the connection ends before its head does.
            let _ = read_request_head(&mut socket).await;
            let index = served.fetch_add(1, Ordering::SeqCst);
            let response = &responses[index.min(responses.len() - 1)];
            let _ = socket.write_all(response).await;
            let _ = socket.shutdown().await;
        }
    });
    (format!("http://{addr}"), count)
}

fn raw_config(base_url: String) -> ClientConfig {
    let mut config = ClientConfig::new(Provider::Anthropic)
        .with_base_url(base_url)
        .with_api_key("test-key");
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(20);
    config.timeouts.total = Duration::from_secs(20);
    config.tls.native_roots = false;
    config
}

/// A whole Anthropic stream as a chunked HTTP/1.1 200, one event per chunk.
fn chunked_stream(events: &[&str], tail: &str) -> Vec<u8> {
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    for event in events {
        out.push_str(&format!("{:x}\r\n{event}\r\n", event.len()));
    }
    out.push_str(tail);
    out.into_bytes()
}

const MESSAGE_START: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n";
const MESSAGE_STOP: &str = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

#[tokio::test]
async fn a_malformed_chunk_is_retried_before_any_event_and_truncates_after_one() {
    // A chunk size that is not hexadecimal: the body breaks. Before any event the request is
    // sent again (nothing was delivered); after one it is truncated, never replayed.
    let broken_first = chunked_stream(&[], "zz\r\nnot a chunk\r\n");
    let whole = chunked_stream(&[MESSAGE_START, MESSAGE_STOP], "0\r\n\r\n");
    let (url, requests) = raw_server_closing(vec![broken_first, whole]).await;
    let client = Client::new(raw_config(url)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries.len(), 1, "{:?}", got.retries);
    assert_eq!(got.events.len(), 2);
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 2);

    let broken_later = chunked_stream(&[MESSAGE_START], "zz\r\nnot a chunk\r\n");
    let (url, requests) = raw_server_closing(vec![broken_later]).await;
    let client = Client::new(raw_config(url)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    let ClientError::Truncated { partial, cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(partial.events, 1);
    assert!(
        matches!(**cause, ClientError::Connection { .. }),
        "{cause:?}"
    );
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_plain_text_page_cut_off_by_a_broken_connection_is_named_in_the_error() {
    // The same page as a body that ends cleanly (above), but the connection breaks after it (a
    // malformed chunk): the connection error says what came before it, as the clean end does.
    let page = "Service Unavailable: the upstream is down\n";
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n\
         {:x}\r\n{page}\r\nzz\r\nnot a chunk\r\n",
        page.len()
    );
    let (url, requests) = raw_server_closing(vec![response.into_bytes()]).await;
    let mut once = raw_config(url);
    once.retry.max_retries = 0;
    let client = Client::new(once).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert!(matches!(error, ClientError::Connection { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.ends_with(
            ": the response (200, text/plain) held no event: \
             \"Service Unavailable: the upstream is down\""
        ),
        "{text}"
    );
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);

    // A stream that broke off after a field line keeps the connection's own message.
    let response = chunked_stream(&["event: message_start\n"], "zz\r\nnot a chunk\r\n");
    let (url, _) = raw_server_closing(vec![response]).await;
    let mut once = raw_config(url);
    once.retry.max_retries = 0;
    let client = Client::new(once).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    let text = got.error.unwrap().to_string();
    assert!(!text.contains("held no event"), "{text}");
}

#[tokio::test]
async fn a_connection_closed_mid_event_delivers_no_half_event() {
    // The server closes after half of an event (a clean end of a close-delimited body): the
    // half event is not delivered, and the stream is truncated after the whole one.
    let half = &MESSAGE_STOP[..20];
    let body = format!("{MESSAGE_START}{half}");
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
    );
    let (url, requests) = raw_server_closing(vec![response.into_bytes()]).await;
    let client = Client::new(raw_config(url)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.events.len(), 1, "{:?}", got.events);
    let error = got.error.unwrap();
    assert_eq!(error.code(), "stream_truncated", "{error:?}");
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_html_502_from_a_proxy_is_retried_and_reported_by_its_title() {
    // nginx's or a load balancer's error page: a server failure, retried; the error names the
    // page by its title, not by kilobytes of markup.
    let page = format!(
        "<html>\r\n<head><title>502 Bad Gateway</title><style>{}</style></head>\r\n<body>\r\n\
         <center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
        "body { font-family: sans-serif; } ".repeat(100)
    );
    let server = serve(&always(
        ScriptedResponse::with_status(502, ScriptBody::Text(page))
            .header("content-type", "text/html"),
    ))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.retry.max_retries = 2;
    let client = Client::new(config).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.retries.len(), 2);
    assert_eq!(got.retries[0].status, Some(502));
    let error = got.error.unwrap();
    assert_eq!(error.code(), "server", "{error:?}");
    let message = &error.details().unwrap().message;
    assert!(message.contains("502 Bad Gateway"), "{message}");
    assert!(message.contains("text/html"), "{message}");
    assert!(!message.contains('<'), "{message}");
    assert!(message.len() < 300, "{message}");
}

#[tokio::test]
async fn retry_after_values_that_are_absurd_or_garbage_fall_back_to_the_backoff() {
    // A wait of days (seconds or milliseconds), or one nobody can read, is not slept: the
    // backoff (at most 20 ms here) applies. A readable, reasonable one is honoured.
    let cases = [
        ("retry-after", "864000"),
        ("retry-after-ms", "86400000000"),
        ("retry-after", "99999999999999999999999"),
        ("retry-after", "in a minute"),
        ("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
    ];
    for (name, value) in cases {
        let server = serve(&script(vec![
            ScriptedResponse::with_status(429, ScriptBody::Text("slow down".into()))
                .header(name, value),
            ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
        ]))
        .await;
        let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        assert!(got.error.is_none(), "{name}: {value}: {:?}", got.error);
        assert_eq!(got.retries.len(), 1, "{name}: {value}");
        assert!(
            got.retries[0].wait <= Duration::from_millis(20),
            "{name}: {value}: {:?}",
            got.retries[0].wait
        );
    }
}

// ---- A provider error in a 200 response before anything was delivered ----

/// A 200 event stream of exactly these bytes.
fn sse_body(text: &str) -> ScriptedResponse {
    ScriptedResponse::ok(ScriptBody::Text(text.into())).header("content-type", "text/event-stream")
}

const RESPONSES_STREAM: &str = "tests/decode/streams/openai-responses/text_and_function_call.sse";

/// A good stream of `provider`'s, and its events.
fn good_stream(provider: Provider) -> (ScriptedResponse, Vec<(String, String)>) {
    let (body, path) = match provider {
        Provider::Anthropic => (
            fixture("anthropic/basic_response.sse"),
            repo_root().join("tests/fixtures/anthropic/basic_response.sse"),
        ),
        Provider::OpenAiChat => (
            fixture("openai-chat/173417d55340.sse"),
            repo_root().join("tests/fixtures/openai-chat/173417d55340.sse"),
        ),
        Provider::OpenAiResponses => (
            ScriptBody::Fixture(PathBuf::from(RESPONSES_STREAM)),
            repo_root().join(RESPONSES_STREAM),
        ),
    };
    let events = parse_all(std::fs::read(path).unwrap())
        .into_iter()
        .filter_map(|item| match item {
            SseOwnedItem::Event(event) => {
                Some((event.event_type.to_string(), event.data.to_string()))
            }
            SseOwnedItem::Retry(_) => None,
        })
        .collect();
    (ScriptedResponse::ok(body), events)
}

/// An error of a transient class (overloaded, server, rate limited) as the first event of a
/// 200 stream generated nothing and was not billed: it is retried as its HTTP status would be,
/// reported with the status it names (OpenRouter's numeric `code`), and the good answer
/// follows. It used to end the stream at once.
#[tokio::test]
async fn a_transient_error_as_the_first_event_is_retried_for_each_provider() {
    let cases: Vec<(Provider, &str, Option<u16>, &str)> = vec![
        (
            Provider::Anthropic,
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            None,
            "overloaded",
        ),
        (
            Provider::Anthropic,
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n",
            None,
            "server",
        ),
        (
            Provider::Anthropic,
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n",
            None,
            "rate_limited",
        ),
        // Keep-alive comments are not events: nothing was delivered before the error.
        (
            Provider::Anthropic,
            ": keep-alive\n\n: OPENROUTER PROCESSING\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            None,
            "overloaded",
        ),
        // Without its `event:` line (some proxies strip them), the data's `type` names it.
        (
            Provider::Anthropic,
            "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            None,
            "overloaded",
        ),
        (
            Provider::OpenAiChat,
            "data: {\"error\":{\"code\":502,\"message\":\"Provider returned error\"}}\n\n",
            Some(502),
            "server",
        ),
        (
            Provider::OpenAiChat,
            ": OPENROUTER PROCESSING\n\ndata: {\"error\":{\"code\":429,\"message\":\"Rate limit exceeded\"}}\n\n",
            Some(429),
            "rate_limited",
        ),
        (
            Provider::OpenAiChat,
            "data: {\"error\":{\"code\":503,\"message\":\"No instances available\"}}\n\ndata: [DONE]\n\n",
            Some(503),
            "server",
        ),
        (
            Provider::OpenAiResponses,
            "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"The server had an error\",\"param\":null,\"sequence_number\":0}\n\n",
            None,
            "server",
        ),
        (
            Provider::OpenAiResponses,
            "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_is_overloaded\",\"message\":\"Selected model is at capacity\"}}}\n\n",
            None,
            "overloaded",
        ),
        (
            Provider::OpenAiResponses,
            "data: {\"type\":\"response.failed\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_is_overloaded\",\"message\":\"Selected model is at capacity\"}}}\n\n",
            None,
            "overloaded",
        ),
    ];
    for (provider, first, status, class) in cases {
        let (good, events) = good_stream(provider);
        let server = serve(&script(vec![
            sse_body(first).header("request-id", "req_1"),
            good.header("request-id", "req_2"),
        ]))
        .await;
        let client = Client::new(config(provider, &server)).unwrap();
        let (got, stream) = collect(client.stream(BODY)).await;
        assert!(got.error.is_none(), "{first}: {:?}", got.error);
        assert_eq!(got.retries.len(), 1, "{first}");
        let retry = &got.retries[0];
        assert_eq!((retry.attempt, retry.status), (1, status), "{first}");
        assert!(
            retry.reason.starts_with(class_prefix(class)),
            "{first}: {retry:?}"
        );
        assert_eq!(got.events, events, "{first}");
        assert!(stream.is_complete());
        let metrics = stream.metrics();
        assert_eq!(metrics.attempts, 2, "{first}");
        assert_eq!(metrics.retries, got.retries);
        assert_eq!(metrics.events, events.len() as u64);
        assert_eq!(metrics.request_id.as_deref(), Some("req_2"));
        assert_eq!(server.requests().len(), 2, "{first}");
    }
}

/// Anthropic and OpenAI Responses name each event twice, in its `event:` line and in its data's
/// `type`; some proxies strip the `event:` lines, and the decoders read the `type` instead. The
/// client does too: such a stream is whole (it was reported truncated, its final event
/// unseen), its usage and first-token time are read, and it decodes to the same message as with
/// the lines, at any chunking.
#[tokio::test]
async fn a_stream_without_event_lines_is_whole_for_the_providers_that_name_events() {
    for provider in [Provider::Anthropic, Provider::OpenAiResponses] {
        let path = match provider {
            Provider::Anthropic => repo_root().join("tests/fixtures/anthropic/basic_response.sse"),
            _ => repo_root().join(RESPONSES_STREAM),
        };
        let named = std::fs::read_to_string(path).unwrap();
        let unnamed: String = named
            .lines()
            .filter(|line| !line.starts_with("event:"))
            .map(|line| format!("{line}\n"))
            .collect();
        assert!(unnamed.len() < named.len());
        let mut offline = StreamDecoder::for_provider(provider);
        let events = offline
            .feed(bytes::Bytes::from(named.clone().into_bytes()))
            .unwrap();
        let message = offline.finish().unwrap();
        let mut usages = Vec::new();
        for (body, chunk) in [(&named, 0), (&unnamed, 0), (&unnamed, 7)] {
            let response = ScriptedResponse::ok(ScriptBody::Text(body.clone()));
            let response = if chunk > 0 {
                response.chunked(chunk, 0)
            } else {
                response
            };
            let server = serve(&script(vec![response])).await;
            let client = Client::new(config(provider, &server)).unwrap();
            let (got, stream) = collect_decoded_keeping(client.stream_message(BODY)).await;
            assert!(got.error.is_none(), "{provider:?} {chunk}: {:?}", got.error);
            assert_eq!(got.events, events, "{provider:?}");
            assert_eq!(got.message.as_ref(), Some(&message), "{provider:?}");
            let metrics = stream.metrics();
            assert!(metrics.time_to_first_token.is_some(), "{provider:?}");
            assert!(metrics.usage.is_some(), "{provider:?}");
            usages.push(metrics.usage.clone());
            assert_eq!(server.requests().len(), 1);
        }
        assert!(usages.iter().all(|usage| *usage == usages[0]), "{usages:?}");
    }
}

/// The start of a `ClientError`'s text for a class.
fn class_prefix(class: &str) -> &'static str {
    match class {
        "overloaded" => "overloaded:",
        "server" => "server error:",
        "rate_limited" => "rate limited:",
        other => panic!("{other}"),
    }
}

/// An error of a class another attempt cannot change (a refused request, an overflowing
/// prompt, a key or a quota) ends the stream at once with that error, as before.
#[tokio::test]
async fn a_first_error_event_of_a_lasting_class_is_not_retried() {
    let cases: Vec<(Provider, &str, &str)> = vec![
        (
            Provider::Anthropic,
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}\n\n",
            "invalid_request",
        ),
        (
            Provider::Anthropic,
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}\n\n",
            "prompt_too_long",
        ),
        (
            Provider::OpenAiChat,
            "data: {\"error\":{\"message\":\"You exceeded your current quota.\",\"type\":\"insufficient_quota\",\"code\":\"insufficient_quota\"}}\n\n",
            "quota_exceeded",
        ),
        (
            Provider::OpenAiChat,
            "data: {\"error\":{\"code\":401,\"message\":\"No auth credentials found\"}}\n\n",
            "authentication",
        ),
        (
            Provider::OpenAiResponses,
            "event: error\ndata: {\"type\":\"error\",\"code\":\"insufficient_quota\",\"message\":\"You exceeded your current quota.\",\"sequence_number\":0}\n\n",
            "quota_exceeded",
        ),
        (
            Provider::OpenAiResponses,
            "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\"}}}\n\n",
            "prompt_too_long",
        ),
    ];
    for (provider, first, code) in cases {
        let (good, _) = good_stream(provider);
        let server = serve(&script(vec![sse_body(first), good])).await;
        let client = Client::new(config(provider, &server)).unwrap();
        let (got, stream) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert_eq!(error.code(), code, "{first}: {error:?}");
        assert!(got.events.is_empty());
        assert!(got.retries.is_empty(), "{first}: {:?}", got.retries);
        assert_eq!(stream.metrics().attempts, 1);
        assert_eq!(server.requests().len(), 1, "{first}");
    }
}

/// Once an event reached the caller, a transient error still ends the stream, truncated with
/// the error as its cause, and is not replayed: an Anthropic `ping` counts (the raw stream's
/// caller saw it), as does an OpenAI Chat chunk.
#[tokio::test]
async fn a_transient_error_after_a_delivered_event_is_truncated_not_retried() {
    let cases: Vec<(Provider, &str, &str)> = vec![
        (
            Provider::Anthropic,
            "event: ping\ndata: {\"type\":\"ping\"}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            "overloaded",
        ),
        (
            Provider::OpenAiChat,
            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"error\":{\"code\":502,\"message\":\"Provider returned error\"}}\n\n",
            "server",
        ),
        (
            Provider::OpenAiResponses,
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\nevent: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}}\n\n",
            "server",
        ),
    ];
    for (provider, body, cause) in cases {
        let (good, _) = good_stream(provider);
        let server = serve(&script(vec![sse_body(body), good])).await;
        let client = Client::new(config(provider, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        let ClientError::Truncated { partial, .. } = &error else {
            panic!("{body}: {error:?}")
        };
        assert_eq!(partial.events, 1);
        assert_eq!(error.root().code(), cause, "{body}");
        assert_eq!(got.events.len(), 1);
        assert!(got.retries.is_empty());
        assert_eq!(server.requests().len(), 1, "{body}");
    }
}

/// Repeated transient first events use up the retry budget like repeated 529s; the last error
/// surfaces as itself (nothing was delivered, so not truncated).
#[tokio::test]
async fn repeated_transient_first_events_exhaust_the_retries_with_the_last_error() {
    let server = serve(&always(
        sse_body("data: {\"error\":{\"code\":503,\"message\":\"No instances available\"}}\n\n")
            .header("request-id", "req_e"),
    ))
    .await;
    let mut config = config(Provider::OpenAiChat, &server);
    config.retry.max_retries = 2;
    let client = Client::new(config).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert!(matches!(error, ClientError::Server { .. }), "{error:?}");
    assert_eq!(error.status(), Some(503));
    assert_eq!(error.request_id(), Some("req_e"));
    let attempts: Vec<_> = got.retries.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 2]);
    assert_eq!(stream.metrics().attempts, 3);
    assert_eq!(stream.metrics().retries, got.retries);
    assert_eq!(server.requests().len(), 3);
}

/// The failed attempt's state does not leak into the retried one: an OpenAI Chat error chunk
/// counts as a first token, and the time to the first token must be the answer's (after the
/// second response's headers), not the error's.
#[tokio::test]
async fn a_retried_attempt_starts_with_fresh_per_response_state() {
    let (good, events) = good_stream(Provider::OpenAiChat);
    let server = serve(&script(vec![
        sse_body(": OPENROUTER PROCESSING\n\ndata: {\"error\":{\"code\":502,\"message\":\"upstream\"}}\n\n"),
        good.chunked(7, 0),
    ]))
    .await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.events, events);
    let metrics = stream.metrics();
    let headers = metrics.time_to_headers.unwrap();
    assert!(
        metrics.time_to_first_event.unwrap() >= headers,
        "{metrics:?}"
    );
    assert!(
        metrics.time_to_first_token.unwrap() >= headers,
        "{metrics:?}"
    );
    assert_eq!(metrics.attempts, 2);
}

/// A 200 whose body is a JSON provider error of a transient class (a gateway's overload,
/// under `application/json` or a generic type) generated nothing: retried. It used to be final.
#[tokio::test]
async fn a_200_json_body_with_a_transient_error_is_retried() {
    let overloaded =
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
    let bodies = [
        ScriptedResponse::ok(ScriptBody::Json(overloaded.clone())),
        ScriptedResponse::ok(ScriptBody::Text(overloaded.to_string())),
        ScriptedResponse::ok(ScriptBody::Text(overloaded.to_string()))
            .header("content-type", "text/event-stream"),
    ];
    for first in bodies {
        let (good, events) = good_stream(Provider::Anthropic);
        let server = serve(&script(vec![first, good])).await;
        let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
        let (got, stream) = collect(client.stream(BODY)).await;
        assert!(got.error.is_none(), "{:?}", got.error);
        assert_eq!(got.retries.len(), 1);
        assert!(
            got.retries[0].reason.starts_with("overloaded:"),
            "{:?}",
            got.retries
        );
        assert_eq!(got.events, events);
        assert_eq!(stream.metrics().attempts, 2);
        assert_eq!(server.requests().len(), 2);
    }
    // A lasting class stays final.
    let server = serve(&always(ScriptedResponse::ok(ScriptBody::Json(
        json!({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}),
    ))))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, _) = collect(client.stream(BODY)).await;
    assert_eq!(got.error.unwrap().code(), "authentication");
    assert_eq!(server.requests().len(), 1);
}

/// A Responses API object that succeeded says `"error": null`: served where a stream was
/// expected, it is a success body (not retried, a protocol error saying so), not a server
/// error (it was classified as one, with the whole body as the message).
#[tokio::test]
async fn a_200_responses_object_with_a_null_error_is_not_an_error_body() {
    let done =
        json!({"id":"resp_1","object":"response","status":"completed","error":null,"output":[]});
    for response in [
        ScriptedResponse::ok(ScriptBody::Json(done.clone())),
        ScriptedResponse::ok(ScriptBody::Text(done.to_string())),
    ] {
        let server = serve(&always(response)).await;
        let client = Client::new(config(Provider::OpenAiResponses, &server)).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert!(matches!(error, ClientError::Protocol { .. }), "{error:?}");
        assert!(got.retries.is_empty());
        assert_eq!(server.requests().len(), 1);
    }
    // Non-streaming, it is the answer.
    let server = serve(&always(ScriptedResponse::ok(ScriptBody::Json(
        done.clone(),
    ))))
    .await;
    let client = Client::new(config(Provider::OpenAiResponses, &server)).unwrap();
    assert_eq!(client.create(BODY).await.unwrap().json().unwrap(), done);
}

/// Non-streaming, a 200 whose JSON body is a provider error is that error, as in a stream:
/// retried when transient, final otherwise. It used to be returned as a success.
#[tokio::test]
async fn create_treats_a_200_json_error_body_as_that_error() {
    let message = json!({"id":"msg_1","type":"message","role":"assistant","content":[]});
    let server = serve(&script(vec![
        ScriptedResponse::ok(ScriptBody::Json(
            json!({"error":{"code":502,"message":"Provider returned error"}}),
        )),
        ScriptedResponse::ok(ScriptBody::Json(message.clone())),
    ]))
    .await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let response = client.create(BODY).await.unwrap();
    assert_eq!(response.json().unwrap(), message);
    assert_eq!(response.metrics.attempts, 2);
    assert_eq!(response.metrics.retries.len(), 1);
    assert_eq!(response.metrics.retries[0].status, Some(502));

    let server = serve(&always(ScriptedResponse::ok(ScriptBody::Json(
        json!({"error":{"message":"bad","type":"invalid_request_error","code":null}}),
    ))))
    .await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let error = client.create(BODY).await.unwrap_err();
    assert_eq!(error.code(), "invalid_request", "{error:?}");
    assert_eq!(server.requests().len(), 1);
}

/// `bytes_received` counts the body bytes of every attempt: the error bodies of the retried
/// ones (read in full here: they are far below the error-body cut) and the body used.
#[tokio::test]
async fn bytes_received_counts_the_bodies_of_retried_attempts_when_streaming() {
    let overloaded =
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
    let error_len = serde_json::to_vec(&overloaded).unwrap().len() as u64;
    let server = serve(&script(vec![
        ScriptedResponse::with_status(529, ScriptBody::Json(overloaded.clone())),
        ScriptedResponse::with_status(529, ScriptBody::Json(overloaded.clone())),
        // A 200 whose JSON body is a transient provider error, in place of the event stream:
        // retried, and its body was read too.
        ScriptedResponse::ok(ScriptBody::Json(overloaded.clone()))
            .header("content-type", "application/json"),
        ScriptedResponse::ok(fixture("anthropic/basic_response.sse")),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert_eq!(got.retries.len(), 3);
    let stream_len =
        std::fs::metadata(repo_root().join("tests/fixtures/anthropic/basic_response.sse"))
            .unwrap()
            .len();
    assert_eq!(stream.metrics().bytes_received, 3 * error_len + stream_len);
}

/// The same for `create`: the retried attempts' error bodies (a 529's, and a 200 whose JSON
/// body is a transient provider error) count with the body returned.
#[tokio::test]
async fn bytes_received_counts_the_bodies_of_retried_attempts_of_create() {
    let overloaded =
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
    let error_len = serde_json::to_vec(&overloaded).unwrap().len() as u64;
    let message = json!({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}]});
    let message_len = serde_json::to_vec(&message).unwrap().len() as u64;
    let server = serve(&script(vec![
        ScriptedResponse::with_status(529, ScriptBody::Json(overloaded.clone())),
        ScriptedResponse::ok(ScriptBody::Json(overloaded.clone())),
        ScriptedResponse::ok(ScriptBody::Json(message.clone())),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let response = client.create(BODY).await.unwrap();
    assert_eq!(response.metrics.attempts, 3);
    assert_eq!(response.json().unwrap(), message);
    assert_eq!(response.metrics.bytes_received, 2 * error_len + message_len);
}

/// A non-streaming response compressed although nothing asked for compression gets the same
/// clear error as a streaming one, not "not JSON" with the compressed bytes in the message.
#[tokio::test]
async fn a_compressed_json_response_to_create_is_a_clear_error_and_not_retried() {
    let server = serve(&always(
        ScriptedResponse::ok(ScriptBody::Text("\u{1f}\u{8b}\u{8}garbage".into()))
            .header("content-type", "application/json")
            .header("content-encoding", "gzip")
            .header("request-id", "req_gz"),
    ))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let error = client.create(BODY).await.unwrap_err();
    let ClientError::Protocol {
        message,
        request_id,
    } = &error
    else {
        panic!("{error:?}")
    };
    assert!(
        message.contains(
            "compressed with content-encoding \"gzip\" although no compression was asked for"
        ),
        "{message}"
    );
    assert!(!message.contains("garbage"), "{message}");
    assert_eq!(request_id.as_deref(), Some("req_gz"));
    assert_eq!(server.requests().len(), 1);
}

// ---- An OpenAI Chat error chunk in any JSON layout; create's body cap and its metrics on
// failure; the connect timeout over the TLS handshake; a fragment in the base URL ----

/// A Chat Completions stream that ends well, whose chunks mention "error" only as text: a
/// delta that is the word, one that quotes `"error":` (escaped, as JSON strings are), and a
/// top-level `"error": null` next to the choices.
const CHAT_MENTIONING_ERROR: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"error\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" \\\"error\\\": {\\\"code\\\": 502}\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"error\":null,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
data: [DONE]\n\n";

/// An OpenAI-compatible gateway's error chunk is recognised by its top-level `error` member,
/// whatever the whitespace and the key order: OpenRouter's real shape (an ordinary chunk with
/// an `error` object and `finish_reason: "error"`), `{ "error": ...}` with a space, and one
/// pretty-printed over several `data:` lines. Before, only `{"error"` at the very start was: the
/// others passed as a delivered event, were not retried, and ended the stream as "truncated
/// after 1 events".
#[tokio::test]
async fn an_openai_chat_error_chunk_in_any_layout_is_retried_before_any_event() {
    let firsts = [
        "data: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"provider\":\"x\",\"error\":{\"code\":502,\"message\":\"Provider returned error\"},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n",
        "data: { \"error\": {\"code\": 502, \"message\": \"upstream failed\"}}\n\n",
        "data: {\ndata:   \"error\" : {\"code\": 502, \"message\": \"upstream failed\"}\ndata: }\n\n",
        ": OPENROUTER PROCESSING\n\ndata: {\"object\":\"chat.completion.chunk\",\"error\":{\"code\":502,\"message\":\"x\"}}\n\n",
    ];
    for first in firsts {
        let (good, events) = good_stream(Provider::OpenAiChat);
        let server = serve(&script(vec![sse_body(first), good])).await;
        let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
        let (got, stream) = collect(client.stream(BODY)).await;
        assert!(got.error.is_none(), "{first}: {:?}", got.error);
        assert_eq!(got.retries.len(), 1, "{first}");
        assert_eq!(got.retries[0].status, Some(502), "{first}");
        assert!(
            got.retries[0].reason.starts_with("server error:"),
            "{first}: {:?}",
            got.retries[0]
        );
        assert_eq!(got.events, events, "{first}");
        assert_eq!(stream.metrics().events, events.len() as u64, "{first}");
        assert_eq!(server.requests().len(), 2, "{first}");

        // Without retries, the error itself (nothing was delivered), raw and decoded.
        let server = serve(&always(sse_body(first))).await;
        let mut config = config(Provider::OpenAiChat, &server);
        config.retry.max_retries = 0;
        let client = Client::new(config).unwrap();
        let (got, stream) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert!(
            matches!(error, ClientError::Server { .. }),
            "{first}: {error:?}"
        );
        assert_eq!(error.status(), Some(502), "{first}");
        assert!(got.events.is_empty(), "{first}");
        assert_eq!(stream.metrics().events, 0, "{first}");
        let decoded = collect_decoded(client.stream_message(BODY)).await;
        let error = decoded.error.unwrap();
        assert!(
            matches!(error, ClientError::Server { .. }),
            "{first}: {error:?}"
        );
        assert!(!error.to_string().contains("truncated"), "{first}: {error}");
    }
}

/// The cheap test for an error chunk does not misfire on chunks that only mention "error": a
/// delta that is the word, one quoting `"error":`, and a top-level `"error": null` beside the
/// choices all go through, raw and decoded.
#[tokio::test]
async fn an_openai_chat_chunk_that_only_mentions_error_is_not_an_error() {
    let server = serve(&always(sse_body(CHAT_MENTIONING_ERROR))).await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let (got, stream) = collect(client.stream(BODY)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert!(got.retries.is_empty());
    assert_eq!(got.events.len(), 4);
    assert!(stream.is_complete());
    let decoded = collect_decoded(client.stream_message(BODY)).await;
    assert!(decoded.error.is_none(), "{:?}", decoded.error);
    let message = decoded.message.unwrap();
    assert_eq!(
        message["choices"][0]["message"]["content"],
        "error \"error\": {\"code\": 502}"
    );
}

/// `create` reads at most `max_response_bytes` of a body: past it, a protocol error naming the
/// limit, not retried (the same request gets the same answer). It read a body of any size into
/// memory (1.5 GB became 2.3 GB of RSS).
#[tokio::test]
async fn create_refuses_a_body_past_max_response_bytes() {
    const LIMIT: usize = 64 << 10;
    // A valid JSON object, padded past the limit, with and without a content length.
    let padded = format!("{{{}\"id\":\"msg_1\"}}", " ".repeat(LIMIT * 4));
    for length in [true, false] {
        let mut response = ScriptedResponse::ok(ScriptBody::Text(padded.clone()))
            .header("content-type", "application/json")
            .header("request-id", "req_big");
        if !length {
            response = response.chunked(8 << 10, 0);
        }
        let server = serve(&always(response)).await;
        let mut config = config(Provider::Anthropic, &server);
        config.max_response_bytes = Some(LIMIT);
        let client = Client::new(config).unwrap();
        let error = client.create(BODY).await.unwrap_err();
        let ClientError::Protocol {
            message,
            request_id,
        } = &error
        else {
            panic!("content length {length}: {error:?}")
        };
        assert!(message.contains("max_response_bytes"), "{message}");
        assert!(message.contains(&LIMIT.to_string()), "{message}");
        assert_eq!(request_id.as_deref(), Some("req_big"));
        assert_eq!(server.requests().len(), 1, "not retried");
    }
    // The default is the event cap's 64 MiB; a body under the limit is read as before.
    assert_eq!(
        ClientConfig::new(Provider::Anthropic).max_response_bytes,
        Some(64 << 20)
    );
    let server = serve(&always(
        ScriptedResponse::ok(ScriptBody::Text(padded.clone()))
            .header("content-type", "application/json"),
    ))
    .await;
    let mut config = config(Provider::Anthropic, &server);
    config.max_response_bytes = Some(padded.len());
    let client = Client::new(config).unwrap();
    let response = client.create(BODY).await.unwrap();
    assert_eq!(response.json().unwrap()["id"], "msg_1");
}

/// A loopback server that answers one request with a chunked 200 JSON body that never ends
/// (`{` and then spaces, 64 KiB at a time, until the client goes away). Returns the base URL
/// and a receiver of the body bytes written.
async fn endless_json_server() -> (String, tokio::sync::oneshot::Receiver<u64>) {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (written_sender, written) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        assert!(read_request_head(&mut socket).await);
        let prelude = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                       transfer-encoding: chunked\r\n\r\n1\r\n{\r\n";
        socket.write_all(prelude.as_bytes()).await.unwrap();
        let block = vec![b' '; 64 * 1024];
        let mut chunk = format!("{:x}\r\n", block.len()).into_bytes();
        chunk.extend_from_slice(&block);
        chunk.extend_from_slice(b"\r\n");
        let mut total = 0u64;
        while socket.write_all(&chunk).await.is_ok() {
            total += block.len() as u64;
        }
        let _ = written_sender.send(total);
    });
    (format!("http://{addr}"), written)
}

/// An endless body stops being read at the cap: the client neither buffers nor drains the
/// rest, and the connection goes away.
#[tokio::test]
async fn create_stops_reading_an_endless_body_at_the_cap() {
    const LIMIT: usize = 1 << 20;
    let (url, written) = endless_json_server().await;
    let mut config = ClientConfig::new(Provider::Anthropic).with_base_url(url);
    config.tls.native_roots = false;
    config.max_response_bytes = Some(LIMIT);
    let client = Client::new(config).unwrap();
    let failure = tokio::time::timeout(
        Duration::from_secs(20),
        client.create_with_metrics(BODY, &[]),
    )
    .await
    .expect("the endless body was read for ever")
    .unwrap_err();
    assert_eq!(failure.error.code(), "protocol", "{:?}", failure.error);
    assert_eq!(failure.metrics.attempts, 1);
    let received = failure.metrics.bytes_received;
    assert!(received >= LIMIT as u64 / 2, "{received}");
    assert!(received < (LIMIT as u64) * 2, "{received}");
    let written = tokio::time::timeout(Duration::from_secs(10), written)
        .await
        .expect("the server kept writing")
        .unwrap();
    assert!(written < 64 * LIMIT as u64, "{written}");
}

/// A failed `create` comes back with its metrics: the attempts and retries made (a 500, then a
/// 400 that is final), the bytes read and the time taken. The bindings had only the error, and
/// C reported 0 attempts and no retries after two.
#[tokio::test]
async fn a_failed_create_reports_its_metrics() {
    let server = serve(&script(vec![
        ScriptedResponse::with_status(
            500,
            ScriptBody::Json(json!({"type":"error","error":{"type":"api_error","message":"boom"}})),
        )
        .header("request-id", "req_1"),
        ScriptedResponse::with_status(
            400,
            ScriptBody::Json(
                json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}}),
            ),
        )
        .header("request-id", "req_2"),
    ]))
    .await;
    let client = Client::new(config(Provider::Anthropic, &server)).unwrap();
    let failure = client.create_with_metrics(BODY, &[]).await.unwrap_err();
    assert_eq!(
        failure.error.code(),
        "invalid_request",
        "{:?}",
        failure.error
    );
    assert_eq!(failure.error.request_id(), Some("req_2"));
    assert_eq!(failure.to_string(), failure.error.to_string());
    let metrics = &failure.metrics;
    assert_eq!(metrics.attempts, 2);
    assert_eq!(metrics.retries.len(), 1);
    assert_eq!(metrics.retries[0].status, Some(500));
    assert!(metrics.bytes_received > 0);
    assert!(metrics.total.is_some());
    // As a failed stream's: no success headers came, so no request id or version of one.
    assert_eq!(metrics.request_id, None);
    assert_eq!(metrics.http_version, None);
    // `create` still fails with the error alone.
    let error = client.create(BODY).await.unwrap_err();
    assert_eq!(error.code(), "invalid_request", "{error:?}");

    // A failure after a success's headers (a 200 whose JSON is a final provider error): its
    // request id and version, as a stream's metrics have them.
    let server = serve(&always(
        ScriptedResponse::ok(ScriptBody::Json(
            json!({"error":{"message":"bad","type":"invalid_request_error"}}),
        ))
        .header("request-id", "req_200"),
    ))
    .await;
    let client = Client::new(config(Provider::OpenAiChat, &server)).unwrap();
    let failure = client.create_with_metrics(BODY, &[]).await.unwrap_err();
    assert_eq!(failure.metrics.attempts, 1);
    assert_eq!(failure.metrics.request_id.as_deref(), Some("req_200"));
    assert_eq!(failure.metrics.http_version, Some("HTTP/1.1"));
    assert!(failure.metrics.time_to_headers.is_some());
}

/// The connect timeout covers the TLS handshake: an `https://` server that accepts the TCP
/// connection and never answers the ClientHello is a connect timeout, retried like one, not a
/// first-byte timeout (or, with the defaults, the whole total timeout).
#[tokio::test]
async fn a_tls_handshake_that_hangs_is_a_connect_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&accepted);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(socket);
        }
    });
    let mut config = ClientConfig::new(Provider::Anthropic)
        .with_base_url(format!("https://{addr}"))
        .with_api_key("k");
    config.tls.native_roots = false;
    config.timeouts.connect = Duration::from_millis(300);
    config.timeouts.first_byte = Duration::from_secs(60);
    config.timeouts.total = Duration::from_secs(60);
    config.retry.max_retries = 1;
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(5);
    let client = Client::new(config).unwrap();
    let started = std::time::Instant::now();
    let (got, _) = collect(client.stream(BODY)).await;
    let error = got.error.unwrap();
    assert!(
        matches!(
            error,
            ClientError::Timeout {
                which: TimeoutKind::Connect,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(got.retries.len(), 1, "retried as a connect timeout");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);

    // Non-streaming too.
    let started = std::time::Instant::now();
    let error = client.create(BODY).await.unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::Timeout {
                which: TimeoutKind::Connect,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// A fragment in the base URL is refused when the client is made: everything after `#` (the
/// endpoint path the client appends included) never reaches the server, so
/// `http://host/p#frag` sent `POST /p`.
#[tokio::test]
async fn a_base_url_with_a_fragment_is_a_config_error() {
    for base in [
        "http://127.0.0.1:9/p#frag",
        "http://127.0.0.1:9#frag",
        "http://127.0.0.1:9/p?api-version=1#frag",
        "http://127.0.0.1:9/p#",
    ] {
        let config = ClientConfig::new(Provider::Anthropic).with_base_url(base);
        match Client::new(config) {
            Err(ClientError::Config(message)) => {
                assert!(message.contains("fragment"), "{base}: {message}");
            }
            other => panic!("{base}: {other:?}"),
        }
    }
}

/// `json` compressed as a gzip member (with a file name in its header, as `gzip` writes one).
fn gzipped(json: &serde_json::Value) -> Vec<u8> {
    let mut member = vec![0x1f, 0x8b, 8, 8, 0, 0, 0, 0, 0, 255];
    member.extend_from_slice(b"error.json\0");
    member.extend(miniz_oxide::deflate::compress_to_vec(
        json.to_string().as_bytes(),
        6,
    ));
    // The CRC-32 and size trailer (not checked: the body is a diagnostic).
    member.extend_from_slice(&[0; 8]);
    member
}

/// A proxy or gateway may compress its error body although nothing asked for compression. Its
/// bytes were taken as the message (mojibake in every error and retry event), and the class
/// came from the status alone: a gzipped `insufficient_quota` 429 was retried as a rate limit,
/// a gzipped prompt too long was a plain invalid request. A gzip or deflate body is inflated
/// now; another coding is named instead of shown.
#[tokio::test]
async fn a_compressed_error_body_is_inflated_or_named_never_shown_as_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: Vec<u8>| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        ScriptBody::Fixture(path)
    };
    let quota = json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}});
    let too_long = json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 300000 tokens > 200000 maximum"}});
    let auth = json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
    let cases = [
        (
            429,
            "gzip",
            file("quota.gz", gzipped(&quota)),
            "quota_exceeded",
        ),
        (
            400,
            "x-gzip",
            file("long.gz", gzipped(&too_long)),
            "prompt_too_long",
        ),
        (
            401,
            "deflate",
            file(
                "auth.z",
                miniz_oxide::deflate::compress_to_vec_zlib(auth.to_string().as_bytes(), 6),
            ),
            "authentication",
        ),
        (
            503,
            "br",
            file("page.br", vec![0x8b, 0x00, 0x80, 0xff, 0xfe, 0x03]),
            "server",
        ),
    ];
    for (status, encoding, body, code) in cases {
        let server = serve(&always(
            ScriptedResponse::with_status(status, body)
                .header("content-type", "application/json")
                .header("content-encoding", encoding),
        ))
        .await;
        let mut config = config(Provider::Anthropic, &server);
        config.retry.max_retries = 1;
        let client = Client::new(config).unwrap();
        let (got, _) = collect(client.stream(BODY)).await;
        let error = got.error.unwrap();
        assert_eq!(error.code(), code, "{encoding}: {error:?}");
        assert_eq!(error.status(), Some(status));
        let message = &error.details().unwrap().message;
        assert!(!message.contains('\u{fffd}'), "{encoding}: {message:?}");
        match encoding {
            "gzip" => {
                assert_eq!(message, "You exceeded your current quota");
                // A quota is final: one request, whatever the coding of its body.
                assert_eq!(server.requests().len(), 1);
            }
            "x-gzip" => assert!(matches!(
                error,
                ClientError::PromptTooLong {
                    tokens: Some(300_000),
                    limit: Some(200_000),
                    ..
                }
            )),
            "deflate" => assert_eq!(message, "invalid x-api-key"),
            _ => assert!(message.contains("content-encoding \"br\""), "{message}"),
        }
    }
}
