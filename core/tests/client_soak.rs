//! A randomized fault-injection soak of the client against the loopback replay server.
//!
//! A seeded generator gives every request a plan: zero or more failed attempts the client must
//! retry (429/529/5xx/408 bursts with or without `retry-after`, resets before the headers,
//! disconnects before the first event, a transient provider `error` as the first event of a
//! 200 stream, headers slower than the first-byte timeout, silence longer than the first-event
//! timeout), then a final attempt that succeeds (in one piece, in
//! random pieces, or as a slow drip) or fails for good (a 4xx, a disconnect or a stall
//! mid-stream, an `error` event, malformed JSON, an oversized event, a drip longer than the
//! total timeout). From the plan and the client's configuration the test knows the outcome in
//! advance, and checks, for every request:
//!
//! - it ends in the complete message, or in a typed error of the class the plan predicts
//!   (success whenever the plan's failures fit in `max_retries`), with every retry reported;
//! - it took no longer than the plan allows by the configured timeouts and waits, plus one idle
//!   period (a watchdog firing a whole period late would be a bug; scheduling noise is far
//!   below), and never longer than the total timeout plus that period;
//! - the server saw exactly the attempts the client reported.
//!
//! The first requests run one at a time, the rest several at once. At the end, with the client
//! dropped and the server quiet again, the process has as many file descriptors, the runtime as
//! many live tasks, and the server no open connection, as before.
//!
//! `FERROLOOP_SOAK_SEED=N` replays a run (the seed is printed); `FERROLOOP_SOAK_REQUESTS=N`
//! changes the count (default 200). Loopback only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferroloop::client::{
    Client, ClientConfig, ClientError, MessageItem, Provider, RetryEvent, TimeoutKind,
};
use ferroloop::decode::StreamDecoder;
use ferroloop_replay::{
    Fault, RecordedRequest, ReplayServer, Responder, Script, ScriptBody, ScriptEvent,
    ScriptedResponse, ServerOptions,
};
use futures::StreamExt;
use serde_json::{Value, json};

const DEFAULT_REQUESTS: usize = 200;
/// Requests run one at a time before the concurrent phase.
const SEQUENTIAL: usize = 40;
const IN_FLIGHT: usize = 6;
/// Events over this size are refused by the client (the oversized-event fault sends more).
const MAX_EVENT_BYTES: usize = 16 * 1024;
/// The whole soak, as a last resort against a hang the per-request checks would not see.
const SOAK_LIMIT: Duration = Duration::from_secs(90);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Small timeouts and fast retries, so that every fault costs milliseconds. The timeouts leave
/// room for a loaded two-core machine: at an idle timeout of 250 ms, a drip whose chunks were
/// 1 ms apart once timed out after 414 ms without a byte, while other builds ran beside it.
fn soak_config(base_url: String) -> ClientConfig {
    let mut config = ClientConfig::new(Provider::Anthropic)
        .with_base_url(base_url)
        .with_api_key("soak");
    config.tls.native_roots = false;
    config.retry.max_retries = 3;
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(20);
    config.timeouts.connect = Duration::from_secs(1);
    config.timeouts.first_byte = Duration::from_millis(800);
    config.timeouts.first_event = Duration::from_millis(600);
    config.timeouts.idle = Duration::from_millis(500);
    config.timeouts.stall_notice = Duration::from_millis(100);
    config.timeouts.total = Duration::from_secs(3);
    config.max_event_bytes = Some(MAX_EVENT_BYTES);
    config
}

/// A recorded stream the soak serves, with what the decoder makes of it.
struct Fixture {
    name: &'static str,
    text: String,
    /// Byte offsets just past each event's blank line.
    event_ends: Vec<usize>,
    /// The largest event, in bytes.
    largest_event: usize,
    message: Value,
}

impl Fixture {
    fn load(name: &'static str) -> Self {
        let text = std::fs::read_to_string(repo_root().join("tests/fixtures/anthropic").join(name))
            .unwrap();
        assert!(
            !text.contains('\r'),
            "{name}: the cut points assume LF line ends"
        );
        let mut event_ends = Vec::new();
        let mut from = 0;
        while let Some(at) = text[from..].find("\n\n") {
            from += at + 2;
            event_ends.push(from);
        }
        assert!(event_ends.len() >= 3, "{name}");
        let largest_event = event_ends
            .iter()
            .scan(0, |start, &end| {
                let size = end - *start;
                *start = end;
                Some(size)
            })
            .max()
            .unwrap_or(0);
        let mut decoder = StreamDecoder::for_provider(Provider::Anthropic);
        decoder.feed(bytes::Bytes::from(text.clone())).unwrap();
        let message = decoder.finish().unwrap();
        Self {
            name,
            text,
            event_ends,
            largest_event,
            message,
        }
    }

    /// A cut that delivers at least the first event and never the last (`message_stop`).
    fn mid_stream_cut(&self, rng: &mut fastrand::Rng) -> usize {
        let last_start = self.event_ends[self.event_ends.len() - 2];
        rng.usize(self.event_ends[0]..last_start)
    }

    /// A cut before the first event is complete.
    fn cut_before_first_event(&self, rng: &mut fastrand::Rng) -> usize {
        rng.usize(0..self.event_ends[0] - 1)
    }
}

/// A failed attempt the client must retry (when it has retries left).
#[derive(Debug, Clone)]
enum Transient {
    /// 429, 529, 500, 503 or 408, optionally with `retry-after-ms` or `retry-after: 0`.
    Status {
        status: u16,
        retry_after_ms: Option<u64>,
    },
    /// The connection closes before any response byte.
    ResetBeforeHeaders,
    /// The headers and part of the first event, then the connection breaks.
    DisconnectBeforeFirstEvent { bytes: usize },
    /// The headers come later than the first-byte timeout.
    SlowHeaders,
    /// The headers, then silence past the first-event timeout.
    SilentAfterHeaders,
    /// A 200 stream whose first event is a transient provider error (`overloaded_error` or
    /// `api_error`): nothing was delivered, so it is retried as its status would be.
    ErrorEventFirst { overloaded: bool },
}

/// How the last attempt goes.
#[derive(Debug, Clone)]
enum Final {
    /// The fixture in one piece.
    Whole,
    /// The fixture in random pieces, no delay.
    Pieces { bytes: usize },
    /// The fixture a few bytes at a time, 1 ms apart.
    Drip { bytes: usize },
    /// A status that is not retried: 400, 401, or a 500 with `x-should-retry: false`.
    Refused { status: u16 },
    /// Part of the fixture (at least one event), then the connection breaks.
    DisconnectMidStream { bytes: usize },
    /// Part of the fixture, then silence past the idle timeout.
    StallMidStream { bytes: usize },
    /// A provider `error` event after `message_start` (`overloaded_error` or `api_error`), or
    /// as the first event one of a class that is not retried (`invalid_request_error` or
    /// `permission_error`; a transient one first is a [`Transient::ErrorEventFirst`]).
    ErrorEvent { first: bool, overloaded: bool },
    /// `message_start`, a text block, then a `data:` line that is not JSON.
    MalformedJson,
    /// `message_start`, then one event larger than the client's cap.
    OversizedEvent,
    /// Events arriving in time for the idle timeout but never ending, past the total timeout.
    Endless,
}

#[derive(Debug, Clone)]
struct Plan {
    id: u64,
    fixture: usize,
    transients: Vec<Transient>,
    last: Final,
}

/// What the test expects of a request.
#[derive(Debug, PartialEq)]
enum Expected {
    /// The fixture's message, after this many retries.
    Message { retries: usize },
    /// An error of class `root` (wrapped in `Truncated` when `truncated`).
    Error {
        root: &'static str,
        timeout: Option<TimeoutKind>,
        truncated: bool,
        retries: usize,
    },
}

impl Transient {
    fn generate(rng: &mut fastrand::Rng, fixture: &Fixture, slow_allowed: bool) -> Self {
        loop {
            let transient = match rng.u32(0..100) {
                0..=19 => Transient::Status {
                    status: 429,
                    retry_after_ms: rng.bool().then(|| rng.u64(1..=30)),
                },
                20..=34 => Transient::Status {
                    status: 529,
                    retry_after_ms: None,
                },
                35..=49 => Transient::Status {
                    status: [500, 503, 408][rng.usize(0..3)],
                    retry_after_ms: rng.bool().then_some(0),
                },
                50..=69 => Transient::ResetBeforeHeaders,
                70..=79 => Transient::DisconnectBeforeFirstEvent {
                    bytes: fixture.cut_before_first_event(rng),
                },
                80..=87 => Transient::ErrorEventFirst {
                    overloaded: rng.bool(),
                },
                88..=93 => Transient::SlowHeaders,
                _ => Transient::SilentAfterHeaders,
            };
            let slow = matches!(
                transient,
                Transient::SlowHeaders | Transient::SilentAfterHeaders
            );
            if slow_allowed || !slow {
                return transient;
            }
        }
    }

    fn response(&self, fixture: &Fixture, config: &ClientConfig) -> ScriptedResponse {
        let error_body = |kind: &str| {
            ScriptBody::Json(json!({"type":"error","error":{"type":kind,"message":"soak"}}))
        };
        match self {
            Transient::Status {
                status,
                retry_after_ms,
            } => {
                let kind = match status {
                    429 => "rate_limit_error",
                    529 => "overloaded_error",
                    _ => "api_error",
                };
                let response = ScriptedResponse::with_status(*status, error_body(kind));
                match (status, retry_after_ms) {
                    (429, Some(ms)) => response.header("retry-after-ms", &ms.to_string()),
                    (_, Some(seconds)) => response.header("retry-after", &seconds.to_string()),
                    (_, None) => response,
                }
            }
            Transient::ResetBeforeHeaders => {
                ScriptedResponse::ok(ScriptBody::Empty).fault(Fault::ResetBeforeHeaders)
            }
            Transient::DisconnectBeforeFirstEvent { bytes } => {
                ScriptedResponse::ok(ScriptBody::Text(fixture.text.clone()))
                    .fault(Fault::DisconnectAfter { bytes: *bytes })
            }
            Transient::SlowHeaders => {
                let mut response = ScriptedResponse::ok(ScriptBody::Text(fixture.text.clone()));
                response.headers_delay_ms = millis(config.timeouts.first_byte) + 150;
                response
            }
            Transient::ErrorEventFirst { overloaded } => {
                let kind = if *overloaded {
                    "overloaded_error"
                } else {
                    "api_error"
                };
                ScriptedResponse::ok(ScriptBody::Events(vec![event(
                    "error",
                    json!({"type":"error","error":{"type":kind,"message":"soak"}}),
                )]))
            }
            Transient::SilentAfterHeaders => ScriptedResponse::ok(ScriptBody::Text(
                fixture.text.clone(),
            ))
            .fault(Fault::StallAfter {
                bytes: 0,
                ms: millis(config.timeouts.first_event) + 200,
            }),
        }
    }

    /// The class of the error when this is the attempt the retries ran out on.
    fn class(&self) -> (&'static str, Option<TimeoutKind>) {
        match self {
            Transient::Status { status: 429, .. } => ("rate_limited", None),
            Transient::Status { status: 529, .. } => ("overloaded", None),
            Transient::Status { .. } => ("server", None),
            Transient::ResetBeforeHeaders | Transient::DisconnectBeforeFirstEvent { .. } => {
                ("connection", None)
            }
            Transient::SlowHeaders => ("timeout", Some(TimeoutKind::FirstByte)),
            Transient::SilentAfterHeaders => ("timeout", Some(TimeoutKind::FirstEvent)),
            Transient::ErrorEventFirst { overloaded: true } => ("overloaded", None),
            Transient::ErrorEventFirst { overloaded: false } => ("server", None),
        }
    }

    /// The status its retry event reports.
    fn status(&self) -> Option<u16> {
        match self {
            Transient::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The longest this attempt may take and the longest wait after it, by the configuration.
    fn bounds(&self, config: &ClientConfig) -> (Duration, Duration) {
        let backoff = config.retry.max_delay;
        match self {
            Transient::Status {
                retry_after_ms: Some(ms),
                ..
            } if self.status() == Some(429) => (Duration::ZERO, Duration::from_millis(*ms)),
            Transient::Status {
                retry_after_ms: Some(seconds),
                ..
            } => (Duration::ZERO, Duration::from_secs(*seconds)),
            Transient::SlowHeaders => (config.timeouts.first_byte, backoff),
            Transient::SilentAfterHeaders => (config.timeouts.first_event, backoff),
            _ => (Duration::ZERO, backoff),
        }
    }
}

impl Final {
    fn generate(rng: &mut fastrand::Rng, fixture: &Fixture, config: &ClientConfig) -> Self {
        match rng.u32(0..100) {
            0..=24 => Final::Whole,
            25..=44 => Final::Pieces {
                bytes: rng.usize(1..=300),
            },
            45..=54 => {
                // Small enough pieces to drip, large enough that the biggest event arrives
                // well inside the idle timeout (1 ms apart, plus the timer's 1 ms grain).
                let bytes = rng.usize(12..=32);
                let longest_gap =
                    Duration::from_millis(2 * (fixture.largest_event / bytes + 1) as u64);
                assert!(longest_gap * 2 < config.timeouts.idle, "drip too slow");
                Final::Drip { bytes }
            }
            55..=61 => Final::Refused {
                status: [400, 401, 500][rng.usize(0..3)],
            },
            62..=70 => Final::DisconnectMidStream {
                bytes: fixture.mid_stream_cut(rng),
            },
            71..=76 => Final::StallMidStream {
                bytes: fixture.mid_stream_cut(rng),
            },
            77..=84 => Final::ErrorEvent {
                first: rng.bool(),
                overloaded: rng.bool(),
            },
            85..=91 => Final::MalformedJson,
            92..=97 => Final::OversizedEvent,
            _ => Final::Endless,
        }
    }

    fn response(&self, fixture: &Fixture, config: &ClientConfig) -> ScriptedResponse {
        let text = || ScriptBody::Text(fixture.text.clone());
        match self {
            Final::Whole => ScriptedResponse::ok(text()),
            Final::Pieces { bytes } => ScriptedResponse::ok(text()).chunked(*bytes, 0),
            Final::Drip { bytes } => ScriptedResponse::ok(text()).chunked(*bytes, 1),
            Final::Refused { status } => {
                let kind = match status {
                    400 => "invalid_request_error",
                    401 => "authentication_error",
                    _ => "api_error",
                };
                let body =
                    ScriptBody::Json(json!({"type":"error","error":{"type":kind,"message":"no"}}));
                let response = ScriptedResponse::with_status(*status, body);
                if *status == 500 {
                    response.header("x-should-retry", "false")
                } else {
                    response
                }
            }
            Final::DisconnectMidStream { bytes } => {
                ScriptedResponse::ok(text()).fault(Fault::DisconnectAfter { bytes: *bytes })
            }
            Final::StallMidStream { bytes } => {
                ScriptedResponse::ok(text()).fault(Fault::StallAfter {
                    bytes: *bytes,
                    ms: millis(config.timeouts.idle) + 200,
                })
            }
            Final::ErrorEvent { first, overloaded } => {
                let kind = match (first, overloaded) {
                    (false, true) => "overloaded_error",
                    (false, false) => "api_error",
                    (true, true) => "invalid_request_error",
                    (true, false) => "permission_error",
                };
                let mut events = if *first {
                    vec![]
                } else {
                    vec![message_start()]
                };
                events.push(event(
                    "error",
                    json!({"type":"error","error":{"type":kind,"message":"soak"}}),
                ));
                ScriptedResponse::ok(ScriptBody::Events(events))
            }
            Final::MalformedJson => {
                let mut events = text_block_start();
                events.push(ScriptEvent {
                    event: Some("content_block_delta".into()),
                    data: Value::String("{\"type\":\"content_block_delta\",\"index\":0,".into()),
                    id: None,
                });
                ScriptedResponse::ok(ScriptBody::Events(events))
            }
            Final::OversizedEvent => {
                let mut events = text_block_start();
                events.push(text_delta(&"x".repeat(MAX_EVENT_BYTES + 1)));
                ScriptedResponse::ok(ScriptBody::Events(events))
            }
            Final::Endless => {
                // Pieces a third of the idle timeout apart, each at least as long as any event
                // (so no event spans more than two pieces and every gap stays well inside the
                // idle timeout), for twice the total timeout.
                let gap = config.timeouts.idle / 3;
                let piece = ferroloop_replay::render_events(&[message_start()]).len();
                let tick = ferroloop_replay::render_events(&[text_delta("tick")]).len();
                let pieces = 2 * config.timeouts.total.as_millis() / gap.as_millis();
                let count = pieces as usize * piece.div_ceil(tick);
                let mut events = text_block_start();
                events.extend((0..count).map(|_| text_delta("tick")));
                ScriptedResponse::ok(ScriptBody::Events(events)).chunked(piece, millis(gap))
            }
        }
    }

    fn expected(&self, retries: usize) -> Expected {
        let error = |root, timeout, truncated| Expected::Error {
            root,
            timeout,
            truncated,
            retries,
        };
        match self {
            Final::Whole | Final::Pieces { .. } | Final::Drip { .. } => {
                Expected::Message { retries }
            }
            Final::Refused { status: 400 } => error("invalid_request", None, false),
            Final::Refused { status: 401 } => error("authentication", None, false),
            Final::Refused { .. } => error("server", None, false),
            Final::DisconnectMidStream { .. } => error("connection", None, true),
            Final::StallMidStream { .. } => error("timeout", Some(TimeoutKind::Idle), true),
            Final::ErrorEvent { first, overloaded } => {
                let root = match (first, overloaded) {
                    (false, true) => "overloaded",
                    (false, false) => "server",
                    (true, true) => "invalid_request",
                    (true, false) => "permission",
                };
                error(root, None, !first)
            }
            Final::MalformedJson => error("protocol", None, true),
            Final::OversizedEvent => error("event_too_large", None, true),
            Final::Endless => error("timeout", Some(TimeoutKind::Total), true),
        }
    }

    /// The longest the final attempt may take, by the configuration.
    fn bound(&self, fixture: &Fixture, config: &ClientConfig) -> Duration {
        match self {
            // Each piece waits 1 ms, and tokio's timer has a 1 ms grain.
            Final::Drip { bytes } => {
                Duration::from_millis(2 * (fixture.text.len() / bytes + 1) as u64)
            }
            Final::StallMidStream { .. } => config.timeouts.idle,
            Final::Endless => config.timeouts.total,
            _ => Duration::ZERO,
        }
    }
}

impl Plan {
    fn generate(
        id: u64,
        rng: &mut fastrand::Rng,
        fixtures: &[Fixture],
        config: &ClientConfig,
    ) -> Self {
        let fixture = rng.usize(0..fixtures.len());
        let count = match rng.u32(0..100) {
            0..=49 => 0,
            50..=74 => 1,
            75..=86 => 2,
            87..=94 => 3,
            _ => 4, // more than max_retries (3): the retries run out
        };
        let mut transients = Vec::new();
        for _ in 0..count {
            // At most one slow failure per request, so the total timeout never cuts the
            // plan short of what it predicts.
            let slow_allowed = !transients
                .iter()
                .any(|t| matches!(t, Transient::SlowHeaders | Transient::SilentAfterHeaders));
            transients.push(Transient::generate(rng, &fixtures[fixture], slow_allowed));
        }
        let last = Final::generate(rng, &fixtures[fixture], config);
        Self {
            id,
            fixture,
            transients,
            last,
        }
    }

    /// The responses of its attempts, in order.
    fn responses(&self, fixtures: &[Fixture], config: &ClientConfig) -> Vec<ScriptedResponse> {
        let fixture = &fixtures[self.fixture];
        self.transients
            .iter()
            .map(|transient| transient.response(fixture, config))
            .chain([self.last.response(fixture, config)])
            .collect()
    }

    fn attempts_made(&self, config: &ClientConfig) -> usize {
        (self.transients.len() + 1).min(config.retry.max_retries as usize + 1)
    }

    fn expected(&self, config: &ClientConfig) -> Expected {
        let max_retries = config.retry.max_retries as usize;
        match self.transients.get(max_retries) {
            Some(exhausted) => {
                let (root, timeout) = exhausted.class();
                Expected::Error {
                    root,
                    timeout,
                    truncated: false,
                    retries: max_retries,
                }
            }
            None => self.last.expected(self.transients.len()),
        }
    }

    /// The statuses of the retries it causes.
    fn retry_statuses(&self, config: &ClientConfig) -> Vec<Option<u16>> {
        let retries = self.attempts_made(config) - 1;
        self.transients[..retries]
            .iter()
            .map(Transient::status)
            .collect()
    }

    /// The longest the request may take by the configured timeouts and waits.
    fn bound(&self, fixtures: &[Fixture], config: &ClientConfig) -> Duration {
        let retries = self.attempts_made(config) - 1;
        let mut bound = Duration::ZERO;
        for (index, transient) in self.transients.iter().enumerate().take(retries + 1) {
            let (attempt, wait) = transient.bounds(config);
            bound += attempt;
            if index < retries {
                bound += wait;
            }
        }
        if self.transients.len() <= retries {
            bound += self.last.bound(&fixtures[self.fixture], config);
        }
        bound.min(config.timeouts.total)
    }
}

/// Time an attempt may spend on scheduling and loopback I/O beyond what its plan counts.
const PER_ATTEMPT_ALLOWANCE: Duration = Duration::from_millis(60);

fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

fn event(name: &str, data: Value) -> ScriptEvent {
    ScriptEvent {
        event: Some(name.to_owned()),
        data,
        id: None,
    }
}

fn message_start() -> ScriptEvent {
    event(
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_soak","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":1,"output_tokens":1}}}),
    )
}

fn text_block_start() -> Vec<ScriptEvent> {
    vec![
        message_start(),
        event(
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
    ]
}

fn text_delta(text: &str) -> ScriptEvent {
    event(
        "content_block_delta",
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
    )
}

/// The server side of the plans: request bodies carry `"soak": id`; the Nth attempt of a
/// request gets the Nth response of its plan.
#[derive(Default)]
struct Plans {
    responses: HashMap<u64, Vec<ScriptedResponse>>,
    served: HashMap<u64, usize>,
}

fn responder(plans: Arc<Mutex<Plans>>) -> Responder {
    Arc::new(move |request: &RecordedRequest| {
        let id = serde_json::from_str::<Value>(&request.body)
            .ok()?
            .get("soak")?
            .as_u64()?;
        let mut plans = plans.lock().ok()?;
        let attempt = {
            let served = plans.served.entry(id).or_insert(0);
            *served += 1;
            *served - 1
        };
        // Beyond the plan: the script's 410 answers, and the test reports the extra attempt.
        plans.responses.get(&id)?.get(attempt).cloned()
    })
}

/// How a request ended.
#[derive(Debug)]
struct Outcome {
    message: Option<Value>,
    error: Option<ClientError>,
    retries: Vec<RetryEvent>,
    elapsed: Duration,
}

async fn run(client: Client, id: u64) -> Outcome {
    let body = json!({"model":"m","max_tokens":8,"stream":true,"messages":[],"soak":id});
    let started = Instant::now();
    let mut stream = client.stream_message(body.to_string());
    let mut outcome = Outcome {
        message: None,
        error: None,
        retries: Vec::new(),
        elapsed: Duration::ZERO,
    };
    while let Some(item) = stream.next().await {
        match item {
            Ok(MessageItem::Message(message)) => {
                assert!(outcome.message.is_none(), "request {id}: two messages");
                outcome.message = Some(message);
            }
            Ok(MessageItem::Retry(retry)) => outcome.retries.push(retry),
            Ok(MessageItem::Event(_) | MessageItem::Stalled { .. }) => {}
            Err(error) => {
                outcome.error = Some(error);
                assert!(
                    stream.next().await.is_none(),
                    "request {id}: items after the error"
                );
                break;
            }
        }
    }
    outcome.elapsed = started.elapsed();
    outcome
}

/// Everything wrong with one request's outcome (empty when it is as the plan predicts).
fn check(
    plan: &Plan,
    outcome: &Outcome,
    fixtures: &[Fixture],
    config: &ClientConfig,
) -> Vec<String> {
    let mut problems = Vec::new();
    let expected = plan.expected(config);
    let retries = match &expected {
        Expected::Message { retries } => {
            if outcome.message.as_ref() != Some(&fixtures[plan.fixture].message) {
                problems.push(format!(
                    "expected the message of {}, got {:?} / {:?}",
                    fixtures[plan.fixture].name,
                    outcome.message.as_ref().map(|m| m["id"].clone()),
                    outcome.error
                ));
            }
            *retries
        }
        Expected::Error {
            root,
            timeout,
            truncated,
            retries,
        } => {
            match &outcome.error {
                None => problems.push(format!("expected a {root} error, got a message")),
                Some(error) => {
                    let code = if *truncated { "stream_truncated" } else { root };
                    if error.code() != code || error.root().code() != *root {
                        problems.push(format!("expected {code}/{root}, got {error:?}"));
                    }
                    if let Some(kind) = timeout
                        && !matches!(error.root(), ClientError::Timeout { which, .. } if which == kind)
                    {
                        problems.push(format!("expected a {kind} timeout, got {error:?}"));
                    }
                }
            }
            *retries
        }
    };
    if outcome.retries.len() != retries {
        problems.push(format!(
            "expected {retries} retries, got {:?}",
            outcome.retries
        ));
    } else {
        let statuses: Vec<_> = outcome.retries.iter().map(|r| r.status).collect();
        if statuses != plan.retry_statuses(config) {
            problems.push(format!("retry statuses {statuses:?}"));
        }
        let numbers: Vec<_> = outcome.retries.iter().map(|r| r.attempt).collect();
        if numbers != (1..=retries as u32).collect::<Vec<_>>() {
            problems.push(format!("retry attempt numbers {numbers:?}"));
        }
    }
    // One idle period of slack (a watchdog firing a whole period late would be a bug), plus a
    // scheduling allowance per attempt: the plan counts a refused attempt as taking no time,
    // and on a loaded 2-core machine a loopback round trip with 6 requests in flight can take
    // tens of milliseconds.
    let attempts = u32::try_from(plan.attempts_made(config)).unwrap_or(u32::MAX);
    let slack = config.timeouts.idle + PER_ATTEMPT_ALLOWANCE * attempts;
    let bound = plan.bound(fixtures, config) + slack;
    if outcome.elapsed > bound {
        problems.push(format!(
            "took {:?}, the plan allows {bound:?}",
            outcome.elapsed
        ));
    }
    if outcome.elapsed > config.timeouts.total + slack {
        problems.push(format!(
            "took {:?}, over the total timeout {:?}",
            outcome.elapsed, config.timeouts.total
        ));
    }
    problems
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

fn seed() -> u64 {
    match std::env::var("FERROLOOP_SOAK_SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .expect("FERROLOOP_SOAK_SEED is not a u64"),
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64 ^ u64::from(std::process::id())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_end_as_predicted_within_the_timeouts_and_leak_nothing() {
    let seed = seed();
    let count = std::env::var("FERROLOOP_SOAK_REQUESTS")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(DEFAULT_REQUESTS);
    eprintln!("client soak: seed {seed}, {count} requests (FERROLOOP_SOAK_SEED={seed} replays it)");
    let mut rng = fastrand::Rng::with_seed(seed);

    let fixtures = [
        Fixture::load("basic_response.sse"),
        Fixture::load("tool_use_response.sse"),
    ];
    let plans_state = Arc::new(Mutex::new(Plans::default()));
    let options = ServerOptions {
        responder: Some(responder(Arc::clone(&plans_state))),
        ..ServerOptions::default()
    };
    let server = ReplayServer::start(&Script::default(), &repo_root(), options)
        .await
        .unwrap();
    let config = soak_config(server.base_url());
    let plans: Vec<Plan> = (0..count as u64)
        .map(|id| Plan::generate(id, &mut rng, &fixtures, &config))
        .collect();
    {
        let mut state = plans_state.lock().unwrap();
        for plan in &plans {
            state
                .responses
                .insert(plan.id, plan.responses(&fixtures, &config));
        }
    }

    let fds_before = open_fds();
    let tasks_before = alive_tasks();
    let client = Client::new(config.clone()).unwrap();

    let soak = async {
        let mut outcomes = Vec::with_capacity(plans.len());
        for plan in plans.iter().take(SEQUENTIAL) {
            outcomes.push((plan.id, run(client.clone(), plan.id).await));
        }
        let semaphore = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
        let mut running = tokio::task::JoinSet::new();
        for plan in plans.iter().skip(SEQUENTIAL) {
            let permit = Arc::clone(&semaphore).acquire_owned().await.unwrap();
            let client = client.clone();
            let id = plan.id;
            running.spawn(async move {
                let outcome = run(client, id).await;
                drop(permit);
                (id, outcome)
            });
        }
        while let Some(joined) = running.join_next().await {
            outcomes.push(joined.unwrap());
        }
        outcomes
    };
    let started = Instant::now();
    let outcomes = tokio::time::timeout(SOAK_LIMIT, soak)
        .await
        .expect("the soak hung");
    let wall = started.elapsed();

    let mut failures = Vec::new();
    let mut classes: HashMap<String, usize> = HashMap::new();
    let served = plans_state.lock().unwrap().served.clone();
    for (id, outcome) in &outcomes {
        let plan = &plans[*id as usize];
        let mut problems = check(plan, outcome, &fixtures, &config);
        let attempts = served.get(id).copied().unwrap_or(0);
        if attempts != outcome.retries.len() + 1 {
            problems.push(format!(
                "the server saw {attempts} attempts, the client reported {} retries",
                outcome.retries.len()
            ));
        }
        let class = match &outcome.error {
            None => "message".to_owned(),
            Some(error) if error.code() == "stream_truncated" => {
                format!("truncated/{}", error.root().code())
            }
            Some(error) => error.code().to_owned(),
        };
        *classes.entry(class).or_default() += 1;
        if !problems.is_empty() {
            failures.push(format!("request {id} {plan:?}: {}", problems.join("; ")));
        }
    }
    assert_eq!(outcomes.len(), plans.len());
    let mut classes: Vec<_> = classes.into_iter().collect();
    classes.sort();
    eprintln!(
        "client soak: {} requests in {wall:?}: {classes:?}",
        outcomes.len()
    );
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {} requests went wrong:\n{}",
        failures.len(),
        outcomes.len(),
        failures.join("\n")
    );

    // Nothing leaks: with the client (and its pool) gone and the server's writers done, the
    // counts return to where they were. Settling is a wait for a condition, bounded.
    drop(client);
    let settle_until = Instant::now() + Duration::from_secs(10);
    let settled = || {
        server.open_connections() == 0
            && server.bodies_in_flight() == 0
            && open_fds() == fds_before
            && alive_tasks() == tasks_before
    };
    while !settled() && Instant::now() < settle_until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.open_connections(), 0, "server connections left open");
    assert_eq!(
        server.bodies_in_flight(),
        0,
        "server body writers left running"
    );
    assert_eq!(open_fds(), fds_before, "file descriptors leaked");
    assert_eq!(alive_tasks(), tasks_before, "tasks leaked");
}
