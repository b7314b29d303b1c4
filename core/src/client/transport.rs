//! The pooled HTTP client: hyper-util's client over a TCP connector that honours proxies,
//! wrapped in rustls (ring provider; Mozilla roots embedded, the system store when present),
//! HTTP/2 or HTTP/1.1 chosen by ALPN.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
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
pub(crate) type HttpClient = Client<HttpsConnector<ProxyConnector>, Full<Bytes>>;

/// Builds the HTTP client for `config`.
pub(crate) fn build(config: &ClientConfig) -> Result<HttpClient, ClientError> {
    let tls = tls_config(config)?;
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(config.timeouts.connect));
    let connector = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(ProxyConnector::new(
            tcp,
            config.proxy.clone(),
            config.timeouts.connect,
        ));
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
