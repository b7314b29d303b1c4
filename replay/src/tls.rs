//! A fresh self-signed certificate and a TLS acceptor offering HTTP/2 and HTTP/1.1 by ALPN.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::ReplayError;

/// Returns the acceptor, the certificate as PEM and as DER.
pub(crate) fn self_signed_acceptor()
-> Result<(tokio_rustls::TlsAcceptor, String, Vec<u8>), ReplayError> {
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let certified =
        rcgen::generate_simple_self_signed(names).map_err(|e| ReplayError::Tls(e.to_string()))?;
    let cert_der: CertificateDer<'static> = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ReplayError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone()], key)
        .map_err(|e| ReplayError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        certified.cert.pem(),
        cert_der.to_vec(),
    ))
}
