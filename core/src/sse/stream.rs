//! An async adapter: a stream of byte chunks in, a stream of owned SSE items out.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;

use super::parser::{SseOwnedItem, SseParser};

/// Parses a [`Stream`] of byte chunks (an HTTP body, say) into owned SSE items.
///
/// Each chunk is handed to the parser without copying; an event whose data was a single line
/// inside one chunk shares that chunk's storage. Transport errors are passed through unchanged,
/// and the unterminated tail at end of input is discarded, as the specification requires.
#[derive(Debug)]
pub struct SseStream<S> {
    inner: Option<S>,
    parser: SseParser,
}

impl<S> SseStream<S> {
    /// Wraps `inner` with a default parser.
    pub fn new(inner: S) -> Self {
        Self::with_parser(inner, SseParser::new())
    }

    /// Wraps `inner` with the given parser (to set a size limit, say).
    pub fn with_parser(inner: S, parser: SseParser) -> Self {
        Self {
            inner: Some(inner),
            parser,
        }
    }

    /// The parser (for its counters, last event id and retry value).
    pub fn parser(&self) -> &SseParser {
        &self.parser
    }
}

impl<S, B, E> Stream for SseStream<S>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: Into<Bytes>,
{
    type Item = Result<SseOwnedItem, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(item) = this.parser.next_item() {
                return Poll::Ready(Some(Ok(item.to_owned())));
            }
            let Some(inner) = this.inner.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(inner).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => this.parser.feed(chunk.into()),
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => {
                    this.inner = None;
                    this.parser.finish();
                    return Poll::Ready(None);
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use futures::executor::block_on;

    #[test]
    fn adapts_a_chunk_stream_and_passes_errors_through() {
        let chunks: Vec<Result<Bytes, &str>> = vec![
            Ok(Bytes::from_static(b"event: a\ndata: 1\n")),
            Ok(Bytes::from_static(b"\ndata: 2\n\n")),
            Err("reset"),
            Ok(Bytes::from_static(b"data: unterminated")),
        ];
        let stream = SseStream::new(futures::stream::iter(chunks));
        let items: Vec<_> = block_on(stream.collect());
        assert_eq!(items.len(), 3);
        match &items[0] {
            Ok(SseOwnedItem::Event(e)) => assert_eq!((&*e.event_type, &*e.data), ("a", "1")),
            other => panic!("unexpected {other:?}"),
        }
        match &items[1] {
            Ok(SseOwnedItem::Event(e)) => assert_eq!(&*e.data, "2"),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(items[2], Err("reset"));
    }
}
