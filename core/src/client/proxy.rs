//! `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` / `NO_PROXY`: which proxy a destination goes
//! through, and the connector that goes through it (a `CONNECT` tunnel for `https`
//! destinations, absolute-form requests for `http` ones).

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::error::ClientError;

/// Proxy settings. Their debug output hides proxy credentials.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Proxy for `https` destinations (`http://host:port`; `host:port` means the same). Only
    /// `http://` proxies are supported: another scheme fails [`Client::new`](super::Client::new)
    /// when the base URL would go through it.
    pub https: Option<String>,
    /// Proxy for `http` destinations.
    pub http: Option<String>,
    /// Hosts reached directly: exact names, `.suffix` or `suffix` domain matches, `*` for all,
    /// IP ranges (`10.0.0.0/8`), any of them with `:port`.
    pub no_proxy: Vec<String>,
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("https", &self.https.as_deref().map(redacted))
            .field("http", &self.http.as_deref().map(redacted))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

impl ProxyConfig {
    /// Reads `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (lower case wins, as in
    /// curl) through `lookup`.
    pub fn from_lookup(lookup: &impl Fn(&str) -> Option<String>) -> Self {
        let var = |lower: &str, upper: &str| {
            lookup(lower)
                .or_else(|| lookup(upper))
                .filter(|value| !value.trim().is_empty())
        };
        let all = var("all_proxy", "ALL_PROXY");
        Self {
            https: var("https_proxy", "HTTPS_PROXY").or_else(|| all.clone()),
            http: var("http_proxy", "HTTP_PROXY").or(all),
            no_proxy: var("no_proxy", "NO_PROXY")
                .map(|list| {
                    list.split(',')
                        .map(|entry| entry.trim().to_ascii_lowercase())
                        .filter(|entry| !entry.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The settings with a scheme-less proxy (`proxy.corp:3128`, as curl accepts) read as
    /// `http://`.
    pub(crate) fn normalized(mut self) -> Self {
        for proxy in [&mut self.https, &mut self.http].into_iter().flatten() {
            let trimmed = proxy.trim();
            *proxy = if trimmed.contains("://") {
                trimmed.to_owned()
            } else {
                format!("http://{trimmed}")
            };
        }
        self
    }

    /// Checks the proxy that `destination` goes through, if any: one that cannot work is a
    /// configuration error then rather than a connection error retried on every request. (A
    /// proxy for the other scheme is left alone: the environment may name one this client
    /// never uses.)
    pub(crate) fn check(&self, destination: &Uri) -> Result<(), ClientError> {
        match self.proxy_for(destination) {
            Some(proxy) => check_proxy(proxy),
            None => Ok(()),
        }
    }

    /// The proxy to use for `destination`, if any.
    pub fn proxy_for(&self, destination: &Uri) -> Option<&str> {
        let proxy = if destination.scheme_str() == Some("https") {
            self.https.as_deref()
        } else {
            self.http.as_deref()
        }?;
        let host = destination
            .host()?
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = destination
            .port_u16()
            .unwrap_or(match destination.scheme_str() {
                Some("https") => 443,
                _ => 80,
            });
        (!self.bypasses(host, port)).then_some(proxy)
    }

    /// Whether `NO_PROXY` sends `host:port` directly. Entries are names (`.suffix`,
    /// `*.suffix` and `suffix` match subdomains too), `*`, IP ranges (`10.0.0.0/8`,
    /// `fd00::/8`, as Go and curl read them), and any of those with `:port` (then only that
    /// port).
    fn bypasses(&self, host: &str, port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        let address: Option<IpAddr> = host.parse().ok();
        self.no_proxy.iter().any(|entry| {
            if let Some((network, bits)) = entry.split_once('/') {
                return match (address, network.parse::<IpAddr>(), bits.parse::<u8>()) {
                    (Some(address), Ok(network), Ok(bits)) => in_range(address, network, bits),
                    _ => false,
                };
            }
            let (entry, entry_port) = split_port(entry);
            if entry_port.is_some_and(|entry_port| entry_port != port) {
                return false;
            }
            let entry = entry
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim_start_matches("*.")
                .trim_start_matches('.');
            entry == "*"
                || host == entry
                || (host.len() > entry.len()
                    && host.ends_with(entry)
                    && host.as_bytes()[host.len() - entry.len() - 1] == b'.')
        })
    }
}

/// `(host, Some(port))` for `host:port` and `[v6]:port`; a bare IPv6 address has no port.
fn split_port(entry: &str) -> (&str, Option<u16>) {
    let split = if entry.starts_with('[') {
        entry
            .rsplit_once("]:")
            .map(|(host, port)| (&entry[..host.len() + 1], port))
    } else {
        entry
            .split_once(':')
            .filter(|(_, port)| !port.contains(':'))
    };
    match split.and_then(|(host, port)| Some((host, port.parse().ok()?))) {
        Some((host, port)) => (host, Some(port)),
        None => (entry, None),
    }
}

/// Whether `address` is in `network/bits` (false for a prefix longer than the address).
fn in_range(address: IpAddr, network: IpAddr, bits: u8) -> bool {
    match (address, network) {
        (IpAddr::V4(address), IpAddr::V4(network)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(address) & mask == u32::from(network) & mask
        }
        (IpAddr::V6(address), IpAddr::V6(network)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(address) & mask == u128::from(network) & mask
        }
        _ => false,
    }
}

fn check_proxy(url: &str) -> Result<(), ClientError> {
    let bad = |why: String| ClientError::Config(format!("proxy {}: {why}", redacted(url)));
    let uri: Uri = url
        .parse()
        .map_err(|error| bad(format!("bad URL: {error}")))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad(
            "only http:// proxies are supported (plain HTTP to the proxy, CONNECT for https)"
                .to_owned(),
        ));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host".to_owned()));
    }
    // `http::Uri` accepts any port text; the connector would fail on every request.
    let host_port = uri.authority().map_or("", |authority| {
        let text = authority.as_str();
        text.rsplit_once('@').map_or(text, |(_, host)| host)
    });
    let has_port = host_port
        .rsplit_once(':')
        .is_some_and(|(_, tail)| !tail.contains(']'));
    if has_port && uri.port_u16().is_none() {
        return Err(bad("bad port".to_owned()));
    }
    Ok(())
}

/// `url` without the credentials it may carry, for messages and debug output.
pub(crate) fn redacted(url: &str) -> String {
    let (prefix, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{prefix}***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// A TCP connector that honours [`ProxyConfig`].
#[derive(Clone)]
pub(crate) struct ProxyConnector {
    direct: HttpConnector,
    config: std::sync::Arc<ProxyConfig>,
    /// Bounds the `CONNECT` exchange too: the TCP connect alone is bounded by `direct`.
    connect_timeout: Duration,
}

impl ProxyConnector {
    pub(crate) fn new(
        direct: HttpConnector,
        config: ProxyConfig,
        connect_timeout: Duration,
    ) -> Self {
        Self {
            direct,
            config: std::sync::Arc::new(config),
            connect_timeout,
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for ProxyConnector {
    type Response = ProxiedStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<ProxiedStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.direct.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, destination: Uri) -> Self::Future {
        let mut direct = self.direct.clone();
        let proxy = self.config.proxy_for(&destination).map(str::to_owned);
        let connect_timeout = self.connect_timeout;
        Box::pin(async move {
            let Some(proxy) = proxy else {
                let stream = direct.call(destination).await?;
                return Ok(ProxiedStream {
                    io: stream,
                    via_proxy: false,
                });
            };
            let proxy_uri: Uri = proxy.parse()?;
            let mut stream = direct.call(proxy_uri.clone()).await?;
            if destination.scheme_str() == Some("https") {
                // A proxy that accepts and then says nothing would otherwise hold the
                // attempt until the first-byte timeout.
                tokio::time::timeout(
                    connect_timeout,
                    tunnel(stream.inner_mut(), &destination, &proxy_uri),
                )
                .await
                .map_err(|_| {
                    io::Error::new(io::ErrorKind::TimedOut, "the proxy did not answer CONNECT")
                })??;
                Ok(ProxiedStream {
                    io: stream,
                    via_proxy: false,
                })
            } else {
                // Plain HTTP: hyper writes absolute-form request targets to a proxy.
                Ok(ProxiedStream {
                    io: stream,
                    via_proxy: true,
                })
            }
        })
    }
}

/// Opens a `CONNECT` tunnel to `destination` through an established proxy connection.
async fn tunnel(stream: &mut TcpStream, destination: &Uri, proxy: &Uri) -> io::Result<()> {
    let host = destination
        .host()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "destination has no host"))?;
    let port = destination.port_u16().unwrap_or(443);
    let mut request = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n");
    if let Some(credentials) = proxy_authorization(proxy) {
        request.push_str("Proxy-Authorization: ");
        request.push_str(&credentials);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;

    // Read the proxy's response head byte-wise-safe: stop exactly at the blank line so no
    // byte of the tunnelled stream is consumed.
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Err(io::Error::other("proxy response head too large"));
        }
        if stream.read(&mut byte).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "proxy closed the connection during CONNECT",
            ));
        }
        head.push(byte[0]);
    }
    let status_line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let status = status_line
        .split(|b| *b == b' ')
        .nth(1)
        .and_then(|code| std::str::from_utf8(code).ok());
    if status != Some("200") {
        return Err(io::Error::other(ProxyRefused {
            status: status.and_then(|code| code.parse().ok()),
            line: String::from_utf8_lossy(status_line).trim_end().to_owned(),
        }));
    }
    Ok(())
}

/// The proxy answered `CONNECT` with something other than 200.
#[derive(Debug, thiserror::Error)]
#[error("proxy refused CONNECT: {line}")]
pub(crate) struct ProxyRefused {
    /// The status, when the line had one.
    pub(crate) status: Option<u16>,
    line: String,
}

/// `Basic base64(user:password)` when the proxy URL carries credentials.
pub(crate) fn proxy_authorization(proxy: &Uri) -> Option<String> {
    let (credentials, _) = proxy.authority()?.as_str().rsplit_once('@')?;
    // A URL carries `@`, `:` and `%` in a name or password percent-encoded; the proxy checks
    // the text itself.
    Some(format!(
        "Basic {}",
        base64_encode(&percent_decode(credentials.as_bytes()))
    ))
}

/// `%XX` escapes decoded; anything else (a lone `%` included) kept as is.
fn percent_decode(input: &[u8]) -> Vec<u8> {
    let hex = |byte: u8| char::from(byte).to_digit(16);
    let mut out = Vec::with_capacity(input.len());
    let mut index = 0;
    while index < input.len() {
        let escaped = match input.get(index..index + 3) {
            Some([b'%', high, low]) => hex(*high).zip(hex(*low)),
            _ => None,
        };
        match escaped {
            Some((high, low)) => {
                // Two hex digits make at most 255.
                out.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                index += 3;
            }
            None => {
                out.push(input[index]);
                index += 1;
            }
        }
    }
    out
}

fn base64_encode(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A TCP stream, possibly to a proxy that expects absolute-form requests.
pub(crate) struct ProxiedStream {
    io: TokioIo<TcpStream>,
    via_proxy: bool,
}

impl Connection for ProxiedStream {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.via_proxy)
    }
}

impl Read for ProxiedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for ProxiedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn config(no_proxy: &str) -> ProxyConfig {
        let lookup = |name: &str| match name {
            "HTTPS_PROXY" => Some("http://proxy:3128".to_owned()),
            "http_proxy" => Some("http://plain:8080".to_owned()),
            "NO_PROXY" => Some(no_proxy.to_owned()),
            _ => None,
        };
        ProxyConfig::from_lookup(&lookup)
    }

    #[test]
    fn picks_the_proxy_by_scheme() {
        let config = config("");
        let https: Uri = "https://api.anthropic.com/v1/messages".parse().unwrap();
        let http: Uri = "http://example.com/".parse().unwrap();
        assert_eq!(config.proxy_for(&https), Some("http://proxy:3128"));
        assert_eq!(config.proxy_for(&http), Some("http://plain:8080"));
    }

    #[test]
    fn no_proxy_matches_hosts_and_domain_suffixes() {
        let listed = config("localhost, .internal.example,anthropic.com,127.0.0.1");
        let direct = [
            "https://localhost:8443/",
            "https://a.internal.example/",
            "https://api.anthropic.com/",
            "https://anthropic.com/",
            "http://127.0.0.1:9/",
        ];
        for url in direct {
            assert_eq!(listed.proxy_for(&url.parse().unwrap()), None, "{url}");
        }
        let proxied = ["https://notanthropic.com/", "https://api.openai.com/"];
        for url in proxied {
            assert!(listed.proxy_for(&url.parse().unwrap()).is_some(), "{url}");
        }
        assert_eq!(
            config("*").proxy_for(&"https://x.y/".parse().unwrap()),
            None
        );
    }

    #[test]
    fn no_proxy_understands_ip_ranges_and_ports() {
        let listed = config("10.0.0.0/8, 192.168.1.0/24, fd00::/8, gw.local:8443, [::1]:9000");
        let direct = [
            "https://10.1.2.3/",
            "http://192.168.1.77:8080/",
            "https://[fd12::1]/",
            "https://gw.local:8443/",
            "http://[::1]:9000/",
        ];
        for url in direct {
            assert_eq!(listed.proxy_for(&url.parse().unwrap()), None, "{url}");
        }
        let proxied = [
            "https://11.0.0.1/",
            "http://192.168.2.1/",
            "https://[fe80::1]/",
            "https://gw.local/",
            "https://gw.local:9443/",
            "http://[::1]:9001/",
            // A name is not an address in the range.
            "https://ten.example/",
        ];
        for url in proxied {
            assert!(listed.proxy_for(&url.parse().unwrap()).is_some(), "{url}");
        }
        // Nonsense ranges match nothing.
        let odd = config("10.0.0.0/99, x/8, 10.0.0.0/");
        assert!(
            odd.proxy_for(&"https://10.0.0.1/".parse().unwrap())
                .is_some()
        );
        let all = config("0.0.0.0/0");
        assert_eq!(all.proxy_for(&"https://1.2.3.4/".parse().unwrap()), None);
    }

    #[test]
    fn credentials_are_redacted_with_or_without_a_scheme() {
        assert_eq!(redacted("http://u:p@h:1/x"), "http://***@h:1/x");
        assert_eq!(redacted("u:p@h:1"), "***@h:1");
        assert_eq!(redacted("http://h:1/a@b"), "http://h:1/a@b");
        assert_eq!(redacted("http://h:1"), "http://h:1");
    }

    #[test]
    fn percent_decoding_keeps_what_is_not_an_escape() {
        assert_eq!(percent_decode(b"a%40b%3a%3A%25"), b"a@b::%");
        assert_eq!(percent_decode(b"50%"), b"50%");
        assert_eq!(percent_decode(b"%zz%4"), b"%zz%4");
        assert_eq!(percent_decode(b"%C3%A9"), "\u{e9}".as_bytes());
    }

    #[test]
    fn base64_matches_the_rfc_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, expected) in vectors {
            assert_eq!(base64_encode(input.as_bytes()), expected);
        }
    }
}
