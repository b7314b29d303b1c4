//! The sans-IO event-stream parser (WHATWG HTML, "Parsing an event stream").

use std::collections::VecDeque;

use bytes::Bytes;

use super::event::{SseEvent, SseEventRef, SseItem};
use super::line_end::LineEndFinder;
use crate::Utf8Bytes;

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";
const DEFAULT_EVENT_TYPE: &str = "message";

/// Options for [`SseParser`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SseConfig {
    /// Largest pending event, in bytes (the line being read plus the data and event type
    /// gathered so far). An event that grows past it is dropped, counted in
    /// [`SseParser::dropped_events`], and parsing resumes after the next blank line.
    /// `None` (the default) means no limit: real events reach tens of MiB.
    pub max_event_bytes: Option<usize>,
}

impl SseConfig {
    /// Sets [`SseConfig::max_event_bytes`].
    pub fn max_event_bytes(mut self, limit: Option<usize>) -> Self {
        self.max_event_bytes = limit;
        self
    }
}

/// Where the value of a field (the event type or the data) of the pending event lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// Not seen yet.
    Empty,
    /// Validated UTF-8 at `start..end` of the input chunk numbered `chunk` (the current one, or
    /// the one before it, which the parser keeps alive while a field points into it).
    Slice {
        chunk: u64,
        start: usize,
        end: usize,
    },
    /// Copied into the parser's own reusable buffer.
    Buf,
}

/// What a complete line turned into.
enum LineOutcome {
    Nothing,
    Dispatch,
    Retry(u64),
}

/// An item found by [`SseParser::next_item`], without its borrow.
#[cfg(any(feature = "client", test))]
#[derive(Clone, Copy)]
enum Step {
    Dispatch,
    Retry(u64),
}

/// A zero-copy, linear-time Server-Sent-Events parser.
///
/// Feed it byte chunks split anywhere with [`feed`](Self::feed), then drain the completed items with
/// [`next_item`](Self::next_item), a lending iterator whose events borrow from the input chunk (a
/// single-line `data:` inside one chunk is never copied) or from the parser's reusable buffers
/// (multi-line data, or data that spans chunks, is assembled once). It follows the WHATWG
/// algorithm exactly: one leading BOM stripped, CR / LF / CRLF line ends (a CR ending a chunk ends
/// the line at once), comments, `event` / `data` / `id` / `retry` fields, invalid UTF-8 replaced by
/// U+FFFD. It never returns an error and never panics on any input.
///
/// ```
/// use bytes::Bytes;
/// use ferroloop::sse::{SseItem, SseParser};
///
/// let mut parser = SseParser::new();
/// parser.feed(Bytes::from_static(b"event: ping\ndata: {\"a\":1}\n\n"));
/// match parser.next_item() {
///     Some(SseItem::Event(event)) => {
///         assert_eq!(event.event_type(), "ping");
///         assert_eq!(event.data(), "{\"a\":1}");
///     }
///     other => panic!("unexpected {other:?}"),
/// }
/// assert!(parser.next_item().is_none());
/// ```
#[derive(Debug)]
pub struct SseParser {
    config: SseConfig,
    line_end: LineEndFinder,
    /// The chunk being scanned, from `pos`, and its sequence number.
    cur: Bytes,
    pos: usize,
    cur_id: u64,
    /// An earlier chunk (numbered `prev_id`), kept while a pending field points into it.
    prev: Bytes,
    prev_id: u64,
    /// Chunks fed and not yet reached.
    queue: VecDeque<Bytes>,
    /// Bytes of a line that began in an earlier chunk.
    line_buf: Vec<u8>,
    /// A line is in progress across chunks (it may hold no bytes yet, e.g. while discarding).
    line_open: bool,
    /// The previous chunk ended with CR: skip one LF at the start of the next bytes.
    skip_lf: bool,
    /// How many bytes of the BOM have matched at stream start; `None` once decided.
    bom_matched: Option<u8>,

    event_type: Field,
    event_type_buf: String,
    /// `Field::Empty` until the first `data` field of the pending event.
    data: Field,
    /// Data assembled so far; the value starts at `data_start` (a line buffer moved in whole
    /// keeps its `data:` prefix in front, so dropping the prefix needs no copy).
    data_buf: String,
    data_start: usize,

    last_event_id: Utf8Bytes,
    retry: Option<u64>,

    /// The pending event went over `max_event_bytes`: ignore lines until the next blank line.
    discarding: bool,
    /// Buffers of the event returned last must be cleared before parsing continues.
    reset_pending: bool,

    dropped_events: u64,
    bytes_scanned: u64,
    bytes_fed: u64,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser with the default configuration (no event size limit).
    pub fn new() -> Self {
        Self::with_config(SseConfig::default())
    }

    /// A parser with the given configuration.
    pub fn with_config(config: SseConfig) -> Self {
        Self {
            config,
            line_end: LineEndFinder::new(),
            cur: Bytes::new(),
            pos: 0,
            cur_id: 0,
            prev: Bytes::new(),
            prev_id: u64::MAX,
            queue: VecDeque::new(),
            line_buf: Vec::new(),
            line_open: false,
            skip_lf: false,
            bom_matched: Some(0),
            event_type: Field::Empty,
            event_type_buf: String::new(),
            data: Field::Empty,
            data_buf: String::new(),
            data_start: 0,
            last_event_id: Utf8Bytes::new(),
            retry: None,
            discarding: false,
            reset_pending: false,
            dropped_events: 0,
            bytes_scanned: 0,
            bytes_fed: 0,
        }
    }

    /// The configuration this parser was built with.
    pub fn config(&self) -> &SseConfig {
        &self.config
    }

    /// Queues a chunk of the stream. Chunks may be split anywhere, including inside a CRLF pair,
    /// a UTF-8 sequence or the BOM. Drain the completed items with [`next_item`](Self::next_item).
    pub fn feed(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        self.bytes_fed += chunk.len() as u64;
        self.queue.push_back(chunk);
    }

    /// Copies `chunk` and queues it (for callers that do not own a [`Bytes`]).
    pub fn feed_slice(&mut self, chunk: &[u8]) {
        self.feed(Bytes::copy_from_slice(chunk));
    }

    /// Feeds `chunk` and calls `on_item` for every item it completes, in order.
    pub fn feed_with(&mut self, chunk: Bytes, mut on_item: impl FnMut(SseItem<'_>)) {
        self.feed(chunk);
        while let Some(item) = self.next_item() {
            on_item(item);
        }
    }

    /// The next completed item (an event, or a `retry` value at the point its field was read),
    /// or `None` when every byte fed so far has been consumed.
    ///
    /// The returned event borrows the parser; it stays valid until the next call.
    pub fn next_item(&mut self) -> Option<SseItem<'_>> {
        if self.reset_pending {
            self.reset_pending = false;
            self.clear_pending_event();
        }
        loop {
            if self.pos >= self.cur.len() && !self.advance_chunk() {
                return None;
            }
            // Scan with the chunk moved out of `self` (a move, not a reference-count update), so
            // the line handlers can borrow it while they update the parser.
            let chunk = std::mem::take(&mut self.cur);
            let outcome = self.scan(&chunk);
            self.cur = chunk;
            match outcome {
                LineOutcome::Nothing => {}
                LineOutcome::Retry(ms) => return Some(SseItem::Retry(ms)),
                LineOutcome::Dispatch => {
                    self.reset_pending = true;
                    return Some(SseItem::Event(self.pending_event()));
                }
            }
        }
    }

    /// [`next_item`](Self::next_item), with [`dropped_events`](Self::dropped_events) as it
    /// stands after the call: for a caller that must refuse any event following a dropped one
    /// (the item borrows the parser, so the count cannot be read next to it otherwise).
    #[cfg(any(feature = "client", test))]
    pub(crate) fn next_item_and_dropped(&mut self) -> (u64, Option<SseItem<'_>>) {
        // The item is taken apart and lent again (its fields stay in place until the next
        // call), so that `scan` keeps a single caller and stays inlined into `next_item`.
        let step = match self.next_item() {
            None => None,
            Some(SseItem::Retry(ms)) => Some(Step::Retry(ms)),
            Some(SseItem::Event(_)) => Some(Step::Dispatch),
        };
        let dropped = self.dropped_events;
        let item = step.map(|step| match step {
            Step::Retry(ms) => SseItem::Retry(ms),
            Step::Dispatch => SseItem::Event(self.pending_event()),
        });
        (dropped, item)
    }

    /// Ends the stream: an unterminated event (no blank line after it) is discarded, as the
    /// specification requires. Returns whether anything was discarded.
    ///
    /// The parser can then be fed a new stream (a reconnection): the BOM check is re-armed, the
    /// last event id and the retry value are kept.
    pub fn finish(&mut self) -> bool {
        // Bytes not yet scanned belong to the unterminated tail.
        let discarded = self.pos < self.cur.len()
            || !self.queue.is_empty()
            || self.line_open
            || (!self.reset_pending
                && (self.data != Field::Empty || self.event_type != Field::Empty));
        self.queue.clear();
        self.cur = Bytes::new();
        self.prev = Bytes::new();
        self.prev_id = u64::MAX;
        self.pos = 0;
        self.cur_id += 1;
        self.line_buf.clear();
        self.line_open = false;
        self.skip_lf = false;
        self.bom_matched = Some(0);
        self.discarding = false;
        self.reset_pending = false;
        self.clear_pending_event();
        discarded
    }

    /// The current reconnection time set by the last valid `retry` field, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The last event id (persists across events; an `id` field with an empty value resets it).
    pub fn last_event_id(&self) -> &str {
        self.last_event_id.as_str()
    }

    /// Events dropped because they grew past [`SseConfig::max_event_bytes`].
    pub fn dropped_events(&self) -> u64 {
        self.dropped_events
    }

    /// Bytes examined by the parser's scanning loops (line-end search, field-name search and
    /// UTF-8 validation). A work counter, used to prove the parser is linear in its input.
    pub fn bytes_scanned(&self) -> u64 {
        self.bytes_scanned
    }

    /// Total bytes fed so far.
    pub fn bytes_fed(&self) -> u64 {
        self.bytes_fed
    }

    /// Moves on to the next queued chunk. Returns false when none is queued.
    fn advance_chunk(&mut self) -> bool {
        let Some(next) = self.queue.pop_front() else {
            return false;
        };
        let finished = std::mem::replace(&mut self.cur, next);
        let finished_id = self.cur_id;
        self.cur_id += 1;
        self.pos = 0;
        if self.refers_to(finished_id) {
            // Fields still point into the finished chunk: keep it, and copy out whatever pointed
            // into an older one (at most one event straddles each chunk boundary).
            self.materialize_older_than(finished_id);
            self.prev = finished;
            self.prev_id = finished_id;
        } else if !self.refers_to(self.prev_id) {
            self.prev = Bytes::new();
            self.prev_id = u64::MAX;
        }
        true
    }

    fn refers_to(&self, chunk_id: u64) -> bool {
        let points_into =
            |field: Field| matches!(field, Field::Slice { chunk, .. } if chunk == chunk_id);
        points_into(self.data) || points_into(self.event_type)
    }

    /// Copies fields that point into chunks older than `chunk_id` into the parser's buffers.
    fn materialize_older_than(&mut self, chunk_id: u64) {
        if let Field::Slice { chunk, start, end } = self.event_type
            && chunk < chunk_id
        {
            let text = self.text_in(&self.cur, chunk, start, end).to_owned();
            self.event_type_buf = text;
            self.event_type = Field::Buf;
        }
        if let Field::Slice { chunk, start, end } = self.data
            && chunk < chunk_id
        {
            let mut buf = std::mem::take(&mut self.data_buf);
            buf.clear();
            buf.push_str(self.text_in(&self.cur, chunk, start, end));
            self.data_buf = buf;
            self.data_start = 0;
            self.data = Field::Buf;
        }
    }

    /// The text of a `Field::Slice`. `scanning` is the current chunk (while `scan` holds it,
    /// `self.cur` is empty).
    fn text_in<'a>(&'a self, scanning: &'a Bytes, chunk: u64, start: usize, end: usize) -> &'a str {
        let source = if chunk == self.cur_id {
            scanning
        } else {
            &self.prev
        };
        debug_assert!(
            chunk == self.cur_id || chunk == self.prev_id,
            "slice of a dropped chunk"
        );
        let bytes = source.get(start..end).unwrap_or_default();
        debug_assert!(
            std::str::from_utf8(bytes).is_ok(),
            "slices are validated when stored"
        );
        debug_assert!(is_utf8(bytes));
        // SAFETY: a `Field::Slice` is only stored after `simdutf8` validated exactly this range
        // of this chunk (`append_data`, `set_event_type`), chunks are immutable, and the chunk a
        // slice points into is kept as the current chunk or `prev` until the field is cleared or
        // copied out (`advance_chunk` / `materialize_older_than`). Tested by the chunk-boundary
        // unit tests and the chunk-invariance property tests, which run with the debug
        // assertion above.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// Scans `chunk` from `self.pos` until a line produces an item or the chunk is used up.
    fn scan(&mut self, chunk: &Bytes) -> LineOutcome {
        if self.bom_matched.is_some() && !self.consume_bom(chunk) {
            return LineOutcome::Nothing;
        }
        if self.skip_lf && self.pos < chunk.len() {
            self.skip_lf = false;
            if chunk[self.pos] == b'\n' {
                self.pos += 1;
                self.bytes_scanned += 1;
            }
        }
        while self.pos < chunk.len() {
            let rest = &chunk[self.pos..];
            // A blank line (the end of every event) needs no search.
            let found = match rest.first() {
                Some(b'\n' | b'\r') => Some(0),
                _ => self.line_end.find(rest),
            };
            let Some(offset) = found else {
                self.bytes_scanned += rest.len() as u64;
                let start = self.pos;
                self.pos = chunk.len();
                self.push_line_bytes(&chunk[start..]);
                return LineOutcome::Nothing;
            };
            self.bytes_scanned += offset as u64 + 1;
            let line_start = self.pos;
            let line_end = line_start + offset;
            let mut next = line_end + 1;
            if chunk[line_end] == b'\r' {
                match chunk.get(next) {
                    Some(b'\n') => {
                        next += 1;
                        self.bytes_scanned += 1;
                    }
                    Some(_) => {}
                    // The CR ends the line now; an LF may still follow in the next chunk.
                    None => self.skip_lf = true,
                }
            }
            self.pos = next;
            let outcome = if self.line_open {
                self.push_line_bytes(&chunk[line_start..line_end]);
                self.line_open = false;
                let line = std::mem::take(&mut self.line_buf);
                self.process_buffered_line(chunk, line)
            } else {
                self.process_line(chunk, line_start, line_end)
            };
            if !matches!(outcome, LineOutcome::Nothing) {
                return outcome;
            }
        }
        LineOutcome::Nothing
    }

    /// Strips a leading BOM, which may be split across chunks. Returns false when the chunk was
    /// used up while matching.
    fn consume_bom(&mut self, chunk: &Bytes) -> bool {
        let Some(mut matched) = self.bom_matched else {
            return true;
        };
        while self.pos < chunk.len() && usize::from(matched) < BOM.len() {
            if chunk[self.pos] != BOM[usize::from(matched)] {
                // Not a BOM: the bytes matched so far are ordinary line content.
                self.bom_matched = None;
                if matched > 0 {
                    self.push_line_bytes(&BOM[..usize::from(matched)]);
                }
                return true;
            }
            matched += 1;
            self.pos += 1;
            self.bytes_scanned += 1;
        }
        if usize::from(matched) == BOM.len() {
            self.bom_matched = None;
            true
        } else {
            self.bom_matched = Some(matched);
            false
        }
    }

    /// Keeps bytes of a line that continues in a later chunk.
    fn push_line_bytes(&mut self, bytes: &[u8]) {
        self.line_open = true;
        if self.discarding {
            // Only whether the line is blank matters until the next blank line.
            if !bytes.is_empty() && self.line_buf.is_empty() {
                self.line_buf.push(b'x');
            }
            return;
        }
        self.line_buf.extend_from_slice(bytes);
        if self.over_limit(0) {
            self.drop_pending_event();
            self.line_buf.clear();
            self.line_buf.push(b'x');
        }
    }

    fn pending_event_bytes(&self) -> usize {
        let data = match self.data {
            Field::Empty => 0,
            Field::Slice { start, end, .. } => end - start,
            Field::Buf => self.data_buf.len() - self.data_start,
        };
        let event_type = match self.event_type {
            Field::Empty => 0,
            Field::Slice { start, end, .. } => end - start,
            Field::Buf => self.event_type_buf.len(),
        };
        self.line_buf.len() + data + event_type
    }

    fn over_limit(&self, extra: usize) -> bool {
        self.config
            .max_event_bytes
            .is_some_and(|limit| self.pending_event_bytes() + extra > limit)
    }

    fn drop_pending_event(&mut self) {
        self.dropped_events += 1;
        self.discarding = true;
        tracing::warn!(
            limit = self.config.max_event_bytes,
            "SSE event exceeds max_event_bytes; dropped until the next blank line"
        );
        self.clear_pending_event();
    }

    fn clear_pending_event(&mut self) {
        self.event_type = Field::Empty;
        self.event_type_buf.clear();
        self.data = Field::Empty;
        self.data_buf.clear();
        self.data_start = 0;
    }

    /// Processes a complete line that was assembled in `line_buf` (it spanned chunks).
    fn process_buffered_line(&mut self, scanning: &Bytes, mut line: Vec<u8>) -> LineOutcome {
        let outcome = if self.discarding {
            self.discarding_line(line.is_empty())
        } else if line.is_empty() {
            self.dispatch_outcome()
        } else {
            let (name_end, value_start) = self.split_field(&line);
            if &line[..name_end] == b"data" && self.data == Field::Empty {
                // Move the assembled line into the data buffer instead of copying it.
                let recycled = std::mem::take(&mut self.data_buf).into_bytes();
                self.bytes_scanned += line.len() as u64;
                self.data_buf = into_text(line);
                self.data_start = value_start.min(self.data_buf.len());
                self.data = Field::Buf;
                line = recycled;
                LineOutcome::Nothing
            } else {
                self.apply_field(scanning, &line, name_end, value_start, None)
            }
        };
        line.clear();
        if self.line_buf.capacity() < line.capacity() {
            self.line_buf = line;
        }
        outcome
    }

    /// Processes a complete line that lies inside one chunk, without copying it.
    fn process_line(&mut self, chunk: &Bytes, start: usize, end: usize) -> LineOutcome {
        if self.discarding {
            return self.discarding_line(start == end);
        }
        if start == end {
            return self.dispatch_outcome();
        }
        if self.over_limit(end - start) {
            // The same rule as for a line assembled across chunks: the line counts in full.
            self.drop_pending_event();
            return LineOutcome::Nothing;
        }
        let line = &chunk[start..end];
        let (name_end, value_start) = self.split_field(line);
        self.apply_field(chunk, line, name_end, value_start, Some(start))
    }

    fn discarding_line(&mut self, blank: bool) -> LineOutcome {
        if blank {
            self.discarding = false;
        }
        LineOutcome::Nothing
    }

    fn dispatch_outcome(&mut self) -> LineOutcome {
        if self.data != Field::Empty {
            LineOutcome::Dispatch
        } else {
            // No data: the event type buffer is reset and nothing is dispatched.
            self.clear_pending_event();
            LineOutcome::Nothing
        }
    }

    /// Finds the field name and the start of its value (after the colon and one optional space).
    /// A line starting with a colon is a comment: its name is empty.
    fn split_field(&mut self, line: &[u8]) -> (usize, usize) {
        let colon = if line.starts_with(b"data:") {
            // The dominant line; no search needed.
            Some(4)
        } else {
            memchr::memchr(b':', line)
        };
        match colon {
            Some(colon) => {
                self.bytes_scanned += colon as u64 + 1;
                let mut value_start = colon + 1;
                if line.get(value_start) == Some(&b' ') {
                    value_start += 1;
                }
                (colon, value_start)
            }
            None => {
                self.bytes_scanned += line.len() as u64;
                (line.len(), line.len())
            }
        }
    }

    /// Applies one field. `line_offset` is the line's position in `scanning` (the chunk being
    /// scanned) when the line lies in it, so its value may be kept as a zero-copy slice.
    fn apply_field(
        &mut self,
        scanning: &Bytes,
        line: &[u8],
        name_end: usize,
        value_start: usize,
        line_offset: Option<usize>,
    ) -> LineOutcome {
        if name_end == 0 {
            return LineOutcome::Nothing; // a comment
        }
        let value = line.get(value_start..).unwrap_or_default();
        let value_offset = line_offset.map(|offset| offset + value_start);
        match &line[..name_end] {
            b"data" => {
                self.append_data(scanning, value, value_offset);
                LineOutcome::Nothing
            }
            b"event" => {
                self.set_event_type(value, value_offset);
                LineOutcome::Nothing
            }
            b"id" => {
                self.bytes_scanned += value.len() as u64;
                if memchr::memchr(0, value).is_none() {
                    self.last_event_id = match value_offset {
                        Some(start) => owned_text(scanning.slice(start..start + value.len())),
                        None => owned_text(Bytes::copy_from_slice(value)),
                    };
                }
                LineOutcome::Nothing
            }
            b"retry" => {
                self.bytes_scanned += value.len() as u64;
                match parse_retry(value) {
                    Some(ms) => {
                        self.retry = Some(ms);
                        LineOutcome::Retry(ms)
                    }
                    None => LineOutcome::Nothing,
                }
            }
            _ => LineOutcome::Nothing,
        }
    }

    /// Appends one `data` value (and the LF that joins it to the previous one). `value_offset`
    /// is the value's position in the current chunk, when it lies in one.
    fn append_data(&mut self, scanning: &Bytes, value: &[u8], value_offset: Option<usize>) {
        let first = self.data == Field::Empty;
        self.bytes_scanned += value.len() as u64;
        if let (true, Some(start)) = (first, value_offset)
            && is_utf8(value)
        {
            self.data = Field::Slice {
                chunk: self.cur_id,
                start,
                end: start + value.len(),
            };
            return;
        }
        if first {
            self.data_buf.clear();
            self.data_start = 0;
        } else {
            if let Field::Slice { chunk, start, end } = self.data {
                // A second line: the first one moves into the reusable buffer.
                let mut buf = std::mem::take(&mut self.data_buf);
                buf.clear();
                buf.push_str(self.text_in(scanning, chunk, start, end));
                self.data_buf = buf;
                self.data_start = 0;
            }
            self.data_buf.push('\n');
        }
        self.data = Field::Buf;
        push_lossy(&mut self.data_buf, value);
    }

    fn set_event_type(&mut self, value: &[u8], value_offset: Option<usize>) {
        self.bytes_scanned += value.len() as u64;
        if let Some(start) = value_offset
            && is_utf8(value)
        {
            self.event_type = Field::Slice {
                chunk: self.cur_id,
                start,
                end: start + value.len(),
            };
            return;
        }
        self.event_type_buf.clear();
        push_lossy(&mut self.event_type_buf, value);
        self.event_type = Field::Buf;
    }

    /// A view of the event ready for dispatch.
    // Inlined into both `next_item` and `next_item_and_dropped` (a call per event costs ~1%).
    #[inline(always)]
    fn pending_event(&self) -> SseEventRef<'_> {
        let (data, data_source) = match self.data {
            Field::Slice { chunk, start, end } => (
                self.text_in(&self.cur, chunk, start, end),
                Some(self.chunk_by_id(chunk)),
            ),
            Field::Buf => (
                self.data_buf.get(self.data_start..).unwrap_or_default(),
                None,
            ),
            Field::Empty => ("", None),
        };
        let (event_type, event_type_source) = match self.event_type {
            Field::Slice { chunk, start, end } => (
                self.text_in(&self.cur, chunk, start, end),
                Some(self.chunk_by_id(chunk)),
            ),
            Field::Buf => (self.event_type_buf.as_str(), None),
            Field::Empty => ("", None),
        };
        // An absent or empty event type means the default one.
        let (event_type, event_type_source) = if event_type.is_empty() {
            (DEFAULT_EVENT_TYPE, None)
        } else {
            (event_type, event_type_source)
        };
        SseEventRef::new(
            event_type,
            event_type_source,
            data,
            data_source,
            &self.last_event_id,
        )
    }

    fn chunk_by_id(&self, chunk: u64) -> &Bytes {
        if chunk == self.cur_id {
            &self.cur
        } else {
            &self.prev
        }
    }
}

/// Whether `bytes` is valid UTF-8.
///
/// Most SSE values are short and ASCII (event types, JSON with English text); a word-at-a-time
/// ASCII test settles those in a few instructions, where a general validator pays a set-up cost
/// per call (measured with callgrind on the 6 MB Anthropic workload; see BENCHMARKS.md). Anything
/// else goes to `simdutf8`.
#[inline]
fn is_utf8(bytes: &[u8]) -> bool {
    is_ascii_words(bytes) || simdutf8::basic::from_utf8(bytes).is_ok()
}

/// ASCII test that ORs eight bytes at a time, stopping at the first 32-byte block with a high bit.
#[inline]
fn is_ascii_words(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        let mut acc = 0u64;
        for word in block.chunks_exact(8) {
            let mut lanes = [0u8; 8];
            lanes.copy_from_slice(word);
            acc |= u64::from_ne_bytes(lanes);
        }
        if acc & HIGH != 0 {
            return false;
        }
    }
    let rest = blocks.remainder();
    let mut words = rest.chunks_exact(8);
    let mut acc = 0u64;
    for word in &mut words {
        let mut lanes = [0u8; 8];
        lanes.copy_from_slice(word);
        acc |= u64::from_ne_bytes(lanes);
    }
    for &byte in words.remainder() {
        acc |= u64::from(byte);
    }
    acc & HIGH == 0
}

/// Appends `bytes` to `out`, replacing invalid UTF-8 with U+FFFD.
fn push_lossy(out: &mut String, bytes: &[u8]) {
    if is_utf8(bytes) {
        // SAFETY: validated on the line above.
        out.push_str(unsafe { std::str::from_utf8_unchecked(bytes) });
    } else {
        out.push_str(&String::from_utf8_lossy(bytes));
    }
}

/// `bytes` as a `String`, replacing invalid UTF-8 with U+FFFD (without copying when valid).
fn into_text(bytes: Vec<u8>) -> String {
    if is_utf8(&bytes) {
        // SAFETY: validated on the line above.
        unsafe { String::from_utf8_unchecked(bytes) }
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// `bytes` as shared text, replacing invalid UTF-8 with U+FFFD (without copying when valid).
fn owned_text(bytes: Bytes) -> Utf8Bytes {
    if is_utf8(&bytes) {
        // SAFETY: validated on the line above.
        unsafe { Utf8Bytes::from_bytes_unchecked(bytes) }
    } else {
        Utf8Bytes::from(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// `retry` takes ASCII digits only (base ten, milliseconds); anything else is ignored.
/// Values beyond `u64` saturate.
fn parse_retry(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0u64, |acc, digit| {
        acc.saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    }))
}

/// Parses a complete stream held in memory (the whole input as one chunk) into owned items.
/// The unterminated tail, if any, is discarded.
pub fn parse_all(input: impl Into<Bytes>) -> Vec<SseOwnedItem> {
    let mut parser = SseParser::new();
    let mut items = Vec::new();
    parser.feed_with(input.into(), |item| items.push(item.to_owned()));
    parser.finish();
    items
}

/// An owned [`SseItem`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseOwnedItem {
    /// A dispatched event.
    Event(SseEvent),
    /// A valid `retry` field, in milliseconds.
    Retry(u64),
}

impl SseItem<'_> {
    /// Converts the item into an owned one (zero-copy where the event borrowed an input chunk).
    pub fn to_owned(&self) -> SseOwnedItem {
        match self {
            SseItem::Event(event) => SseOwnedItem::Event(event.to_owned()),
            SseItem::Retry(ms) => SseOwnedItem::Retry(*ms),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn events(parser: &mut SseParser) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        while let Some(item) = parser.next_item() {
            if let SseItem::Event(e) = item {
                out.push((e.event_type().into(), e.data().into(), e.id().into()));
            }
        }
        out
    }

    fn feed_in_chunks(parser: &mut SseParser, input: &Bytes, size: usize) -> usize {
        let mut count = 0;
        let mut pos = 0;
        while pos < input.len() {
            let end = (pos + size).min(input.len());
            parser.feed(input.slice(pos..end));
            count += events(parser).len();
            pos = end;
        }
        count
    }

    #[test]
    fn scanning_work_is_linear_at_any_chunking() {
        let mut raw = b"data: ".to_vec();
        raw.extend(std::iter::repeat_n(b'x', 4 << 20));
        raw.extend_from_slice(b"\n\n");
        let input = Bytes::from(raw);
        for size in [1, 1460, input.len()] {
            let mut parser = SseParser::new();
            assert_eq!(
                feed_in_chunks(&mut parser, &input, size),
                1,
                "{size}-byte chunks"
            );
            let scanned = parser.bytes_scanned();
            let bound = 2 * input.len() as u64 + 64;
            assert!(
                scanned <= bound,
                "{size}-byte chunks scanned {scanned} > {bound}"
            );
            assert!(scanned >= input.len() as u64, "every byte is looked at");
        }
    }

    #[test]
    fn many_small_events_are_linear_too() {
        let one = b"event: content_block_delta\ndata: {\"t\":\"hello\"}\n\n";
        let input = Bytes::from(one.repeat(10_000));
        // Each byte is scanned once for the line end and at most once more (the value's UTF-8
        // check); the field name is looked at again to find its colon: a few bytes per line.
        let lines = 3 * 10_000u64;
        let bound = 2 * input.len() as u64 + 8 * lines;
        for size in [1, 7, input.len()] {
            let mut parser = SseParser::new();
            assert_eq!(feed_in_chunks(&mut parser, &input, size), 10_000);
            assert!(
                parser.bytes_scanned() <= bound,
                "{size}: {} > {bound}",
                parser.bytes_scanned()
            );
        }
    }

    #[test]
    fn cr_at_chunk_end_dispatches_without_waiting() {
        let mut parser = SseParser::new();
        parser.feed(Bytes::from_static(b"data: a\r\r"));
        assert_eq!(
            events(&mut parser),
            vec![("message".into(), "a".into(), String::new())]
        );
        // The LF that completes the CRLF arrives later and must not count as a blank line.
        parser.feed(Bytes::from_static(b"\ndata: b\r"));
        assert!(events(&mut parser).is_empty());
        parser.feed(Bytes::from_static(b"\n\r\n"));
        assert_eq!(events(&mut parser)[0].1, "b");
    }

    #[test]
    fn single_line_data_borrows_the_chunk() {
        let chunk = Bytes::from_static(b"event: delta\ndata: {\"x\":1}\n\n");
        let mut parser = SseParser::new();
        parser.feed(chunk.clone());
        let Some(SseItem::Event(event)) = parser.next_item() else {
            panic!("expected an event")
        };
        assert!(event.is_data_borrowed());
        let owned = event.to_owned();
        // Same storage as the input chunk: pointers inside its range.
        let base = chunk.as_ptr() as usize;
        let data_ptr = owned.data.as_ptr() as usize;
        assert!(data_ptr >= base && data_ptr < base + chunk.len());
        let type_ptr = owned.event_type.as_ptr() as usize;
        assert!(type_ptr >= base && type_ptr < base + chunk.len());
    }

    #[test]
    fn data_spanning_chunks_or_lines_is_assembled() {
        let mut parser = SseParser::new();
        parser.feed(Bytes::from_static(b"data: hel"));
        parser.feed(Bytes::from_static(b"lo\ndata: world\n"));
        assert!(parser.next_item().is_none());
        parser.feed(Bytes::from_static(b"\n"));
        let Some(SseItem::Event(event)) = parser.next_item() else {
            panic!("expected an event")
        };
        assert_eq!(event.data(), "hello\nworld");
        assert!(!event.is_data_borrowed());
    }

    #[test]
    fn buffers_are_reused_after_dispatch() {
        let mut parser = SseParser::new();
        parser.feed(Bytes::from_static(b"data: a\ndata: b\n\ndata: c\n\n"));
        assert_eq!(
            events(&mut parser)
                .iter()
                .map(|e| e.1.as_str())
                .collect::<Vec<_>>(),
            ["a\nb", "c"]
        );
    }

    #[test]
    fn oversized_event_is_dropped_and_parsing_resumes() {
        let config = SseConfig::default().max_event_bytes(Some(16));
        let mut parser = SseParser::with_config(config);
        parser.feed(Bytes::from_static(b"data: small\n\ndata: "));
        parser.feed(Bytes::from(vec![b'y'; 1000]));
        parser.feed(Bytes::from_static(b"\ndata: more\n\ndata: after\n\n"));
        let got: Vec<String> = events(&mut parser).into_iter().map(|e| e.1).collect();
        assert_eq!(got, ["small", "after"]);
        assert_eq!(parser.dropped_events(), 1);
        assert!(parser.line_buf.capacity() < 4096, "memory stays bounded");
        assert!(parser.data_buf.capacity() < 4096);
    }

    #[test]
    fn next_item_and_dropped_reports_a_drop_with_the_event_after_it() {
        let config = SseConfig::default().max_event_bytes(Some(16));
        let mut parser = SseParser::with_config(config);
        // One chunk: an event, an oversized event, then an event the same call dispatches.
        parser.feed(Bytes::from_static(
            b"data: small\n\ndata: yyyyyyyyyyyyyyyyyyyyyyyy\n\nretry: 7\ndata: after\n\n",
        ));
        let (dropped, item) = parser.next_item_and_dropped();
        assert_eq!(dropped, 0);
        assert!(matches!(item, Some(SseItem::Event(event)) if event.data() == "small"));
        let (dropped, item) = parser.next_item_and_dropped();
        assert_eq!(dropped, 1);
        assert!(matches!(item, Some(SseItem::Retry(7))));
        let (dropped, item) = parser.next_item_and_dropped();
        assert_eq!(dropped, 1);
        assert!(matches!(item, Some(SseItem::Event(event)) if event.data() == "after"));
        assert!(matches!(parser.next_item_and_dropped(), (1, None)));
    }

    #[test]
    fn oversized_multi_line_event_is_dropped() {
        let config = SseConfig::default().max_event_bytes(Some(20));
        let mut parser = SseParser::with_config(config);
        parser.feed(Bytes::from_static(
            b"data: 0123456789\ndata: 0123456789\n\ndata: ok\n\n",
        ));
        let got: Vec<String> = events(&mut parser).into_iter().map(|e| e.1).collect();
        assert_eq!(got, ["ok"]);
        assert_eq!(parser.dropped_events(), 1);
    }

    #[test]
    fn finish_discards_the_unterminated_event() {
        let mut parser = SseParser::new();
        parser.feed(Bytes::from_static(b"data: a\n\ndata: b\n"));
        assert_eq!(events(&mut parser).len(), 1);
        assert!(parser.finish());
        // A new stream after finish: the BOM is stripped again, the id persists.
        parser.feed(Bytes::from_static(b"\xEF\xBB\xBFid: 3\ndata: c\n\n"));
        assert_eq!(
            events(&mut parser),
            vec![("message".into(), "c".into(), "3".into())]
        );
        assert!(!parser.finish());
        assert_eq!(parser.last_event_id(), "3");
    }

    #[test]
    fn retry_is_reported_in_order_and_kept() {
        let mut parser = SseParser::new();
        parser.feed(Bytes::from_static(b"data: a\nretry: 1500\n\n"));
        assert!(matches!(parser.next_item(), Some(SseItem::Retry(1500))));
        assert!(matches!(parser.next_item(), Some(SseItem::Event(_))));
        assert_eq!(parser.retry(), Some(1500));
    }

    #[test]
    fn ascii_word_test_agrees_with_std_at_every_length_and_position() {
        for len in 0..80 {
            let ascii = vec![b'a'; len];
            assert!(is_ascii_words(&ascii));
            assert!(is_utf8(&ascii));
            for pos in 0..len {
                let mut high = ascii.clone();
                high[pos] = 0xC3;
                assert!(!is_ascii_words(&high), "len {len} pos {pos}");
                assert_eq!(is_utf8(&high), std::str::from_utf8(&high).is_ok());
            }
        }
        assert!(is_utf8("日本語 テキスト 🚀".as_bytes()));
    }

    #[test]
    fn parse_all_collects_owned_items() {
        let items = parse_all(Bytes::from_static(b"retry: 5\ndata: x\n\ndata: tail"));
        assert_eq!(items.len(), 2);
        assert_eq!(items[0], SseOwnedItem::Retry(5));
        let SseOwnedItem::Event(event) = &items[1] else {
            panic!("expected an event")
        };
        assert_eq!(event.data, "x");
        assert_eq!(event.as_ref().data(), "x");
    }
}
