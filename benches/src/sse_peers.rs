//! The same job for every SSE parser: parse the chunks, touch every event's data, return the
//! number of events and data bytes (so no implementation can skip work).

use bytes::Bytes;
use futures::StreamExt;
use futures::executor::block_on;
use futures::stream;

/// What one parse produced: events and total data bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    /// Events dispatched.
    pub events: u64,
    /// Bytes of data across those events.
    pub data_bytes: u64,
}

impl Tally {
    fn add(&mut self, data_len: usize) {
        self.events += 1;
        self.data_bytes += data_len as u64;
    }
}

/// An SSE parser under comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseImpl {
    /// ferroloop's sans-IO parser with borrowed events (its natural API).
    Ferroloop,
    /// ferroloop's `SseStream` adapter, yielding owned events like the stream-based peers.
    FerroloopStream,
    /// `eventsource-stream` 0.2.
    EventsourceStream,
    /// `sse-stream` 0.3.
    SseStream,
    /// `sseer` 0.3.
    Sseer,
    /// `sse-parse` 0.1.
    SseParse,
}

impl SseImpl {
    /// Every implementation, ferroloop first.
    pub const ALL: [SseImpl; 6] = [
        SseImpl::Ferroloop,
        SseImpl::FerroloopStream,
        SseImpl::EventsourceStream,
        SseImpl::SseStream,
        SseImpl::Sseer,
        SseImpl::SseParse,
    ];

    /// The name used in tables.
    pub fn name(self) -> &'static str {
        match self {
            SseImpl::Ferroloop => "ferroloop",
            SseImpl::FerroloopStream => "ferroloop (Stream)",
            SseImpl::EventsourceStream => "eventsource-stream",
            SseImpl::SseStream => "sse-stream",
            SseImpl::Sseer => "sseer",
            SseImpl::SseParse => "sse-parse",
        }
    }

    /// True for ferroloop's own implementations.
    pub fn is_ferroloop(self) -> bool {
        matches!(self, SseImpl::Ferroloop | SseImpl::FerroloopStream)
    }

    /// Parses `chunks` (in order, as one stream).
    pub fn parse(self, chunks: &[Bytes]) -> Tally {
        match self {
            SseImpl::Ferroloop => ferroloop_sans_io(chunks),
            SseImpl::FerroloopStream => ferroloop_stream(chunks),
            SseImpl::EventsourceStream => eventsource_stream(chunks),
            SseImpl::SseStream => sse_stream(chunks),
            SseImpl::Sseer => sseer(chunks),
            SseImpl::SseParse => sse_parse(chunks),
        }
    }
}

type Infallible = std::convert::Infallible;

fn byte_stream(
    chunks: &[Bytes],
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Unpin + '_ {
    stream::iter(chunks.iter().cloned().map(Ok))
}

fn ferroloop_sans_io(chunks: &[Bytes]) -> Tally {
    let mut parser = ferroloop::sse::SseParser::new();
    let mut tally = Tally::default();
    for chunk in chunks {
        parser.feed(chunk.clone());
        while let Some(item) = parser.next_item() {
            if let ferroloop::sse::SseItem::Event(event) = item {
                tally.add(event.data().len());
            }
        }
    }
    parser.finish();
    tally
}

fn ferroloop_stream(chunks: &[Bytes]) -> Tally {
    let mut events = ferroloop::sse::SseStream::new(byte_stream(chunks));
    let mut tally = Tally::default();
    block_on(async {
        while let Some(Ok(item)) = events.next().await {
            if let ferroloop::sse::SseOwnedItem::Event(event) = item {
                tally.add(event.data.len());
            }
        }
    });
    tally
}

fn eventsource_stream(chunks: &[Bytes]) -> Tally {
    use eventsource_stream::Eventsource;
    let mut events = byte_stream(chunks).eventsource();
    let mut tally = Tally::default();
    block_on(async {
        while let Some(Ok(event)) = events.next().await {
            tally.add(event.data.len());
        }
    });
    tally
}

fn sse_stream(chunks: &[Bytes]) -> Tally {
    let mut events = sse_stream::SseByteStream::new(byte_stream(chunks));
    let mut tally = Tally::default();
    block_on(async {
        while let Some(Ok(event)) = events.next().await {
            // sse-stream also yields retry-only and comment items; count the events.
            if let Some(data) = event.data {
                tally.add(data.len());
            }
        }
    });
    tally
}

fn sseer(chunks: &[Bytes]) -> Tally {
    let mut events = sseer::event_stream::EventStream::new(byte_stream(chunks));
    let mut tally = Tally::default();
    block_on(async {
        while let Some(Ok(event)) = events.next().await {
            tally.add(event.data.len());
        }
    });
    tally
}

fn sse_parse(chunks: &[Bytes]) -> Tally {
    let mut parser = sse_parse::SseParser::new();
    let mut tally = Tally::default();
    for chunk in chunks {
        parser.feed(chunk);
        while let Some(event) = parser.next_event() {
            tally.add(event.data.len());
        }
    }
    parser.finish();
    tally
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{anthropic_stream, chunked};

    #[test]
    fn every_implementation_sees_the_same_events() {
        let input = anthropic_stream(1, 100_000);
        for size in [1460, 64, 7] {
            let chunks = chunked(&input, size);
            let reference = SseImpl::Ferroloop.parse(&chunks);
            assert!(reference.events > 500);
            for imp in SseImpl::ALL {
                assert_eq!(
                    imp.parse(&chunks),
                    reference,
                    "{} at {size}-byte chunks",
                    imp.name()
                );
            }
        }
    }
}
