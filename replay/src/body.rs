//! The response body: a fixed buffer, or pieces pushed by a writer task that paces them and
//! injects faults.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

use crate::script::{Fault, PreparedBody};
use crate::server::State;

/// A response body of the replay server.
#[derive(Debug)]
pub struct ReplayBody {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Full(Option<Bytes>),
    Channel(mpsc::Receiver<Result<Bytes, io::Error>>),
}

impl ReplayBody {
    /// A body sent in one piece, with a `content-length`.
    pub(crate) fn full(bytes: Bytes) -> Self {
        let bytes = if bytes.is_empty() { None } else { Some(bytes) };
        Self {
            inner: Inner::Full(bytes),
        }
    }

    /// A body written piece by piece by a task (chunked / HTTP/2 data frames).
    pub(crate) fn channel(receiver: mpsc::Receiver<Result<Bytes, io::Error>>) -> Self {
        Self {
            inner: Inner::Channel(receiver),
        }
    }
}

impl Body for ReplayBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match &mut self.inner {
            Inner::Full(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Inner::Channel(receiver) => receiver
                .poll_recv(cx)
                .map(|piece| piece.map(|piece| piece.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.inner, Inner::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |bytes| bytes.len() as u64))
            }
            Inner::Channel(_) => SizeHint::default(),
        }
    }
}

/// How a body is written.
#[derive(Debug, Clone)]
pub(crate) struct Pacing {
    pub(crate) chunk_bytes: Option<usize>,
    pub(crate) chunk_delay: Duration,
    pub(crate) fault: Option<Fault>,
}

impl Pacing {
    /// True when the body can go out in one piece.
    pub(crate) fn is_plain(&self) -> bool {
        self.chunk_bytes.is_none()
            && self.chunk_delay.is_zero()
            && !matches!(
                self.fault,
                Some(Fault::DisconnectAfter { .. } | Fault::StallAfter { .. })
            )
    }
}

/// Writes `body` into `sender` as `pacing` says. Returns when done, failed, or the client went
/// away (counted in `state`).
pub(crate) async fn write_body(
    body: PreparedBody,
    pacing: Pacing,
    sender: mpsc::Sender<Result<Bytes, io::Error>>,
    state: Arc<State>,
) {
    let outcome = match body {
        PreparedBody::Bytes(bytes) => write_bytes(bytes, &pacing, &sender).await,
        PreparedBody::Paced {
            count,
            interval_us,
            data,
        } => write_paced(count, interval_us, &data, &sender).await,
    };
    match outcome {
        Outcome::Complete => {}
        Outcome::ClientGone => {
            state.aborted_bodies.fetch_add(1, Ordering::SeqCst);
        }
        Outcome::Disconnected => {
            // Hyper aborts the connection (HTTP/1) or resets the stream (HTTP/2) on a body
            // error, dropping whatever it has not written yet. Let it take the last piece, hit
            // an empty channel (which makes it flush), and only then break the connection.
            while sender.capacity() < sender.max_capacity() && !sender.is_closed() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            let _ = sender
                .send(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "scripted disconnect",
                )))
                .await;
        }
    }
    state.mark_activity();
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
}

enum Outcome {
    Complete,
    ClientGone,
    Disconnected,
}

async fn write_bytes(
    bytes: Bytes,
    pacing: &Pacing,
    sender: &mpsc::Sender<Result<Bytes, io::Error>>,
) -> Outcome {
    let total = bytes.len();
    let piece_len = pacing.chunk_bytes.unwrap_or(total).max(1);
    // The one position where the fault strikes, if any.
    let fault_at = match &pacing.fault {
        Some(Fault::DisconnectAfter { bytes } | Fault::StallAfter { bytes, .. }) => {
            Some((*bytes).min(total))
        }
        _ => None,
    };
    let mut sent = 0;
    let mut fault_done = false;
    while sent < total || (!fault_done && fault_at == Some(total)) {
        if !fault_done && fault_at == Some(sent) {
            fault_done = true;
            match &pacing.fault {
                Some(Fault::DisconnectAfter { .. }) => return Outcome::Disconnected,
                Some(Fault::StallAfter { ms, .. }) => {
                    tokio::time::sleep(Duration::from_millis(*ms)).await;
                    if sender.is_closed() {
                        return Outcome::ClientGone;
                    }
                }
                _ => {}
            }
            continue;
        }
        let mut end = (sent + piece_len).min(total);
        if let Some(at) = fault_at.filter(|at| !fault_done && *at > sent) {
            end = end.min(at);
        }
        if sender.send(Ok(bytes.slice(sent..end))).await.is_err() {
            return Outcome::ClientGone;
        }
        sent = end;
        if !pacing.chunk_delay.is_zero() && sent < total {
            tokio::time::sleep(pacing.chunk_delay).await;
        }
    }
    Outcome::Complete
}

async fn write_paced(
    count: u64,
    interval_us: u64,
    data: &str,
    sender: &mpsc::Sender<Result<Bytes, io::Error>>,
) -> Outcome {
    let start = tokio::time::Instant::now();
    let origin = crate::clock_origin();
    for index in 0..count {
        let due = start + Duration::from_micros(interval_us.saturating_mul(index));
        tokio::time::sleep_until(due).await;
        let stamp = origin.elapsed().as_nanos();
        let event = format!("id: {stamp}\ndata: {data}\n\n");
        if sender.send(Ok(Bytes::from(event))).await.is_err() {
            return Outcome::ClientGone;
        }
    }
    Outcome::Complete
}
