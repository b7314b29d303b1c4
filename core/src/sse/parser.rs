//! The sans-IO event-stream parser (WHATWG HTML, "Parsing an event stream").

use std::collections::VecDeque;
use std::ops::ControlFlow;

use bytes::Bytes;

use super::event::{SseEvent, SseEventRef, SseItem};
use super::line_end::{LineEndFinder, LineScan};
use crate::Utf8Bytes;

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";
const DEFAULT_EVENT_TYPE: &str = "message";
/// Chunks up to this size that end no line are appended to the partial line directly by
/// [`SseParser::feed`] (byte-at-a-time feeds would otherwise pay the chunk bookkeeping per byte).
const SMALL_CHUNK: usize = 16;
/// Pieces of an open line at least this long are kept as slices of their chunk (no copy) and
/// copied once, into a buffer of the exact size, when the line ends; shorter ones are copied
/// into the line buffer at once. Lines then cost one copy, not the copies of a doubling buffer
/// (until they reach [`LONG_LINE`]).
const SHARED_PIECE: usize = 1024;
/// An open line that reaches this length is copied into the line buffer chunk by chunk, right
/// after each chunk is searched, while the chunk is still in the L1 cache (its earlier pieces
/// are gathered once, when it gets there). Copying at the line's end instead reads the whole
/// line from memory a second time: for a 16 MiB `data:` line that second read cost as much as
/// the search itself.
const LONG_LINE: usize = 1 << 20;
/// The least capacity reserved for a long line's buffer. A line past [`LONG_LINE`] is an
/// outlier (a whole file or image in one event) of unknown final size; a doubling buffer would
/// copy it again at every step (measured: twice the time of the copy itself), so its buffer is
/// reserved at once, generously, and grows fourfold after that. Capacity that is never written
/// is address space, not memory: the OS maps pages as they are first written. The parser keeps
/// the buffer for its next long line.
const LONG_LINE_RESERVE: usize = 32 << 20;

/// Options for [`SseParser`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SseConfig {
    /// Largest pending event, in bytes (the line being read plus the data and event type
    /// gathered so far; a comment line belongs to no event and never counts). An event that
    /// grows past it is dropped, counted in [`SseParser::dropped_events`], and parsing resumes
    /// after the next blank line (which still commits an `id` field read before the event went
    /// over the limit, as a blank line with no data does; the lines after that point are
    /// ignored).
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

/// A piece of a line that spans chunks, once it holds a shared piece (in order).
#[derive(Debug)]
enum LinePiece {
    /// `line_buf[start..end]`.
    Buffered { start: usize, end: usize },
    /// `chunk[start..]`, the tail of an input chunk. The chunk is moved in when the parser
    /// moves past it (`SseParser::install_chunk`): until then `chunk` is empty and
    /// `ParserState::line_tail_pending` is set. A whole chunk inside the line
    /// (`ParserState::absorb_line_chunk`) is moved in at once, with `start` 0.
    Shared { chunk: Bytes, start: usize },
}

/// What [`ParserState::usual_event`] did.
enum UsualEvent {
    /// The whole event was read and is ready to dispatch; the next line starts here.
    Dispatch(usize),
    /// Lines up to here were read (an `event` line); go on from here the ordinary way.
    Read(usize),
    /// The line at the position given was searched but is not of the usual shape: handle it
    /// the ordinary way, with this search result.
    Line(LineScan),
}

/// What a complete line turned into.
enum LineOutcome {
    Nothing,
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
    /// The chunk being scanned (from `state.pos`). It is kept apart from the rest of the
    /// state so that the scanning code can borrow it while it updates the state.
    cur: Bytes,
    /// Chunks fed and not yet reached.
    queue: VecDeque<Bytes>,
    state: ParserState,
}

/// A [`SseParser`] whose current chunk is borrowed from the caller, for the length of one
/// [`SseParser::feed_borrowed`] call: dropping it (also while unwinding) releases the chunk.
struct BorrowedChunk<'p> {
    parser: &'p mut SseParser,
}

impl Drop for BorrowedChunk<'_> {
    fn drop(&mut self) {
        self.parser.release_borrowed();
    }
}

/// Everything [`SseParser`] keeps besides the chunks: the scanning code's `self`.
#[derive(Debug)]
struct ParserState {
    config: SseConfig,
    line_end: LineEndFinder,
    /// The position in the current chunk, and that chunk's sequence number.
    pos: usize,
    cur_id: u64,
    /// An earlier chunk (numbered `prev_id`), kept while a pending field points into it.
    prev: Bytes,
    prev_id: u64,
    /// Bytes of a line that began in an earlier chunk (while `line_pieces` is empty, all of
    /// them, in order; otherwise the short pieces, which `line_pieces` orders).
    line_buf: Vec<u8>,
    /// The pieces of the open line, in order, once a long one is kept as a chunk slice.
    line_pieces: Vec<LinePiece>,
    /// The bytes held in `LinePiece::Shared` pieces.
    line_shared_len: usize,
    /// The index in `line_pieces` of the tail of the current chunk, which joins its piece when
    /// the parser moves to the next chunk (chunks absorbed by `feed` may add pieces after it
    /// before then).
    line_tail_pending: Option<usize>,
    /// A line is in progress across chunks (it may hold no bytes yet, e.g. while discarding).
    line_open: bool,
    /// The open line is a comment (its first byte is `:`): it can never produce anything, so
    /// its bytes are neither kept nor counted against `max_event_bytes`; only its end is looked
    /// for, and it is counted in `comments` there, as a comment inside one chunk is. Without
    /// this a 500 MB comment line was buffered whole, and under a cap it dropped the event
    /// around it.
    comment_open: bool,
    /// [`LONG_LINE`]; smaller in tests, so that random streams reach the long-line path.
    long_line: usize,
    /// The offset of the first non-ASCII byte in `line_buf` (`None`: the line is all ASCII, so
    /// it needs no UTF-8 check; otherwise the check starts there).
    line_first_high: Option<usize>,
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

    /// The WHATWG "last event ID string": the id of the last dispatch (a blank line), which the
    /// events carry and a reconnection sends.
    last_event_id: Utf8Bytes,
    /// The WHATWG "last event ID buffer" when an `id` field of the pending event changed it
    /// (`None`: it equals `last_event_id`). Kept apart so that the id of an event that is never
    /// dispatched (cut off by the end of the stream) never becomes the last event id; an
    /// `Option` so that a dispatch with no `id` field costs a test, not a reference-count update.
    pending_id: Option<Utf8Bytes>,
    retry: Option<u64>,

    /// The pending event went over `max_event_bytes`: ignore lines until the next blank line.
    discarding: bool,
    /// The current chunk is a caller's borrowed slice ([`SseParser::feed_borrowed`]): nothing
    /// may keep a `Bytes` handle to it (an `id` value is copied instead of shared).
    cur_borrowed: bool,

    dropped_events: u64,
    bytes_scanned: u64,
    bytes_fed: u64,
    comments: u64,
    empty_dispatches: u64,
    /// A field line (`data`, `event`, `id`, `retry`) has been read and is no longer pending:
    /// its event was dispatched or dropped, its block ended without data, or the stream ended
    /// with it unterminated. Noted where pending fields end, not per line, so the line loop pays
    /// nothing for it and a dispatch one store (see [`SseParser::saw_field`]).
    saw_field: bool,
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
            cur: Bytes::new(),
            queue: VecDeque::new(),
            state: ParserState::new(config),
        }
    }

    /// The configuration this parser was built with.
    pub fn config(&self) -> &SseConfig {
        &self.state.config
    }

    /// Queues a chunk of the stream. Chunks may be split anywhere, including inside a CRLF pair,
    /// a UTF-8 sequence or the BOM. Drain the completed items with [`next_item`](Self::next_item).
    pub fn feed(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        self.state.bytes_fed += chunk.len() as u64;
        if self.queue.is_empty() && self.state.pos >= self.cur.len() {
            // Nothing is waiting to be scanned (the usual case when the caller drains after
            // every feed): a small chunk inside a line, or a long one that does not end the
            // open line, joins the line at once; any other becomes the current chunk without a
            // trip through the queue.
            if chunk.len() <= SMALL_CHUNK && self.state.absorb_small_chunk(&chunk) {
                return;
            }
            if self.state.line_is_long() {
                return self.feed_long_line(chunk);
            }
            self.install_chunk(chunk);
        } else {
            self.queue.push_back(chunk);
        }
    }

    /// [`feed`](Self::feed) while a long line is open and nothing waits to be scanned.
    // Not inlined, so that `feed` hands the usual chunk on to `install_chunk` as it came
    // (measured: 8 instructions more per feed of a 64-byte chunk otherwise).
    #[inline(never)]
    fn feed_long_line(&mut self, chunk: Bytes) {
        if let Err(chunk) = self.state.absorb_line_chunk(chunk, &self.cur) {
            self.install_chunk(chunk);
        }
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

    /// Feeds a chunk the caller keeps and calls `on_item` for every item it completes, in order:
    /// the same items as [`feed_with`](Self::feed_with) given a copy of `chunk`, without the
    /// copy. The parser reads the chunk in place during the call and keeps only what an
    /// unfinished line or event still needs from it (copied when the call ends), so a caller
    /// holding its bytes in memory it does not own (a JavaScript `Uint8Array`, a read buffer)
    /// saves a pass over the input and an allocation per chunk.
    ///
    /// The events `on_item` receives borrow the chunk only for the call: their
    /// [`to_owned`](SseEventRef::to_owned) and [`data_shared`](SseEventRef::data_shared) copy
    /// instead of sharing. Items of chunks fed earlier and not drained yet are delivered first.
    pub fn feed_borrowed(&mut self, chunk: &[u8], mut on_item: impl FnMut(SseItem<'_>)) {
        let _ = self.feed_borrowed_until(chunk, |item| {
            on_item(item);
            ControlFlow::Continue(())
        });
    }

    /// [`feed_borrowed`](Self::feed_borrowed) whose callback may stop the delivery: once
    /// `on_item` returns [`ControlFlow::Break`], no further item is delivered and the call
    /// returns `Break`. Nothing is lost: the items not delivered stay pending, and
    /// [`next_item`](Self::next_item) (or the next feed) yields them, in order. The chunk is
    /// then kept as an owned copy, since the caller may reuse its memory once the call returns.
    pub fn feed_borrowed_until(
        &mut self,
        chunk: &[u8],
        mut on_item: impl FnMut(SseItem<'_>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let idle = self.queue.is_empty() && self.state.pos >= self.cur.len();
        // The cases `feed` would not make the chunk current (items still waiting, a small
        // chunk joining the open line, a chunk continuing a long line as a piece of its own)
        // take the copying path: rare, or cheap to copy.
        if !idle || chunk.len() <= SMALL_CHUNK || self.state.line_shared_len != 0 {
            self.feed(Bytes::copy_from_slice(chunk));
            while let Some(item) = self.next_item() {
                on_item(item.without_sources())?;
            }
            return ControlFlow::Continue(());
        }
        self.state.bytes_fed += chunk.len() as u64;
        // SAFETY: the `'static` lifetime is a fiction confined to this call: the alias is only
        // ever the current chunk (the queue is empty, so nothing is installed after it), nothing
        // takes a `Bytes` handle of it (an `id` value is copied while `cur_borrowed` is set,
        // `keep_line_tail` and `absorb_line_chunk` only take chunks the parser moves past or is
        // fed, and the events handed out have no sources), and `BorrowedChunk`'s drop, which
        // runs before this function returns or unwinds, copies what the parser still needs
        // from it (all of it when the delivery stopped early) and drops the alias. Tested by
        // `feed_borrowed_*` below and by the property tests `borrowed_feeds_match_owned_feeds`
        // (with the debug assertions of `text_in`) and `stopped_borrowed_feeds_lose_nothing`.
        let alias =
            Bytes::from_static(unsafe { std::mem::transmute::<&[u8], &'static [u8]>(chunk) });
        self.install_chunk(alias);
        self.state.cur_borrowed = true;
        let borrowed = BorrowedChunk { parser: self };
        while let Some(item) = borrowed.parser.next_item() {
            on_item(item.without_sources())?;
        }
        ControlFlow::Continue(())
    }

    /// Ends a [`feed_borrowed`](Self::feed_borrowed) call: copies whatever the parser still
    /// needs from the borrowed current chunk and forgets it.
    fn release_borrowed(&mut self) {
        let state = &mut self.state;
        state.cur_borrowed = false;
        if state.pos < self.cur.len() {
            // Not drained (`on_item` stopped the delivery or panicked): keep the whole chunk,
            // as an owned copy at the same offsets.
            self.cur = Bytes::copy_from_slice(&self.cur);
            return;
        }
        state.materialize_chunk(&self.cur, state.cur_id);
        if let Some(index) = state.line_tail_pending.take() {
            state.buffer_line_piece(&self.cur, index);
        }
        self.cur = Bytes::new();
        state.pos = 0;
    }

    /// The next completed item (an event, or a `retry` value at the point its field was read),
    /// or `None` when every byte fed so far has been consumed.
    ///
    /// The returned event borrows the parser; it stays valid until the next call.
    #[inline]
    pub fn next_item(&mut self) -> Option<SseItem<'_>> {
        // Everything fed has been scanned: answered inline, without the scanning machinery
        // (the usual answer after a small feed).
        if self.state.pos >= self.cur.len() && !self.advance_chunk() {
            return None;
        }
        self.scan_for_item()
    }

    /// [`next_item`](Self::next_item) once bytes are waiting in the current chunk.
    fn scan_for_item(&mut self) -> Option<SseItem<'_>> {
        loop {
            match self.state.scan(&self.cur) {
                LineOutcome::Nothing => {
                    if self.state.pos >= self.cur.len() && !self.advance_chunk() {
                        return None;
                    }
                }
                LineOutcome::Retry(ms) => return Some(SseItem::Retry(ms)),
                LineOutcome::Dispatch => {
                    return Some(SseItem::Event(self.state.take_pending_event(&self.cur)));
                }
            }
        }
    }

    /// [`next_item`](Self::next_item), with the count of dropped oversized events as it
    /// stands after the call: for a caller that must refuse any event following a dropped one
    /// (the item borrows the parser, so the count cannot be read next to it otherwise).
    #[cfg(any(feature = "client", test))]
    pub(crate) fn next_item_and_dropped(&mut self) -> (u64, Option<SseItem<'_>>) {
        // The same loop as `scan_for_item`, kept apart so that `next_item` keeps a single
        // inlined caller of the scanner (measured: a shared step costs the hot path).
        loop {
            if self.state.pos >= self.cur.len() && !self.advance_chunk() {
                return (self.state.dropped_events, None);
            }
            match self.state.scan(&self.cur) {
                LineOutcome::Nothing => {}
                LineOutcome::Retry(ms) => {
                    return (self.state.dropped_events, Some(SseItem::Retry(ms)));
                }
                LineOutcome::Dispatch => {
                    let dropped = self.state.dropped_events;
                    let event = self.state.take_pending_event(&self.cur);
                    return (dropped, Some(SseItem::Event(event)));
                }
            }
        }
    }

    /// Ends the stream: an unterminated event (no blank line after it) is discarded, as the
    /// specification requires, its `id` field included. Returns whether anything was discarded.
    ///
    /// The parser can then be fed a new stream (a reconnection): the BOM check is re-armed, the
    /// last event id (as the last blank line left it, see
    /// [`last_event_id`](Self::last_event_id)) and the retry value are kept.
    pub fn finish(&mut self) -> bool {
        let state = &mut self.state;
        // Bytes not yet scanned belong to the unterminated tail.
        let discarded = state.pos < self.cur.len()
            || !self.queue.is_empty()
            || state.line_open
            || state.data != Field::Empty
            || state.event_type != Field::Empty
            || state.pending_id.is_some();
        state.saw_field |= state.fields_pending();
        self.queue.clear();
        self.cur = Bytes::new();
        state.prev = Bytes::new();
        state.prev_id = u64::MAX;
        state.pos = 0;
        state.cur_id += 1;
        state.line_buf.clear();
        state.line_pieces.clear();
        state.line_shared_len = 0;
        state.line_tail_pending = None;
        state.line_open = false;
        state.comment_open = false;
        state.line_first_high = None;
        state.skip_lf = false;
        state.bom_matched = Some(0);
        state.discarding = false;
        state.clear_pending_event();
        // The unterminated event's `id` goes with it: the last event ID buffer returns to the
        // last dispatched value, which the next stream's events carry.
        state.pending_id = None;
        discarded
    }

    /// The current reconnection time set by the last valid `retry` field, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.state.retry
    }

    /// The last event id: the WHATWG "last event ID string", which a reconnection sends in
    /// `Last-Event-ID`. An `id` field takes effect when its event is dispatched (the blank line
    /// that ends it, even one with no data, which dispatches nothing); until then this returns
    /// the previous value, and an event cut off by [`finish`](Self::finish) never changes it.
    /// It persists across events; an `id` field with an empty value resets it to "".
    pub fn last_event_id(&self) -> &str {
        self.state.last_event_id.as_str()
    }

    /// Events dropped because they grew past [`SseConfig::max_event_bytes`].
    pub fn dropped_events(&self) -> u64 {
        self.state.dropped_events
    }

    /// Bytes examined by the parser's scanning loops (line-end search, field-name search and
    /// UTF-8 validation). A work counter, used to prove the parser is linear in its input.
    pub fn bytes_scanned(&self) -> u64 {
        self.state.bytes_scanned
    }

    /// Comment lines (`: ...`) read so far. Servers send them as keep-alives while the model
    /// is still working (WHATWG suggests one every 15 seconds); a client's idle watchdog counts
    /// them as signs of life. A comment is counted when its line ends; its text is never kept,
    /// so a comment line of any length costs no memory.
    pub fn comments(&self) -> u64 {
        self.state.comments
    }

    /// Blank lines that dispatched nothing (no `data` field since the previous blank line): an
    /// extra blank line between events, or fields without data (`event: ping` alone). Some
    /// servers and proxies send a bare blank line as their keep-alive instead of a comment; a
    /// client's idle watchdog counts these as signs of life too. The blank line that ends an
    /// event dropped for its size is not counted.
    pub fn empty_dispatches(&self) -> u64 {
        self.state.empty_dispatches
    }

    /// Whether any field line (`data`, `event`, `id` or `retry`, whatever its value) has been
    /// read since the parser was made: comments, blank lines, lines with another field name and
    /// an unterminated last line do not count (an event dropped for its size counts, whatever
    /// its oversized line was). A client reads it to tell a body that broke off
    /// mid-stream from one that never was an event stream (a plain-text error page).
    #[cfg(any(feature = "client", test))]
    pub(crate) fn saw_field(&self) -> bool {
        self.state.saw_field || self.state.fields_pending()
    }

    /// Total bytes fed so far.
    pub fn bytes_fed(&self) -> u64 {
        self.state.bytes_fed
    }

    /// Moves on to the next queued chunk. Returns false when none is queued.
    #[inline]
    fn advance_chunk(&mut self) -> bool {
        let Some(next) = self.queue.pop_front() else {
            return false;
        };
        self.install_chunk(next);
        true
    }

    /// Makes `next` the chunk being scanned (the current one must be used up).
    fn install_chunk(&mut self, next: Bytes) {
        let finished = std::mem::replace(&mut self.cur, next);
        let state = &mut self.state;
        let finished_id = state.cur_id;
        state.cur_id += 1;
        state.pos = 0;
        if state.refers_to(finished_id) {
            // Fields still point into the finished chunk: keep it, and copy out whatever pointed
            // into an older one (at most one event straddles each chunk boundary).
            state.materialize_older_than(finished_id);
            if state.line_tail_pending.is_some() {
                state.keep_line_tail(finished.clone());
            }
            state.prev = finished;
            state.prev_id = finished_id;
        } else {
            if state.line_tail_pending.is_some() {
                // Moved, not shared: no reference-count traffic per chunk of a long line.
                state.keep_line_tail(finished);
            }
            if state.prev_id != u64::MAX && !state.refers_to(state.prev_id) {
                state.prev = Bytes::new();
                state.prev_id = u64::MAX;
            }
        }
    }
}

impl ParserState {
    fn new(config: SseConfig) -> Self {
        Self {
            config,
            line_end: LineEndFinder::new(),
            pos: 0,
            cur_id: 0,
            prev: Bytes::new(),
            prev_id: u64::MAX,
            line_buf: Vec::new(),
            line_pieces: Vec::new(),
            line_shared_len: 0,
            line_tail_pending: None,
            line_open: false,
            comment_open: false,
            long_line: LONG_LINE,
            line_first_high: None,
            skip_lf: false,
            bom_matched: Some(0),
            event_type: Field::Empty,
            event_type_buf: String::new(),
            data: Field::Empty,
            data_buf: String::new(),
            data_start: 0,
            last_event_id: Utf8Bytes::new(),
            pending_id: None,
            retry: None,
            discarding: false,
            cur_borrowed: false,
            dropped_events: 0,
            bytes_scanned: 0,
            bytes_fed: 0,
            comments: 0,
            empty_dispatches: 0,
            saw_field: false,
        }
    }

    /// Appends `bytes` (a small chunk, fed when every earlier byte has been scanned) to the
    /// partial line when they end no line — exactly what scanning them would do. Returns false,
    /// having changed nothing but the work counter, when they must be scanned as a chunk.
    fn absorb_small_chunk(&mut self, bytes: &[u8]) -> bool {
        if self.bom_matched.is_some() || self.skip_lf {
            return false;
        }
        let mut first_high = None;
        for (i, &byte) in bytes.iter().enumerate() {
            if byte == b'\r' || byte == b'\n' {
                self.bytes_scanned += i as u64 + 1;
                return false;
            }
            if byte >= 0x80 && first_high.is_none() {
                first_high = Some(i);
            }
        }
        self.bytes_scanned += bytes.len() as u64;
        // Most byte-at-a-time feeds continue a line that is not a comment: two tests of flags
        // settle them (a line start, rarer, also looks at its first byte).
        if !self.line_open {
            if bytes
                .first()
                .is_some_and(|&first| self.starts_comment(first))
            {
                // The start of a comment: nothing to keep.
                self.open_comment_line();
                return true;
            }
        } else if self.comment_open {
            // Inside a comment: nothing to keep.
            return true;
        }
        self.push_line_bytes(bytes, first_high);
        true
    }

    /// Whether a line whose first byte is `first`, beginning where the scan stands (no line is
    /// open), is a comment to skip without keeping its bytes. While an oversized event is
    /// being discarded its lines are ignored the discarding way (comments uncounted), as
    /// before.
    #[inline(always)]
    fn starts_comment(&self, first: u8) -> bool {
        first == b':' && !self.line_open && !self.discarding
    }

    /// Marks the open line as a comment whose bytes are not kept (see `comment_open`).
    #[inline(always)]
    fn open_comment_line(&mut self) {
        debug_assert!(self.line_buf.is_empty() && self.line_pieces.is_empty());
        self.line_open = true;
        self.comment_open = true;
    }

    /// Adds `chunk` (fed when every earlier byte has been scanned) to the open line as a piece
    /// of its own, moved in, when the line already holds a long piece and goes on past this
    /// chunk: exactly what scanning it would do, without making it the current chunk (the
    /// chunks of a 16 MiB line then cost a search and a push each, not the chunk change and the
    /// line loop's set-up). Gives the chunk back, having changed nothing but the work counter,
    /// when it must be scanned as a chunk.
    ///
    /// `cur` is the current chunk (used up), whose tail may be the line's last piece.
    #[inline]
    fn absorb_line_chunk(&mut self, chunk: Bytes, cur: &Bytes) -> Result<(), Bytes> {
        // Only lines already long try it (`feed` tests `line_is_long` first): a short line cut
        // by the chunk end (most chunk boundaries of a stream of small events) ends early in
        // the next chunk, which would then be searched twice.
        let copying = self.is_copying_long_line();
        if !(copying || self.line_shared_len != 0 && chunk.len() >= SHARED_PIECE)
            || self.discarding
            || self.config.max_event_bytes.is_some()
            || self.bom_matched.is_some()
            || self.skip_lf
        {
            return Err(chunk);
        }
        if copying {
            self.prefetch_long_line_space(chunk.len());
        }
        let found = self.line_end.scan(&chunk);
        if let Some(end) = found.end(chunk.len()) {
            // The line ends here: the line loop takes over (and searches these bytes again).
            self.bytes_scanned += end as u64 + 1;
            return Err(chunk);
        }
        self.bytes_scanned += chunk.len() as u64;
        self.note_line_first_high(found.first_high());
        if self.line_len() + chunk.len() >= self.long_line {
            // Copied while it is in the L1 cache; the chunk is released here.
            self.append_to_long_line(&chunk, Some(cur));
            return Ok(());
        }
        // `line_shared_len` > 0: the line's earlier bytes are all in `line_pieces` already.
        self.line_shared_len += chunk.len();
        self.line_pieces.push(LinePiece::Shared { chunk, start: 0 });
        Ok(())
    }

    /// Whether the open line is long enough for [`SseParser::feed`] to hand whole chunks to
    /// [`absorb_line_chunk`](Self::absorb_line_chunk).
    #[inline(always)]
    fn line_is_long(&self) -> bool {
        self.line_shared_len != 0 || self.line_buf.len() >= self.long_line
    }

    /// Whether the open line is a long one being copied into `line_buf` as it arrives (no
    /// chunk slices; see [`LONG_LINE`]).
    #[inline(always)]
    fn is_copying_long_line(&self) -> bool {
        self.line_buf.len() >= self.long_line && self.line_pieces.is_empty()
    }

    /// Appends `bytes` to a line that is (or now becomes) [`LONG_LINE`] long: its chunk slices
    /// are gathered into `line_buf` first (`cur` holds the pending tail piece, if any), with
    /// room reserved for what follows.
    fn append_to_long_line(&mut self, bytes: &[u8], cur: Option<&Bytes>) {
        let needed = self.line_len() + bytes.len();
        if !self.line_pieces.is_empty() {
            let line = self.gather_line(cur, self.long_line_capacity(needed));
            self.line_buf = line;
        } else if needed > self.line_buf.capacity() {
            let extra = self.long_line_capacity(needed) - self.line_buf.len();
            self.line_buf.reserve_exact(extra);
        }
        self.line_open = true;
        self.line_buf.extend_from_slice(bytes);
        if self.config.max_event_bytes.is_some() {
            self.check_line_limit();
        }
    }

    /// The capacity to reserve for a long line that needs `needed` bytes.
    fn long_line_capacity(&self, needed: usize) -> usize {
        let wanted = needed.saturating_mul(4).max(LONG_LINE_RESERVE);
        // Never more than a capped event may hold.
        let wanted = match self.config.max_event_bytes {
            Some(limit) => wanted.min(limit.saturating_add(1)),
            None => wanted,
        };
        wanted.max(needed)
    }

    /// Asks the CPU to fetch, for writing, the part of the long line's buffer that the chunk
    /// after one of `chunk_len` bytes will be copied to. Without it each chunk's copy ends with
    /// stores still waiting for their cache lines, and the atomic reference-count update that
    /// follows (releasing the chunk, or the caller cloning the next one) waits for them all:
    /// measured, that stall cost as much as the search of a 16 MiB line.
    #[inline(always)]
    fn prefetch_long_line_space(&self, chunk_len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch};
            let spare = self.line_buf.capacity() - self.line_buf.len();
            let end = spare.min(chunk_len.saturating_mul(2));
            let base = self.line_buf.as_ptr().wrapping_add(self.line_buf.len());
            let mut offset = chunk_len;
            while offset < end {
                // SAFETY: a prefetch is a hint: it never faults and changes no memory; the
                // address lies inside the buffer's allocation (`offset < spare`).
                unsafe { _mm_prefetch::<_MM_HINT_ET0>(base.wrapping_add(offset).cast()) };
                offset += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = chunk_len;
    }

    fn refers_to(&self, chunk_id: u64) -> bool {
        let points_into =
            |field: Field| matches!(field, Field::Slice { chunk, .. } if chunk == chunk_id);
        points_into(self.data) || points_into(self.event_type)
    }

    /// Copies fields that point into chunks older than `chunk_id` into the parser's buffers.
    fn materialize_older_than(&mut self, chunk_id: u64) {
        // Older chunks are read from `prev`, whatever `scanning` is.
        self.materialize_where(&Bytes::new(), |chunk| chunk < chunk_id);
    }

    /// Copies fields that point into the chunk numbered `chunk_id` (`source`) into the parser's
    /// buffers.
    fn materialize_chunk(&mut self, source: &Bytes, chunk_id: u64) {
        self.materialize_where(source, |chunk| chunk == chunk_id);
    }

    /// Copies the fields that point into chunks `copy` selects into the parser's buffers (their
    /// text is read as [`text_in`](Self::text_in) reads it, `scanning` being the current chunk).
    fn materialize_where(&mut self, scanning: &Bytes, copy: impl Fn(u64) -> bool) {
        if let Field::Slice { chunk, start, end } = self.event_type
            && copy(chunk)
        {
            let mut buf = std::mem::take(&mut self.event_type_buf);
            buf.clear();
            buf.push_str(self.text_in(scanning, chunk, start, end));
            self.event_type_buf = buf;
            self.event_type = Field::Buf;
        }
        if let Field::Slice { chunk, start, end } = self.data
            && copy(chunk)
        {
            let mut buf = std::mem::take(&mut self.data_buf);
            buf.clear();
            buf.push_str(self.text_in(scanning, chunk, start, end));
            self.data_buf = buf;
            self.data_start = 0;
            self.data = Field::Buf;
        }
    }

    /// Turns the open line's piece at `index`, the tail of `chunk` (the current chunk, which
    /// the parser is about to forget), into a copy in `line_buf`. When no piece is a chunk slice
    /// any more, `line_buf` holds the whole line in order and the pieces are dropped.
    fn buffer_line_piece(&mut self, chunk: &Bytes, index: usize) {
        let Some(piece) = self.line_pieces.get_mut(index) else {
            return;
        };
        let LinePiece::Shared { start: from, .. } = *piece else {
            return;
        };
        let tail = chunk.get(from..).unwrap_or_default();
        let start = self.line_buf.len();
        self.line_buf.extend_from_slice(tail);
        *piece = LinePiece::Buffered {
            start,
            end: self.line_buf.len(),
        };
        self.line_shared_len -= tail.len();
        if self.line_shared_len == 0 {
            // Buffered pieces are appended to `line_buf` in line order.
            self.line_pieces.clear();
        }
    }

    /// The text of a `Field::Slice`. `scanning` is the current chunk.
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
        // SAFETY: a `Field::Slice` is only stored once this range of this chunk is known to be
        // UTF-8 (`append_data`, `set_event_type` via `check_utf8`: the line-end scan saw only
        // ASCII before its first non-ASCII byte, and `simdutf8` validated the rest from there;
        // tested by `values_are_validated_from_their_first_non_ascii_byte_exactly` and the
        // scanner's tests), chunks are immutable, and the chunk a
        // slice points into is kept as the current chunk or `prev` until the field is cleared or
        // copied out (`advance_chunk` / `materialize_older_than`). Tested by the chunk-boundary
        // unit tests and the chunk-invariance property tests, which run with the debug
        // assertion above.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// Scans `chunk` from `self.pos` until a line produces an item or the chunk is used up.
    fn scan(&mut self, chunk: &Bytes) -> LineOutcome {
        // One test for the three states that need work before the line loop (rare except at
        // chunk starts).
        if self.bom_matched.is_some() | self.skip_lf | self.line_open {
            let outcome = self.scan_prelude(chunk);
            if !matches!(outcome, LineOutcome::Nothing) || self.pos >= chunk.len() {
                return outcome;
            }
        }
        self.scan_lines(chunk)
    }

    /// The start of [`scan`](Self::scan): the BOM, an LF after a CR that ended the previous
    /// chunk, and the line begun in an earlier chunk.
    #[inline]
    fn scan_prelude(&mut self, chunk: &Bytes) -> LineOutcome {
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
        if self.line_open && self.pos < chunk.len() {
            return self.finish_open_line(chunk);
        }
        LineOutcome::Nothing
    }

    /// Finishes the line begun in an earlier chunk.
    #[inline]
    fn finish_open_line(&mut self, chunk: &Bytes) -> LineOutcome {
        if self.comment_open {
            return self.skip_comment_line(chunk);
        }
        let rest = &chunk[self.pos..];
        let found = self.line_end.scan_at(chunk, self.pos);
        let Some(offset) = found.end(rest.len()) else {
            self.bytes_scanned += rest.len() as u64;
            let start = self.pos;
            self.pos = chunk.len();
            self.push_line_piece(chunk, start, found.first_high());
            return LineOutcome::Nothing;
        };
        let line_start = self.pos;
        let (line_end, next) = self.line_bounds(chunk, line_start, offset);
        self.bytes_scanned += (next - line_start) as u64;
        self.pos = next;
        self.push_line_bytes(&chunk[line_start..line_end], found.first_high());
        self.line_open = false;
        let line = self.take_line();
        let first_high = self.line_first_high.take();
        self.process_buffered_line(chunk, line, first_high)
    }

    /// Goes on with the comment line begun in an earlier chunk: its bytes are passed over, not
    /// kept; where it ends it is counted in `comments` (the moment a comment inside one chunk
    /// is counted too, which a client's idle watchdog relies on).
    #[inline(never)]
    fn skip_comment_line(&mut self, chunk: &Bytes) -> LineOutcome {
        let line_start = self.pos;
        let rest = chunk.get(line_start..).unwrap_or_default();
        let found = self.line_end.scan_at(chunk, line_start);
        let Some(offset) = found.end(rest.len()) else {
            self.bytes_scanned += rest.len() as u64;
            self.pos = chunk.len();
            return LineOutcome::Nothing;
        };
        let (_, next) = self.line_bounds(chunk, line_start, offset);
        self.bytes_scanned += (next - line_start) as u64;
        self.pos = next;
        self.line_open = false;
        self.comment_open = false;
        self.comments += 1;
        LineOutcome::Nothing
    }

    /// The end of a line found `offset` bytes after `line_start`, and where the next line
    /// starts (after a CRLF pair, or after the CR that ends the chunk: then one LF at the start
    /// of the next chunk is skipped). Every byte from `line_start` to the next line's start
    /// counts as scanned once; the callers add that distance to `bytes_scanned`.
    #[inline]
    fn line_bounds(&mut self, chunk: &[u8], line_start: usize, offset: usize) -> (usize, usize) {
        let line_end = line_start + offset;
        let mut next = line_end + 1;
        if chunk.get(line_end) == Some(&b'\r') {
            match chunk.get(next) {
                Some(b'\n') => next += 1,
                Some(_) => {}
                // The CR ends the line now; an LF may still follow in the next chunk.
                None => self.skip_lf = true,
            }
        }
        (line_end, next)
    }

    /// Scans the lines that begin in `chunk` at `self.pos`, until one produces an item or the
    /// chunk is used up (a line it does not end is kept in `line_buf`).
    fn scan_lines(&mut self, chunk: &Bytes) -> LineOutcome {
        // The position lives in a local (a register) in this loop, written back on exit; the
        // line-end search looks at every byte it moves past once, counted on exit.
        let start = self.pos;
        let mut pos = start;
        let outcome = loop {
            let Some(&first) = chunk.get(pos) else {
                break LineOutcome::Nothing;
            };
            // A blank line (the end of every event) needs no search.
            if first == b'\n' || first == b'\r' {
                pos = if first == b'\n' {
                    pos + 1
                } else {
                    self.line_bounds(chunk, pos, 0).1
                };
                let outcome = if self.discarding {
                    self.discarding_line(true)
                } else {
                    self.dispatch_outcome()
                };
                if !matches!(outcome, LineOutcome::Nothing) {
                    break outcome;
                }
                continue;
            }
            let found = match () {
                () if (first == b'e' || first == b'd') && self.usual_events_apply() => {
                    match self.usual_event(chunk, pos) {
                        UsualEvent::Dispatch(next) => {
                            pos = next;
                            break LineOutcome::Dispatch;
                        }
                        UsualEvent::Read(next) => {
                            pos = next;
                            continue;
                        }
                        UsualEvent::Line(found) => found,
                    }
                }
                () => self.line_end.scan_at(chunk, pos),
            };
            let rest = chunk.get(pos..).unwrap_or_default();
            let Some(offset) = found.end(rest.len()) else {
                let start = pos;
                pos = chunk.len();
                if self.starts_comment(first) {
                    // Its bytes are never needed: only its end is looked for, in later chunks.
                    self.open_comment_line();
                } else {
                    self.push_line_piece(chunk, start, found.first_high());
                }
                break LineOutcome::Nothing;
            };
            let line_start = pos;
            let (line_end, next) = self.line_bounds(chunk, line_start, offset);
            pos = next;
            let first_high = found.first_high().map(|high| line_start + high);
            let outcome = self.process_line(chunk, line_start, line_end, first_high);
            if !matches!(outcome, LineOutcome::Nothing) {
                break outcome;
            }
        };
        self.bytes_scanned += (pos - start) as u64;
        self.pos = pos;
        outcome
    }

    /// Whether [`usual_event`](Self::usual_event) may run: no data line is pending (so a
    /// `data` value can be kept as a slice), nothing is being discarded and there is no size
    /// cap to check.
    #[inline(always)]
    fn usual_events_apply(&self) -> bool {
        self.data == Field::Empty && !self.discarding && self.config.max_event_bytes.is_none()
    }

    /// Reads an event of the usual shape at `pos` in one step: an optional `event:` line with
    /// an ASCII value, a `data:` line, then a blank line, all ending in LF and inside `chunk`.
    /// It has exactly the effect of the line loop on those lines (fields, work counter), minus
    /// the loop's per-line dispatch, which is most of the cost of a small event. Anything else
    /// is left to the line loop, with the line-end search already made.
    #[inline(always)]
    fn usual_event(&mut self, chunk: &Bytes, pos: usize) -> UsualEvent {
        let mut at = pos;
        let mut found = self.line_end.scan_at(chunk, at);
        if chunk.get(at..).unwrap_or_default().starts_with(b"event:") {
            let Some(offset) = found.end(chunk.len() - at) else {
                return UsualEvent::Line(found);
            };
            let line_end = at + offset;
            if chunk.get(line_end) != Some(&b'\n') || found.first_high().is_some() {
                return UsualEvent::Line(found);
            }
            let skipped = usize::from(chunk.get(at + 6) == Some(&b' '));
            let value_start = (at + 6 + skipped).min(line_end);
            self.bytes_scanned += 6;
            self.event_type = Field::Slice {
                chunk: self.cur_id,
                start: value_start,
                end: line_end,
            };
            at = line_end + 1;
            if !chunk.get(at..).unwrap_or_default().starts_with(b"data:") {
                return UsualEvent::Read(at);
            }
            found = self.line_end.scan_at(chunk, at);
        } else if !chunk.get(at..).unwrap_or_default().starts_with(b"data:") {
            return UsualEvent::Line(found);
        }
        // A `data:` line at `at`, searched: `found`.
        let read = |at: usize, found: LineScan| {
            if at == pos {
                UsualEvent::Line(found)
            } else {
                UsualEvent::Read(at)
            }
        };
        let Some(offset) = found.end(chunk.len() - at) else {
            // The line goes on in the next chunk: kept, as the line loop does.
            self.push_line_piece(chunk, at, found.first_high());
            return UsualEvent::Read(chunk.len());
        };
        let line_end = at + offset;
        if chunk.get(line_end) != Some(&b'\n') {
            return read(at, found);
        }
        let skipped = usize::from(chunk.get(at + 5) == Some(&b' '));
        let value_start = (at + 5 + skipped).min(line_end);
        if let Some(high) = found.first_high() {
            let value = chunk.get(value_start..line_end).unwrap_or_default();
            let (valid, checked) = valid_utf8_from(value, (at + high).saturating_sub(value_start));
            if !valid {
                // Replaced by the line loop (which counts the check itself).
                return read(at, found);
            }
            self.bytes_scanned += checked as u64;
        }
        self.bytes_scanned += 5;
        self.data = Field::Slice {
            chunk: self.cur_id,
            start: value_start,
            end: line_end,
        };
        if chunk.get(line_end + 1) == Some(&b'\n') {
            UsualEvent::Dispatch(line_end + 2)
        } else {
            // More fields (`id:` …), or the blank line is in the next chunk.
            UsualEvent::Read(line_end + 1)
        }
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
                    self.push_line_bytes(&BOM[..usize::from(matched)], Some(0));
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

    /// Keeps bytes of a line that continues in a later chunk; `first_high` is the offset in
    /// `bytes` from which they must be checked for UTF-8 (`None`: they are all ASCII).
    #[inline]
    fn push_line_bytes(&mut self, bytes: &[u8], first_high: Option<usize>) {
        self.line_open = true;
        if !self.discarding && self.config.max_event_bytes.is_none() && self.line_pieces.is_empty()
        {
            // No cap to check: the common case, inline.
            if self.line_first_high.is_none()
                && let Some(high) = first_high
            {
                self.line_first_high = Some(self.line_buf.len() + high);
            }
            if let [byte] = bytes {
                // Byte-at-a-time feeds: a push, not a call to `memcpy`.
                self.line_buf.push(*byte);
            } else {
                self.line_buf.extend_from_slice(bytes);
            }
            return;
        }
        self.push_line_bytes_checked(bytes, first_high);
    }

    /// [`push_line_bytes`](Self::push_line_bytes) while discarding or under a size cap.
    #[inline(never)]
    fn push_line_bytes_checked(&mut self, bytes: &[u8], first_high: Option<usize>) {
        if self.discarding {
            // Only whether the line is blank matters until the next blank line.
            if !bytes.is_empty() && self.line_buf.is_empty() {
                self.line_buf.push(b'x');
            }
            return;
        }
        self.note_line_first_high(first_high);
        let start = self.line_buf.len();
        if let [byte] = bytes {
            // Byte-at-a-time feeds: a push, not a call to `memcpy`.
            self.line_buf.push(*byte);
        } else {
            self.line_buf.extend_from_slice(bytes);
        }
        let end = self.line_buf.len();
        if !self.line_pieces.is_empty() && end > start {
            match self.line_pieces.last_mut() {
                Some(LinePiece::Buffered { end: last_end, .. }) if *last_end == start => {
                    *last_end = end;
                }
                _ => self.line_pieces.push(LinePiece::Buffered { start, end }),
            }
        }
        self.check_line_limit();
    }

    /// Keeps `chunk[start..]`, the part of a line that continues in a later chunk: as a slice
    /// of the chunk when it is long, else copied.
    #[inline(always)]
    fn push_line_piece(&mut self, chunk: &Bytes, start: usize, first_high: Option<usize>) {
        let rest = chunk.get(start..).unwrap_or_default();
        if rest.len() >= SHARED_PIECE && !self.discarding {
            if self.line_len() + rest.len() >= self.long_line && self.line_tail_pending.is_none() {
                self.push_long_line_piece(rest, first_high);
            } else {
                self.push_shared_piece(chunk, start, first_high);
            }
        } else {
            self.push_line_bytes(rest, first_high);
        }
    }

    /// [`push_line_piece`](Self::push_line_piece) for a piece that makes (or keeps) the line
    /// long: copied into `line_buf` (see [`LONG_LINE`]).
    #[inline(never)]
    fn push_long_line_piece(&mut self, rest: &[u8], first_high: Option<usize>) {
        self.note_line_first_high(first_high);
        // No tail is pending (tested by the caller).
        self.append_to_long_line(rest, None);
    }

    /// [`push_line_piece`](Self::push_line_piece) for a long piece, kept as a chunk slice.
    #[inline(never)]
    fn push_shared_piece(&mut self, chunk: &Bytes, start: usize, first_high: Option<usize>) {
        let len = chunk.len().saturating_sub(start);
        self.line_open = true;
        self.note_line_first_high(first_high);
        if self.line_pieces.is_empty() && !self.line_buf.is_empty() {
            self.line_pieces.push(LinePiece::Buffered {
                start: 0,
                end: self.line_buf.len(),
            });
        }
        // The chunk itself joins the piece when the parser moves past it (`keep_line_tail`).
        self.line_tail_pending = Some(self.line_pieces.len());
        self.line_pieces.push(LinePiece::Shared {
            chunk: Bytes::new(),
            start,
        });
        self.line_shared_len += len;
        self.check_line_limit();
    }

    /// Gives the pending tail piece of the open line its chunk (the one the parser just left).
    #[inline(never)]
    fn keep_line_tail(&mut self, finished: Bytes) {
        if let Some(index) = self.line_tail_pending.take()
            && let Some(LinePiece::Shared { chunk, .. }) = self.line_pieces.get_mut(index)
        {
            *chunk = finished;
        }
    }

    /// Drops the pending event when the open line took it over the size cap.
    fn check_line_limit(&mut self) {
        if self.over_limit(0) {
            self.drop_pending_event();
            self.line_buf.clear();
            self.line_pieces.clear();
            self.line_shared_len = 0;
            self.line_tail_pending = None;
            self.line_buf.push(b'x');
        }
    }

    /// The length of the open line so far.
    fn line_len(&self) -> usize {
        self.line_buf.len() + self.line_shared_len
    }

    /// Notes where the open line's first non-ASCII byte is, given `first_high`, its offset in
    /// bytes about to be added to the line (the first one noted wins).
    fn note_line_first_high(&mut self, first_high: Option<usize>) {
        if self.line_first_high.is_none()
            && let Some(high) = first_high
        {
            self.line_first_high = Some(self.line_len() + high);
        }
    }

    /// The complete line that spanned chunks, taken out of the parser: `line_buf` itself, or,
    /// when long pieces were kept as chunk slices, every piece copied once, in order, into a
    /// buffer of the exact size.
    fn take_line(&mut self) -> Vec<u8> {
        if self.line_pieces.is_empty() {
            return std::mem::take(&mut self.line_buf);
        }
        debug_assert!(
            self.line_tail_pending.is_none(),
            "a line ends in a later chunk"
        );
        let line = self.gather_line(None, self.line_len());
        self.line_buf.clear();
        line
    }

    /// The open line's pieces copied once, in order, into a new buffer of `capacity` bytes
    /// (at least the line's length); the pieces are cleared. `cur` is the chunk a pending
    /// tail piece lies in (`None` when no tail is pending).
    fn gather_line(&mut self, cur: Option<&Bytes>, capacity: usize) -> Vec<u8> {
        let mut line = Vec::with_capacity(capacity.max(self.line_len()));
        for (index, piece) in self.line_pieces.iter().enumerate() {
            match *piece {
                LinePiece::Buffered { start, end } => {
                    line.extend_from_slice(self.line_buf.get(start..end).unwrap_or_default());
                }
                LinePiece::Shared { ref chunk, start } => {
                    let chunk = match cur {
                        Some(cur) if self.line_tail_pending == Some(index) => cur,
                        _ => chunk,
                    };
                    line.extend_from_slice(chunk.get(start..).unwrap_or_default())
                }
            }
        }
        // The chunk slices are released only once every piece is copied: a release is an atomic
        // decrement, a full barrier that would otherwise wait for the copy just before it to
        // reach memory, piece after piece (measured: a quarter of the time of a 16 MiB line).
        self.line_pieces.clear();
        self.line_shared_len = 0;
        self.line_tail_pending = None;
        line
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
        self.line_len() + data + event_type
    }

    fn over_limit(&self, extra: usize) -> bool {
        self.config
            .max_event_bytes
            .is_some_and(|limit| self.pending_event_bytes() + extra > limit)
    }

    fn drop_pending_event(&mut self) {
        // A dropped event was one all the same (its oversized line may be its first field).
        self.saw_field = true;
        self.dropped_events += 1;
        self.discarding = true;
        tracing::warn!(
            limit = self.config.max_event_bytes,
            "SSE event exceeds max_event_bytes; dropped until the next blank line"
        );
        self.clear_pending_event();
    }

    /// Whether a field of the event being read is pending (`event`, `data`, or an `id` not yet
    /// committed).
    fn fields_pending(&self) -> bool {
        self.data != Field::Empty || self.event_type != Field::Empty || self.pending_id.is_some()
    }

    fn clear_pending_event(&mut self) {
        self.event_type = Field::Empty;
        self.event_type_buf.clear();
        self.data = Field::Empty;
        self.data_buf.clear();
        self.data_start = 0;
    }

    /// Processes a complete line that was assembled in `line_buf` (it spanned chunks);
    /// `first_high` is the offset from which it must be checked for UTF-8 (`None`: all ASCII).
    fn process_buffered_line(
        &mut self,
        scanning: &Bytes,
        mut line: Vec<u8>,
        first_high: Option<usize>,
    ) -> LineOutcome {
        let outcome = if self.discarding {
            self.discarding_line(line.is_empty())
        } else if line.is_empty() {
            self.dispatch_outcome()
        } else {
            let (name_end, value_start) = self.split_field(&line);
            if &line[..name_end] == b"data" && self.data == Field::Empty {
                // Move the assembled line into the data buffer instead of copying it.
                let recycled = std::mem::take(&mut self.data_buf).into_bytes();
                let valid = match first_high {
                    None => true,
                    Some(from) => {
                        let (valid, checked) = valid_utf8_from(&line, from);
                        self.bytes_scanned += checked as u64;
                        valid
                    }
                };
                self.data_buf = if valid {
                    // SAFETY: the line's bytes before `first_high` are ASCII (noted while it
                    // was scanned) and the rest was validated on the lines above.
                    unsafe { String::from_utf8_unchecked(line) }
                } else {
                    String::from_utf8_lossy(&line).into_owned()
                };
                self.data_start = value_start.min(self.data_buf.len());
                self.data = Field::Buf;
                line = recycled;
                LineOutcome::Nothing
            } else {
                self.apply_field(scanning, &line, name_end, value_start, None, first_high)
            }
        };
        line.clear();
        if self.line_buf.capacity() < line.capacity() {
            self.line_buf = line;
        }
        outcome
    }

    /// Processes a complete, non-blank line that lies inside one chunk, without copying it;
    /// `first_high` is the position of its first non-ASCII byte, if any.
    #[inline(always)]
    fn process_line(
        &mut self,
        chunk: &Bytes,
        start: usize,
        end: usize,
        first_high: Option<usize>,
    ) -> LineOutcome {
        if self.discarding {
            return self.discarding_line(start == end);
        }
        if self.over_limit(end - start) && chunk.get(start) != Some(&b':') {
            // The same rule as for a line assembled across chunks: the line counts in full,
            // unless it is a comment, which belongs to no event and is never kept there either
            // (tested here only once the line is over, so the usual line pays nothing).
            self.drop_pending_event();
            return LineOutcome::Nothing;
        }
        let line = &chunk[start..end];
        // The two fields of nearly every event, recognised without a search for the colon.
        if let Some(after) = line.strip_prefix(b"data:") {
            self.bytes_scanned += 5;
            let (value, skipped) = strip_space(after);
            let value_start = start + 5 + skipped;
            let utf8_from = first_high.map(|high| high.saturating_sub(value_start));
            self.append_data(chunk, value, Some(value_start), utf8_from);
            return LineOutcome::Nothing;
        }
        if let Some(after) = line.strip_prefix(b"event:") {
            self.bytes_scanned += 6;
            let (value, skipped) = strip_space(after);
            let value_start = start + 6 + skipped;
            let utf8_from = first_high.map(|high| high.saturating_sub(value_start));
            self.set_event_type(value, Some(value_start), utf8_from);
            return LineOutcome::Nothing;
        }
        let (name_end, value_start) = self.split_field(line);
        let first_high = first_high.map(|high| high - start);
        self.apply_field(chunk, line, name_end, value_start, Some(start), first_high)
    }

    fn discarding_line(&mut self, blank: bool) -> LineOutcome {
        if blank {
            self.discarding = false;
            // The blank line ending a dropped event is still a dispatch: an `id` read before
            // the event went over the cap is committed, as it would be without the cap (only
            // the event's data and type are dropped).
            self.commit_event_id();
        }
        LineOutcome::Nothing
    }

    fn dispatch_outcome(&mut self) -> LineOutcome {
        if self.data != Field::Empty {
            // `take_pending_event` commits the id, on every path to a dispatched event.
            LineOutcome::Dispatch
        } else {
            // No data: nothing is dispatched, but the first step of the WHATWG dispatch (the
            // last event ID string takes the buffer's value) comes before that test.
            self.empty_dispatches += 1;
            self.saw_field |= self.fields_pending();
            self.commit_event_id();
            self.clear_pending_event();
            LineOutcome::Nothing
        }
    }

    /// The first step of the WHATWG dispatch: the last event ID string takes the value of the
    /// last event ID buffer.
    #[inline(always)]
    fn commit_event_id(&mut self) {
        if let Some(id) = self.pending_id.take() {
            self.last_event_id = id;
        }
    }

    /// Finds the field name and the start of its value (after the colon and one optional space).
    /// A line starting with a colon is a comment: its name is empty.
    fn split_field(&mut self, line: &[u8]) -> (usize, usize) {
        // The two fields of nearly every event need no search for the colon.
        let colon = if line.starts_with(b"data:") {
            Some(4)
        } else if line.starts_with(b"event:") {
            Some(5)
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
    /// scanned) when the line lies in it, so its value may be kept as a zero-copy slice;
    /// `first_high` is the offset in `line` from which it must be checked for UTF-8 (`None`:
    /// all ASCII).
    fn apply_field(
        &mut self,
        scanning: &Bytes,
        line: &[u8],
        name_end: usize,
        value_start: usize,
        line_offset: Option<usize>,
        first_high: Option<usize>,
    ) -> LineOutcome {
        if name_end == 0 {
            self.comments += 1;
            return LineOutcome::Nothing; // a comment
        }
        let ascii = first_high.is_none();
        let utf8_from = first_high.map(|high| high.saturating_sub(value_start));
        let value = line.get(value_start..).unwrap_or_default();
        let value_offset = line_offset.map(|offset| offset + value_start);
        match &line[..name_end] {
            b"data" => {
                self.append_data(scanning, value, value_offset, utf8_from);
                LineOutcome::Nothing
            }
            b"event" => {
                self.set_event_type(value, value_offset, utf8_from);
                LineOutcome::Nothing
            }
            b"id" => {
                self.bytes_scanned += value.len() as u64;
                if memchr::memchr(0, value).is_none() {
                    let shared = match value_offset {
                        Some(start) if !self.cur_borrowed => {
                            scanning.slice(start..start + value.len())
                        }
                        _ => Bytes::copy_from_slice(value),
                    };
                    self.pending_id = Some(if ascii {
                        // SAFETY: every byte of the line is ASCII (checked while it was scanned).
                        unsafe { Utf8Bytes::from_bytes_unchecked(shared) }
                    } else {
                        owned_text(shared)
                    });
                } else {
                    // Ignored (the specification's rule), so never pending: noted here.
                    self.saw_field = true;
                }
                LineOutcome::Nothing
            }
            b"retry" => {
                // Never pending, so noted here (rare: once per stream at most, in practice).
                self.saw_field = true;
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

    /// Whether `value` is valid UTF-8. `utf8_from` is where validation must start: every byte
    /// before it is known to be ASCII (`None`: all of them are).
    #[inline]
    fn check_utf8(&mut self, value: &[u8], utf8_from: Option<usize>) -> bool {
        let Some(from) = utf8_from else {
            return true;
        };
        let (valid, checked) = valid_utf8_from(value, from);
        self.bytes_scanned += checked as u64;
        valid
    }

    /// Appends one `data` value (and the LF that joins it to the previous one). `value_offset`
    /// is the value's position in the current chunk, when it lies in one; `utf8_from` is where
    /// its UTF-8 validation must start (`None`: it is all ASCII).
    #[inline(always)]
    fn append_data(
        &mut self,
        scanning: &Bytes,
        value: &[u8],
        value_offset: Option<usize>,
        utf8_from: Option<usize>,
    ) {
        // The common case, inline: the event's only data line, kept as a slice of the chunk.
        if self.data == Field::Empty
            && let Some(start) = value_offset
            && self.check_utf8(value, utf8_from)
        {
            self.data = Field::Slice {
                chunk: self.cur_id,
                start,
                end: start + value.len(),
            };
            return;
        }
        self.append_data_to_buffer(scanning, value, utf8_from);
    }

    /// [`append_data`](Self::append_data) for a value that is copied: a second line, a line
    /// assembled across chunks, or invalid UTF-8.
    #[inline(never)]
    fn append_data_to_buffer(&mut self, scanning: &Bytes, value: &[u8], utf8_from: Option<usize>) {
        let first = self.data == Field::Empty;
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
        push_text(&mut self.data_buf, value, utf8_from.is_none());
    }

    fn set_event_type(
        &mut self,
        value: &[u8],
        value_offset: Option<usize>,
        utf8_from: Option<usize>,
    ) {
        if let Some(start) = value_offset
            && self.check_utf8(value, utf8_from)
        {
            self.event_type = Field::Slice {
                chunk: self.cur_id,
                start,
                end: start + value.len(),
            };
            return;
        }
        self.event_type_buf.clear();
        push_text(&mut self.event_type_buf, value, utf8_from.is_none());
        self.event_type = Field::Buf;
    }

    /// The pending event, for dispatch: the parser's fields are reset to empty at once (the
    /// buffers are cleared when next written), and the view borrows what they pointed to. Its
    /// id is the last event id once the pending `id` field, if any, is committed.
    fn take_pending_event<'a>(&'a mut self, cur: &'a Bytes) -> SseEventRef<'a> {
        // Every dispatched event comes here (the line loop's blank line, and the one-step read
        // of `usual_event`), so this is the one place its id is committed, and where a
        // dispatched event's fields are noted as seen.
        self.saw_field = true;
        self.commit_event_id();
        let data = std::mem::replace(&mut self.data, Field::Empty);
        let event_type = std::mem::replace(&mut self.event_type, Field::Empty);
        self.event_view(cur, data, event_type)
    }

    /// A view of an event whose fields are `data` and `event_type`; `cur` is the current chunk.
    fn event_view<'a>(&'a self, cur: &'a Bytes, data: Field, event_type: Field) -> SseEventRef<'a> {
        let (data, data_source) = match data {
            Field::Slice { chunk, start, end } => (
                self.text_in(cur, chunk, start, end),
                Some(self.chunk_by_id(cur, chunk)),
            ),
            Field::Buf => (
                self.data_buf.get(self.data_start..).unwrap_or_default(),
                None,
            ),
            Field::Empty => ("", None),
        };
        let (event_type, event_type_source) = match event_type {
            Field::Slice { chunk, start, end } => (
                self.text_in(cur, chunk, start, end),
                Some(self.chunk_by_id(cur, chunk)),
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

    fn chunk_by_id<'a>(&'a self, cur: &'a Bytes, chunk: u64) -> &'a Bytes {
        if chunk == self.cur_id {
            cur
        } else {
            &self.prev
        }
    }
}

/// Whether `bytes` is valid UTF-8, given that every byte before `from` is ASCII; also returns
/// how many bytes were checked.
#[inline]
fn valid_utf8_from(bytes: &[u8], from: usize) -> (bool, usize) {
    // Validation may start anywhere up to `from`: at least 64 bytes before the end when there
    // are that many, because `simdutf8` hands shorter inputs to the (slower, byte-wise)
    // standard validator.
    let from = from.min(bytes.len().saturating_sub(64));
    let tail = bytes.get(from..).unwrap_or_default();
    // Known to hold a non-ASCII byte: straight to the full validator.
    (simdutf8::basic::from_utf8(tail).is_ok(), tail.len())
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

/// A field value after its colon: one leading space dropped. Returns the value and how many
/// bytes were dropped.
#[inline]
fn strip_space(after_colon: &[u8]) -> (&[u8], usize) {
    match after_colon.strip_prefix(b" ") {
        Some(value) => (value, 1),
        None => (after_colon, 0),
    }
}

/// Appends `bytes` to `out`, replacing invalid UTF-8 with U+FFFD; `ascii` says they are known
/// to be ASCII.
fn push_text(out: &mut String, bytes: &[u8], ascii: bool) {
    if ascii || is_utf8(bytes) {
        // SAFETY: known ASCII or validated on the line above.
        out.push_str(unsafe { std::str::from_utf8_unchecked(bytes) });
    } else {
        out.push_str(&String::from_utf8_lossy(bytes));
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

    /// A field line of any kind, in any position and at any chunking, is noted; comments,
    /// blank lines, other field names and an unterminated last line are not.
    #[test]
    fn field_lines_are_noted_at_any_chunking() {
        let cases: [(&[u8], bool); 13] = [
            (b"Service Unavailable: the upstream is down\n", false),
            (b": keep-alive\n\n\r\n:\n", false),
            (b"<html>\n{\"error\": 1}\ndatum: x\n\n", false),
            (b"oops\ndata: x", false),
            (b"data: x\n\n", true),
            (b"event: ping\ndata: {}\n\n", true),
            (b"event: ping\n\n", true),
            (b"event: ping\n", true),
            (b"data\n", true),
            (b"id: 7\n\n", true),
            (b"id: a\0b\n", true),
            (b"retry: soon\n", true),
            (b"page text\n\nretry: 1000\n", true),
        ];
        for (input, expected) in cases {
            let input = Bytes::from_static(input);
            for size in 1..=input.len() {
                let mut parser = SseParser::new();
                assert!(!parser.saw_field());
                feed_in_chunks(&mut parser, &input, size);
                parser.finish();
                assert_eq!(
                    parser.saw_field(),
                    expected,
                    "{input:?} in {size}-byte chunks"
                );
            }
        }
        // An event dropped for its size was one all the same.
        let mut parser = SseParser::with_config(SseConfig::default().max_event_bytes(Some(4)));
        parser.feed(Bytes::from_static(b"data: far too long\n\n"));
        assert_eq!(events(&mut parser).len(), 0);
        assert_eq!(parser.dropped_events(), 1);
        assert!(parser.saw_field());
    }

    #[test]
    fn comment_lines_are_counted_at_any_chunking() {
        let input = Bytes::from_static(
            b": keep-alive\r\n\r\nevent: a\ndata: x\n: inside an event\n\n:\n:OPENROUTER PROCESSING\n\ndata: y\n\n",
        );
        for size in 1..=input.len() {
            let mut parser = SseParser::new();
            assert_eq!(feed_in_chunks(&mut parser, &input, size), 2, "{size}");
            assert_eq!(parser.comments(), 4, "{size}-byte chunks");
        }
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

    /// Chunk sizes that mix long pieces (kept as chunk slices) with short ones (copied), so
    /// a long line is assembled from both kinds in every order.
    fn feed_in_mixed_chunks(
        parser: &mut SseParser,
        input: &Bytes,
        sizes: &[usize],
    ) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        let mut pos = 0;
        let mut turn = 0;
        while pos < input.len() {
            let end = (pos + sizes[turn % sizes.len()]).min(input.len());
            turn += 1;
            parser.feed(input.slice(pos..end));
            out.extend(events(parser));
            pos = end;
        }
        out
    }

    #[test]
    fn long_lines_assembled_from_chunk_slices_match_the_whole_parse() {
        // Multi-byte characters and an invalid byte at every distance from the piece edges.
        let mut raw = b"\xEF\xBB\xBFid: 7\nevent: big\xC3\xA9\ndata: ".to_vec();
        for i in 0..3000 {
            match i % 7 {
                0 => raw.extend_from_slice("é".as_bytes()),
                3 => raw.extend_from_slice("😀".as_bytes()),
                5 if i % 1000 == 5 => raw.push(0xFF),
                _ => raw.push(b'a' + (i % 26) as u8),
            }
        }
        raw.extend_from_slice(b"\r\ndata: second line\n\n: comment\ndata: short\n\n");
        let input = Bytes::from(raw);
        let mut whole = SseParser::new();
        whole.feed(input.clone());
        let expected = events(&mut whole);
        assert_eq!(expected.len(), 2);
        assert!(expected[0].1.contains('\u{FFFD}'));
        for sizes in [
            &[1460][..],
            &[1024],
            &[1025, 1],
            &[1, 2000, 3],
            &[5000, 7],
            &[1500, 1500, 2, 1100],
        ] {
            let mut parser = SseParser::new();
            assert_eq!(
                feed_in_mixed_chunks(&mut parser, &input, sizes),
                expected,
                "chunk sizes {sizes:?}"
            );
            assert!(parser.state.line_pieces.is_empty());
        }
    }

    /// A stream whose events hold lines past `LONG_LINE` (copied into the line buffer as
    /// they arrive), with multi-byte characters and invalid bytes before and after the point
    /// where the copying starts, in a first and in a second `data` line and in an event type.
    fn long_line_stream() -> Bytes {
        let long_text = |len: usize, salt: usize| {
            let mut text = Vec::with_capacity(len + 8);
            let mut i = 0;
            while text.len() < len {
                match (i + salt) % 11 {
                    0 => text.extend_from_slice("é".as_bytes()),
                    4 => text.extend_from_slice("日本".as_bytes()),
                    7 if i % 90_001 == 7 => text.push(0xFF),
                    _ => text.push(b'a' + (i % 26) as u8),
                }
                i += 1;
            }
            text
        };
        let mut raw = b"data: ".to_vec();
        raw.extend(long_text(LONG_LINE + (LONG_LINE >> 1), 0));
        raw.extend_from_slice(b"\n\nevent: e\ndata: first\r\ndata: ");
        raw.extend(long_text(2 * LONG_LINE + 333, 3));
        raw.extend_from_slice(b"\r\rid: 9\nevent: ");
        raw.extend(long_text(LONG_LINE + 77, 5));
        raw.extend_from_slice(b"\ndata: after\n\ndata: short\n\n");
        Bytes::from(raw)
    }

    /// Feeds `input` in chunks of the given sizes in turn, draining after every `batch` feeds;
    /// `batch` 0: by [`SseParser::feed_borrowed`] (drained by each call).
    fn feed_in_batches(
        parser: &mut SseParser,
        input: &Bytes,
        sizes: &[usize],
        batch: usize,
    ) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        let (mut pos, mut turn) = (0, 0);
        while pos < input.len() {
            let end = (pos + sizes[turn % sizes.len()]).min(input.len());
            turn += 1;
            if batch == 0 {
                parser.feed_borrowed(&input[pos..end], |item| {
                    if let SseItem::Event(e) = item {
                        out.push((e.event_type().into(), e.data().into(), e.id().into()));
                    }
                });
            } else {
                parser.feed(input.slice(pos..end));
                if turn % batch == 0 {
                    out.extend(events(parser));
                }
            }
            pos = end;
        }
        out.extend(events(parser));
        out
    }

    #[test]
    fn lines_past_the_long_line_length_are_copied_as_they_arrive() {
        let input = long_line_stream();
        let mut whole = SseParser::new();
        whole.feed(input.clone());
        let expected = events(&mut whole);
        assert_eq!(expected.len(), 4);
        assert!(expected[0].1.len() > LONG_LINE && expected[0].1.contains('\u{FFFD}'));
        assert!(expected[1].1.starts_with("first\n") && expected[1].1.len() > 2 * LONG_LINE);
        assert!(expected[2].0.len() > LONG_LINE && expected[2].1 == "after");
        for (sizes, batch) in [
            (&[1460][..], 1),
            (&[1460], 3),
            (&[1460, 20000], 0),
            (&[4096, 1], 1),
            (&[700], 1),
            (&[65536, 3, 2000], 2),
            (&[LONG_LINE + 5], 1),
        ] {
            let mut parser = SseParser::new();
            let got = feed_in_batches(&mut parser, &input, sizes, batch);
            assert!(
                got == expected,
                "chunk sizes {sizes:?}, drained every {batch}"
            );
            assert!(parser.state.line_pieces.is_empty());
            // Each byte searched about once (the line ends twice, by the attempt to add
            // their chunks whole, and the non-ASCII parts once more by validation).
            assert!(parser.bytes_scanned() <= 2 * input.len() as u64);
            // The long line's buffer is kept for the next one.
            let kept = parser
                .state
                .line_buf
                .capacity()
                .max(parser.state.data_buf.capacity());
            assert!(kept >= LONG_LINE_RESERVE, "{sizes:?}: kept {kept}");
        }
    }

    #[test]
    fn a_capped_parser_drops_a_long_line_and_reserves_no_more_than_the_cap() {
        let input = long_line_stream();
        let limit = LONG_LINE;
        let config = SseConfig::default().max_event_bytes(Some(limit));
        let mut whole = SseParser::with_config(config.clone());
        whole.feed(input.clone());
        let expected = events(&mut whole);
        let last = ("message".to_owned(), "short".to_owned(), "9".to_owned());
        assert!(expected == [last], "only the last event fits");
        for sizes in [&[1460][..], &[LONG_LINE + 5]] {
            let mut parser = SseParser::with_config(config.clone());
            let got = feed_in_batches(&mut parser, &input, sizes, 1);
            assert!(got == expected, "chunk sizes {sizes:?}");
            assert_eq!(parser.dropped_events(), 3);
            assert!(parser.state.line_buf.capacity() <= 2 * limit);
        }
    }

    /// Streams of events whose lines run to tens of KiB, so that with a small `long_line`
    /// they cross it (copied as they arrive) at random points.
    fn streams_with_long_lines() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let run = (
            prop_oneof![
                Just(b"abcdefgh".to_vec()),
                Just("é".as_bytes().to_vec()),
                Just("日本".as_bytes().to_vec()),
                Just(b"\xff".to_vec()),
                Just(b"x".to_vec()),
            ],
            1usize..100,
        )
            .prop_map(|(token, times)| token.repeat(times));
        let value = prop::collection::vec(run, 0..40).prop_map(|runs| runs.concat());
        let field = prop_oneof![
            4 => Just(&b"data: "[..]),
            1 => Just(&b"data:"[..]),
            1 => Just(&b"event: "[..]),
            1 => Just(&b"id: "[..]),
            1 => Just(&b": "[..]),
        ];
        let eol =
            prop_oneof![4 => Just(&b"\n"[..]), 1 => Just(&b"\r"[..]), 1 => Just(&b"\r\n"[..])];
        let line = (field, value, eol.clone()).prop_map(|(field, value, eol)| {
            let mut line = field.to_vec();
            line.extend(value);
            line.extend_from_slice(eol);
            line
        });
        let event = (prop::collection::vec(line, 1..4), eol).prop_map(|(lines, blank)| {
            let mut event = lines.concat();
            event.extend_from_slice(blank);
            event
        });
        prop::collection::vec(event, 1..6).prop_map(|events| events.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        #[test]
        fn long_lines_copied_as_they_arrive_match_the_whole_parse(
            raw in streams_with_long_lines(),
            sizes in proptest::collection::vec(1usize..4000, 1..6),
            batch in 0usize..4,
            // Below and above `SHARED_PIECE`: a line is then copied from its first long piece
            // on, or gathered from chunk slices (one of them a pending tail) when it gets there.
            long_line in proptest::prop_oneof![proptest::strategy::Just(700usize), proptest::strategy::Just(3000)],
        ) {
            let input = Bytes::from(raw);
            let mut whole = SseParser::new();
            whole.feed(input.clone());
            let expected = events(&mut whole);
            let mut parser = SseParser::new();
            parser.state.long_line = long_line;
            let got = feed_in_batches(&mut parser, &input, &sizes, batch);
            proptest::prop_assert!(got == expected, "events differ");
            // Each byte searched once, non-ASCII values validated once more, and a long
            // line's last chunk searched twice (the attempt to add it whole).
            proptest::prop_assert!(parser.bytes_scanned() <= 3 * input.len() as u64 + 64);
        }
    }

    #[test]
    fn chunks_inside_a_long_line_join_it_without_becoming_the_current_chunk() {
        let mut parser = SseParser::new();
        let mut raw = b"data: a\ndata: ".to_vec();
        raw.extend(std::iter::repeat_n(b'x', 4500));
        raw.extend_from_slice("é\n\n".as_bytes());
        let input = Bytes::from(raw);
        // The first chunk holds the first data line and the start of the long one.
        parser.feed(input.slice(..1100));
        assert!(events(&mut parser).is_empty());
        let first_chunk = parser.state.cur_id;
        for start in [1100, 2200, 3300] {
            parser.feed(input.slice(start..start + 1100));
            assert!(events(&mut parser).is_empty());
        }
        // Each chunk became a piece of the line, moved in; the first one stays current (the
        // pending data field points into it).
        assert_eq!(parser.state.cur_id, first_chunk);
        assert_eq!(parser.state.line_pieces.len(), 4);
        // Every byte so far searched once, and the first line's field name once more.
        assert_eq!(parser.bytes_scanned(), 4400 + "data:".len() as u64);
        parser.feed(input.slice(4400..));
        let got = events(&mut parser);
        let long = format!("{}é", "x".repeat(4500));
        assert_eq!(
            got,
            [("message".into(), format!("a\n{long}"), String::new())]
        );
        assert!(parser.state.line_pieces.is_empty());
        // Each byte searched once, the last chunk's bytes up to the line end twice (by the
        // attempt to add it whole), the data prefix and the non-ASCII tail again.
        assert!(parser.bytes_scanned() <= input.len() as u64 + 150);
    }

    #[test]
    fn long_lines_of_every_field_continued_by_whole_chunks_match_the_whole_parse() {
        let long = |fill: &str| fill.repeat(1200);
        let mut raw = Vec::new();
        for line in [
            format!("event: {}\r\n", long("t")),
            format!("id: {}\n", long("7")),
            format!(": {}\r", long("c")),
            "data: first\n".to_owned(),
            format!("data: {}\n", long("é")),
            // The first non-ASCII character far into an ASCII line, then an invalid byte.
            format!("data: {}é{}\n", long("ab"), long("ab")),
            format!("data: {}\u{1F600}\n\n", long("cd")),
            format!("data: {}#{}\n", long("q"), long("r")),
            format!("retry: {}\n", long("9")),
            "data: tail\n\n".to_owned(),
        ] {
            raw.extend_from_slice(line.as_bytes());
        }
        let invalid = raw.iter().position(|&byte| byte == b'#').unwrap();
        raw[invalid] = 0xFF;
        let input = Bytes::from(raw);
        let mut whole = SseParser::new();
        whole.feed(input.clone());
        let expected = events(&mut whole);
        assert_eq!(expected.len(), 2);
        for sizes in [
            &[1024][..],
            &[1100, 3],
            &[3, 1100],
            &[2000, 16, 17, 1024],
            &[1024, 1, 1024, 15],
            &[4096],
        ] {
            let mut parser = SseParser::new();
            assert_eq!(
                feed_in_mixed_chunks(&mut parser, &input, sizes),
                expected,
                "chunk sizes {sizes:?}"
            );
            assert_eq!(parser.last_event_id(), whole.last_event_id());
            assert!(parser.state.line_pieces.is_empty());
            assert!(
                parser.bytes_scanned() <= 2 * whole.bytes_scanned(),
                "chunk sizes {sizes:?}: {} against {}",
                parser.bytes_scanned(),
                whole.bytes_scanned()
            );
        }
    }

    #[test]
    fn a_long_line_over_the_cap_drops_its_chunk_slices() {
        let config = SseConfig::default().max_event_bytes(Some(3000));
        let mut parser = SseParser::with_config(config);
        let mut raw = b"data: ".to_vec();
        raw.extend(std::iter::repeat_n(b'z', 10_000));
        raw.extend_from_slice(b"\n\ndata: after\n\n");
        let input = Bytes::from(raw);
        let got = feed_in_mixed_chunks(&mut parser, &input, &[1460]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, "after");
        assert_eq!(parser.dropped_events(), 1);
        assert!(
            parser.state.line_pieces.capacity() < 8,
            "no slice is kept past the cap"
        );
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

    fn owned_event(item: &SseItem<'_>) -> Option<SseEvent> {
        match item {
            SseItem::Event(event) => Some(event.to_owned()),
            SseItem::Retry(_) => None,
        }
    }

    #[test]
    fn feed_borrowed_events_own_copies_of_the_chunk() {
        let mut buffer = b"id: 7\nevent: delta\ndata: {\"x\":1}\n\nevent: de".to_vec();
        let mut parser = SseParser::new();
        let mut owned = Vec::new();
        parser.feed_borrowed(&buffer, |item| {
            if let SseItem::Event(event) = item {
                assert!(!event.is_data_borrowed());
                owned.push(event.to_owned());
            }
        });
        let range = buffer.as_ptr_range();
        let outside = |text: &str| !range.contains(&text.as_ptr());
        assert!(outside(&owned[0].data) && outside(&owned[0].event_type));
        assert!(outside(&owned[0].id) && outside(parser.last_event_id()));
        // Nothing the parser kept points into the caller's buffer.
        buffer.fill(b'#');
        parser.feed_borrowed(
            b"lta\ndata: second, long enough to be borrowed\n\n",
            |item| {
                owned.extend(owned_event(&item));
            },
        );
        let texts: Vec<_> = owned
            .iter()
            .map(|e| (e.event_type.as_str(), e.data.as_str(), e.id.as_str()))
            .collect();
        assert_eq!(
            texts,
            [
                ("delta", "{\"x\":1}", "7"),
                ("delta", "second, long enough to be borrowed", "7")
            ]
        );
    }

    #[test]
    fn feed_borrowed_keeps_the_rest_of_the_chunk_when_the_callback_panics() {
        let mut buffer = b"data: one\n\ndata: two\n\ndata: three, then a partial li".to_vec();
        let mut parser = SseParser::new();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            parser.feed_borrowed(&buffer, |_| panic!("callback failed"));
        }));
        assert!(outcome.is_err());
        buffer.fill(b'#');
        let mut rest = Vec::new();
        while let Some(item) = parser.next_item() {
            rest.extend(owned_event(&item));
        }
        parser.feed_borrowed(b"ne\n\n", |item| rest.extend(owned_event(&item)));
        let data: Vec<_> = rest.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["two", "three, then a partial line"]);
    }

    #[test]
    fn feed_borrowed_until_keeps_the_undelivered_items_pending() {
        let mut buffer =
            b"data: one\n\ndata: two\n\nretry: 5\ndata: three, then a partial li".to_vec();
        let mut parser = SseParser::new();
        let mut seen = Vec::new();
        let flow = parser.feed_borrowed_until(&buffer, |item| {
            seen.extend(owned_event(&item));
            ControlFlow::Break(())
        });
        assert_eq!(flow, ControlFlow::Break(()));
        buffer.fill(b'#');
        assert!(matches!(parser.next_item(), Some(SseItem::Event(e)) if e.data() == "two"));
        assert!(matches!(parser.next_item(), Some(SseItem::Retry(5))));
        assert!(parser.next_item().is_none());
        // The next feed continues the partial line; a callback that never stops sees the rest.
        let flow = parser.feed_borrowed_until(b"ne\n\n", |item| {
            seen.extend(owned_event(&item));
            ControlFlow::Continue(())
        });
        assert_eq!(flow, ControlFlow::Continue(()));
        let data: Vec<_> = seen.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["one", "three, then a partial line"]);
    }

    #[test]
    fn feed_borrowed_until_delivers_pending_items_first_and_may_stop_among_them() {
        let mut parser = SseParser::new();
        parser.feed_slice(b"data: a\n\ndata: b\n\n");
        let mut seen = Vec::new();
        let chunk = b"data: c, long enough to take the borrowing path of the parser\n\n".to_vec();
        let flow = parser.feed_borrowed_until(&chunk, |item| {
            seen.extend(owned_event(&item));
            if seen.len() == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(flow, ControlFlow::Break(()));
        let rest = events(&mut parser);
        let data: Vec<_> = seen.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["a", "b"]);
        assert_eq!(rest.len(), 1);
        assert!(rest[0].1.starts_with("c, long enough"));
    }

    #[test]
    fn small_chunks_absorbed_by_feed_keep_pending_fields_valid() {
        let mut parser = SseParser::new();
        parser.feed(Bytes::from_static(b"data: hello\nevent: greeting\n"));
        assert!(parser.next_item().is_none());
        // Small chunks that end no line go straight to the partial line; the chunk the
        // pending fields point into must stay alive until they are dispatched.
        parser.feed(Bytes::from_static(b"x-un"));
        parser.feed(Bytes::from_static(b"kn\xC3"));
        assert!(parser.next_item().is_none());
        parser.feed(Bytes::from_static(b"\xA9own: 1\r"));
        assert!(parser.next_item().is_none());
        parser.feed(Bytes::from_static(b"\n"));
        parser.feed(Bytes::from_static(b"\n"));
        assert_eq!(
            events(&mut parser),
            vec![("greeting".into(), "hello".into(), String::new())]
        );
        // A CR ending a small chunk is a line end, not a byte of the partial line.
        parser.feed(Bytes::from_static(b"data: a"));
        parser.feed(Bytes::from_static(b"b\r"));
        parser.feed(Bytes::from_static(b"\r"));
        assert_eq!(events(&mut parser)[0].1, "ab");
        assert!(!parser.finish());
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
        assert!(
            parser.state.line_buf.capacity() < 4096,
            "memory stays bounded"
        );
        assert!(parser.state.data_buf.capacity() < 4096);
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
    fn values_are_validated_from_their_first_non_ascii_byte_exactly() {
        // Valid and invalid sequences at every position of short and long values (validation
        // starts at the first non-ASCII byte or 64 bytes before the end, whichever is first).
        let pieces: [&[u8]; 6] = [
            "é".as_bytes(),
            "日本".as_bytes(),
            "🚀".as_bytes(),
            b"\x80",
            b"\xE6\x97",
            b"\xF0\x9F\x9A",
        ];
        for len in [0usize, 1, 31, 32, 63, 64, 65, 100, 130, 200] {
            for at in (0..=len).step_by(7).chain([len]) {
                for piece in pieces {
                    for second in [None, Some("ü".as_bytes()), Some(b"\xFF".as_slice())] {
                        let mut value = vec![b'a'; len];
                        value.splice(at..at, piece.iter().copied());
                        if let Some(second) = second {
                            value.extend_from_slice(second);
                        }
                        let expected = String::from_utf8_lossy(&value).into_owned();
                        // (field, what follows the line, the expected event type and data)
                        let cases = [
                            (
                                &b"data"[..],
                                &b"\n\n"[..],
                                "message".to_owned(),
                                expected.clone(),
                            ),
                            (
                                b"data",
                                b"\ndata: x\n\n",
                                "message".into(),
                                format!("{expected}\nx"),
                            ),
                            (b"event", b"\ndata: x\n\n", expected.clone(), "x".into()),
                        ];
                        for (field, rest, event_type, data) in cases {
                            let mut input = field.to_vec();
                            input.extend_from_slice(b": ");
                            input.extend_from_slice(&value);
                            input.extend_from_slice(rest);
                            let want = if event_type.is_empty() {
                                "message".to_owned()
                            } else {
                                event_type
                            };
                            let want = [(want, data, String::new())];
                            let input = Bytes::from(input);
                            // Whole, and split (lines assembled across chunks) at several points.
                            for split in (0..input.len()).step_by(11).chain([0]) {
                                let mut parser = SseParser::new();
                                parser.feed(input.slice(..split));
                                let mut got = events(&mut parser);
                                parser.feed(input.slice(split..));
                                got.extend(events(&mut parser));
                                assert_eq!(got, want, "{len} {at} {piece:?} split {split}");
                            }
                            let mut parser = SseParser::new();
                            assert_eq!(feed_in_chunks(&mut parser, &input, 1), 1);
                        }
                    }
                }
            }
        }
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
