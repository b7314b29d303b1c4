//! OpenAI Chat Completions stream decoding (see [`OpenAiChatDecoder`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::error::{DecodeError, ProtocolError};
use super::events::DecodeEvent;
use super::json_str;
use super::{EventDecoder, data_value, decode_lone_surrogates_lossily};

type Object = Map<String, Value>;

/// A choice's content and refusal text, as ranges of the decoder's scratch buffer.
type TextSpans = (Option<Range<usize>>, Option<Range<usize>>);

/// OpenAI Chat Completions streaming: `chat.completion.chunk` objects, then `data: [DONE]`.
///
/// Accumulation follows openai-python's `ChatCompletionStreamState`: the first chunk becomes the
/// snapshot (`object` renamed to `chat.completion`, each choice's `delta` renamed `message`);
/// later deltas merge key by key (strings concatenate, `null` keeps the earlier value, lists of
/// objects merge by their `index`, `index`/`type` are replaced, and so is `role`, which some
/// servers repeat on every delta, but a `null` keeps them too); a truthy `finish_reason` is
/// assigned; logprobs lists extend; `usage` and `system_fingerprint` are taken from every chunk
/// (the usage-only final chunk has empty `choices`).
///
/// Tool call events (`block_start`, `input_json_delta`, `tool_use_*`) name a call, not a choice,
/// so they are reported for the first choice only (with `n` > 1, another choice's calls would
/// otherwise be taken for the first's and run); every choice's calls are in the message.
///
/// A tool call is sealed when another call starts, if its arguments are complete JSON there;
/// otherwise it stays open for its late fragments (servers interleaving calls) and is sealed when
/// its value ends, at the `finish_reason`, or at `[DONE]`.
///
/// The output is the non-streaming `chat.completion` shape: the streaming-only `index` of each
/// tool call is removed (the SDK keeps it, and adds its client-side `parsed` fields, which are not
/// part of the API's response).
#[derive(Debug)]
pub struct OpenAiChatDecoder {
    snapshot: Option<Object>,
    choices: Vec<ChoiceState>,
    done: bool,
    failure: Option<DecodeError>,
    events: Vec<DecodeEvent>,
    record: bool,
    text_fast_path: bool,
    template_fast_path: bool,
    template: Template,
    /// Decoded text of the chunk in hand (reused: no allocation per chunk once warm).
    scratch: String,
    /// Per choice of the chunk in hand: where its content and refusal sit in `scratch`.
    spans: Vec<TextSpans>,
    /// The halves of characters at the ends of the content, refusal and tool call arguments of
    /// the chunk in hand, read from it as sent when it held lone surrogate escapes (see
    /// [`ChoiceEdges`]).
    edges: Vec<ChoiceEdges>,
    /// Whether a choice holds a high half ([`ChoiceState::holds_half`]), updated wherever one
    /// may change: the fast paths, which never join halves, are skipped while it is set.
    holding: bool,
}

/// The halves of characters at the two ends of one delta string (see [`json_str::Halves`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Edges {
    low_first: Option<u16>,
    high_last: Option<u16>,
}

impl Edges {
    /// The halves of a delta string `text` parsed after its lone surrogates were read as U+FFFD
    /// (`lone_surrogates_replaced`): the U+FFFD of each edge half taken off again.
    fn halves(self, text: String) -> json_str::Halves<'static> {
        let mut body = text.as_str();
        if self.low_first.is_some() {
            body = body
                .strip_prefix(char::REPLACEMENT_CHARACTER)
                .unwrap_or(body);
        }
        if self.high_last.is_some() {
            body = body
                .strip_suffix(char::REPLACEMENT_CHARACTER)
                .unwrap_or(body);
        }
        let text = if body.len() == text.len() {
            text
        } else {
            body.to_owned()
        };
        json_str::Halves {
            low_first: self.low_first,
            text: Cow::Owned(text),
            high_last: self.high_last,
        }
    }
}

/// A choice's [`Edges`] in one chunk.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct ChoiceEdges {
    /// The choice's `index`.
    index: usize,
    content: Edges,
    refusal: Edges,
    /// Per entry of the delta's `tool_calls`, in order: its `function.arguments` (empty when
    /// none has a half).
    arguments: Vec<Edges>,
}

impl ChoiceEdges {
    /// Whether any of the choice's strings has a half at an edge.
    fn has_halves(&self) -> bool {
        self.content != Edges::default()
            || self.refusal != Edges::default()
            || !self.arguments.is_empty()
    }
}

/// A chunk read only for the strings a JavaScript server may cut a character between, kept raw
/// ([`edges_of`]); everything else is left to the general path.
#[derive(Deserialize)]
struct EdgesChunk<'a> {
    #[serde(borrow, default)]
    choices: Option<Vec<EdgesChoice<'a>>>,
}

#[derive(Deserialize)]
struct EdgesChoice<'a> {
    #[serde(default)]
    index: Option<usize>,
    #[serde(borrow, default)]
    delta: Option<EdgesDelta<'a>>,
}

#[derive(Deserialize)]
struct EdgesDelta<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    refusal: Option<&'a RawValue>,
    /// Kept raw: a list the general path rejects must not hide the content's edges.
    #[serde(borrow, default)]
    tool_calls: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct EdgesCall<'a> {
    #[serde(borrow, default)]
    function: Option<EdgesFunction<'a>>,
}

#[derive(Deserialize)]
struct EdgesFunction<'a> {
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// The [`Edges`] of each choice's content, refusal and tool call arguments in `data`, a chunk
/// holding lone surrogate escapes (none when it does not read as a chunk: the general path
/// reports that; none for the calls when its `tool_calls` is not a list).
fn edges_of(data: &str) -> Vec<ChoiceEdges> {
    let Ok(chunk) = serde_json::from_str::<EdgesChunk<'_>>(data) else {
        return Vec::new();
    };
    let edges = |raw: Option<&RawValue>| {
        raw.and_then(|raw| json_str::raw_string_halves(raw).ok())
            .map_or(Edges::default(), |halves| Edges {
                low_first: halves.low_first,
                high_last: halves.high_last,
            })
    };
    let arguments = |raw: Option<&RawValue>| -> Vec<Edges> {
        let calls = raw
            .and_then(|raw| serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok())
            .unwrap_or_default();
        let found: Vec<Edges> = calls
            .iter()
            .map(|call| {
                let call = serde_json::from_str::<EdgesCall<'_>>(call.get()).ok();
                edges(call.and_then(|c| c.function).and_then(|f| f.arguments))
            })
            .collect();
        if found.iter().all(|edges| *edges == Edges::default()) {
            Vec::new()
        } else {
            found
        }
    };
    chunk
        .choices
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter_map(|(position, choice)| {
            let delta = choice.delta.as_ref()?;
            let found = ChoiceEdges {
                index: choice.index.unwrap_or(position),
                content: edges(delta.content),
                refusal: edges(delta.refusal),
                arguments: arguments(delta.tool_calls),
            };
            found.has_halves().then_some(found)
        })
        .collect()
}

/// The [`ChoiceEdges`] of choice `index` among a chunk's `edges` (no halves when it has none).
fn edges_of_choice(edges: &[ChoiceEdges], index: usize) -> ChoiceEdges {
    edges
        .iter()
        .find(|edges| edges.index == index)
        .cloned()
        .unwrap_or_default()
}

/// Applies one delta string (`delta`, as parsed: a lone surrogate already U+FFFD) to the high
/// half a choice holds for it, with [`json_str::push_halves`]: `existing` is the message's text
/// so far (it takes the joined text, and `delta` is left empty), or `None` when the delta's text
/// becomes the message's (`delta` then holds the joined text). Returns the delta's event text
/// (`None`: the delta has no such string).
fn join_choice_halves(
    existing: Option<&mut Value>,
    delta: Option<&mut Value>,
    held: &mut Option<u16>,
    edges: Edges,
) -> Option<String> {
    let Some(Value::String(text)) = delta else {
        return None;
    };
    let piece = edges.halves(std::mem::take(text));
    let event = match existing {
        Some(Value::String(existing)) => json_str::push_halves(existing, held, piece),
        _ => json_str::push_halves(text, held, piece),
    };
    Some(event.into_owned())
}

/// The previous chunk's bytes around its one appended string, when that chunk only appended
/// content (single choice, no usage, refusal, logprobs or finish reason) or one tool call's
/// arguments ([`Target`]). A chunk made of the same bytes with only that string changed is the
/// same JSON with one string value replaced, so it is applied by appending the string, with no
/// JSON parse. Valid only right after that chunk: every other event clears it, because the
/// template chunk also resets `usage` and `system_fingerprint`, which another chunk may have
/// changed in between.
///
/// The text of a run of such chunks collects in `pending` and joins the snapshot when the run
/// ends (or in the copy [`EventDecoder::message`] returns): finding the string in the snapshot
/// costs three or more map lookups, more than the rest of the chunk's work.
#[derive(Debug, Default)]
struct Template {
    valid: bool,
    /// The choice the string goes to.
    index: usize,
    /// Which string of that choice (a string in the snapshot while the template is valid).
    target: Target,
    /// Text decoded since the template was learned, not yet in the snapshot.
    pending: String,
    /// The bytes up to and including the appended string's opening quote.
    prefix: String,
    /// The bytes after its closing quote; with `obfuscated`, up to and including the opening
    /// quote of the chunk's `obfuscation` string.
    suffix: String,
    /// Whether the chunk ended with an `obfuscation` string (OpenAI pads chunks with a random
    /// one, after `choices`, which no path reads past the first chunk): the second string that
    /// may differ.
    obfuscated: bool,
    /// With `obfuscated`, the bytes after that string's closing quote.
    end: String,
}

/// The string a [`Template`] appends to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The message's `content`.
    #[default]
    Content,
    /// `function.arguments` of the tool call with this index.
    Arguments(usize),
}

#[derive(Debug, Default, Clone)]
struct ChoiceState {
    /// Per tool call (by its position in the message's `tool_calls`): sealed yet?
    sealed: Vec<bool>,
    /// Per tool call: left open when another call started, because its arguments were an
    /// unfinished JSON value (see [`OpenAiChatDecoder::seal_at_switch`]); how far they were read.
    open: Vec<Option<JsonEnd>>,
    /// The position of the tool call that received the latest fragment.
    current_tool: Option<usize>,
    /// The position of the latest call sent with each chunk `index`: a fragment goes there
    /// (see [`accumulate_tool_calls`]). The usual small indexes are looked up directly (no
    /// hashing on the hot path), others in a map, so neither a large `index` nor many calls cost
    /// more than linear time and memory.
    calls_by_small_index: Vec<Option<usize>>,
    calls_by_large_index: HashMap<usize, usize>,
    /// The high halves the last content and refusal deltas ended with (see
    /// [`join_choice_halves`]).
    held_content: Option<u16>,
    held_refusal: Option<u16>,
    /// Per tool call (by position): the high half its arguments' last fragment ended with.
    /// Empty until a fragment ends with one.
    held_arguments: Vec<Option<u16>>,
}

/// Where a JSON object or list ends, read incrementally: the state after the bytes read so far.
#[derive(Debug, Default, Clone, Copy)]
struct JsonEnd {
    read: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl JsonEnd {
    /// Reads `text` (the previous text with more appended) on from where the last call stopped;
    /// whether its first value has ended. A value that is not an object or a list counts as
    /// ended at once: a later fragment completing it is not worth waiting for.
    fn ended(&mut self, text: &str) -> bool {
        let bytes = text.as_bytes();
        let Some(rest) = bytes.get(self.read..) else {
            // The text did not grow from the one read (it cannot): read it again.
            *self = Self::default();
            return self.ended(text);
        };
        for (offset, &byte) in rest.iter().enumerate() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match (self.depth, byte) {
                (_, b' ' | b'\t' | b'\n' | b'\r') => {}
                (_, b'{' | b'[') => self.depth += 1,
                (0, _) => return true,
                (1, b'}' | b']') => {
                    self.depth = 0;
                    self.read += offset + 1;
                    return true;
                }
                (_, b'}' | b']') => self.depth -= 1,
                (_, b'"') => self.in_string = true,
                _ => {}
            }
        }
        self.read = bytes.len();
        false
    }
}

/// The text of a half character whose other half never came.
const LONE_HALF: &str = "\u{FFFD}";

/// Tool call indexes below this are looked up in a table ([`ChoiceState::call_at`]).
const SMALL_CALL_INDEX: usize = 64;

impl ChoiceState {
    /// Whether a content, refusal or arguments delta ended with half a character (see
    /// [`join_choice_halves`]).
    fn holds_half(&self) -> bool {
        self.held_content.is_some()
            || self.held_refusal.is_some()
            || self.held_arguments.iter().any(Option::is_some)
    }

    /// The high half the arguments of the call at `position` ended with, if any.
    fn held_argument(&self, position: usize) -> Option<u16> {
        self.held_arguments.get(position).copied().flatten()
    }

    /// Joins the halves of characters cut between the arguments fragments of the choice's
    /// calls, once a delta's `tools` were accumulated into `message` at `positions`: a call's
    /// arguments end with the fragment as parsed (a lone half read as U+FFFD), which is taken
    /// off and appended again through [`json_str::push_halves`]. Each fragment in `tools`
    /// becomes its event text. Only fragments with a half at an edge (`edges`: per entry, from
    /// the chunk as sent) or following a held half are touched.
    fn join_arguments_halves(
        &mut self,
        message: &mut Object,
        tools: &mut [Value],
        positions: &[Option<usize>],
        edges: &[Edges],
    ) {
        for (entry, (tool, position)) in tools.iter_mut().zip(positions).enumerate() {
            let Some(position) = *position else {
                continue;
            };
            let edges = edges.get(entry).copied().unwrap_or_default();
            if edges == Edges::default() && self.held_argument(position).is_none() {
                continue;
            }
            let fragment = tool
                .get_mut("function")
                .and_then(|f| f.get_mut("arguments"));
            let (Some(Value::String(fragment)), Some(arguments)) =
                (fragment, call_arguments(message, position))
            else {
                continue;
            };
            // Another entry of the same chunk for the same call may follow this one's text.
            if !arguments.ends_with(fragment.as_str()) {
                continue;
            }
            arguments.truncate(arguments.len() - fragment.len());
            if self.held_arguments.len() <= position {
                self.held_arguments.resize(position + 1, None);
            }
            let held = &mut self.held_arguments[position];
            let event =
                json_str::push_halves(arguments, held, edges.halves(std::mem::take(fragment)));
            *fragment = event.into_owned();
        }
    }

    /// The position of the latest call sent with `index`.
    fn call_at(&self, index: usize) -> Option<usize> {
        if index < SMALL_CALL_INDEX {
            self.calls_by_small_index.get(index).copied().flatten()
        } else {
            self.calls_by_large_index.get(&index).copied()
        }
    }

    /// Records that the call at `position` is the latest sent with `index`.
    fn add_call(&mut self, index: usize, position: usize) {
        if index >= SMALL_CALL_INDEX {
            self.calls_by_large_index.insert(index, position);
            return;
        }
        if self.calls_by_small_index.len() <= index {
            self.calls_by_small_index.resize(index + 1, None);
        }
        if let Some(slot) = self.calls_by_small_index.get_mut(index) {
            *slot = Some(position);
        }
    }
}

impl Default for OpenAiChatDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// A chunk whose choices only carry `content`/`refusal` text: the serde fast path. Nothing in
/// it allocates for the usual single-choice chunk: strings stay borrowed (text as raw JSON,
/// decoded into the decoder's scratch buffer), the first choice is held inline.
#[derive(Deserialize)]
struct TextChunk<'a> {
    #[serde(borrow)]
    choices: Choices<TextChoice<'a>>,
    #[serde(default)]
    usage: Option<&'a RawValue>,
    #[serde(default, borrow)]
    system_fingerprint: Option<JsonStr<'a>>,
    /// Read only for its position (see [`Template`]).
    #[serde(default, borrow)]
    obfuscation: Option<&'a RawValue>,
    /// An error reported next to the choices (OpenRouter): the general path fails the stream.
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct TextChoice<'a> {
    /// Missing: [`NO_INDEX`], which sends the chunk to the general path.
    #[serde(default = "no_index")]
    index: usize,
    #[serde(borrow)]
    delta: TextDelta<'a>,
    #[serde(default)]
    logprobs: Option<&'a RawValue>,
    #[serde(default, borrow)]
    finish_reason: Option<JsonStr<'a>>,
}

/// Raw JSON values, so that the text is decoded once, straight where it goes, and the content
/// string's position in the chunk is known (see [`Template`]). Anything but a string or `null`
/// sends the chunk to the general path, as a typed `String` field would.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextDelta<'a> {
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    refusal: Option<&'a RawValue>,
}

/// A chunk that only appends to one tool call's arguments, parsed after the general path
/// applied it, to learn a [`Template`] from it.
#[derive(Deserialize)]
struct ArgsChunk<'a> {
    #[serde(borrow)]
    choices: Choices<ArgsChoice<'a>>,
    #[serde(default, borrow)]
    usage: Option<&'a RawValue>,
    #[serde(default, borrow)]
    obfuscation: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ArgsChoice<'a> {
    #[serde(default = "no_index")]
    index: usize,
    #[serde(borrow)]
    delta: ArgsDelta<'a>,
    #[serde(default, borrow)]
    logprobs: Option<&'a RawValue>,
    #[serde(default, borrow)]
    finish_reason: Option<JsonStr<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgsDelta<'a> {
    #[serde(borrow)]
    tool_calls: Choices<ArgsCall<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgsCall<'a> {
    index: usize,
    #[serde(borrow)]
    function: ArgsFunction<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgsFunction<'a> {
    #[serde(borrow)]
    arguments: &'a RawValue,
}

/// The fast paths' choice index when the chunk gives none: no choice has it, so the chunk goes to
/// the general path, which takes the choice's position in the list.
const NO_INDEX: usize = usize::MAX;

fn no_index() -> usize {
    NO_INDEX
}

/// A JSON string, borrowed from the input unless it holds escapes. (`Option<Cow<str>>` fields
/// always allocate: serde borrows only for a bare `Cow<str>`.)
struct JsonStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for JsonStr<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = JsonStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

/// A JSON list whose first element is held inline: one choice per chunk is the rule, and a
/// `Vec` would allocate for it every chunk.
struct Choices<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Choices<T> {
    fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(&self.rest)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Choices<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Choices<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let first = seq.next_element()?;
                let mut rest = Vec::new();
                if first.is_some() {
                    while let Some(item) = seq.next_element()? {
                        rest.push(item);
                    }
                }
                Ok(Choices { first, rest })
            }
        }
        deserializer.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

/// Decodes a raw JSON text field into `scratch`: `Ok(None)` when absent or `null`, `Err` when
/// it is not a valid string (the chunk then takes the general path).
fn decode_text(raw: Option<&RawValue>, scratch: &mut String) -> Result<Option<Range<usize>>, ()> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let body = raw.get().strip_prefix('"').ok_or(())?;
    let start = scratch.len();
    let used = json_str::push_body(body, scratch).ok_or(())?;
    if used != body.len() {
        scratch.truncate(start);
        return Err(());
    }
    Ok(Some(start..scratch.len()))
}

/// Where `inner` (a subslice of `outer`) starts in `outer`.
fn offset_in(outer: &str, inner: &str) -> Option<usize> {
    let offset = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = offset.checked_add(inner.len())?;
    (outer.get(offset..end)? == inner).then_some(offset)
}

fn malformed(detail: impl Into<String>) -> DecodeError {
    ProtocolError::Malformed {
        event_type: "chat.completion.chunk".to_owned(),
        detail: detail.into(),
    }
    .into()
}

impl OpenAiChatDecoder {
    /// A decoder waiting for the first chunk.
    pub fn new() -> Self {
        Self {
            snapshot: None,
            choices: Vec::new(),
            done: false,
            failure: None,
            events: Vec::new(),
            record: true,
            text_fast_path: true,
            template_fast_path: true,
            template: Template::default(),
            scratch: String::new(),
            spans: Vec::new(),
            edges: Vec::new(),
            holding: false,
        }
    }

    /// Turns the text-chunk fast paths (serde borrowed structs, and appending a chunk that
    /// repeats the previous one's bytes around its content) on or off. Benchmarks and tests
    /// compare them with the general path; results are identical either way.
    #[doc(hidden)]
    pub fn set_text_fast_path(&mut self, enabled: bool) {
        self.end_template();
        self.text_fast_path = enabled;
    }

    /// Turns the template fast path alone on or off (benchmarks measure the serde text path
    /// without it; results are identical either way).
    #[doc(hidden)]
    pub fn set_template_fast_path(&mut self, enabled: bool) {
        self.end_template();
        self.template_fast_path = enabled;
    }

    fn emit(&mut self, event: impl FnOnce() -> DecodeEvent) {
        if self.record {
            self.events.push(event());
        }
    }

    /// The template fast path (see [`Template`]): `data` is the previous chunk with only its
    /// appended string (and its padding) changed. Returns `false` (having changed nothing)
    /// otherwise.
    fn try_template(&mut self, data: &str) -> bool {
        let Self {
            template,
            events,
            record,
            ..
        } = self;
        let Some(rest) = data.strip_prefix(template.prefix.as_str()) else {
            return false;
        };
        let start = template.pending.len();
        let Some(used) = json_str::push_body(rest, &mut template.pending) else {
            return false;
        };
        let after = rest.get(used..).unwrap_or_default();
        let matched = if template.obfuscated {
            after
                .strip_prefix(template.suffix.as_str())
                .and_then(|r| r.get(json_str::string_body(r)?.1..))
                == Some(template.end.as_str())
        } else {
            after == template.suffix
        };
        if !matched {
            template.pending.truncate(start);
            return false;
        }
        if *record && template.pending.len() > start {
            let text = template.pending.get(start..).unwrap_or_default().to_owned();
            events.push(match template.target {
                Target::Content => DecodeEvent::TextDelta {
                    index: template.index,
                    text,
                },
                Target::Arguments(tool) => DecodeEvent::InputJsonDelta {
                    index: tool,
                    partial_json: text,
                },
            });
        }
        true
    }

    /// Ends the template run: its pending text joins the snapshot.
    fn end_template(&mut self) {
        if !self.template.valid {
            return;
        }
        self.template.valid = false;
        if let Some(content) = self
            .snapshot
            .as_mut()
            .and_then(|s| template_slot(s, self.template.index, self.template.target))
        {
            content.push_str(&self.template.pending);
        }
        self.template.pending.clear();
    }

    /// The serde fast path: text-only deltas for existing choices. Returns `false` (having
    /// changed nothing) when the chunk needs the general path.
    fn try_text_chunk(&mut self, data: &str) -> bool {
        if self.snapshot.is_none() {
            return false;
        }
        let Ok(chunk) = serde_json::from_str::<TextChunk<'_>>(data) else {
            return false;
        };
        if chunk.error.is_some() {
            return false;
        }
        // Everything that can fail is checked before anything changes.
        self.scratch.clear();
        self.spans.clear();
        for choice in chunk.choices.iter() {
            if choice.logprobs.is_some() {
                return false;
            }
            let (Ok(content), Ok(refusal)) = (
                decode_text(choice.delta.content, &mut self.scratch),
                decode_text(choice.delta.refusal, &mut self.scratch),
            ) else {
                return false;
            };
            self.spans.push((content, refusal));
        }
        let usage = match chunk.usage {
            Some(raw) => match serde_json::from_str(raw.get()) {
                Ok(v) => v,
                Err(_) => return false,
            },
            None => Value::Null,
        };
        let Some(snapshot) = self.snapshot.as_mut() else {
            return false;
        };
        let Some(choices) = snapshot.get_mut("choices").and_then(Value::as_array_mut) else {
            return false;
        };
        let simple = chunk.choices.iter().all(|c| {
            choices
                .get(c.index)
                .and_then(|choice| choice.get("message"))
                .is_some_and(Value::is_object)
        });
        if !simple {
            return false;
        }
        for (choice, (content, refusal)) in chunk.choices.iter().zip(&self.spans) {
            let Some(existing) = choices.get_mut(choice.index).and_then(Value::as_object_mut)
            else {
                continue;
            };
            if let Some(Value::Object(message)) = existing.get_mut("message") {
                if let Some(text) = content.clone().and_then(|r| self.scratch.get(r)) {
                    append_string(message, "content", text);
                }
                if let Some(text) = refusal.clone().and_then(|r| self.scratch.get(r)) {
                    append_string(message, "refusal", text);
                }
            }
            if let Some(reason) = choice.finish_reason.as_ref().filter(|r| !r.0.is_empty()) {
                set_field(
                    existing,
                    "finish_reason",
                    Value::String(reason.0.as_ref().to_owned()),
                );
            }
        }
        let has_usage = !usage.is_null();
        set_field(snapshot, "usage", usage);
        let fingerprint = chunk.system_fingerprint.as_ref().map(|f| f.0.as_ref());
        set_str_field(snapshot, "system_fingerprint", fingerprint);

        let scratch = std::mem::take(&mut self.scratch);
        let spans = std::mem::take(&mut self.spans);
        for (choice, (content, refusal)) in chunk.choices.iter().zip(&spans) {
            let text = |span: &Option<Range<usize>>| {
                span.clone()
                    .and_then(|r| scratch.get(r))
                    .filter(|t| !t.is_empty())
            };
            if let Some(text) = text(content) {
                self.emit(|| DecodeEvent::TextDelta {
                    index: choice.index,
                    text: text.to_owned(),
                });
            }
            if let Some(text) = text(refusal) {
                self.emit(|| DecodeEvent::RefusalDelta {
                    index: choice.index,
                    refusal: text.to_owned(),
                });
            }
            if let Some(reason) = choice.finish_reason.as_ref().filter(|r| !r.0.is_empty()) {
                self.finish_choice(choice.index, &reason.0);
            }
        }
        self.scratch = scratch;
        self.spans = spans;
        if has_usage {
            self.emit_usage();
        }
        if self.template_fast_path {
            self.learn_template(data, &chunk);
        }
        true
    }

    /// Keeps `data`'s bytes around its content string as the [`Template`] for the next chunk,
    /// if applying that chunk again would change nothing but the content: one choice, content
    /// only, no usage, no finish reason.
    fn learn_template(&mut self, data: &str, chunk: &TextChunk<'_>) {
        let (Some(choice), true, None) = (
            &chunk.choices.first,
            chunk.choices.rest.is_empty(),
            chunk.usage,
        ) else {
            return;
        };
        let (Some(content), None, None) = (
            choice.delta.content,
            choice.delta.refusal,
            &choice.finish_reason,
        ) else {
            return;
        };
        self.set_template(
            data,
            content,
            chunk.obfuscation,
            choice.index,
            Target::Content,
        );
    }

    /// After the general path applied `data` (a chunk whose only delta is one tool call): keeps
    /// its bytes around the arguments string as
    /// the [`Template`], if `data` is a chunk that only appends to one tool call's arguments
    /// (one choice, one call with only `index` and `function.arguments`, no usage, finish
    /// reason or logprobs) and that call is the current one (no seal, no start on a repeat).
    fn learn_arguments_template(&mut self, data: &str) {
        let Ok(chunk) = serde_json::from_str::<ArgsChunk<'_>>(data) else {
            return;
        };
        let (Some(choice), true, None) = (
            &chunk.choices.first,
            chunk.choices.rest.is_empty(),
            chunk.usage,
        ) else {
            return;
        };
        let (Some(call), true, None, None, 0) = (
            &choice.delta.tool_calls.first,
            choice.delta.tool_calls.rest.is_empty(),
            choice.logprobs,
            &choice.finish_reason,
            choice.index,
        ) else {
            return;
        };
        // The call this fragment went to (by its position in the message), if it is the
        // current one: a repeat of these bytes appends to the same call.
        let position = self.choices.get(choice.index).and_then(|s| {
            s.call_at(call.index)
                .filter(|&p| s.current_tool == Some(p) && s.sealed.len() > p)
        });
        if let Some(position) = position {
            let target = Target::Arguments(position);
            self.set_template(
                data,
                call.function.arguments,
                chunk.obfuscation,
                choice.index,
                target,
            );
        }
    }

    /// Records `data`'s bytes around `value` (a string in `data`) and, when it is a string
    /// after `value`, around `obfuscation`, as the template for `target` of choice `index`.
    fn set_template(
        &mut self,
        data: &str,
        value: &RawValue,
        obfuscation: Option<&RawValue>,
        index: usize,
        target: Target,
    ) {
        let raw = value.get();
        if !raw.starts_with('"') || raw.len() < 2 {
            return;
        }
        let Some(start) = offset_in(data, raw) else {
            return;
        };
        let value_end = start + raw.len();
        let Some(prefix) = data.get(..start + 1) else {
            return;
        };
        let obfuscation = obfuscation
            .map(RawValue::get)
            .filter(|o| o.starts_with('"'))
            .and_then(|o| Some((offset_in(data, o)?, o.len())))
            .filter(|&(at, _)| at >= value_end);
        let (suffix, end) = match obfuscation {
            Some((at, len)) => (data.get(value_end..at + 1), data.get(at + len..)),
            None => (data.get(value_end..), Some("")),
        };
        let (Some(suffix), Some(end)) = (suffix, end) else {
            return;
        };
        let is_string = self
            .snapshot
            .as_mut()
            .and_then(|s| template_slot(s, index, target))
            .is_some();
        if !is_string {
            return;
        }
        let template = &mut self.template;
        template.pending.clear();
        template.prefix.clear();
        template.prefix.push_str(prefix);
        template.suffix.clear();
        template.suffix.push_str(suffix);
        template.obfuscated = obfuscation.is_some();
        template.end.clear();
        template.end.push_str(end);
        template.index = index;
        template.target = target;
        template.valid = true;
    }

    fn emit_usage(&mut self) {
        if !self.record {
            return;
        }
        let usage = self
            .snapshot
            .as_ref()
            .and_then(|s| s.get("usage"))
            .cloned()
            .unwrap_or(Value::Null);
        self.events.push(DecodeEvent::MessageDelta {
            delta: Value::Object(Map::new()),
            usage,
        });
    }

    fn first_chunk(&mut self, mut chunk: Object) -> Result<(), DecodeError> {
        let choices = match chunk.get_mut("choices") {
            Some(Value::Array(choices)) => std::mem::take(choices),
            _ => Vec::new(),
        };
        let mut converted: Vec<Value> = Vec::with_capacity(choices.len());
        for (position, choice) in choices.into_iter().enumerate() {
            let Value::Object(mut choice) = choice else {
                return Err(malformed("a choice is not an object"));
            };
            let index = choice_index(&mut choice, position)?;
            let delta = choice.remove("delta").unwrap_or(Value::Object(Map::new()));
            choice.insert("message".to_owned(), delta);
            while converted.len() <= index {
                converted.push(Value::Null);
            }
            converted[index] = Value::Object(choice);
        }
        chunk.insert("choices".to_owned(), Value::Array(converted));
        if !chunk.contains_key("system_fingerprint") {
            chunk.insert("system_fingerprint".to_owned(), Value::Null);
        }
        chunk.insert(
            "object".to_owned(),
            Value::String("chat.completion".to_owned()),
        );
        let had_usage = chunk.get("usage").is_some_and(|u| !u.is_null());
        if self.record {
            self.events.push(DecodeEvent::MessageStart {
                message: Value::Object(chunk.clone()),
            });
        }
        self.snapshot = Some(chunk);
        // Report what the first chunk already carried, as a later chunk would.
        let Some(choices) = self
            .snapshot
            .as_ref()
            .and_then(|s| s.get("choices"))
            .and_then(Value::as_array)
        else {
            return Ok(());
        };
        let mut reports = Vec::new();
        for (index, choice) in choices.iter().enumerate() {
            let message = choice.get("message");
            let content = message
                .and_then(|m| m.get("content"))
                .and_then(Value::as_str);
            let refusal = message
                .and_then(|m| m.get("refusal"))
                .and_then(Value::as_str);
            let reasoning = message
                .and_then(Value::as_object)
                .and_then(reasoning_text)
                .map(str::to_owned);
            let tools = message
                .and_then(|m| m.get("tool_calls"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let finish = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_owned);
            reports.push((
                index,
                reasoning,
                content.map(str::to_owned),
                refusal.map(str::to_owned),
                tools,
                finish,
            ));
        }
        for (index, reasoning, content, refusal, tools, finish) in reports {
            // The first chunk's lists are the snapshot's as they are.
            if self.choices.len() <= index {
                self.choices.resize(index + 1, ChoiceState::default());
            }
            let edges = edges_of_choice(&self.edges, index);
            let state = &mut self.choices[index];
            // A high half ending the first delta is held back from its event, as later.
            let held = |text: Option<String>, held: &mut Option<u16>, edges| {
                let mut text = Value::from(text?);
                join_choice_halves(None, Some(&mut text), held, edges)
            };
            let content = held(content, &mut state.held_content, edges.content);
            let refusal = held(refusal, &mut state.held_refusal, edges.refusal);
            let positions = calls_as_they_are(&tools, state);
            let mut tools = tools;
            if !edges.arguments.is_empty()
                && let Some(message) = self
                    .snapshot
                    .as_mut()
                    .and_then(|s| s.get_mut("choices"))
                    .and_then(|c| c.get_mut(index))
                    .and_then(|c| c.get_mut("message"))
                    .and_then(Value::as_object_mut)
            {
                state.join_arguments_halves(message, &mut tools, &positions, &edges.arguments);
            }
            self.report_reasoning(index, reasoning.as_deref());
            self.report_delta(
                index,
                content.as_deref(),
                refusal.as_deref(),
                &tools,
                &positions,
            );
            if let Some(reason) = finish.filter(|r| !r.is_empty()) {
                self.finish_choice(index, &reason);
            }
        }
        if had_usage {
            self.emit_usage();
        }
        Ok(())
    }

    /// Reports a choice's reasoning text ([`reasoning_text`]) as thinking.
    fn report_reasoning(&mut self, choice: usize, reasoning: Option<&str>) {
        if let Some(text) = reasoning {
            self.emit(|| DecodeEvent::ThinkingDelta {
                index: choice,
                thinking: text.to_owned(),
            });
        }
    }

    /// Emits the events of one choice delta and tracks tool calls (sealing the previous call
    /// when a new one starts, as the SDK does). `positions` says where each entry of `tools`
    /// landed in the snapshot's `tool_calls` ([`accumulate_tool_calls`]): events and seals name calls by
    /// that position.
    fn report_delta(
        &mut self,
        choice: usize,
        content: Option<&str>,
        refusal: Option<&str>,
        tools: &[Value],
        positions: &[Option<usize>],
    ) {
        if let Some(text) = content.filter(|t| !t.is_empty()) {
            self.emit(|| DecodeEvent::TextDelta {
                index: choice,
                text: text.to_owned(),
            });
        }
        if let Some(text) = refusal.filter(|t| !t.is_empty()) {
            self.emit(|| DecodeEvent::RefusalDelta {
                index: choice,
                refusal: text.to_owned(),
            });
        }
        for (tool, position) in tools.iter().zip(positions) {
            // A position, not the network's `index`: it sizes a table, and it is bounded by the
            // calls the stream actually sent.
            let Some(tool_index) = *position else {
                continue;
            };
            if self.choices.len() <= choice {
                self.choices.resize(choice + 1, ChoiceState::default());
            }
            let state = &mut self.choices[choice];
            let previous = state.current_tool.replace(tool_index);
            let is_new = state.sealed.len() <= tool_index;
            if is_new {
                state.sealed.resize(tool_index + 1, false);
            }
            if let Some(previous) = previous.filter(|&p| p != tool_index) {
                self.seal_at_switch(choice, previous);
            }
            // Tool call events name no choice: only the first choice's are reported (see
            // [`OpenAiChatDecoder`]); the others' calls are in the message.
            if choice != 0 {
                continue;
            }
            if is_new {
                let block = tool.clone();
                self.emit(|| DecodeEvent::BlockStart {
                    index: tool_index,
                    block,
                });
            }
            let fragment = tool
                .get("function")
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty());
            if let Some(fragment) = fragment {
                self.emit(|| DecodeEvent::InputJsonDelta {
                    index: tool_index,
                    partial_json: fragment.to_owned(),
                });
            }
        }
    }

    /// Sends the high halves a choice still holds as the U+FFFD the message already shows (its
    /// text ends, or the stream does).
    fn flush_halves(&mut self, choice: usize) {
        let Some(state) = self.choices.get_mut(choice) else {
            return;
        };
        let (content, refusal) = (state.held_content.take(), state.held_refusal.take());
        let arguments = std::mem::take(&mut state.held_arguments);
        if content.is_some() {
            self.emit(|| DecodeEvent::TextDelta {
                index: choice,
                text: LONE_HALF.to_owned(),
            });
        }
        if refusal.is_some() {
            self.emit(|| DecodeEvent::RefusalDelta {
                index: choice,
                refusal: LONE_HALF.to_owned(),
            });
        }
        // Tool call events are the first choice's only (see [`OpenAiChatDecoder`]).
        for (tool, held) in arguments.iter().enumerate() {
            if held.is_some() && choice == 0 {
                self.emit(|| DecodeEvent::InputJsonDelta {
                    index: tool,
                    partial_json: LONE_HALF.to_owned(),
                });
            }
        }
    }

    fn finish_choice(&mut self, choice: usize, reason: &str) {
        self.flush_halves(choice);
        self.emit(|| DecodeEvent::MessageDelta {
            delta: serde_json::json!({ "finish_reason": reason }),
            usage: Value::Null,
        });
        let cut_off = reason == "length";
        let count = self.choices.get(choice).map_or(0, |s| s.sealed.len());
        for tool in 0..count {
            self.seal(choice, tool, cut_off);
        }
    }

    /// Whether the snapshot has at least one choice, each has a `finish_reason`, and every
    /// tool call was sealed (a call started after its choice's `finish_reason` was not).
    fn every_choice_finished(&self) -> bool {
        if !self
            .choices
            .iter()
            .all(|state| state.sealed.iter().all(|sealed| *sealed))
        {
            return false;
        }
        let choices = self
            .snapshot
            .as_ref()
            .and_then(|s| s.get("choices"))
            .and_then(Value::as_array);
        choices.is_some_and(|choices| {
            !choices.is_empty()
                && choices.iter().all(|choice| {
                    choice
                        .get("finish_reason")
                        .and_then(Value::as_str)
                        .is_some_and(|reason| !reason.is_empty())
                })
        })
    }

    /// Seals the call at `tool` now that another call of the choice received a fragment, as the
    /// SDK's events do, unless its arguments are an unfinished (or empty) JSON value: a server
    /// interleaving two calls' fragments (A, B, A) would otherwise have A sealed invalid. Such a
    /// call stays open, its late fragments still go to it, and it is sealed once its value
    /// ends (checked at the next switch, reading only the new text), at the `finish_reason`, or
    /// at `[DONE]`. In the usual stream the arguments are complete here and parsed once, as
    /// before.
    fn seal_at_switch(&mut self, choice: usize, tool: usize) {
        let Some(state) = self.choices.get_mut(choice) else {
            return;
        };
        if state.sealed.get(tool).copied().unwrap_or(true) {
            return;
        }
        let raw_arguments = snapshot_call(self.snapshot.as_ref(), choice, tool)
            .and_then(|c| c.get("function"))
            .and_then(|f| f.get("arguments"));
        if raw_arguments.is_some_and(Value::is_object) {
            self.seal(choice, tool, false);
            return;
        }
        let arguments = raw_arguments.and_then(Value::as_str).unwrap_or("");
        let parsed = match state.open.get_mut(tool).and_then(Option::as_mut) {
            Some(end) => {
                if !end.ended(arguments) {
                    return;
                }
                None
            }
            None => {
                let parsed = (!json_str::is_json_whitespace(arguments))
                    .then(|| serde_json::from_str::<Value>(arguments));
                if !matches!(parsed, Some(Ok(_))) {
                    let mut end = JsonEnd::default();
                    if !end.ended(arguments) {
                        if state.open.len() <= tool {
                            state.open.resize(tool + 1, None);
                        }
                        state.open[tool] = Some(end);
                        return;
                    }
                }
                parsed
            }
        };
        self.seal_parsed(choice, tool, false, parsed);
    }

    /// Seals the calls no `finish_reason` sealed at `[DONE]`: the stream is whole, so their
    /// arguments are final. Calls left open at a switch ([`seal_at_switch`](Self::seal_at_switch))
    /// end here, and so do the calls of a server that sends no `finish_reason` (or `null` on
    /// every chunk) before `[DONE]`.
    fn seal_unsealed_calls(&mut self) {
        for choice in 0..self.choices.len() {
            let count = self.choices[choice].sealed.len();
            for tool in 0..count {
                self.seal(choice, tool, false);
            }
        }
    }

    /// Parses a tool call's arguments once and reports the outcome.
    fn seal(&mut self, choice: usize, tool: usize, cut_off: bool) {
        self.seal_parsed(choice, tool, cut_off, None);
    }

    /// [`seal`](Self::seal), with the arguments already parsed when `parsed` is given.
    fn seal_parsed(
        &mut self,
        choice: usize,
        tool: usize,
        cut_off: bool,
        parsed: Option<Result<Value, serde_json::Error>>,
    ) {
        let Some(flag) = self
            .choices
            .get_mut(choice)
            .and_then(|s| s.sealed.get_mut(tool))
        else {
            return;
        };
        if *flag {
            return;
        }
        *flag = true;
        // A half the arguments still hold stays the U+FFFD they show: their text is final.
        let held = self
            .choices
            .get_mut(choice)
            .and_then(|s| s.held_arguments.get_mut(tool))
            .and_then(Option::take);
        if choice != 0 {
            return;
        }
        if held.is_some() {
            self.emit(|| DecodeEvent::InputJsonDelta {
                index: tool,
                partial_json: LONE_HALF.to_owned(),
            });
        }
        let Some(call) = snapshot_call(self.snapshot.as_ref(), choice, tool) else {
            return;
        };
        let field = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
        let id = field(call.get("id"));
        let function = call.get("function");
        let name = field(function.and_then(|f| f.get("name")));
        let raw_arguments = function.and_then(|f| f.get("arguments"));
        let arguments = field(raw_arguments);
        // Arguments sent as a JSON object, not a string holding one (TGI, LocalAI): the input.
        let object = raw_arguments.filter(|a| a.is_object()).cloned();
        let parsed = parsed.or(object.map(Ok)).unwrap_or_else(|| {
            if json_str::is_json_whitespace(&arguments) {
                Ok(Value::Object(Map::new()))
            } else {
                serde_json::from_str::<Value>(&arguments)
            }
        });
        let event = match parsed {
            Ok(input) => DecodeEvent::ToolUseReady {
                index: tool,
                id,
                name,
                input,
            },
            Err(_) if cut_off => DecodeEvent::ToolUseTruncated {
                index: tool,
                id,
                name,
                partial_json: arguments,
            },
            Err(error) => DecodeEvent::ToolUseInvalid {
                index: tool,
                id,
                name,
                partial_json: arguments,
                error: error.to_string(),
            },
        };
        self.events.push(event);
    }

    fn general_chunk(&mut self, data: &str) -> Result<(), DecodeError> {
        let value: Value = serde_json::from_str(data)
            .map_err(|e| DecodeError::json("chat.completion.chunk", e))?;
        let Value::Object(mut chunk) = value else {
            return Err(malformed("the chunk is not an object"));
        };
        if is_error_chunk(&chunk) {
            return Err(self.fail(Value::Object(chunk)));
        }
        if self.done {
            return Err(ProtocolError::AfterEnd {
                event_type: "chat.completion.chunk".to_owned(),
            }
            .into());
        }
        let Some(snapshot) = self.snapshot.as_mut() else {
            return self.first_chunk(chunk);
        };
        let choices = match chunk.remove("choices") {
            Some(Value::Array(choices)) => choices,
            Some(Value::Null) | None => Vec::new(),
            Some(_) => return Err(malformed("`choices` is not a list")),
        };
        let no_choice_yet = snapshot
            .get("choices")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty);
        if no_choice_yet && !choices.is_empty() {
            // The first chunk had no choices (Azure's prompt filter results, with an empty `id`
            // and `model` and `created: 0`): the first chunk with choices names the completion.
            for key in ["id", "model", "created"] {
                let blank = snapshot
                    .get(key)
                    .is_none_or(|v| v.is_null() || v.as_str() == Some("") || v.as_u64() == Some(0));
                if let Some(value) = chunk.get(key).filter(|_| blank) {
                    snapshot.insert(key.to_owned(), value.clone());
                }
            }
        }
        let Some(Value::Array(snapshot_choices)) = snapshot.get_mut("choices") else {
            return Err(malformed("snapshot lost its choices"));
        };
        let mut reports = Vec::with_capacity(choices.len());
        for (position, choice) in choices.into_iter().enumerate() {
            let Value::Object(mut choice) = choice else {
                return Err(malformed("a choice is not an object"));
            };
            let index = choice_index(&mut choice, position)?;
            let mut delta = match choice.remove("delta") {
                Some(Value::Object(delta)) => delta,
                _ => Map::new(),
            };
            let edges = edges_of_choice(&self.edges, index);
            let (content, refusal);
            let reasoning = reasoning_text(&delta).map(str::to_owned);
            let mut tools = delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let finish = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .map(str::to_owned);
            let positions;
            match snapshot_choices
                .get_mut(index)
                .and_then(Value::as_object_mut)
            {
                Some(existing) => {
                    let message = existing
                        .entry("message")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if self.choices.len() <= index {
                        self.choices.resize(index + 1, ChoiceState::default());
                    }
                    let state = &mut self.choices[index];
                    if let Value::Object(message) = message {
                        let before = message.get("tool_calls");
                        let has_calls = matches!(before, Some(Value::Array(_)));
                        let as_is = matches!(before, None | Some(Value::Null));
                        let entries = if has_calls {
                            delta.shift_remove("tool_calls")
                        } else {
                            None
                        };
                        content = join_choice_halves(
                            message.get_mut("content"),
                            delta.get_mut("content"),
                            &mut state.held_content,
                            edges.content,
                        );
                        refusal = join_choice_halves(
                            message.get_mut("refusal"),
                            delta.get_mut("refusal"),
                            &mut state.held_refusal,
                            edges.refusal,
                        );
                        accumulate_delta(message, delta)?;
                        positions = match entries {
                            // Calls already there: the fragments are matched to them here.
                            Some(entries) => accumulate_tool_calls(message, entries, state)?,
                            // Taken as they are (the SDK's rule), or dropped (another kind
                            // there, which the SDK keeps).
                            None if as_is => calls_as_they_are(&tools, state),
                            None => vec![None; tools.len()],
                        };
                        if !edges.arguments.is_empty() || !state.held_arguments.is_empty() {
                            state.join_arguments_halves(
                                message,
                                &mut tools,
                                &positions,
                                &edges.arguments,
                            );
                        }
                    } else {
                        positions = vec![None; tools.len()];
                        let text = |key| delta.get(key).and_then(Value::as_str).map(str::to_owned);
                        (content, refusal) = (text("content"), text("refusal"));
                    }
                    if let Some(reason) = &finish {
                        existing.insert("finish_reason".to_owned(), Value::String(reason.clone()));
                    }
                    if let Some(logprobs) = choice.remove("logprobs").filter(|l| !l.is_null()) {
                        merge_logprobs(existing, logprobs);
                    }
                }
                None => {
                    if self.choices.len() <= index {
                        self.choices.resize(index + 1, ChoiceState::default());
                    }
                    let state = &mut self.choices[index];
                    positions = calls_as_they_are(&tools, state);
                    content = join_choice_halves(
                        None,
                        delta.get_mut("content"),
                        &mut state.held_content,
                        edges.content,
                    );
                    refusal = join_choice_halves(
                        None,
                        delta.get_mut("refusal"),
                        &mut state.held_refusal,
                        edges.refusal,
                    );
                    if !edges.arguments.is_empty() {
                        state.join_arguments_halves(
                            &mut delta,
                            &mut tools,
                            &positions,
                            &edges.arguments,
                        );
                    }
                    choice.insert("message".to_owned(), Value::Object(delta));
                    while snapshot_choices.len() < index {
                        snapshot_choices.push(Value::Null);
                    }
                    if index < snapshot_choices.len() {
                        snapshot_choices[index] = Value::Object(choice);
                    } else {
                        snapshot_choices.push(Value::Object(choice));
                    }
                }
            }
            reports.push((index, reasoning, content, refusal, tools, positions, finish));
        }
        let usage = chunk.remove("usage").unwrap_or(Value::Null);
        let has_usage = !usage.is_null();
        snapshot.insert("usage".to_owned(), usage);
        let fingerprint = chunk.remove("system_fingerprint").unwrap_or(Value::Null);
        snapshot.insert("system_fingerprint".to_owned(), fingerprint);
        // Only a chunk that appends to one tool call and nothing else can teach a template:
        // the others are not parsed a second time for it.
        let arguments_only = !has_usage
            && matches!(
                reports.as_slice(),
                [(_, None, None, None, tools, _, None)] if tools.len() == 1
            );
        for (index, reasoning, content, refusal, tools, positions, finish) in reports {
            self.report_reasoning(index, reasoning.as_deref());
            self.report_delta(
                index,
                content.as_deref(),
                refusal.as_deref(),
                &tools,
                &positions,
            );
            if let Some(reason) = finish {
                self.finish_choice(index, &reason);
            }
        }
        if has_usage {
            self.emit_usage();
        }
        if arguments_only && self.text_fast_path && self.template_fast_path {
            self.learn_arguments_template(data);
        }
        Ok(())
    }

    fn fail(&mut self, raw: Value) -> DecodeError {
        let error = DecodeError::provider(raw);
        tracing::debug!(%error, "provider error in stream");
        error
    }
}

/// The reasoning text of a delta, not empty: `reasoning_content` (DeepSeek, vLLM, LM Studio,
/// llama.cpp), else `reasoning` (Ollama, OpenRouter, newer vLLM, which may send both with the
/// same text: it is reported once). Both accumulate into the message as any unknown string
/// field does. The text fast paths never see them (their deltas name only `content` and
/// `refusal`).
fn reasoning_text(delta: &Object) -> Option<&str> {
    ["reasoning_content", "reasoning"].iter().find_map(|key| {
        delta
            .get(*key)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
    })
}

/// The tool call at position `tool` of choice `choice` in the snapshot.
fn snapshot_call(snapshot: Option<&Object>, choice: usize, tool: usize) -> Option<&Value> {
    snapshot?
        .get("choices")?
        .get(choice)?
        .get("message")?
        .get("tool_calls")?
        .get(tool)
}

/// `[DONE]`, also with trailing whitespace (openai-python ends the stream at any data starting
/// with `[DONE]`; a chunk is JSON, so it never does).
pub(crate) fn is_done_marker(data: &str) -> bool {
    data.strip_prefix("[DONE]")
        .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_whitespace()))
}

/// Whether a chunk's text gives some choice a `finish_reason` (a non-empty string; `null` and
/// `""`, which some servers send on every chunk, do not count). A scan for the key, not a
/// parse: the client's bookkeeping calls it on every chunk, and a false positive (the key
/// inside a string) only matters for a server that also leaves out `[DONE]`.
#[cfg_attr(not(feature = "client"), allow(dead_code))] // the client is its only caller
pub(crate) fn sets_finish_reason(data: &str) -> bool {
    const KEY: &[u8] = b"\"finish_reason\"";
    let bytes = data.as_bytes();
    memchr::memmem::find_iter(bytes, KEY).any(|at| {
        let mut rest = bytes[at + KEY.len()..].iter().copied();
        let mut next = || rest.find(|b| !b.is_ascii_whitespace());
        next() == Some(b':') && next() == Some(b'"') && next() != Some(b'"')
    })
}

/// Largest choice or tool call index accepted (indexes size tables).
const MAX_INDEX: usize = 1 << 16;

/// A choice's `index`; without one (some compatible servers leave it out), its `position` in the
/// chunk's list, which is then written into the choice.
fn choice_index(choice: &mut Object, position: usize) -> Result<usize, DecodeError> {
    if matches!(choice.get("index"), None | Some(Value::Null)) && position < MAX_INDEX {
        choice.insert("index".to_owned(), Value::from(position));
        return Ok(position);
    }
    choice
        .get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < MAX_INDEX)
        .ok_or_else(|| malformed("a choice has no valid `index`"))
}

/// The calls of a `tool_calls` list the snapshot took as it is (the first chunk of a choice, or
/// a message without calls yet): each at its position in the list, found afterwards by its
/// `index`. Returns the positions.
fn calls_as_they_are(tools: &[Value], state: &mut ChoiceState) -> Vec<Option<usize>> {
    tools
        .iter()
        .enumerate()
        .map(|(position, tool)| {
            if let Some(index) = wire_index(tool) {
                state.add_call(index, position);
            }
            Some(position)
        })
        .collect()
}

/// The `index` a tool call entry was sent with.
fn wire_index(tool: &Value) -> Option<usize> {
    tool.get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
}

/// Appends the fragments of a `tool_calls` delta to the message's calls (`message` holds a
/// `tool_calls` list) and returns where each landed. A fragment goes to the latest call sent
/// with its `index`, as the SDK's accumulation does for servers that number their calls 0, 1,
/// 2, ...; it starts a new call when no call has its `index` yet (a server numbering out of
/// order) or when it carries an `id` other than that call's (Ollama sends every parallel call
/// with `index: 0`, which the SDK merges into one call with concatenated arguments). Events
/// and seals name calls by these positions.
fn accumulate_tool_calls(
    message: &mut Object,
    entries: Value,
    state: &mut ChoiceState,
) -> Result<Vec<Option<usize>>, DecodeError> {
    let Value::Array(entries) = entries else {
        // The SDK keeps the calls when the delta's are of another kind.
        return Ok(Vec::new());
    };
    let Some(Value::Array(calls)) = message.get_mut("tool_calls") else {
        return Ok(vec![None; entries.len()]);
    };
    if calls.iter().all(|c| c.is_string() || c.is_number()) {
        // An empty list (or one of scalars) is extended as it is, like the SDK does.
        let first = calls.len();
        let positions = entries
            .iter()
            .enumerate()
            .map(|(offset, entry)| {
                if let Some(index) = wire_index(entry) {
                    state.add_call(index, first + offset);
                }
                Some(first + offset)
            })
            .collect();
        calls.extend(entries);
        return Ok(positions);
    }
    let mut positions = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Object(entry) = entry else {
            return Err(malformed("`tool_calls` list entry is not an object"));
        };
        let index = match entry.get("index") {
            None | Some(Value::Null) => None,
            Some(index) => Some(
                index
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| malformed("`tool_calls` list entry has no integer `index`"))?,
            ),
        };
        let id = entry
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        // Without an `index` (Gemini sends each call whole, unnumbered), a fragment goes to the
        // current call, unless its `id` names another one.
        let candidate = match index {
            Some(index) => state.call_at(index),
            None => state.current_tool,
        };
        let existing = candidate.filter(|&position| {
            let call_id = calls
                .get(position)
                .and_then(|c| c.get("id"))
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty());
            match (id, call_id) {
                (Some(id), Some(call_id)) => id == call_id,
                _ => true,
            }
        });
        match existing {
            Some(position) => {
                let Some(Value::Object(call)) = calls.get_mut(position) else {
                    return Err(malformed(format!(
                        "`tool_calls` entry {position} is not an object"
                    )));
                };
                accumulate_tool_call(call, entry)?;
                positions.push(Some(position));
            }
            None => {
                let position = calls.len();
                calls.push(Value::Object(entry));
                if let Some(index) = index {
                    state.add_call(index, position);
                }
                positions.push(Some(position));
            }
        }
    }
    Ok(positions)
}

/// Sets `key` to `value`, in place when present (the key keeps its position, no key allocated).
fn set_field(map: &mut Object, key: &str, value: Value) {
    match map.get_mut(key) {
        Some(slot) => *slot = value,
        None => {
            map.insert(key.to_owned(), value);
        }
    }
}

/// [`set_field`] with a string or `null`, reusing the string already there.
fn set_str_field(map: &mut Object, key: &str, value: Option<&str>) {
    match (map.get_mut(key), value) {
        (Some(Value::String(existing)), Some(text)) => {
            if existing != text {
                text.clone_into(existing);
            }
        }
        (Some(slot), value) => *slot = value.map_or(Value::Null, |t| Value::String(t.to_owned())),
        (None, value) => {
            map.insert(
                key.to_owned(),
                value.map_or(Value::Null, |t| Value::String(t.to_owned())),
            );
        }
    }
}

fn append_string(message: &mut Object, key: &str, text: &str) {
    match message.get_mut(key) {
        Some(Value::String(existing)) => existing.push_str(text),
        Some(existing @ Value::Null) => *existing = Value::String(text.to_owned()),
        Some(_) => {}
        None => {
            message.insert(key.to_owned(), Value::String(text.to_owned()));
        }
    }
}

/// openai-python's `accumulate_delta`, over JSON objects.
fn accumulate_delta(acc: &mut Object, delta: Object) -> Result<(), DecodeError> {
    for (key, delta_value) in delta {
        let Some(acc_value) = acc.get_mut(&key) else {
            acc.insert(key, delta_value);
            continue;
        };
        // A `null` keeps the earlier value, also for the keys replaced below: servers that send
        // `"role": null` (or a tool call's `"type": null`) on every later delta would otherwise
        // leave the message with `role: null`, a shape no API accepts back.
        if delta_value.is_null() && !acc_value.is_null() {
            continue;
        }
        // `role` too: servers that repeat `"role": "assistant"` on every delta (Gemini, LM
        // Studio) would otherwise make it `assistantassistant...`.
        if acc_value.is_null() || key == "index" || key == "type" || key == "role" {
            *acc_value = delta_value;
            continue;
        }
        match (acc_value, delta_value) {
            (Value::String(a), Value::String(d)) => a.push_str(&d),
            (Value::Number(a), Value::Number(d)) => {
                let sum = match (a.as_i64(), d.as_i64()) {
                    (Some(x), Some(y)) => x.checked_add(y).map(serde_json::Number::from),
                    _ => serde_json::Number::from_f64(
                        a.as_f64().unwrap_or(0.0) + d.as_f64().unwrap_or(0.0),
                    ),
                };
                if let Some(sum) = sum {
                    *a = sum;
                }
            }
            (Value::Object(a), Value::Object(d)) => accumulate_delta(a, d)?,
            (Value::Array(a), Value::Array(d)) => {
                if a.iter().all(|x| x.is_string() || x.is_number()) {
                    a.extend(d);
                    continue;
                }
                for entry in d {
                    let Value::Object(entry) = entry else {
                        return Err(malformed(format!("`{key}` list entry is not an object")));
                    };
                    let index = entry
                        .get("index")
                        .and_then(Value::as_u64)
                        .and_then(|i| usize::try_from(i).ok())
                        .ok_or_else(|| {
                            malformed(format!("`{key}` list entry has no integer `index`"))
                        })?;
                    match a.get_mut(index) {
                        Some(Value::Object(existing)) if key == "tool_calls" => {
                            accumulate_tool_call(existing, entry)?;
                        }
                        Some(Value::Object(existing)) => accumulate_delta(existing, entry)?,
                        Some(_) => {
                            return Err(malformed(format!(
                                "`{key}` entry {index} is not an object"
                            )));
                        }
                        None => a.push(Value::Object(entry)),
                    }
                }
            }
            // The SDK keeps the accumulated value when the kinds differ.
            _ => {}
        }
    }
    Ok(())
}

/// A tool call delta: like [`accumulate_delta`], except that `id` and `function.name` are set
/// once and never concatenated (some OpenAI-compatible servers repeat them in every chunk, which
/// would turn `call_1` into `call_1call_1` under plain string concatenation).
fn accumulate_tool_call(acc: &mut Object, mut delta: Object) -> Result<(), DecodeError> {
    keep_first(acc, &mut delta, "id");
    if let (Some(Value::Object(acc_function)), Some(Value::Object(delta_function))) =
        (acc.get_mut("function"), delta.get_mut("function"))
    {
        keep_first(acc_function, delta_function, "name");
    }
    accumulate_delta(acc, delta)
}

/// Drops `key` from `delta` when `acc` already holds a non-empty string for it.
fn keep_first(acc: &Object, delta: &mut Object, key: &str) {
    let already = acc
        .get(key)
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if already {
        delta.shift_remove(key);
    }
}

/// openai-python's logprobs accumulation: lists extend, a missing snapshot takes the chunk's.
fn merge_logprobs(choice: &mut Object, logprobs: Value) {
    let Value::Object(incoming) = logprobs else {
        return;
    };
    let snapshot = choice.entry("logprobs").or_insert(Value::Null);
    if !snapshot.is_object() {
        let mut fresh = Map::new();
        fresh.insert(
            "content".to_owned(),
            incoming.get("content").cloned().unwrap_or(Value::Null),
        );
        fresh.insert(
            "refusal".to_owned(),
            incoming.get("refusal").cloned().unwrap_or(Value::Null),
        );
        *snapshot = Value::Object(fresh);
        return;
    }
    let Value::Object(snapshot) = snapshot else {
        return;
    };
    for key in ["content", "refusal"] {
        let Some(Value::Array(items)) = incoming.get(key) else {
            continue;
        };
        if items.is_empty() {
            continue;
        }
        let slot = snapshot.entry(key).or_insert(Value::Null);
        match slot {
            Value::Array(existing) => existing.extend(items.iter().cloned()),
            _ => *slot = Value::Array(items.clone()),
        }
    }
}

/// The arguments string of the call at `position` of `message`, if it is a string.
fn call_arguments(message: &mut Object, position: usize) -> Option<&mut String> {
    match message
        .get_mut("tool_calls")?
        .get_mut(position)?
        .get_mut("function")?
        .get_mut("arguments")?
    {
        Value::String(text) => Some(text),
        _ => None,
    }
}

/// The `target` string of choice `index` in the snapshot, if it is a string.
fn template_slot(snapshot: &mut Object, index: usize, target: Target) -> Option<&mut String> {
    let message = snapshot
        .get_mut("choices")?
        .get_mut(index)?
        .get_mut("message")?
        .as_object_mut()?;
    match target {
        Target::Content => match message.get_mut("content")? {
            Value::String(text) => Some(text),
            _ => None,
        },
        Target::Arguments(tool) => call_arguments(message, tool),
    }
}

/// The snapshot in the non-streaming shape, with the template run's `pending` content
/// appended: tool calls lose their streaming-only `index`.
fn to_response_shape(snapshot: &Object, pending: Option<(usize, Target, &str)>) -> Value {
    let mut out = snapshot.clone();
    if let Some((index, target, text)) = pending
        && let Some(content) = template_slot(&mut out, index, target)
    {
        content.push_str(text);
    }
    if let Some(Value::Array(choices)) = out.get_mut("choices") {
        for choice in choices {
            let calls = choice
                .get_mut("message")
                .and_then(|m| m.get_mut("tool_calls"))
                .and_then(Value::as_array_mut);
            for call in calls.into_iter().flatten() {
                if let Value::Object(call) = call {
                    call.shift_remove("index");
                }
            }
        }
    }
    Value::Object(out)
}

impl OpenAiChatDecoder {
    /// One event's data decoded (the whole of `push_event` but remembering its error).
    fn decode_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        // Halves of characters are joined on the general path only.
        let fast = self.edges.is_empty() && !self.holding;
        if fast
            && self.template.valid
            && !self.done
            && event_type != "error"
            && self.try_template(data)
        {
            return Ok(());
        }
        self.end_template();
        if is_done_marker(data) {
            // A repeated marker (gateways relaying a stream that already carried one append
            // their own) ends nothing more: one end, one `message_stop`.
            if self.done {
                return Ok(());
            }
            if self.snapshot.is_none() {
                return Err(ProtocolError::BeforeStart {
                    event_type: "[DONE]".to_owned(),
                }
                .into());
            }
            for choice in 0..self.choices.len() {
                self.flush_halves(choice);
            }
            self.holding = false;
            self.seal_unsealed_calls();
            self.done = true;
            self.emit(|| DecodeEvent::MessageStop);
            return Ok(());
        }
        if event_type == "error" {
            let raw = data_value(data);
            return Err(self.fail(raw));
        }
        if fast && !self.done && self.text_fast_path && self.try_text_chunk(data) {
            return Ok(());
        }
        let result = self.general_chunk(data);
        self.holding = self.choices.iter().any(ChoiceState::holds_half);
        result
    }
}

/// Whether a Chat chunk is an error chunk, which fails the stream whatever else it holds (vLLM:
/// `{"error": {...}}` alone; OpenRouter: an `error` object next to choices that end with
/// `finish_reason: "error"`; an `"error": null` counts only in a chunk without choices). The
/// client asks the same of a chunk before anything was delivered, to retry it.
pub(crate) fn is_error_chunk(chunk: &serde_json::Map<String, Value>) -> bool {
    match chunk.get("error") {
        Some(Value::Null) => !chunk.contains_key("choices"),
        Some(_) => true,
        None => false,
    }
}

impl EventDecoder for OpenAiChatDecoder {
    fn push_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        // A repaired chunk's content and refusal had their edge halves read as U+FFFD: they are
        // read from the chunk as sent, to be joined with the deltas around them.
        let result = decode_lone_surrogates_lossily(data, |data, sent| match sent {
            None => self.decode_event(event_type, data),
            Some(sent) => {
                self.edges = edges_of(sent);
                let result = self.decode_event(event_type, data);
                self.edges.clear();
                result
            }
        });
        DecodeError::remember(&mut self.failure, result)
    }

    fn drain_events(&mut self, out: &mut Vec<DecodeEvent>) {
        out.append(&mut self.events);
    }

    fn set_record_events(&mut self, record: bool) {
        self.record = record;
    }

    fn message(&self) -> Value {
        let pending = self.template.valid.then_some((
            self.template.index,
            self.template.target,
            self.template.pending.as_str(),
        ));
        self.snapshot
            .as_ref()
            .map_or(Value::Null, |s| to_response_shape(s, pending))
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn finish(&mut self) -> Result<Value, DecodeError> {
        // Some servers end the body after the last choice's `finish_reason` without sending
        // `data: [DONE]`; the answer is whole (the SDKs accept it: their accumulation ends with
        // the body, and openai-node checks each choice's `finish_reason`). Without a reason for
        // every choice, the stream was cut.
        let whole = self.done || self.every_choice_finished();
        DecodeError::finish_result(
            self.failure.as_ref(),
            whole,
            self.snapshot.is_some(),
            (
                "the stream ended before its first chunk",
                "the stream ended before `data: [DONE]` (and before a `finish_reason` for every choice)",
            ),
            || self.message(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finish_reason_is_a_non_empty_string_whatever_the_spacing() {
        assert!(sets_finish_reason(
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#
        ));
        assert!(sets_finish_reason(
            r#"{"choices": [{"index": 0, "finish_reason" : "tool_calls"}]}"#
        ));
        assert!(sets_finish_reason(
            r#"{"choices":[{"index":0,"finish_reason":null},{"index":1,"finish_reason":"length"}]}"#
        ));
        for no in [
            r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":""}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"finish_reason""#,
            "",
        ] {
            assert!(!sets_finish_reason(no), "{no}");
        }
    }

    #[test]
    fn the_done_marker_may_carry_trailing_whitespace_only() {
        assert!(is_done_marker("[DONE]"));
        assert!(is_done_marker("[DONE] \r\n"));
        assert!(!is_done_marker(" [DONE]"));
        assert!(!is_done_marker("[DONE]x"));
    }
}
