//! Which failures are retried, and how long to wait: exponential backoff with full jitter,
//! overridden by the server's `retry-after-ms` / `retry-after`.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

/// When and how often to retry.
///
/// The defaults are a foreground agent's (as Claude Code's): ride out a provider's brief
/// outage rather than fail a long run. They apply to every retryable failure, a refused
/// connection included: against a server that is not there (a wrong `--base-url` port, a local
/// model server not started) the client gives up after 11 attempts, on average about 80 s
/// later (at most 159.5 s, the sum of the backoff ceilings), reporting each retry on the way.
/// The provider SDKs (Anthropic's, OpenAI's) retry twice by default and give up within about
/// 2 s; a caller that wants that sets `max_retries: 2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 10; 0 disables retries).
    pub max_retries: u32,
    /// The first backoff ceiling (default 500 ms); it doubles on each retry.
    pub base_delay: Duration,
    /// The largest backoff ceiling (default 32 s). Every ceiling is capped to it, the first
    /// one too: a `base_delay` above it waits up to `max_delay` from the first retry, so that
    /// lowering only this one (for a quick-failing client) is enough.
    pub max_delay: Duration,
    /// A server-requested wait longer than this is ignored in favour of the backoff
    /// (default 60 s), so a bogus header cannot park a request for hours.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 10,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(32),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// A retry about to happen, reported so that a UI can show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryEvent {
    /// The attempt that failed, from 1.
    pub attempt: u32,
    /// Its HTTP status, when the failure was a response (or an error in a 200 that names one,
    /// OpenRouter's numeric `code`).
    pub status: Option<u16>,
    /// The class of the failure, [`ClientError::code`](super::ClientError::code):
    /// `overloaded` for a 529 and for an `overloaded_error` event that came before anything was
    /// delivered (which has no status), `rate_limited`, `server`, `connection`, `timeout`, ...
    pub code: &'static str,
    /// How long the client waits before the next attempt.
    pub wait: Duration,
    /// Why the attempt failed.
    pub reason: String,
}

impl RetryEvent {
    /// The attempt about to be made (2 for the first retry): the number the bindings' `retry`
    /// events carry as `attempt`, as the agent's `retry` event does.
    #[must_use]
    pub fn next_attempt(&self) -> u32 {
        self.attempt.saturating_add(1)
    }

    /// Whether the provider was overloaded: an HTTP 529, or an overload that came without one
    /// (Anthropic's `overloaded_error` event first in a 200, OpenAI's `server_is_overloaded`).
    /// The one reading of it: the agent's `retry` event carries it as `overloaded` and counts
    /// such retries toward `fallback_after_529_retries`, and the bindings' client `retry`
    /// items carry it under the same name.
    #[must_use]
    pub fn overloaded(&self) -> bool {
        self.status == Some(529) || self.code == "overloaded"
    }
}

impl RetryPolicy {
    /// The backoff ceiling before retry number `retry` (from 0): `base × 2^retry`, capped.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// The wait before retry number `retry` (from 0): the server's request when present and
    /// reasonable (above zero, at most [`RetryPolicy::max_retry_after`]), otherwise a uniformly random fraction of the ceiling (full jitter).
    pub fn wait(&self, retry: u32, server_requested: Option<Duration>) -> Duration {
        self.wait_with_jitter(retry, server_requested, fastrand::f64())
    }

    /// [`RetryPolicy::wait`] with the random fraction given (`0.0..1.0`).
    pub fn wait_with_jitter(
        &self,
        retry: u32,
        server_requested: Option<Duration>,
        jitter: f64,
    ) -> Duration {
        match server_requested {
            // A zero wait (`retry-after: 0`, a date in the past) would retry at once, again
            // and again, against a server that is shedding load: the backoff applies instead.
            Some(wait) if !wait.is_zero() && wait <= self.max_retry_after => wait,
            _ => {
                let ceiling = self.ceiling(retry);
                // Not `mul_f64`: it panics when the product rounds up past `Duration::MAX` (a
                // ceiling that large, from a policy without a cap).
                Duration::try_from_secs_f64(ceiling.as_secs_f64() * jitter.clamp(0.0, 1.0))
                    .map_or(ceiling, |wait| wait.min(ceiling))
            }
        }
    }
}

/// Whether a response with this status and headers may be retried: an explicit
/// `x-should-retry` header decides; otherwise 408, 409, 429 and every 5xx (529 included).
/// The client also reads the body: a quota error (OpenAI's `insufficient_quota` 429,
/// [`ClientError::QuotaExceeded`](super::ClientError::QuotaExceeded)) is never retried.
pub fn is_retryable_status(status: u16, headers: &HeaderMap) -> bool {
    match headers
        .get("x-should-retry")
        .and_then(|value| value.to_str().ok())
    {
        Some(value) if value.eq_ignore_ascii_case("true") => return true,
        Some(value) if value.eq_ignore_ascii_case("false") => return false,
        _ => {}
    }
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// The wait a server asked for: `retry-after-ms` (milliseconds, fractional allowed), else
/// `retry-after` as seconds or as an HTTP date (relative to `now`).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(wait) = text("retry-after-ms")
        .and_then(|value| value.trim().parse::<f64>().ok())
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
    {
        return Some(wait);
    }
    let value = text("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn the_next_attempt_follows_the_failed_one() {
        let event = RetryEvent {
            attempt: 1,
            status: Some(429),
            code: "rate_limited",
            wait: Duration::from_millis(5),
            reason: "rate limited".into(),
        };
        assert_eq!(event.next_attempt(), 2);
    }

    /// An overload is a 529 or the class `overloaded` without one (an `overloaded_error` event
    /// first in a 200); a rate limit, a server error or a connection failure is none.
    #[test]
    fn an_overload_is_a_529_or_the_overloaded_class() {
        let retry = |status, code| RetryEvent {
            attempt: 1,
            status,
            code,
            wait: Duration::ZERO,
            reason: String::new(),
        };
        assert!(retry(Some(529), "overloaded").overloaded());
        assert!(retry(None, "overloaded").overloaded());
        assert!(retry(Some(503), "overloaded").overloaded());
        // An in-band numeric 529 whose payload named another class still reads as a 529.
        assert!(retry(Some(529), "server").overloaded());
        for (status, code) in [
            (Some(429), "rate_limited"),
            (Some(500), "server"),
            (None, "connection"),
            (None, "timeout"),
        ] {
            assert!(!retry(status, code).overloaded(), "{status:?} {code}");
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn retries_exactly_the_transient_statuses() {
        let none = HeaderMap::new();
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(is_retryable_status(status, &none), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(!is_retryable_status(status, &none), "{status}");
        }
    }

    #[test]
    fn x_should_retry_overrides_the_status() {
        assert!(is_retryable_status(
            400,
            &headers(&[("x-should-retry", "true")])
        ));
        assert!(!is_retryable_status(
            503,
            &headers(&[("x-should-retry", "false")])
        ));
    }

    #[test]
    fn foreground_defaults_are_ten_retries_from_half_a_second() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.max_retries, 10);
        assert_eq!(policy.base_delay, Duration::from_millis(500));
        assert_eq!(policy.max_delay, Duration::from_secs(32));
    }

    /// The documented worst case of the defaults against a server that refuses connections
    /// (each attempt fails at once, so the waits are the whole time): the sum of the ceilings.
    #[test]
    fn the_default_retries_wait_at_most_159_5_seconds_in_all() {
        let policy = RetryPolicy::default();
        let worst: Duration = (0..policy.max_retries)
            .map(|retry| policy.wait_with_jitter(retry, None, 1.0))
            .sum();
        assert_eq!(worst, Duration::from_millis(159_500));
    }

    #[test]
    fn backoff_doubles_from_the_base_and_stops_at_the_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.ceiling(0), Duration::from_millis(500));
        assert_eq!(policy.ceiling(1), Duration::from_secs(1));
        assert_eq!(policy.ceiling(6), Duration::from_secs(32));
        assert_eq!(policy.ceiling(7), Duration::from_secs(32));
        assert_eq!(policy.ceiling(1000), Duration::from_secs(32));
    }

    #[test]
    fn full_jitter_spans_zero_to_the_ceiling() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.wait_with_jitter(3, None, 0.0), Duration::ZERO);
        assert_eq!(
            policy.wait_with_jitter(3, None, 1.0),
            Duration::from_secs(4)
        );
        assert_eq!(
            policy.wait_with_jitter(3, None, 0.5),
            Duration::from_secs(2)
        );
        for retry in 0..20 {
            let wait = policy.wait(retry, None);
            assert!(wait <= policy.ceiling(retry));
        }
    }

    /// A policy without a cap (`Duration::MAX`, a Rust caller's "no limit") waits at most the
    /// ceiling: `Duration::mul_f64` panicked ("overflow when converting float to duration")
    /// once the jittered wait rounded up past `Duration::MAX`.
    #[test]
    fn an_uncapped_policy_waits_without_panicking() {
        let policy = RetryPolicy {
            base_delay: Duration::MAX,
            max_delay: Duration::MAX,
            ..RetryPolicy::default()
        };
        for jitter in [0.0, 0.5, 1.0 - f64::EPSILON, 1.0] {
            for retry in [0, 1, 40] {
                assert!(policy.wait_with_jitter(retry, None, jitter) <= Duration::MAX);
            }
        }
        assert_eq!(policy.wait_with_jitter(0, None, 1.0), Duration::MAX);
        assert_eq!(policy.wait_with_jitter(0, None, 0.0), Duration::ZERO);
    }

    #[test]
    fn server_requested_wait_wins_unless_unreasonable() {
        let policy = RetryPolicy::default();
        let asked = Some(Duration::from_secs(3));
        assert_eq!(
            policy.wait_with_jitter(0, asked, 0.1),
            Duration::from_secs(3)
        );
        assert_eq!(
            policy.wait_with_jitter(1, Some(Duration::ZERO), 0.5),
            Duration::from_millis(500)
        );
        let absurd = Some(Duration::from_secs(3600));
        assert_eq!(
            policy.wait_with_jitter(0, absurd, 1.0),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn parses_retry_after_in_every_form() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250")]), now),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "1.5"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_micros(1500))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")]), now),
            Some(Duration::from_secs(2))
        );
        // 1445412480 is Wed, 21 Oct 2015 07:28:00 GMT.
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:07 GMT")]),
                now
            ),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-1")]), now), None);
        // Absurd values are ignored, never a panic.
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1e300")]), now),
            None
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "NaN")]), now), None);
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "1e300"), ("retry-after", "1")]),
                now
            ),
            Some(Duration::from_secs(1))
        );
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    proptest::proptest! {
        #[test]
        fn any_header_value_parses_without_panicking(value in "[ -~]{0,40}") {
            let Ok(header) = HeaderValue::from_str(&value) else { return Ok(()) };
            for name in ["retry-after", "retry-after-ms"] {
                let mut map = HeaderMap::new();
                map.insert(name, header.clone());
                let _ = retry_after(&map, SystemTime::now());
            }
        }

        #[test]
        fn waits_never_exceed_the_ceiling(retry in 0u32..200, jitter in 0.0f64..1.0) {
            let policy = RetryPolicy::default();
            proptest::prop_assert!(policy.wait_with_jitter(retry, None, jitter) <= policy.max_delay);
        }
    }
}
