//! Watchdogs on a streaming response: first event, idle gap between events (with an earlier
//! stall notice), total time. Keep-alives (comments, bare blank lines) count as signs of life
//! for the first-event and idle timeouts, not for the stall notice. One lazily re-armed timer
//! serves all of them, so an event costs a clock read, never a timer reset.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// Timeouts of a request. Every one is reported as [`ClientError::Timeout`] with the elapsed
/// time.
///
/// [`ClientError::Timeout`]: super::ClientError::Timeout
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    /// Making a new connection, all of it: the TCP connect, the proxy's answer to `CONNECT`
    /// when tunnelling, and the TLS handshake (default 30 s). A connect timeout is retried like
    /// any connection failure. (A pooled connection skips it.)
    pub connect: Duration,
    /// From sending the request to the response headers (default 600 s).
    pub first_byte: Duration,
    /// From the headers to the first event, or from the latest keep-alive (a comment or a bare
    /// blank line; default 90 s).
    pub first_event: Duration,
    /// Between two events, or since the latest keep-alive (a comment or a bare blank line;
    /// default 90 s).
    pub idle: Duration,
    /// A gap this long between events is reported once as a stall (default 30 s).
    pub stall_notice: Duration,
    /// The whole request, retries included (default 600 s).
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(30),
            first_byte: Duration::from_secs(600),
            first_event: Duration::from_secs(90),
            idle: Duration::from_secs(90),
            stall_notice: Duration::from_secs(30),
            total: Duration::from_secs(600),
        }
    }
}

impl Timeouts {
    /// The name of the first timeout that is zero (`connect`, `first_byte`, `first_event`,
    /// `idle`, `stall_notice`, `total`), if any. A zero timeout has no use: the total and
    /// first-byte ones fail every request at once, the others race the network (a stream whose
    /// events arrive in one read gets through, any other breaks), and a host that writes 0
    /// most likely means "none", as 0 does for Node's and curl's timeouts.
    /// [`Client::new`](super::Client::new) refuses such a configuration.
    pub fn first_zero(&self) -> Option<&'static str> {
        [
            ("connect", self.connect),
            ("first_byte", self.first_byte),
            ("first_event", self.first_event),
            ("idle", self.idle),
            ("stall_notice", self.stall_notice),
            ("total", self.total),
        ]
        .into_iter()
        .find(|(_, limit)| limit.is_zero())
        .map(|(name, _)| name)
    }
}

/// Which watchdog fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutKind {
    /// The connection was not established in time.
    Connect,
    /// The response headers did not arrive in time.
    FirstByte,
    /// No event arrived in time after the headers.
    FirstEvent,
    /// Too long between two events.
    Idle,
    /// The whole request took too long.
    Total,
}

impl fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutKind::Connect => "connect",
            TimeoutKind::FirstByte => "first byte",
            TimeoutKind::FirstEvent => "first event",
            TimeoutKind::Idle => "idle",
            TimeoutKind::Total => "total",
        })
    }
}

/// What a watchdog reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alarm {
    /// No event for `elapsed` (reported once per gap).
    Stall(Duration),
    /// A timeout: the request must end.
    Timeout(TimeoutKind, Duration),
    /// The grace after the provider's final event is over (see [`Watchdog::on_complete`]).
    GraceOver,
}

/// How long the end of the body is awaited after the provider's final event. The end normally
/// comes with the event or just after (reading it lets the connection go back to the pool);
/// a server that never ends the body must not hold a complete answer for the idle timeout.
pub(crate) const COMPLETE_GRACE: Duration = Duration::from_millis(500);

/// The watchdogs of one response body.
#[derive(Debug)]
pub(crate) struct Watchdog {
    /// The three limits this watchdog applies (not the whole [`Timeouts`]: the response stream
    /// holds it by value, and its size counts).
    first_event: Duration,
    idle: Duration,
    stall_notice: Duration,
    total_deadline: Instant,
    /// The last event (the stall notice counts from it).
    last_progress: Instant,
    /// The last event or keep-alive (the first-event and idle timeouts count from it).
    last_alive: Instant,
    seen_event: bool,
    stall_reported: bool,
    timer: Pin<Box<Sleep>>,
    request_start: Instant,
    /// Set once the final event arrived: the end of the body is awaited until then only.
    grace_deadline: Option<Instant>,
}

impl Watchdog {
    /// Starts watching at the moment the headers arrived.
    pub(crate) fn new(timeouts: &Timeouts, request_start: Instant, headers_at: Instant) -> Self {
        let total_deadline = later(request_start, timeouts.total);
        Self {
            first_event: timeouts.first_event,
            idle: timeouts.idle,
            stall_notice: timeouts.stall_notice,
            total_deadline,
            last_progress: headers_at,
            last_alive: headers_at,
            seen_event: false,
            stall_reported: false,
            timer: Box::pin(tokio::time::sleep_until(headers_at.min(total_deadline))),
            request_start,
            grace_deadline: None,
        }
    }

    /// Records that the provider's final event arrived at `now`: from then on only
    /// [`COMPLETE_GRACE`] is given to the end of the body, and no stall is reported.
    pub(crate) fn on_complete(&mut self, now: Instant) {
        if self.grace_deadline.is_none() {
            self.grace_deadline = Some(later(now, COMPLETE_GRACE));
        }
    }

    /// Records an event delivered at `now`.
    pub(crate) fn on_event(&mut self, now: Instant) {
        self.last_progress = now;
        self.last_alive = now;
        self.seen_event = true;
        self.stall_reported = false;
    }

    /// Records a keep-alive (a comment or a bare blank line) read at `now`. The server is alive, so
    /// the first-event and idle timeouts start again (a reasoning model behind a gateway that sends
    /// `: PROCESSING` may think for minutes before its first token); the stall notice still counts
    /// from the last event, since no output arrived.
    pub(crate) fn on_keepalive(&mut self, now: Instant) {
        self.last_alive = self.last_alive.max(now);
    }

    /// Resolves when an alarm is due; otherwise arms the timer for the earliest deadline.
    pub(crate) fn poll_alarm(&mut self, cx: &mut Context<'_>) -> Poll<Alarm> {
        loop {
            let now = Instant::now();
            if let Some(grace) = self.grace_deadline {
                if now >= grace.min(self.total_deadline) {
                    return Poll::Ready(Alarm::GraceOver);
                }
                self.arm(grace.min(self.total_deadline));
                if self.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                continue;
            }
            if now >= self.total_deadline {
                return Poll::Ready(Alarm::Timeout(TimeoutKind::Total, now - self.request_start));
            }
            let (kind, limit) = if self.seen_event {
                (TimeoutKind::Idle, self.idle)
            } else {
                (TimeoutKind::FirstEvent, self.first_event)
            };
            let quiet_deadline = later(self.last_alive, limit);
            if now >= quiet_deadline {
                return Poll::Ready(Alarm::Timeout(kind, now - self.last_alive));
            }
            let stall_deadline = later(self.last_progress, self.stall_notice);
            let stall_pending = !self.stall_reported && stall_deadline < quiet_deadline;
            if stall_pending && now >= stall_deadline {
                self.stall_reported = true;
                return Poll::Ready(Alarm::Stall(now - self.last_progress));
            }
            let mut next = quiet_deadline.min(self.total_deadline);
            if stall_pending {
                next = next.min(stall_deadline);
            }
            self.arm(next);
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    /// Makes the timer fire no later than `next`.
    fn arm(&mut self, next: Instant) {
        // Lazy re-arming: a timer set too early just wakes us to recompute; only a timer set
        // too late (or already fired) needs moving.
        if self.timer.deadline() > next || self.timer.is_elapsed() {
            self.timer.as_mut().reset(next);
        }
    }
}

/// `at + wait`, saturating at a far future instead of panicking on a huge configured duration.
pub(crate) fn later(at: Instant, wait: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    at.checked_add(wait.min(FAR))
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_timeouts_are_the_documented_ones() {
        let timeouts = Timeouts::default();
        assert_eq!(timeouts.idle, Duration::from_secs(90));
        assert_eq!(timeouts.stall_notice, Duration::from_secs(30));
        assert_eq!(timeouts.total, Duration::from_secs(600));
        assert_eq!(timeouts.first_event, Duration::from_secs(90));
        assert_eq!(timeouts.connect, Duration::from_secs(30));
    }

    #[test]
    fn huge_durations_saturate_instead_of_panicking() {
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now + Duration::from_secs(3600));
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }
}
