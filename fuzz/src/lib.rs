//! Checks shared by the fuzz targets (each target in `fuzz_targets/` is a thin `fuzz_target!`
//! calling one of these). Every check asserts real invariants, not only "no panic".

use std::ops::ControlFlow;

use bytes::Bytes;
use ferroloop::decode::partial_json::{PartialJson, PartialMode};
use ferroloop::decode::{
    AnthropicDecoder, DecodeError, DecodeEvent, EventDecoder, OpenAiChatDecoder, Provider,
    StreamDecoder,
};
use ferroloop::sse::{SseConfig, SseOwnedItem, SseParser, parse_all};
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

/// One step of a decoder's output: a typed event, or an error returned by `push_event`/`feed`.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A typed event.
    Event(DecodeEvent),
    /// An error, as `code: message`.
    Error(String),
}

/// Everything observable about one decoding run.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Events and errors, in order.
    pub log: Vec<Entry>,
    /// The snapshot before `finish`.
    pub snapshot: Value,
    /// The result of `finish`: the final message as JSON text (`finish_json`, or the text of
    /// `finish`'s message), or the error with its partial message.
    pub finish: Result<String, (String, Option<Value>)>,
}

/// How [`run_stream`] hands the chunks to the stream decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// `feed_into` of an owned copy; ends with `finish`.
    Owned,
    /// `feed_borrowed_into` of a buffer freed right after the call; checks `message_json`
    /// against `message` along the way and ends with `finish_json`.
    Borrowed,
}

fn describe(error: &DecodeError) -> String {
    format!("{}: {error}", error.code())
}

fn finish_result(result: Result<Value, DecodeError>) -> Result<String, (String, Option<Value>)> {
    match result {
        Ok(message) => {
            assert!(
                message.is_object(),
                "finish returned a non-object: {message}"
            );
            Ok(message.to_string())
        }
        Err(error) => finish_error(error),
    }
}

fn finish_json_result(
    result: Result<String, DecodeError>,
) -> Result<String, (String, Option<Value>)> {
    match result {
        Ok(text) => {
            match serde_json::from_str::<Value>(&text) {
                Ok(message) => {
                    assert!(message.is_object(), "finish_json gave a non-object: {text}")
                }
                Err(error) => panic!("finish_json gave invalid JSON {text:?}: {error}"),
            }
            Ok(text)
        }
        Err(error) => finish_error(error),
    }
}

fn finish_error(error: DecodeError) -> Result<String, (String, Option<Value>)> {
    let text = describe(&error);
    assert!(!error.to_string().is_empty());
    let partial = match error {
        DecodeError::Truncated { partial, .. } => Some(*partial),
        _ => None,
    };
    Err((text, partial))
}

fn check_snapshot(snapshot: &Value) {
    assert!(
        snapshot.is_null() || snapshot.is_object(),
        "snapshot is neither null nor an object: {snapshot}"
    );
}

/// Feeds `input` as raw SSE bytes in chunks of `chunk` bytes (0 = one chunk), as `feed` says.
/// After an error the queued events are drained with empty feeds, so the log does not depend on
/// where the chunk boundaries fell.
pub fn run_stream<D: EventDecoder>(
    decoder: D,
    input: &[u8],
    chunk: usize,
    record: bool,
    feed: Feed,
) -> Outcome {
    let mut stream = StreamDecoder::new(decoder);
    stream.decoder_mut().set_record_events(record);
    let mut log = Vec::new();
    let mut events = Vec::new();
    let size = if chunk == 0 {
        input.len().max(1)
    } else {
        chunk
    };
    let feed_piece = |stream: &mut StreamDecoder<D>, piece: &[u8], events: &mut Vec<_>| match feed {
        Feed::Owned => stream.feed_into(Bytes::copy_from_slice(piece), events),
        Feed::Borrowed => with_scratch(piece, |chunk| stream.feed_borrowed_into(chunk, events)),
    };
    // A snapshot costs the size of the message: check a bounded number of them per run.
    let stride = input.len().div_ceil(size).div_ceil(16).max(1);
    for (turn, piece) in input.chunks(size).enumerate() {
        let mut result = feed_piece(&mut stream, piece, &mut events);
        loop {
            log.extend(events.drain(..).map(Entry::Event));
            match result {
                Ok(()) => break,
                Err(error) => {
                    log.push(Entry::Error(describe(&error)));
                    result = feed_piece(&mut stream, &[], &mut events);
                }
            }
        }
        if turn % stride == 0 {
            let snapshot = stream.message();
            check_snapshot(&snapshot);
            if feed == Feed::Borrowed {
                check_message_json(&stream, &snapshot);
            }
        }
    }
    let snapshot = stream.message();
    if feed == Feed::Borrowed {
        check_message_json(&stream, &snapshot);
    }
    let complete = stream.is_complete();
    let finish = match feed {
        Feed::Owned => finish_result(stream.finish()),
        Feed::Borrowed => finish_json_result(stream.finish_json()),
    };
    if finish.is_ok() {
        assert!(
            complete || every_choice_finished(&snapshot),
            "finish succeeded on a stream that never completed"
        );
    }
    Outcome {
        log,
        snapshot,
        finish,
    }
}

/// An OpenAI Chat snapshot whose choices all have a `finish_reason`: a whole answer even
/// without `data: [DONE]` (the only way a stream finishes without its end marker).
fn every_choice_finished(snapshot: &Value) -> bool {
    snapshot["choices"].as_array().is_some_and(|choices| {
        !choices.is_empty()
            && choices
                .iter()
                .all(|c| c["finish_reason"].as_str().is_some_and(|r| !r.is_empty()))
    })
}

/// `message_json` is exactly the text of `message()` (what `EventDecoder::message_json`
/// promises: the bindings hand it over instead of serializing the `Value`).
fn check_message_json<D: EventDecoder>(stream: &StreamDecoder<D>, snapshot: &Value) {
    assert_eq!(
        stream.message_json(),
        snapshot.to_string(),
        "message_json is not the text of message"
    );
}

/// Pushes already-framed events straight into a decoder (no SSE parser).
pub fn run_events<'a, D: EventDecoder>(
    mut decoder: D,
    events: impl IntoIterator<Item = (&'a str, &'a str)>,
    record: bool,
) -> Outcome {
    decoder.set_record_events(record);
    let mut log = Vec::new();
    let mut out = Vec::new();
    for (turn, (event_type, data)) in events.into_iter().enumerate() {
        if turn % 16 == 0 {
            check_snapshot(&decoder.message());
        }
        let result = decoder.push_event(event_type, data);
        decoder.drain_events(&mut out);
        log.extend(out.drain(..).map(Entry::Event));
        if let Err(error) = result {
            log.push(Entry::Error(describe(&error)));
        }
    }
    let snapshot = decoder.message();
    let complete = decoder.is_complete();
    let finish = finish_result(decoder.finish());
    if finish.is_ok() {
        assert!(
            complete || every_choice_finished(&snapshot),
            "finish succeeded on a stream that never completed"
        );
    }
    Outcome {
        log,
        snapshot,
        finish,
    }
}

fn errors_only(outcome: &Outcome) -> Vec<Entry> {
    outcome
        .log
        .iter()
        .filter(|entry| matches!(entry, Entry::Error(_)))
        .cloned()
        .collect()
}

/// A cheap deterministic hash of the input, to pick a chunk size without consuming input bytes
/// (so the fixture seeds stay valid streams).
fn chunk_size_for(input: &[u8]) -> usize {
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    1 + (hash % 67) as usize
}

fn new_decoder(provider: Provider) -> ferroloop::decode::AnyDecoder {
    provider.decoder()
}

/// Raw SSE bytes through one provider's decoder:
/// - one chunk and small chunks give the same events, errors, snapshot and final result;
/// - `feed_borrowed_into` gives what `feed_into` gives at the same chunking, and `message_json`
///   and `finish_json` are exactly the text of `message` and `finish`;
/// - the stream decoder agrees with pushing the framed events directly;
/// - accumulate-only mode (no typed events) gives the same errors and the same message;
/// - for Anthropic, the hand-written string-delta fast path agrees with the serde path, and for
///   OpenAI Chat Completions the template and text fast paths agree with the general path.
pub fn check_decode_stream(provider: Provider, input: &[u8]) {
    let whole = run_stream(new_decoder(provider), input, 0, true, Feed::Owned);
    let split = run_stream(
        new_decoder(provider),
        input,
        chunk_size_for(input),
        true,
        Feed::Owned,
    );
    assert_eq!(whole, split, "chunking changed the decoding");
    let borrowed = run_stream(
        new_decoder(provider),
        input,
        chunk_size_for(input),
        true,
        Feed::Borrowed,
    );
    assert_eq!(
        split, borrowed,
        "feed_borrowed_into and feed_into disagree (or finish_json is not the text of finish)"
    );

    let items = parse_all(Bytes::copy_from_slice(input));
    let framed = items.iter().filter_map(|item| match item {
        SseOwnedItem::Event(event) => Some((event.as_ref().event_type(), event.as_ref().data())),
        SseOwnedItem::Retry(_) => None,
    });
    let direct = run_events(new_decoder(provider), framed, true);
    assert_eq!(
        whole, direct,
        "the stream decoder and direct pushes disagree"
    );

    let quiet = run_stream(new_decoder(provider), input, 0, false, Feed::Owned);
    assert_eq!(
        errors_only(&whole),
        errors_only(&quiet),
        "accumulate-only mode changed the errors"
    );
    assert_eq!(
        whole.snapshot, quiet.snapshot,
        "accumulate-only mode changed the snapshot"
    );
    assert_eq!(
        whole.finish, quiet.finish,
        "accumulate-only mode changed the result"
    );

    if provider == Provider::Anthropic {
        check_anthropic_calls(&whole);
        let mut slow = AnthropicDecoder::new();
        slow.set_text_fast_path(false);
        let serde_path = run_stream(slow, input, 0, true, Feed::Owned);
        assert_eq!(
            whole, serde_path,
            "the text fast path and the serde path disagree"
        );
    }
    if provider == Provider::OpenAiChat {
        let mut no_template = OpenAiChatDecoder::new();
        no_template.set_template_fast_path(false);
        let serde_text = run_stream(no_template, input, 0, true, Feed::Owned);
        assert_eq!(
            whole, serde_text,
            "the template fast path and the serde text path disagree"
        );
        let mut general = OpenAiChatDecoder::new();
        general.set_text_fast_path(false);
        let general = run_stream(general, input, 0, true, Feed::Owned);
        assert_eq!(
            whole, general,
            "the text fast paths and the general path disagree"
        );
    }
}

/// When an Anthropic stream completes, every call its events reported (ready, invalid or
/// truncated) is the `tool_use` (or `server_tool_use`) block at that index of the final message,
/// with the same id and name (and input, when ready), and no block is reported twice: an agent
/// runs what the events report and records what the message holds.
fn check_anthropic_calls(outcome: &Outcome) {
    let Ok(text) = &outcome.finish else {
        return;
    };
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let content = message["content"].as_array().cloned().unwrap_or_default();
    let mut reported = vec![false; content.len()];
    for entry in &outcome.log {
        let Entry::Event(event) = entry else {
            continue;
        };
        let (index, id, name, input) = match event {
            DecodeEvent::ToolUseReady {
                index,
                id,
                name,
                input,
            } => (*index, id, name, Some(input)),
            DecodeEvent::ToolUseInvalid {
                index, id, name, ..
            }
            | DecodeEvent::ToolUseTruncated {
                index, id, name, ..
            } => (*index, id, name, None),
            _ => continue,
        };
        let Some(block) = content.get(index) else {
            panic!("a call reported at block {index}, past the message's content: {message}");
        };
        assert!(
            block.get("input").is_some(),
            "call {index} is not a tool block: {message}"
        );
        // A call without a (string) id or name is reported with an empty one.
        let text = |key: &str| block[key].as_str().unwrap_or_default();
        assert_eq!(text("id"), id.as_str(), "ids differ: {message}");
        assert_eq!(text("name"), name.as_str(), "names differ: {message}");
        if let Some(input) = input {
            assert_eq!(&block["input"], input, "inputs differ: {message}");
        }
        assert!(!reported[index], "block {index} reported twice: {message}");
        reported[index] = true;
    }
}

/// Reads bytes of the fuzzer's input as choices; zeros once exhausted.
struct Choices<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn pick<'s>(&mut self, from: &[&'s str]) -> &'s str {
        from[usize::from(self.byte()) % from.len()]
    }
}

/// Event types of every provider (and a few that none knows).
const EVENT_TYPES: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
    "message",
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.output_text.annotation.added",
    "response.refusal.delta",
    "response.refusal.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.completed",
    "response.failed",
    "response.incomplete",
    "unknown_event",
];

/// Object keys the decoders look at (and their siblings).
const KEYS: &[&str] = &[
    "type",
    "index",
    "delta",
    "text",
    "partial_json",
    "thinking",
    "signature",
    "citation",
    "content_block",
    "message",
    "content",
    "usage",
    "input_tokens",
    "output_tokens",
    "stop_reason",
    "stop_sequence",
    "id",
    "name",
    "input",
    "role",
    "model",
    "error",
    "choices",
    "finish_reason",
    "tool_calls",
    "function",
    "arguments",
    "refusal",
    "response",
    "output",
    "output_index",
    "content_index",
    "item",
    "item_id",
    "call_id",
    "status",
    "incomplete_details",
    "reason",
    "part",
    "annotation",
];

/// String values the decoders compare against.
const STRINGS: &[&str] = &[
    "text",
    "tool_use",
    "server_tool_use",
    "thinking",
    "redacted_thinking",
    "text_delta",
    "input_json_delta",
    "thinking_delta",
    "signature_delta",
    "citations_delta",
    "message",
    "assistant",
    "function",
    "function_call",
    "output_text",
    "refusal",
    "completed",
    "incomplete",
    "in_progress",
    "failed",
    "stop",
    "length",
    "tool_calls",
    "end_turn",
    "max_tokens",
    "tool_use_1",
    "{\"a\":",
    "1}",
    "",
    "é\u{1F600}",
    "[DONE]",
    "overloaded_error",
];

/// The words a generated JSON value is made of.
struct Vocab {
    keys: &'static [&'static str],
    strings: &'static [&'static str],
}

const DECODE_VOCAB: Vocab = Vocab {
    keys: KEYS,
    strings: STRINGS,
};

fn gen_value(c: &mut Choices<'_>, depth: u8) -> Value {
    gen_value_in(c, depth, &DECODE_VOCAB)
}

fn gen_value_in(c: &mut Choices<'_>, depth: u8, vocab: &Vocab) -> Value {
    let choice = if depth >= 4 {
        c.byte() % 4
    } else {
        c.byte() % 8
    };
    match choice {
        0 => Value::Null,
        1 => Value::Bool(c.byte() & 1 == 1),
        2 => match c.byte() % 4 {
            0 => Value::from(c.byte() % 4),
            1 => Value::from(-i64::from(c.byte())),
            2 => Value::from(u64::MAX - u64::from(c.byte())),
            _ => Value::from(f64::from(c.byte()) / 3.0),
        },
        3 => match c.byte() % 8 {
            0 => Value::from(gen_base64(c)),
            _ => Value::from(c.pick(vocab.strings)),
        },
        4 => {
            let n = c.byte() % 4;
            Value::Array((0..n).map(|_| gen_value_in(c, depth + 1, vocab)).collect())
        }
        _ => {
            let n = c.byte() % 5;
            let mut map = Map::new();
            for _ in 0..n {
                let key = c.pick(vocab.keys).to_owned();
                map.insert(key, gen_value_in(c, depth + 1, vocab));
            }
            Value::Object(map)
        }
    }
}

/// Builds an event sequence from the fuzzer's bytes: protocol event types with JSON data made of
/// the protocol's own keys and values (so the decoders' validation paths are reached), sometimes
/// not JSON at all.
pub fn gen_events(data: &[u8]) -> Vec<(String, String)> {
    let mut c = Choices { data, pos: 0 };
    let mut events = Vec::new();
    while !c.exhausted() && events.len() < 64 {
        let event_type = c.pick(EVENT_TYPES);
        let payload = match c.byte() % 16 {
            // Not JSON: `[DONE]`, empty, or raw text.
            0 => c.pick(&["[DONE]", "", "{", "null", "\u{FFFD}"]).to_owned(),
            _ => {
                let mut value = gen_value(&mut c, 0);
                if c.byte() % 2 == 0 {
                    // Most real events repeat their SSE type in the JSON `type` field.
                    if let Value::Object(map) = &mut value {
                        map.insert("type".to_owned(), Value::from(event_type));
                    } else {
                        let mut map = Map::new();
                        map.insert("type".to_owned(), Value::from(event_type));
                        map.insert("index".to_owned(), Value::from(c.byte() % 3));
                        map.insert("x".to_owned(), value);
                        value = Value::Object(map);
                    }
                }
                value.to_string()
            }
        };
        events.push((event_type.to_owned(), payload));
    }
    events
}

/// Frames events as an SSE stream (`event:` line, one `data:` line per line of the payload).
pub fn to_sse(events: &[(String, String)]) -> Vec<u8> {
    let mut out = String::new();
    for (event_type, data) in events {
        out.push_str("event: ");
        out.push_str(event_type);
        out.push('\n');
        for line in data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// Structured event sequences through every provider's decoder: no panic, typed errors, a
/// snapshot that is always null or an object, a final result that is an object only when the
/// stream completed, and the same outcome when the sequence is framed as SSE and fed in chunks.
pub fn check_decode_events(data: &[u8]) {
    let events = gen_events(data);
    let sse = to_sse(&events);
    for provider in [
        Provider::Anthropic,
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
    ] {
        let pairs = events.iter().map(|(t, d)| (t.as_str(), d.as_str()));
        let direct = run_events(new_decoder(provider), pairs, true);
        let streamed = run_stream(
            new_decoder(provider),
            &sse,
            chunk_size_for(data),
            true,
            Feed::Owned,
        );
        assert_eq!(direct, streamed, "framing as SSE changed the decoding");
        let pairs = events.iter().map(|(t, d)| (t.as_str(), d.as_str()));
        let quiet = run_events(new_decoder(provider), pairs, false);
        assert_eq!(errors_only(&direct), errors_only(&quiet));
        assert_eq!(direct.snapshot, quiet.snapshot);
        assert_eq!(direct.finish, quiet.finish);
    }
}

/// The partial-JSON view on arbitrary text fed in arbitrary fragments:
/// - never panics; the view, when there is one, is valid JSON (by the grammar: numbers out of
///   f64's range included);
/// - after every fragment, the incremental view equals the view of a fresh parse of the same
///   prefix, in both modes, and the scanner has examined each byte at most once;
/// - once the whole text is a valid JSON document, the view is that document.
pub fn check_partial_json(data: &[u8]) {
    let (control, rest) = data.split_at(data.len().min(2));
    let text = String::from_utf8_lossy(rest);
    let sizes: Vec<usize> = control.iter().map(|b| usize::from(*b % 16) + 1).collect();
    // A fresh parse per prefix is quadratic: compare at most ~32 prefixes per input (always
    // including the last one).
    let steps = text
        .len()
        .div_ceil(sizes.iter().min().copied().unwrap_or(1))
        .max(1);
    let stride = steps.div_ceil(32);
    for mode in [
        PartialMode::DropIncompleteStrings,
        PartialMode::TrailingStrings,
    ] {
        let mut incremental = PartialJson::new();
        let mut start = 0;
        let mut turn = 0;
        while start < text.len() {
            let size = sizes
                .get(turn % sizes.len().max(1))
                .copied()
                .unwrap_or(text.len());
            turn += 1;
            let mut end = (start + size).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            incremental.push(&text[start..end]);
            start = end;
            if turn % stride != 0 && end < text.len() {
                // Still scanned incrementally (the view below is asked less often).
                incremental.scan();
                continue;
            }
            let got = incremental.view_text(mode);
            let mut fresh = PartialJson::new();
            fresh.push(&text[..end]);
            assert_eq!(
                got,
                fresh.view_text(mode),
                "incremental and fresh views differ"
            );
            assert_eq!(incremental.is_invalid(), fresh.is_invalid());
            if let Some(view) = &got {
                if let Err(error) = serde_json::from_str::<Value>(view) {
                    // A number past f64's range is valid JSON that `Value` cannot hold: the
                    // grammar alone is checked then. Nesting past serde_json's recursion limit
                    // (128) is valid JSON it refuses to read, as it refuses the whole text:
                    // `view` is `None` there and `parse_complete` an error, alike.
                    let message = error.to_string();
                    let too_deep = message.starts_with("recursion limit exceeded");
                    let out_of_range = message.starts_with("number out of range");
                    if !too_deep
                        && (!out_of_range || serde_json::from_str::<IgnoredAny>(view).is_err())
                    {
                        panic!("view {view:?} of {:?} is not JSON: {error}", &text[..end]);
                    }
                }
            }
            assert!(incremental.work() <= end as u64, "a byte was scanned twice");
        }
        if let Ok(document) = serde_json::from_str::<Value>(&text) {
            assert!(
                !incremental.is_invalid(),
                "valid JSON {text:?} reported invalid"
            );
            assert_eq!(incremental.view(mode), Some(document));
        }
    }
}

/// A base64-looking string: sometimes an image or PDF magic number, then characters of the
/// base64 alphabets (standard and URL-safe), whitespace or junk, chosen by the fuzzer.
fn gen_base64(c: &mut Choices<'_>) -> String {
    const ALPHABET: &[u8] =
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_= \n.";
    let mut out = String::from(c.pick(&[
        "",
        "iVBORw0KGgoAAAANSUhEUgAA",
        "/9j/",
        "/9j/4AAQSkZJRgABAQ",
        "R0lGODlh",
        "UklGR",
        "UklGRiQAAABXRUJQVlA4",
        "JVBERi0xLj",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA",
    ]));
    let n = c.byte();
    for _ in 0..n {
        out.push(char::from(ALPHABET[usize::from(c.byte()) % ALPHABET.len()]));
    }
    out
}

const REQUEST_KEYS: &[&str] = &[
    "messages",
    "system",
    "tools",
    "role",
    "content",
    "type",
    "text",
    "thinking",
    "source",
    "data",
    "media_type",
    "image_url",
    "url",
    "detail",
    "width",
    "height",
    "id",
    "tool_use_id",
    "tool_call_id",
    "tool_calls",
    "input",
    "name",
    "description",
    "input_schema",
    "function",
    "parameters",
    "arguments",
    "is_error",
    "cache_control",
    "title",
    "context",
    "citations",
    // OpenAI Responses: the body's `input` and `instructions`, its items' fields.
    "instructions",
    "functions",
    "call_id",
    "output",
    "summary",
    "encrypted_content",
    "file_data",
    "filename",
];

const REQUEST_STRINGS: &[&str] = &[
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "text",
    "image",
    "image_url",
    "input_image",
    "tool_use",
    "tool_result",
    "server_tool_use",
    "document",
    "thinking",
    "redacted_thinking",
    "base64",
    "url",
    "function",
    "low",
    "high",
    "application/pdf",
    "image/png",
    "Hello, world. 你好世界 😀",
    "",
    // OpenAI Responses item and part types.
    "message",
    "input_text",
    "output_text",
    "input_file",
    "function_call",
    "function_call_output",
    "reasoning",
    "summary_text",
];

const REQUEST_VOCAB: Vocab = Vocab {
    keys: REQUEST_KEYS,
    strings: REQUEST_STRINGS,
};

/// The token estimator on arbitrary bytes:
/// - the vector (AVX2, AVX-512) and portable class-counting kernels agree on every input, and
///   count every byte;
/// - every family's estimate is 0 exactly for empty input and never panics, for raw bytes
///   (invalid UTF-8 included) and for their lossy UTF-8 decoding;
/// - on valid UTF-8, the text and byte entry points agree;
/// - `TextEstimator` fed the input in pieces counts what one pass over the whole counts.
pub fn check_token_estimator(data: &[u8]) {
    use ferroloop::tokens::classes::{Kernel, count_classes_with};
    use ferroloop::tokens::{FAMILIES, estimate_bytes, estimate_text};

    let portable = count_classes_with(data, Kernel::Portable);
    for kernel in [Kernel::Avx2, Kernel::Avx512] {
        let vector = count_classes_with(data, kernel);
        assert_eq!(
            portable, vector,
            "the class-counting kernels disagree ({kernel:?})"
        );
    }
    assert_eq!(portable.bytes, data.len() as u64);
    // Fed in pieces (of a size the input picks), the counts are the whole input's.
    let piece = usize::from(data.first().copied().unwrap_or(0) % 61) + 1;
    let mut pieces = ferroloop::tokens::TextEstimator::new(ferroloop::tokens::Family::Claude);
    for chunk in data.chunks(piece) {
        pieces.feed(chunk);
    }
    assert_eq!(
        pieces.counts(),
        portable,
        "the counts of the pieces differ from the whole's"
    );
    let lossy = String::from_utf8_lossy(data);
    for family in FAMILIES {
        let by_bytes = estimate_bytes(data, family);
        assert_eq!(by_bytes == 0, data.is_empty());
        let by_text = estimate_text(&lossy, family);
        assert_eq!(by_text == 0, lossy.is_empty());
        if let Ok(text) = std::str::from_utf8(data) {
            assert_eq!(estimate_text(text, family), by_bytes);
        }
    }
}

/// Request estimation on arbitrary JSON: the input itself when it parses, otherwise a
/// request-shaped document generated from it (messages with text, image, tool and document
/// blocks; base64 payloads with image and PDF headers). Never panics; estimates are
/// deterministic; the body and by-parts entry points agree.
pub fn check_request_estimate(data: &[u8]) {
    use ferroloop::tokens::{
        FAMILIES, estimate_block, estimate_content, estimate_message, estimate_request,
        estimate_request_body, estimate_tools, images,
    };

    let value = match serde_json::from_slice::<Value>(data) {
        Ok(value) => value,
        Err(_) => {
            // A Messages or Chat Completions body (`messages`, `system`, `tools`), or an
            // OpenAI Responses one (`input` as items or a string, `instructions`, `tools` or
            // the legacy `functions`), by the first byte.
            let mut c = Choices { data, pos: 0 };
            let responses = c.byte() % 3 == 0;
            let mut body = Map::new();
            let messages: Vec<Value> = (0..c.byte() % 4)
                .map(|_| gen_value_in(&mut c, 1, &REQUEST_VOCAB))
                .collect();
            let (messages_key, system_key) = if responses {
                ("input", "instructions")
            } else {
                ("messages", "system")
            };
            let messages = if responses && c.byte() % 4 == 0 {
                Value::from(c.pick(REQUEST_STRINGS))
            } else {
                Value::Array(messages)
            };
            body.insert(messages_key.to_owned(), messages);
            if c.byte() % 2 == 0 {
                body.insert(system_key.to_owned(), gen_value_in(&mut c, 2, &REQUEST_VOCAB));
            }
            if c.byte() % 2 == 0 {
                let tools_key = if responses && c.byte() % 2 == 0 {
                    "functions"
                } else {
                    "tools"
                };
                body.insert(tools_key.to_owned(), gen_value_in(&mut c, 2, &REQUEST_VOCAB));
            }
            Value::Object(body)
        }
    };
    for family in FAMILIES {
        let estimate = estimate_request_body(&value, family);
        assert_eq!(estimate, estimate_request_body(&value, family));
        let _ = estimate.total();
        // The parts are taken where `estimate_request_body` documents it reads them: an OpenAI
        // Responses body holds its messages and items in `input` (an array, or a string that is
        // one user message) and its system prompt in `instructions`, and `functions` is the
        // legacy name of `tools`. Reading only `messages`, `system` and `tools` here failed on
        // the Responses seed (tests/tokens/requests/openai_responses.json) that the library
        // estimates as documented.
        let prompt;
        let messages = match (value.get("messages"), value.get("input")) {
            (Some(messages), _) => messages.as_array().map_or(&[][..], Vec::as_slice),
            (None, Some(Value::Array(items))) => items.as_slice(),
            (None, Some(Value::String(text))) => {
                prompt = [serde_json::json!({"role": "user", "content": text})];
                &prompt[..]
            }
            (None, _) => &[][..],
        };
        let system = value.get("system").or_else(|| value.get("instructions"));
        let tools = value.get("tools").or_else(|| value.get("functions"));
        let by_parts = estimate_request(system, tools, messages, family);
        assert_eq!(estimate, by_parts);
        for part in std::iter::once(&value).chain(messages) {
            let _ = estimate_message(part, family);
            let _ = estimate_content(part, family);
            let _ = estimate_block(part, family);
            let _ = ferroloop::tokens::request::estimate_json(part, family);
            let _ = estimate_tools(part, family);
            let _ = images::image_dimensions(part);
            let _ = images::estimate_image(part, family);
        }
    }
}

/// Everything observable about one SSE parse.
#[derive(Debug, PartialEq)]
struct SseRun {
    items: Vec<SseOwnedItem>,
    last_event_id: String,
    retry: Option<u64>,
    dropped: u64,
    discarded: bool,
    /// `last_event_id` and `retry` after `finish`, which keeps them.
    after_finish: (String, Option<u64>),
}

/// The bytes a borrowed feed is given: a fresh allocation per call, scribbled over and freed
/// right after it, so a reference the parser kept into caller memory reads garbage (or, under
/// the address sanitizer, freed memory) and shows.
fn with_scratch<R>(piece: &[u8], feed: impl FnOnce(&[u8]) -> R) -> R {
    let mut scratch = piece.to_vec();
    let result = feed(&scratch);
    scratch.fill(0xFF);
    drop(scratch);
    result
}

fn drain_into(parser: &mut SseParser, items: &mut Vec<SseOwnedItem>) {
    while let Some(item) = parser.next_item() {
        items.push(item.to_owned());
    }
}

/// After a feed that promises to deliver every completed item, none is left.
fn assert_drained(parser: &mut SseParser, how: &str) {
    if let Some(item) = parser.next_item() {
        panic!("{how} left {:?} pending", item.to_owned());
    }
}

fn end_run(mut parser: SseParser, mut items: Vec<SseOwnedItem>, input_len: usize) -> SseRun {
    // `finish` discards what is still queued: every fed item must be taken out first.
    drain_into(&mut parser, &mut items);
    let last_event_id = parser.last_event_id().to_owned();
    let retry = parser.retry();
    let dropped = parser.dropped_events();
    let discarded = parser.finish();
    // Linear work, whatever the input, the chunking and the entry points.
    let len = input_len as u64;
    assert!(
        parser.bytes_scanned() <= 2 * len + 8 * (len + 1),
        "{} bytes scanned for {len} bytes of input",
        parser.bytes_scanned()
    );
    assert_eq!(parser.bytes_fed(), len, "bytes_fed");
    SseRun {
        items,
        last_event_id,
        retry,
        dropped,
        discarded,
        after_finish: (parser.last_event_id().to_owned(), parser.retry()),
    }
}

/// How many control bytes [`check_sse_feeds`] reads before the stream.
pub const SSE_FEEDS_CONTROL: usize = 17;

/// The SSE parser's entry points mixed freely. The first byte chooses an optional
/// `max_event_bytes` cap; the next 16 are 8 (mode, size) pairs, used in turn for the chunks of
/// the rest of the input. A mode is one of: `feed` then drain with `next_item`; `feed` with the
/// items left pending; `feed_slice` then drain; `feed_slice` left pending; `feed_with`;
/// `feed_borrowed`; `feed_borrowed_until` stopping after 1 to 4 items, the rest drained with
/// `next_item` or left for the next feed. Whatever the mix:
/// - the items (owned), `last_event_id`, `retry`, `dropped_events` and the `finish` result equal
///   those of one owned feed of the whole input;
/// - the feeds that deliver leave nothing pending, a stopping callback stops exactly when it
///   says, and the work stays linear in the input.
pub fn check_sse_feeds(data: &[u8]) {
    let (control, input) = data.split_at(data.len().min(SSE_FEEDS_CONTROL));
    let (limit_byte, steps) = control.split_first().unwrap_or((&0, &[]));
    let limit = (*limit_byte > 200).then(|| usize::from(*limit_byte - 200) * 4);
    let config = || SseConfig::default().max_event_bytes(limit);

    let mut whole = SseParser::with_config(config());
    let mut items = Vec::new();
    whole.feed(Bytes::copy_from_slice(input));
    drain_into(&mut whole, &mut items);
    let expected = end_run(whole, items, input.len());

    let steps: Vec<(u8, u8)> = steps.chunks_exact(2).map(|s| (s[0], s[1])).collect();
    let mut parser = SseParser::with_config(config());
    let mut items = Vec::new();
    let mut pos = 0;
    let mut turn = 0;
    while pos < input.len() {
        let (mode, size) = steps
            .get(turn % steps.len().max(1))
            .copied()
            .unwrap_or((0, 255));
        turn += 1;
        // 255 takes the rest: chunks past 256 bytes too.
        let size = if size == 255 {
            input.len()
        } else {
            usize::from(size) + 1
        };
        let end = (pos + size).min(input.len());
        let piece = &input[pos..end];
        pos = end;
        let stop_after = usize::from((mode >> 3) % 4) + 1;
        match mode % 8 {
            0 => {
                parser.feed(Bytes::copy_from_slice(piece));
                drain_into(&mut parser, &mut items);
            }
            1 => parser.feed(Bytes::copy_from_slice(piece)),
            2 => {
                parser.feed_slice(piece);
                drain_into(&mut parser, &mut items);
            }
            3 => parser.feed_slice(piece),
            4 => {
                parser.feed_with(Bytes::copy_from_slice(piece), |item| {
                    items.push(item.to_owned());
                });
                assert_drained(&mut parser, "feed_with");
            }
            5 => {
                with_scratch(piece, |chunk| {
                    parser.feed_borrowed(chunk, |item| items.push(item.to_owned()));
                });
                assert_drained(&mut parser, "feed_borrowed");
            }
            mode => {
                let mut delivered = 0;
                let flow = with_scratch(piece, |chunk| {
                    parser.feed_borrowed_until(chunk, |item| {
                        items.push(item.to_owned());
                        delivered += 1;
                        if delivered == stop_after {
                            ControlFlow::Break(())
                        } else {
                            ControlFlow::Continue(())
                        }
                    })
                });
                match flow {
                    ControlFlow::Break(()) => assert_eq!(delivered, stop_after, "early break"),
                    ControlFlow::Continue(()) => {
                        assert!(delivered < stop_after, "the callback's break was ignored");
                        assert_drained(&mut parser, "feed_borrowed_until");
                    }
                }
                if mode == 6 {
                    drain_into(&mut parser, &mut items);
                }
            }
        }
    }
    let got = end_run(parser, items, input.len());
    assert_eq!(expected, got, "the feeds changed the parse");
}

/// Raw Chat Completions SSE through the decoder and the agent's translation into the Anthropic
/// shape (`ferroloop::agent::openai::ChatEventTranslator`), as the loop consumes it; see
/// [`check_translation`] for what is checked.
pub fn check_chat_translation(input: &[u8]) {
    let mut translator = ferroloop::agent::openai::ChatEventTranslator::new();
    check_translation(
        input,
        OpenAiChatDecoder::new(),
        |event, out| translator.translate_model_event(event, out),
        |completion| {
            // The loop asks for one choice; tool call events do not say which choice they
            // belong to, so a stream with several is out of this check's reach.
            if completion["choices"]
                .as_array()
                .is_some_and(|c| c.len() > 1)
            {
                return None;
            }
            // The streamed text is the final text when the first choice's `content` and
            // `refusal` are text (or null): a server that sent another kind there keeps it, as
            // the SDK does, while the deltas were still reported.
            let is_text = |key: &str| {
                matches!(
                    completion["choices"][0]["message"].get(key),
                    None | Some(Value::Null | Value::String(_))
                )
            };
            Some(is_text("content") && is_text("refusal"))
        },
        CallNumbering::FinalMessage,
    );
}

/// Raw Responses SSE through the decoder and the agent's translation into the Anthropic shape
/// (`ferroloop::agent::responses::ResponsesEventTranslator`), as the loop consumes it; see
/// [`check_translation`] for what is checked.
pub fn check_responses_translation(input: &[u8]) {
    let mut translator = ferroloop::agent::responses::ResponsesEventTranslator::new();
    check_translation(
        input,
        ferroloop::decode::OpenAiResponsesDecoder::new(),
        |event, out| translator.translate_model_event(event, out),
        // The final message is the `response` that `response.completed` carries, which the
        // decoder takes as it is (as the SDK does), so its text need not be the deltas'; the
        // calls, which the loop runs as they were sealed, are still checked.
        |_| Some(false),
        CallNumbering::Arrival,
    );
}

/// How a translation numbers the calls it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallNumbering {
    /// By their blocks in the final message (Chat: the message is built from the stream).
    FinalMessage,
    /// In the order the stream sent them (Responses: the final message is the response the
    /// server sent at the end, which may hold items the stream never sent).
    Arrival,
}

/// Every `tool_use` block of a final message that stopped for `tool_use` was reported once
/// (ready with the block's id, name and input, or invalid or truncated with its id and name),
/// whatever numbers the reports carry.
fn check_calls_by_content(
    out: &[ferroloop::agent::ModelEvent],
    content: &[Value],
    message: &Value,
) {
    use ferroloop::agent::ModelEvent;

    if message["stop_reason"] != "tool_use" {
        return;
    }
    let mut reports: Vec<(&str, &str, Option<&Value>)> = out
        .iter()
        .filter_map(|event| match event {
            ModelEvent::Decoded(DecodeEvent::ToolUseReady {
                id, name, input, ..
            }) => Some((id.as_str(), name.as_str(), Some(input))),
            ModelEvent::Decoded(
                DecodeEvent::ToolUseInvalid { id, name, .. }
                | DecodeEvent::ToolUseTruncated { id, name, .. },
            ) => Some((id.as_str(), name.as_str(), None)),
            _ => None,
        })
        .collect();
    for (index, block) in content.iter().enumerate() {
        if block["type"] != "tool_use" {
            continue;
        }
        let text = |key: &str| block[key].as_str().unwrap_or_default();
        let found = reports
            .iter()
            .position(|(id, name, input)| {
                *id == text("id") && *name == text("name") && *input == Some(&block["input"])
            })
            .or_else(|| {
                reports.iter().position(|(id, name, input)| {
                    *id == text("id") && *name == text("name") && input.is_none()
                })
            });
        let Some(found) = found else {
            panic!("tool_use block {index} was never reported: {out:#?}");
        };
        reports.swap_remove(found);
    }
}

/// Raw SSE through `decoder` and an agent translation (`translate`) into the Anthropic shape,
/// as the loop consumes it:
/// - blocks are announced in order (0, 1, 2, ...) and every streamed event names an announced
///   block;
/// - when the stream completes, the final message agrees with what was streamed: each call
///   reported ready sits at its block index with the same id, name and input, and the text
///   streamed into a text block is the text block's text (when `final_text` says the
///   completion's text can be compared: `None` skips the final checks);
/// - when the message stops for `tool_use`, every `tool_use` block of it is reported (ready,
///   invalid or truncated) exactly once, so each call runs or is answered once.
fn check_translation<D: EventDecoder>(
    input: &[u8],
    decoder: D,
    mut translate: impl FnMut(ferroloop::agent::ModelEvent, &mut Vec<ferroloop::agent::ModelEvent>),
    final_text: impl Fn(&Value) -> Option<bool>,
    calls: CallNumbering,
) {
    use ferroloop::agent::ModelEvent;

    let mut stream = StreamDecoder::new(decoder);
    let mut decoded = Vec::new();
    let failed = stream
        .feed_into(Bytes::copy_from_slice(input), &mut decoded)
        .is_err();
    let mut out: Vec<ModelEvent> = Vec::new();
    // Refusal text joins the text block, after the content, in the final message; the
    // streamed order may interleave them, so text is only compared when no refusal came.
    let refusal_seen = decoded
        .iter()
        .any(|event| matches!(event, DecodeEvent::RefusalDelta { .. }));
    for event in decoded {
        translate(ModelEvent::Decoded(event), &mut out);
    }
    let streamed = out.len();

    // Streamed events: blocks announced in order, events only for announced blocks.
    let mut announced = 0usize;
    let mut texts: Vec<String> = Vec::new();
    for event in &out {
        let ModelEvent::Decoded(event) = event else {
            continue;
        };
        match event {
            DecodeEvent::BlockStart { index, .. } => {
                assert_eq!(*index, announced, "blocks announced out of order: {out:#?}");
                announced += 1;
                texts.push(String::new());
            }
            DecodeEvent::TextDelta { index, text } => {
                assert!(
                    *index < announced,
                    "text for an unannounced block: {out:#?}"
                );
                texts[*index].push_str(text);
            }
            DecodeEvent::InputJsonDelta { index, .. }
            | DecodeEvent::ToolUseReady { index, .. }
            | DecodeEvent::ToolUseInvalid { index, .. }
            | DecodeEvent::ToolUseTruncated { index, .. }
            | DecodeEvent::BlockStop { index } => {
                assert!(
                    *index < announced,
                    "event for an unannounced block: {out:#?}"
                );
            }
            _ => {}
        }
    }

    if failed {
        return;
    }
    let Ok(completion) = stream.finish() else {
        return;
    };
    let Some(text_fields) = final_text(&completion) else {
        return;
    };
    translate(
        ModelEvent::Completed {
            message: completion,
            time_to_first_token: None,
            request_id: None,
        },
        &mut out,
    );
    let Some(ModelEvent::Completed { message, .. }) = out.last() else {
        panic!("no final message: {out:#?}");
    };
    let content = message["content"].as_array().cloned().unwrap_or_default();

    if calls == CallNumbering::Arrival {
        check_calls_by_content(&out, &content, message);
        return;
    }
    let mut reported = vec![0usize; content.len()];
    for (position, event) in out.iter().enumerate() {
        let ModelEvent::Decoded(event) = event else {
            continue;
        };
        let (index, id, ready_input, name) = match event {
            DecodeEvent::ToolUseReady {
                index,
                id,
                name,
                input,
            } => (*index, id, Some(input), name),
            DecodeEvent::ToolUseInvalid {
                index, id, name, ..
            }
            | DecodeEvent::ToolUseTruncated {
                index, id, name, ..
            } => (*index, id, None, name),
            DecodeEvent::TextDelta { index, .. }
                if position < streamed && !refusal_seen && text_fields =>
            {
                let block = content.get(*index);
                assert_eq!(
                    block.and_then(|b| b["text"].as_str()),
                    Some(texts[*index].as_str()),
                    "streamed text and final text differ: {out:#?}"
                );
                continue;
            }
            _ => continue,
        };
        let Some(block) = content.get(index) else {
            panic!("a call reported at block {index}, past the message's content: {out:#?}");
        };
        assert_eq!(
            block["type"], "tool_use",
            "call {index} is not a tool_use block: {out:#?}"
        );
        // A call without a (string) id or name is reported with an empty one.
        let text = |key: &str| block[key].as_str().unwrap_or_default();
        assert_eq!(text("id"), id.as_str(), "ids differ: {out:#?}");
        assert_eq!(text("name"), name.as_str(), "names differ: {out:#?}");
        if let Some(input) = ready_input {
            assert_eq!(&block["input"], input, "inputs differ: {out:#?}");
        }
        reported[index] += 1;
    }
    if message["stop_reason"] == "tool_use" {
        for (index, block) in content.iter().enumerate() {
            if block["type"] == "tool_use" {
                assert_eq!(
                    reported[index], 1,
                    "tool_use block {index} reported {} times: {out:#?}",
                    reported[index]
                );
            }
        }
    }
}

/// What a generated history holds, for [`check_request_translation`] to find in the translated
/// requests.
#[derive(Debug, Default)]
struct History {
    messages: Vec<Value>,
    /// Each `tool_use`: id, name, input, in order.
    calls: Vec<(String, String, Value)>,
    /// Each `tool_result`: the id it answers, its text pieces, whether it is an error.
    results: Vec<(String, Vec<String>, bool)>,
    /// Text of user messages (outside tool results) and of assistant messages.
    user_texts: Vec<String>,
    assistant_texts: Vec<String>,
    /// Signatures of signed thinking blocks.
    signatures: Vec<String>,
}

/// Text pieces with a marker that makes each one findable; some with line breaks, quotes,
/// non-ASCII text or JSON-looking content.
fn gen_text(c: &mut Choices<'_>, marker: usize) -> String {
    let body = c.pick(&[
        "hello",
        "世界 🌍",
        "two\nlines",
        "\"quoted\" \\ back",
        "{\"json\": [1, 2]}",
        "error: not really",
        "  padded  ",
    ]);
    format!("m{marker}:{body}")
}

fn gen_input(c: &mut Choices<'_>) -> Value {
    match c.byte() % 4 {
        0 => serde_json::json!({}),
        1 => serde_json::json!({"path": "src/main.rs", "n": c.byte()}),
        2 => serde_json::json!({"nested": {"list": [1, "two", null, true]}, "text": "a\"b"}),
        _ => serde_json::json!({"unicode": "世界", "float": 1.5}),
    }
}

/// A valid history from the fuzzer's bytes: alternating user and assistant messages, the
/// assistant's calls (unique ids) answered by the next user message, text, images, documents
/// and thinking blocks among them.
fn gen_history(c: &mut Choices<'_>) -> History {
    use serde_json::json;
    let mut h = History::default();
    let mut marker = 0usize;
    let mut pending_calls: Vec<String> = Vec::new();
    let turns = 1 + c.byte() % 6;
    for turn in 0..turns {
        // A user message: results of the previous calls first, then text and media.
        let mut blocks = Vec::new();
        for id in pending_calls.drain(..) {
            let is_error = c.byte() % 4 == 0;
            let mut pieces = Vec::new();
            let content = match c.byte() % 3 {
                0 => {
                    marker += 1;
                    let text = gen_text(c, marker);
                    pieces.push(text.clone());
                    Value::String(text)
                }
                1 => {
                    let mut inner = Vec::new();
                    for _ in 0..1 + c.byte() % 3 {
                        if c.byte() % 4 == 0 {
                            inner.push(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}));
                        } else {
                            marker += 1;
                            let text = gen_text(c, marker);
                            pieces.push(text.clone());
                            inner.push(json!({"type": "text", "text": text}));
                        }
                    }
                    Value::Array(inner)
                }
                _ => Value::String(String::new()),
            };
            let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": content});
            if is_error {
                block["is_error"] = Value::Bool(true);
            }
            h.results.push((id, pieces, is_error));
            blocks.push(block);
        }
        let extra = if blocks.is_empty() { 1 } else { c.byte() % 3 };
        for _ in 0..extra {
            match c.byte() % 5 {
                0 => blocks.push(json!({"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}})),
                1 => blocks.push(json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}})),
                _ => {
                    marker += 1;
                    let text = gen_text(c, marker);
                    h.user_texts.push(text.clone());
                    blocks.push(json!({"type": "text", "text": text}));
                }
            }
        }
        let content = if blocks.len() == 1 && blocks[0]["type"] == "text" && c.byte() % 2 == 0 {
            blocks[0]["text"].clone()
        } else {
            Value::Array(blocks)
        };
        h.messages.push(json!({"role": "user", "content": content}));
        if turn + 1 == turns {
            break;
        }
        // An assistant message: thinking, text, calls.
        let mut blocks = Vec::new();
        if c.byte() % 3 == 0 {
            marker += 1;
            let signature = format!("sig{marker}");
            h.signatures.push(signature.clone());
            blocks.push(
                json!({"type": "thinking", "thinking": "Let me see.", "signature": signature}),
            );
        }
        if c.byte() % 3 != 0 {
            marker += 1;
            let text = gen_text(c, marker);
            h.assistant_texts.push(text.clone());
            blocks.push(json!({"type": "text", "text": text}));
        }
        for _ in 0..c.byte() % 4 {
            marker += 1;
            let id = format!("toolu_{marker}");
            let name = c.pick(&["read_file", "grep", "run-tests", "x"]).to_owned();
            let input = gen_input(c);
            h.calls.push((id.clone(), name.clone(), input.clone()));
            pending_calls.push(id.clone());
            blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
        }
        // (Thinking alone is no answer: the loop drops such a message, as the API wants.)
        if blocks.iter().all(|b| b["type"] == "thinking") {
            marker += 1;
            let text = gen_text(c, marker);
            h.assistant_texts.push(text.clone());
            blocks.push(json!({"type": "text", "text": text}));
        }
        h.messages
            .push(json!({"role": "assistant", "content": blocks}));
    }
    h
}

/// Every string inside `value`, for finding a text wherever an API puts it.
fn strings_in<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| strings_in(item, out)),
        Value::Object(map) => map.values().for_each(|item| strings_in(item, out)),
        _ => {}
    }
}

fn contains_text(values: &[&Value], text: &str) -> bool {
    let mut strings = Vec::new();
    for value in values {
        strings_in(value, &mut strings);
    }
    strings.iter().any(|s| s.contains(text))
}

impl History {
    /// The calls a translation sent, as (id, name, arguments text), are the history's, in order.
    fn assert_calls_sent(&self, sent: &[(&Value, &Value, &Value)], body: &Value) {
        assert_eq!(
            sent.len(),
            self.calls.len(),
            "calls lost or added: {body:#}"
        );
        for ((id, name, arguments), (want_id, want_name, input)) in sent.iter().zip(&self.calls) {
            assert_eq!(*id, want_id.as_str(), "{body:#}");
            assert_eq!(*name, want_name.as_str(), "{body:#}");
            let arguments: Value =
                serde_json::from_str(arguments.as_str().unwrap_or("")).unwrap_or(Value::Null);
            assert_eq!(&arguments, input, "{body:#}");
        }
    }

    /// The results a translation sent, as (id, output), are the history's, in order, each
    /// with all of its text, an error one saying so first.
    fn assert_results_sent(&self, sent: &[(&Value, &Value)], body: &Value) {
        assert_eq!(
            sent.len(),
            self.results.len(),
            "results lost or added: {body:#}"
        );
        for ((id, output), (want_id, pieces, is_error)) in sent.iter().zip(&self.results) {
            assert_eq!(*id, want_id.as_str(), "{body:#}");
            let mut strings = Vec::new();
            strings_in(output, &mut strings);
            let text = strings.concat();
            for piece in pieces {
                assert!(text.contains(piece.as_str()), "result text lost: {body:#}");
            }
            if *is_error {
                assert!(
                    text.get(..5)
                        .is_some_and(|s| s.eq_ignore_ascii_case("error")),
                    "an error result does not say so: {body:#}"
                );
            }
        }
    }

    /// Every user text is in one of `user`, every assistant text in one of `assistant`.
    fn assert_texts_sent(&self, user: &[&Value], assistant: &[&Value], body: &Value) {
        for text in &self.user_texts {
            assert!(
                contains_text(user, text),
                "user text {text:?} lost: {body:#}"
            );
        }
        for text in &self.assistant_texts {
            assert!(
                contains_text(assistant, text),
                "assistant text {text:?} lost: {body:#}"
            );
        }
    }
}

/// A valid Anthropic history through the agent's request translations for OpenAI Chat
/// Completions and Responses: nothing is lost or reordered.
/// - every call goes out once, in order, with its id, name and input (the arguments parse back
///   to the input);
/// - every result goes out once, after its call, with its id and all of its text, and an error
///   result says so (`Error...`);
/// - every user text goes out in a user message, every assistant text in an assistant
///   message; (Responses) every signed thinking block goes back as its encrypted content.
pub fn check_request_translation(data: &[u8]) {
    use ferroloop::agent::openai::{ChatOptions, chat_request};
    use ferroloop::agent::responses::responses_request;

    let mut c = Choices { data, pos: 0 };
    let h = gen_history(&mut c);
    let request = serde_json::json!({
        "model": "gpt-5",
        "max_tokens": 1024,
        "system": "You are terse.",
        "messages": h.messages,
        "stream": true,
    });

    // Responses: items in order; a result after its call.
    let body = responses_request(&request);
    let items = body["input"].as_array().cloned().unwrap_or_default();
    let of_kind =
        |kind: &str| -> Vec<&Value> { items.iter().filter(|i| i["type"] == kind).collect() };
    let calls: Vec<(&Value, &Value, &Value)> = of_kind("function_call")
        .into_iter()
        .map(|i| (&i["call_id"], &i["name"], &i["arguments"]))
        .collect();
    h.assert_calls_sent(&calls, &body);
    let outputs: Vec<(&Value, &Value)> = of_kind("function_call_output")
        .into_iter()
        .map(|i| (&i["call_id"], &i["output"]))
        .collect();
    h.assert_results_sent(&outputs, &body);
    for (at, item) in items.iter().enumerate() {
        if item["type"] == "function_call_output" {
            let call_at = items
                .iter()
                .position(|i| i["type"] == "function_call" && i["call_id"] == item["call_id"]);
            assert!(
                call_at.is_some_and(|c| c < at),
                "result before its call: {body:#}"
            );
        }
    }
    let by_role = |role: &str| -> Vec<&Value> {
        of_kind("message")
            .into_iter()
            .filter(|i| i["role"] == role)
            .map(|i| &i["content"])
            .collect()
    };
    h.assert_texts_sent(&by_role("user"), &by_role("assistant"), &body);
    let encrypted: Vec<&str> = of_kind("reasoning")
        .into_iter()
        .filter_map(|i| i["encrypted_content"].as_str())
        .collect();
    assert_eq!(encrypted, h.signatures, "reasoning lost or added: {body:#}");

    // Chat Completions: a result directly after its assistant message.
    let body = chat_request(&request, ChatOptions::default());
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let with_role =
        |role: &str| -> Vec<&Value> { messages.iter().filter(|m| m["role"] == role).collect() };
    let calls: Vec<(&Value, &Value, &Value)> = with_role("assistant")
        .into_iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|call| {
            (
                &call["id"],
                &call["function"]["name"],
                &call["function"]["arguments"],
            )
        })
        .collect();
    h.assert_calls_sent(&calls, &body);
    let outputs: Vec<(&Value, &Value)> = with_role("tool")
        .into_iter()
        .map(|m| (&m["tool_call_id"], &m["content"]))
        .collect();
    h.assert_results_sent(&outputs, &body);
    for (at, message) in messages.iter().enumerate() {
        if message["role"] != "tool" {
            continue;
        }
        // The API refuses tool messages anywhere else.
        let owner = messages[..at].iter().rev().find(|m| m["role"] != "tool");
        let answered = owner.is_some_and(|m| {
            m["role"] == "assistant"
                && m["tool_calls"].as_array().is_some_and(|calls| {
                    calls
                        .iter()
                        .any(|call| call["id"] == message["tool_call_id"])
                })
        });
        assert!(answered, "a result does not follow its call: {body:#}");
    }
    let contents = |role: &str| -> Vec<&Value> {
        with_role(role).into_iter().map(|m| &m["content"]).collect()
    };
    h.assert_texts_sent(&contents("user"), &contents("assistant"), &body);
}

/// Breaks a valid history in one of the ways hosts do: a call id used twice, thinking left at the
/// end of an assistant message or unsigned, a blank text, an assistant first or last message, a
/// block in the wrong role, a result missing, an input that is not an object, a call without id.
fn break_history(c: &mut Choices<'_>, messages: &mut Vec<Value>) {
    use serde_json::json;
    let n = messages.len();
    let at = usize::from(c.byte()) % n;
    fn blocks_of(message: &mut Value) -> Option<&mut Vec<Value>> {
        if message["content"].is_string() {
            let text = message["content"].take();
            message["content"] = serde_json::json!([{"type": "text", "text": text}]);
        }
        message["content"].as_array_mut()
    }
    let ids: Vec<(usize, usize)> = messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .filter(|(_, b)| b["type"] == "tool_use")
                .map(move |(j, _)| (i, j))
        })
        .collect();
    match c.byte() % 10 {
        // A later call takes an earlier call's id, its result too (a backend numbering each
        // response's calls from zero).
        0 if ids.len() >= 2 => {
            let (first, second) = (ids[0], ids[ids.len() - 1]);
            let old = messages[second.0]["content"][second.1]["id"].clone();
            let id = messages[first.0]["content"][first.1]["id"].clone();
            messages[second.0]["content"][second.1]["id"] = id.clone();
            if let Some(blocks) = messages.get_mut(second.0 + 1).and_then(blocks_of) {
                for block in blocks.iter_mut() {
                    if block["tool_use_id"] == old {
                        block["tool_use_id"] = id.clone();
                    }
                }
            }
        }
        1 | 2 => {
            let signed = c.byte() % 2 == 0;
            let thinking = if signed {
                json!({"type": "thinking", "thinking": "hm", "signature": "sig"})
            } else {
                json!({"type": "thinking", "thinking": "hm"})
            };
            if let Some(blocks) = messages
                .iter_mut()
                .filter(|m| m["role"] == "assistant")
                .nth(at)
                .and_then(blocks_of)
            {
                if c.byte() % 2 == 0 {
                    blocks.push(thinking);
                } else {
                    blocks.insert(0, thinking);
                }
            }
        }
        3 => {
            if let Some(blocks) = blocks_of(&mut messages[at]) {
                blocks.push(json!({"type": "text", "text": c.pick(&["", "  ", "\n"])}));
            }
        }
        4 => messages.insert(0, json!({"role": "assistant", "content": "Hello."})),
        5 => messages
            .push(json!({"role": "assistant", "content": [{"type": "text", "text": "Pre"}]})),
        6 if !ids.is_empty() => {
            let (i, j) = ids[usize::from(c.byte()) % ids.len()];
            let id = messages[i]["content"][j]["id"].clone();
            if let Some(blocks) = messages.get_mut(i + 1).and_then(blocks_of) {
                blocks.retain(|b| b["tool_use_id"] != id);
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": "go on"}));
                }
            }
        }
        7 if !ids.is_empty() => {
            let (i, j) = ids[usize::from(c.byte()) % ids.len()];
            messages[i]["content"][j]["input"] = json!(c.pick(&["{}", "[]", "x"]));
        }
        8 if !ids.is_empty() => {
            let (i, j) = ids[usize::from(c.byte()) % ids.len()];
            let field = c.pick(&["id", "name"]);
            if let Some(block) = messages[i]["content"][j].as_object_mut() {
                block.remove(field);
            }
        }
        _ => {
            // A block in the wrong role.
            let role = messages[at]["role"].clone();
            let block = if role == "user" {
                json!({"type": "tool_use", "id": "toolu_x", "name": "read_file", "input": {}})
            } else {
                json!({"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"})
            };
            if let Some(blocks) = blocks_of(&mut messages[at]) {
                blocks.push(block);
            }
        }
    }
}

/// A history a host hands the agent loop, valid or broken in the ways hosts break them
/// ([`break_history`]), run against a scripted model: the loop never panics, and either refuses
/// the history before any request, with a stop event that says why, or sends a request whose
/// history the API takes (`check_history`, no repeated call id) holding every message it was
/// given.
pub fn check_agent_history(data: &[u8]) {
    use ferroloop::agent::replay::{ScriptedModel, anthropic_sse, scripted_message};
    use ferroloop::agent::{Agent, AgentConfig, AgentEvent, check_history};
    use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry};
    use futures_util::StreamExt as _;
    use std::sync::Arc;

    let mut c = Choices { data, pos: 0 };
    let mut messages = gen_history(&mut c).messages;
    for _ in 0..c.byte() % 3 {
        break_history(&mut c, &mut messages);
    }
    let given = Value::Array(messages.clone());

    let (model, requests) = ScriptedModel::new(|_, request| {
        let message = scripted_message(
            request,
            vec![serde_json::json!({"type": "text", "text": "ok"})],
            "end_turn",
        );
        Ok(Bytes::from(anthropic_sse(&message, 64)))
    })
    .recorded();
    let mut tools = ToolRegistry::new();
    for name in ["read_file", "grep", "run-tests", "x"] {
        let registered = tools.register(FnTool::new(name, |_, _| async {
            Ok(ToolOutput::text("done"))
        }));
        assert!(registered.is_ok());
    }
    let agent = Agent::new(
        AgentConfig::new("claude-test"),
        Arc::new(model),
        Arc::new(ToolExecutor::new(tools)),
    );
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let events: Vec<AgentEvent> =
        runtime.block_on(async { agent.run_messages(messages.clone()).collect().await });
    let Some(AgentEvent::Stop { error, .. }) = events.last() else {
        panic!("the run ended without a stop event: {events:#?}");
    };
    let requests = requests
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let Some(first) = requests.first() else {
        assert!(
            error.as_deref().is_some_and(|e| !e.is_empty()),
            "no request was sent and no error says why: {events:#?}\n{given:#}"
        );
        return;
    };
    let sent = first["messages"].as_array().cloned().unwrap_or_default();
    if let Err(why) = check_history(&sent) {
        panic!("the loop sent a history the API refuses ({why}): {first:#}\ngiven: {given:#}");
    }
    let mut seen = std::collections::HashSet::new();
    for block in sent
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
    {
        if block["type"] == "tool_use" {
            let id = block["id"].as_str().unwrap_or_default();
            assert!(
                seen.insert(id.to_owned()),
                "call id {id} repeated: {first:#}"
            );
        }
    }
    assert_eq!(
        sent.len(),
        messages.len(),
        "messages were lost or added: {first:#}\ngiven: {given:#}"
    );
}

/// The agent loop against a model whose first answer is the fuzzer's raw SSE (the first byte
/// picks the API: Anthropic, OpenAI Chat, OpenAI Responses) and whose later answers end the
/// turn: the run never panics, ends with one stop event, and the conversation it hands back can
/// be continued (`check_history`, with a user message appended when it ends with the
/// assistant's): every call answered once, no repeated id, no empty message or blank text; and
/// the `usage` events add up to the stop event's token totals.
pub fn check_agent_stream(data: &[u8]) {
    use ferroloop::agent::replay::{
        ScriptedModel, anthropic_sse, openai_chat_sse, openai_responses_sse, scripted_message,
    };
    use ferroloop::agent::{Agent, AgentConfig, AgentEvent, check_history};
    use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry};
    use futures_util::StreamExt as _;
    use std::sync::Arc;

    let Some((&api, stream)) = data.split_first() else {
        return;
    };
    let stream = Bytes::copy_from_slice(stream);
    let api = api % 3;
    let script = move |n: usize, request: &Value| {
        if n == 0 {
            return Ok(stream.clone());
        }
        let message = scripted_message(
            request,
            vec![serde_json::json!({"type": "text", "text": "done"})],
            "end_turn",
        );
        Ok(Bytes::from(match api {
            0 => anthropic_sse(&message, 64),
            1 => openai_chat_sse(&message, 64),
            _ => openai_responses_sse(&message, 64),
        }))
    };
    let model = match api {
        0 => ScriptedModel::new(script),
        1 => ScriptedModel::openai_chat(script),
        _ => ScriptedModel::openai_responses(script),
    };
    let mut tools = ToolRegistry::new();
    for name in ["get_weather", "read", "grep"] {
        let registered = tools.register(
            FnTool::new(name, |_, _| async { Ok(ToolOutput::text("done")) }).concurrency_safe(true),
        );
        assert!(registered.is_ok());
    }
    let mut config = AgentConfig::new("model-test");
    config.limits.max_turns = 4;
    let agent = Agent::new(config, Arc::new(model), Arc::new(ToolExecutor::new(tools)));
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
    else {
        return;
    };
    let events: Vec<AgentEvent> = runtime.block_on(async { agent.run("go").collect().await });
    let stops = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Stop { .. }))
        .count();
    assert_eq!(stops, 1, "stop events: {events:#?}");
    let Some(AgentEvent::Stop {
        messages,
        input_tokens,
        output_tokens,
        ..
    }) = events.last()
    else {
        panic!("the run did not end with its stop event: {events:#?}");
    };
    // Every billed call is accounted for by one `usage` event: the usage they report (the
    // fuzzer's, however absurd) adds up, as the loop adds it, to the run's totals.
    let reported = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::Usage { usage, .. } => ferroloop::tokens::Usage::from_json(usage),
            _ => None,
        })
        .fold((0u64, 0u64), |(input, output), usage| {
            (
                input.saturating_add(usage.input_total()),
                output.saturating_add(usage.output_tokens),
            )
        });
    assert_eq!(
        reported,
        (*input_tokens, *output_tokens),
        "the usage events do not add up to the stop event's totals: {events:#?}"
    );
    let mut continued = messages.clone();
    if continued.last().is_some_and(|m| m["role"] == "assistant") {
        continued.push(serde_json::json!({"role": "user", "content": "go on"}));
    }
    if let Err(why) = check_history(&continued) {
        panic!("the conversation cannot be continued ({why}): {continued:#?}\n{events:#?}");
    }
}

/// The words a generated tool input schema (and its input) is made of: the keywords the
/// validator reads, with values that make sense for them often enough to compile.
const SCHEMA_KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "minContains",
    "maxContains",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "uniqueItems",
    "pattern",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "$ref",
    "$defs",
    "definitions",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "a",
    "b",
];

const SCHEMA_STRINGS: &[&str] = &[
    "string",
    "integer",
    "number",
    "object",
    "array",
    "null",
    "boolean",
    "#",
    "#/$defs/a",
    "#/$defs/b",
    "#/definitions/a",
    "#/properties/a",
    "#/properties/b/items",
    "#/anyOf/0",
    "#/%24defs/a",
    "https://example.invalid/other.json",
    "#anchor",
    "a",
    "b",
    "^a",
    "\\d+$",
    "\\w\\b",
    "(?!x)a",
    "[\\d-]",
    "[",
    "é\u{1F600}",
    "",
];

const SCHEMA_VOCAB: Vocab = Vocab {
    keys: SCHEMA_KEYS,
    strings: SCHEMA_STRINGS,
};

/// Tool input schemas and inputs built from the validator's own keywords:
/// - compiling and validating never panic, and both are deterministic;
/// - a refused input comes with at least one violation, each placed under `input`;
/// - for a schema without `$ref` (whose pointers would move when it is wrapped), `{"not": S}`
///   refuses exactly what `S` accepts, and `{"allOf": [S, {}]}` and `{"anyOf": [S, false]}`
///   accept exactly what `S` does.
pub fn check_input_schema(data: &[u8]) {
    use ferroloop::exec::InputSchema;

    let mut c = Choices { data, pos: 0 };
    let schema = gen_value_in(&mut c, 0, &SCHEMA_VOCAB);
    let input = gen_value_in(&mut c, 0, &SCHEMA_VOCAB);
    let Ok(compiled) = InputSchema::compile(&schema) else {
        assert!(
            InputSchema::compile(&schema).is_err(),
            "compiling is not deterministic: {schema}"
        );
        return;
    };
    assert!(
        InputSchema::compile(&schema).is_ok_and(|again| again == compiled),
        "compiling is not deterministic: {schema}"
    );
    let verdict = compiled.validate(&input);
    assert_eq!(
        verdict,
        compiled.validate(&input),
        "validating is not deterministic: {schema} on {input}"
    );
    if let Err(violations) = &verdict {
        assert!(
            !violations.is_empty(),
            "refused without a violation: {schema} on {input}"
        );
        for violation in violations {
            assert!(
                violation.path.starts_with("input"),
                "a violation outside the input ({violation}): {schema} on {input}"
            );
        }
    }
    if schema.to_string().contains("$ref") {
        return;
    }
    let accepted = verdict.is_ok();
    let wrapped = [
        (serde_json::json!({ "not": schema.clone() }), !accepted),
        (serde_json::json!({ "allOf": [schema.clone(), {}] }), accepted),
        (serde_json::json!({ "anyOf": [schema, false] }), accepted),
    ];
    for (wrapper, expected) in wrapped {
        let Ok(wrapper_schema) = InputSchema::compile(&wrapper) else {
            panic!("{wrapper} does not compile though {schema} does");
        };
        assert_eq!(
            wrapper_schema.validate(&input).is_ok(),
            expected,
            "{wrapper} on {input}: S accepted it: {accepted}"
        );
    }
}
