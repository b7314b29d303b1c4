//! The loopback server: accepts connections on 127.0.0.1, answers request `i` with scripted
//! response `i`, records every request.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::ReplayError;
use crate::body::{Pacing, ReplayBody, write_body};
use crate::script::{Fault, PreparedBody, Script, ScriptedResponse, WhenExhausted};

/// Computes a response from the request, for conversations that depend on what the client
/// sent (the scripted model of `ferroloop run` reads the tool results in the request). `None`
/// falls back to the script.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Option<ScriptedResponse> + Send + Sync>;

/// Server options.
#[derive(Clone, Default)]
pub struct ServerOptions {
    /// Serve HTTPS with a fresh self-signed certificate for `localhost` and `127.0.0.1`
    /// (ALPN offers `h2` and `http/1.1`).
    pub tls: bool,
    /// Asked first for every request; the script answers when it returns `None`.
    pub responder: Option<Responder>,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("tls", &self.tls)
            .field("responder", &self.responder.is_some())
            .finish()
    }
}

/// A request as the server received it.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedRequest {
    /// Position in arrival order, from 0 (the script response it got).
    pub index: usize,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The URI as received: origin-form (`/v1/messages`) for a direct HTTP/1.1 request,
    /// absolute (`http://host/v1/messages`) through an HTTP proxy or over HTTP/2.
    pub uri: String,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub version: String,
    /// Headers in arrival order, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body (lossy UTF-8).
    pub body: String,
}

impl RecordedRequest {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

struct PreparedResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: PreparedBody,
    pacing: Pacing,
    headers_delay: Duration,
}

/// Shared server state.
pub(crate) struct State {
    responses: Vec<PreparedResponse>,
    when_exhausted: WhenExhausted,
    next_index: AtomicUsize,
    requests: Mutex<Vec<RecordedRequest>>,
    connections: AtomicUsize,
    open_connections: AtomicUsize,
    pub(crate) aborted_bodies: AtomicUsize,
    pub(crate) in_flight: AtomicUsize,
    last_activity: Mutex<Instant>,
    request_log: Option<mpsc::UnboundedSender<RecordedRequest>>,
    responder: Option<Responder>,
    base_dir: std::path::PathBuf,
}

impl State {
    pub(crate) fn mark_activity(&self) {
        if let Ok(mut last) = self.last_activity.lock() {
            *last = Instant::now();
        }
    }
}

/// A running replay server. Dropping it stops it and closes every connection.
pub struct ReplayServer {
    addr: SocketAddr,
    cert_pem: Option<String>,
    cert_der: Option<Vec<u8>>,
    state: Arc<State>,
    accept_task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ReplayServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayServer")
            .field("addr", &self.addr)
            .field("tls", &self.cert_der.is_some())
            .finish_non_exhaustive()
    }
}

impl ReplayServer {
    /// Starts a server on 127.0.0.1 (a free port) replaying `script`. Relative fixture paths
    /// resolve against `base_dir`. Must be called inside a tokio runtime.
    pub async fn start(
        script: &Script,
        base_dir: &Path,
        options: ServerOptions,
    ) -> Result<Self, ReplayError> {
        Self::start_with_log(script, base_dir, options, None).await
    }

    /// Like [`ReplayServer::start`], also sending each request to `request_log` as it arrives.
    pub async fn start_with_log(
        script: &Script,
        base_dir: &Path,
        options: ServerOptions,
        request_log: Option<mpsc::UnboundedSender<RecordedRequest>>,
    ) -> Result<Self, ReplayError> {
        let responses = script
            .responses
            .iter()
            .map(|response| prepare(response, base_dir))
            .collect::<Result<Vec<_>, _>>()?;
        let state = Arc::new(State {
            responses,
            when_exhausted: script.when_exhausted,
            next_index: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            open_connections: AtomicUsize::new(0),
            aborted_bodies: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            last_activity: Mutex::new(Instant::now()),
            request_log,
            responder: options.responder.clone(),
            base_dir: base_dir.to_path_buf(),
        });
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(ReplayError::Io)?;
        let addr = listener.local_addr().map_err(ReplayError::Io)?;
        let (tls, cert_pem, cert_der) = if options.tls {
            let (acceptor, pem, der) = crate::tls::self_signed_acceptor()?;
            (Some(acceptor), Some(pem), Some(der))
        } else {
            (None, None, None)
        };
        let accept_task = tokio::spawn(accept_loop(listener, tls, Arc::clone(&state)));
        Ok(Self {
            addr,
            cert_pem,
            cert_der,
            state,
            accept_task,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        let scheme = if self.cert_der.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The self-signed certificate (PEM), when serving TLS.
    pub fn cert_pem(&self) -> Option<&str> {
        self.cert_pem.as_deref()
    }

    /// The self-signed certificate (DER), when serving TLS.
    pub fn cert_der(&self) -> Option<&[u8]> {
        self.cert_der.as_deref()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state
            .requests
            .lock()
            .map(|requests| requests.clone())
            .unwrap_or_default()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Connections open now (accepted and not yet closed by either side).
    pub fn open_connections(&self) -> usize {
        self.state.open_connections.load(Ordering::SeqCst)
    }

    /// Body writer tasks running now (paced, chunked or faulty bodies still being written).
    pub fn bodies_in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::SeqCst)
    }

    /// Bodies whose client went away before the body was fully written.
    pub fn aborted_bodies(&self) -> usize {
        self.state.aborted_bodies.load(Ordering::SeqCst)
    }

    /// Resolves once no body is being written and nothing happened for `idle`.
    pub async fn wait_until_idle(&self, idle: Duration) {
        loop {
            let quiet_for = self
                .state
                .last_activity
                .lock()
                .map(|last| last.elapsed())
                .unwrap_or_default();
            let busy = self.state.in_flight.load(Ordering::SeqCst) > 0;
            if !busy && quiet_for >= idle {
                return;
            }
            let wait = if busy {
                idle
            } else {
                idle.saturating_sub(quiet_for)
            };
            tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
        }
    }
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

fn prepare(
    response: &crate::script::ScriptedResponse,
    base_dir: &Path,
) -> Result<PreparedResponse, ReplayError> {
    let status = StatusCode::from_u16(response.status)
        .map_err(|_| ReplayError::InvalidScript(format!("bad status {}", response.status)))?;
    let mut headers = HeaderMap::new();
    for (name, value) in &response.headers {
        let value = match value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ReplayError::InvalidScript(format!("bad header name {name:?}")))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| ReplayError::InvalidScript(format!("bad header value {value:?}")))?;
        headers.append(name, value);
    }
    if !headers.contains_key(http::header::CONTENT_TYPE)
        && let Some(content_type) = response.body.default_content_type()
    {
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        );
    }
    Ok(PreparedResponse {
        status,
        headers,
        body: response.body.prepare(base_dir)?,
        pacing: Pacing {
            chunk_bytes: response.chunk_bytes,
            chunk_delay: Duration::from_millis(response.chunk_delay_ms),
            fault: response.fault.clone(),
        },
        headers_delay: Duration::from_millis(response.headers_delay_ms),
    })
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<State>,
) {
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, _) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        state.connections.fetch_add(1, Ordering::SeqCst);
        state.mark_activity();
        let state = Arc::clone(&state);
        let tls = tls.clone();
        let open = OpenConnection::new(Arc::clone(&state));
        connections.spawn(async move {
            let _open = open;
            match tls {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(stream) => serve_connection(stream, state).await,
                    Err(error) => tracing::debug!(%error, "TLS handshake failed"),
                },
                None => serve_connection(stream, state).await,
            }
        });
    }
}

/// Counts a connection as open for as long as it lives (also when its task is aborted).
struct OpenConnection(Arc<State>);

impl OpenConnection {
    fn new(state: Arc<State>) -> Self {
        state.open_connections.fetch_add(1, Ordering::SeqCst);
        Self(state)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::SeqCst);
        self.0.mark_activity();
    }
}

async fn serve_connection<IO>(io: IO, state: Arc<State>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| respond(request, Arc::clone(&state)));
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if let Err(error) = builder.serve_connection(TokioIo::new(io), service).await {
        tracing::debug!(%error, "connection ended with an error");
    }
}

async fn respond(
    request: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<ReplayBody>, io::Error> {
    state.mark_activity();
    let index = state.next_index.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let recorded = RecordedRequest {
        index,
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), ToString::to_string),
        uri: parts.uri.to_string(),
        version: format!("{:?}", parts.version),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    if let Some(log) = &state.request_log {
        let _ = log.send(recorded.clone());
    }
    let computed = match &state.responder {
        Some(responder) => match responder(&recorded).map(|r| prepare(&r, &state.base_dir)) {
            Some(Ok(prepared)) => Some(prepared),
            Some(Err(error)) => {
                tracing::warn!(%error, "the responder returned an invalid response");
                None
            }
            None => None,
        },
        None => None,
    };
    if let Ok(mut requests) = state.requests.lock() {
        requests.push(recorded);
    }

    let scripted = match computed.as_ref() {
        Some(computed) => Some(computed),
        None => match state.responses.get(index) {
            Some(response) => Some(response),
            None if state.when_exhausted == WhenExhausted::RepeatLast => state.responses.last(),
            None => None,
        },
    };
    let Some(scripted) = scripted else {
        return Ok(exhausted_response(index));
    };
    if !scripted.headers_delay.is_zero() {
        tokio::time::sleep(scripted.headers_delay).await;
    }
    if scripted.pacing.fault == Some(Fault::ResetBeforeHeaders) {
        // A service error makes hyper drop the connection without writing a response.
        return Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "scripted reset before headers",
        ));
    }
    let body = match (&scripted.body, scripted.pacing.is_plain()) {
        (PreparedBody::Bytes(bytes), true) => ReplayBody::full(bytes.clone()),
        (body, _) => {
            let (sender, receiver) = mpsc::channel(8);
            state.in_flight.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(write_body(
                body.clone(),
                scripted.pacing.clone(),
                sender,
                Arc::clone(&state),
            ));
            ReplayBody::channel(receiver)
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = scripted.status;
    *response.headers_mut() = scripted.headers.clone();
    Ok(response)
}

fn exhausted_response(index: usize) -> Response<ReplayBody> {
    let body = serde_json::json!({
        "type": "error",
        "error": {
            "type": "replay_exhausted",
            "message": format!("the replay script has no response for request {index}"),
        }
    });
    let mut response = Response::new(ReplayBody::full(Bytes::from(body.to_string())));
    *response.status_mut() = StatusCode::GONE;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
