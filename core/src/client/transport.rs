//! The pooled HTTP client: hyper-util's client over a TCP connector that honours proxies,
//! wrapped in rustls (ring provider; Mozilla roots embedded, the system store when present),
//! HTTP/2 or HTTP/1.1 chosen by ALPN, the whole of it under the connect timeout.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;

use super::config::ClientConfig;
use super::error::ClientError;
use super::proxy::ProxyConnector;

/// The connection-pooling HTTP client shared by every request of a [`super::Client`].
pub(crate) type HttpClient = Client<ConnectTimeout<HttpsConnector<ProxyConnector>>, Full<Bytes>>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connector whose whole connection (TCP connect, a proxy's `CONNECT` exchange, the TLS
/// handshake) must be made within the connect timeout, as reqwest's is. The TCP connector and
/// the proxy bound only their own steps: a server that accepts the TCP connection and never
/// answers the ClientHello held the attempt until the first-byte timeout (600 s by default,
/// the whole total). Failing here makes it a connect error, which hyper reports as one
/// (`is_connect`) and the client retries as a connect timeout.
#[derive(Clone)]
pub(crate) struct ConnectTimeout<C> {
    inner: C,
    timeout: Duration,
}

impl<C> tower_service::Service<Uri> for ConnectTimeout<C>
where
    C: tower_service::Service<Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, destination: Uri) -> Self::Future {
        let connecting = self.inner.call(destination);
        let timeout = self.timeout;
        // One allocation per new connection (pooled ones skip the connector), none per request.
        Box::pin(async move {
            match tokio::time::timeout(timeout, connecting).await {
                Ok(connected) => connected.map_err(Into::into),
                // A `TimedOut` I/O error: what `send` reads as a connect timeout.
                Err(_) => Err(Box::new(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection (TCP, proxy CONNECT, TLS handshake) was not made within the \
                     connect timeout",
                )) as BoxError),
            }
        })
    }
}

/// Builds the HTTP client for `config`.
pub(crate) fn build(config: &ClientConfig) -> Result<HttpClient, ClientError> {
    let tls = tls_config(config)?;
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(config.timeouts.connect));
    let https = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(ProxyConnector::new(
            tcp,
            config.proxy.clone(),
            config.timeouts.connect,
        ));
    let connector = ConnectTimeout {
        inner: https,
        timeout: config.timeouts.connect,
    };
    let mut builder = Client::builder(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .http2_only(config.http2_prior_knowledge)
        .http2_adaptive_window(true);
    Ok(builder.build(connector))
}

fn tls_config(config: &ClientConfig) -> Result<rustls::ClientConfig, ClientError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if config.tls.native_roots {
        // A missing or partly unreadable system store is normal (containers): the embedded
        // roots still apply.
        let native = rustls_native_certs::load_native_certs();
        let (added, ignored) = roots.add_parsable_certificates(native.certs);
        tracing::debug!(added, ignored, "system certificate store loaded");
    }
    for der in &config.tls.extra_roots_der {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|error| ClientError::Config(format!("bad extra root certificate: {error}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| ClientError::Config(format!("TLS setup failed: {error}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tls)
}
