//! Usage anchoring: the provider's reported `usage` is authoritative for the prefix it covered;
//! only messages appended after it are estimated, scaled by an online correction factor per
//! model.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::message::json_kind;
use serde_json::Value;

use super::model::{Family, estimate_text};

/// A correction factor that is not a positive finite number.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("the correction factor must be a positive number, got {0}")]
pub struct InvalidCorrection(pub f64);
use super::request::{
    MessageBody, Overheads, estimate_block, estimate_message_frame, estimate_tools, message_body,
};

/// A usage object a caller handed in that cannot be recorded ([`Usage::parse`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidUsage {
    /// No token count at all (not an object, or none of the known fields).
    #[error(
        "not a usage object: it needs input_tokens / output_tokens (or prompt_tokens / \
         completion_tokens) as non-negative integers"
    )]
    NoCounts,
    /// A count field holding something other than a non-negative integer (a negative number,
    /// a fraction, a string, a number past `u64::MAX`).
    #[error("usage field `{field}` must be a non-negative integer, got {value}")]
    NotACount {
        /// The field's name.
        field: &'static str,
        /// The value found, as JSON.
        value: String,
    },
}

/// A message handed to the tracker that is no JSON object ([`ContextTracker::try_push_message`],
/// [`ContextTracker::try_replace_messages`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAMessage {
    /// The one message pushed.
    #[error("the message must be a JSON object (a message or an OpenAI Responses item), got {0}")]
    Pushed(&'static str),
    /// A message of a history, by index.
    #[error(
        "message {index} must be a JSON object (a message or an OpenAI Responses item), got {kind}"
    )]
    InHistory {
        /// Its index in the history.
        index: usize,
        /// What it is instead (`string`, `number`, ...).
        kind: &'static str,
    },
}

/// A system prompt or tool list handed to the tracker in a shape no request gives it
/// ([`ContextTracker::try_set_system`], [`ContextTracker::try_set_tools`]). Read leniently, a
/// tool definition not in a list counted as no tools at all, and a number as a prompt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotARequestPart {
    /// The system prompt.
    #[error("the system prompt must be a string, an array of blocks or null, got {0}")]
    System(&'static str),
    /// The tool definitions.
    #[error("the tool definitions must be an array or null, got {0}")]
    Tools(&'static str),
}

/// The count fields a usage object may hold, Anthropic's and OpenAI's.
const USAGE_FIELDS: [&str; 6] = [
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
    "prompt_tokens",
    "completion_tokens",
];

/// Lower clamp of the correction factor.
pub const CORRECTION_MIN: f64 = 0.8;
/// Upper clamp of the correction factor.
pub const CORRECTION_MAX: f64 = 1.6;
/// Weight of the newest observation in the correction's moving average.
pub const CORRECTION_ALPHA: f64 = 0.3;
/// Prefixes estimated below this many tokens are too small to learn a correction from.
pub const CORRECTION_MIN_TOKENS: u64 = 256;
/// The block cache is cleared when it grows past this many entries.
const CACHE_CAPACITY: usize = 1 << 16;

/// Provider-reported usage of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Everything the context now holds: input + cache creation + cache read + output.
    ///
    /// Saturating: the counts come from a server (or a caller) and may be absurd; a sum past
    /// `u64::MAX` must not overflow (a panic in debug builds, a tiny wrapped count in release).
    pub fn total(&self) -> u64 {
        self.input_total().saturating_add(self.output_tokens)
    }

    /// The prompt's tokens: input + cache creation + cache read (saturating, as [`Self::total`]).
    pub fn input_total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }

    /// Reads a usage object a caller hands in (what the bindings' `record_usage` take): as
    /// [`Self::from_json`], but a count field that is present and not `null` must be a
    /// non-negative integer. `from_json` reads such a field as absent, so a negative or
    /// fractional `input_tokens` would make the usage "output only" and be ignored without a
    /// word, and a string count would vanish; here it is an error naming the field.
    pub fn parse(usage: &Value) -> Result<Usage, InvalidUsage> {
        if let Value::Object(fields) = usage {
            for field in USAGE_FIELDS {
                match fields.get(field) {
                    None | Some(Value::Null) => {}
                    Some(value) if value.is_u64() => {}
                    Some(value) => {
                        return Err(InvalidUsage::NotACount {
                            field,
                            value: value.to_string(),
                        });
                    }
                }
            }
        }
        Usage::from_json(usage).ok_or(InvalidUsage::NoCounts)
    }

    /// Reads an Anthropic (`input_tokens`, `cache_*_input_tokens`, `output_tokens`) or OpenAI
    /// (`prompt_tokens`/`completion_tokens`, or Responses' `input_tokens`/`output_tokens`) usage
    /// object. OpenAI's cached tokens are part of `prompt_tokens` already. Lenient, for a
    /// server's usage: a field that is not a non-negative integer counts as absent
    /// ([`Self::parse`] refuses it instead).
    pub fn from_json(usage: &Value) -> Option<Usage> {
        let field = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let Some(prompt) = field("prompt_tokens") {
            return Some(Usage {
                input_tokens: prompt,
                output_tokens: field("completion_tokens").unwrap_or(0),
                ..Usage::default()
            });
        }
        let input = field("input_tokens");
        let output = field("output_tokens");
        if input.is_none() && output.is_none() {
            return None;
        }
        Some(Usage {
            input_tokens: input.unwrap_or(0),
            cache_creation_input_tokens: field("cache_creation_input_tokens").unwrap_or(0),
            cache_read_input_tokens: field("cache_read_input_tokens").unwrap_or(0),
            output_tokens: output.unwrap_or(0),
        })
    }
}

/// How a token count was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CountMethod {
    /// Straight from the provider's usage: nothing was appended since, and the model that
    /// reported it is still the one selected.
    Exact,
    /// Provider usage for the covered prefix plus an estimate of what was appended since (or
    /// usage another model reported: see [`ContextTracker::set_model`]).
    UsageEstimate,
    /// Estimated only (no usage recorded yet, or the covered prefix was edited).
    Estimate,
}

impl CountMethod {
    /// `"exact"`, `"usage+estimate"` or `"estimate"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CountMethod::Exact => "exact",
            CountMethod::UsageEstimate => "usage+estimate",
            CountMethod::Estimate => "estimate",
        }
    }
}

/// A token count and how it was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCount {
    /// Tokens in the context.
    pub tokens: u64,
    /// How `tokens` was obtained.
    pub method: CountMethod,
}

#[derive(Debug, Clone, Copy)]
struct Anchor {
    /// Messages covered by the usage.
    covered: usize,
    /// The usage total.
    tokens: u64,
    /// The model that reported it (an index into `ContextTracker::models`).
    model: usize,
}

/// A model's correction factor.
#[derive(Debug, Clone)]
struct ModelCorrection {
    /// The model's name; empty for the model a tracker starts with before any is named.
    name: String,
    /// usage / estimate, smoothed and clamped.
    factor: f64,
}

/// Tracks the token size of a growing conversation.
///
/// Push messages as they are added (the assistant's response included), then record the
/// response's usage with [`ContextTracker::record_usage`]. Each message is estimated once, when
/// pushed, block by block through a content-hash cache, so a turn costs O(new bytes); replacing
/// the history (after compaction) re-estimates only blocks not seen before.
///
/// Each model has its own correction factor ([`ContextTracker::set_model`]): models of one
/// tokenizer family still count the same text differently, and a conversation that moves to
/// another model (a fallback after an overload) must not price its estimates with the usage of
/// the first.
#[derive(Debug)]
pub struct ContextTracker {
    family: Family,
    system: u64,
    tools: u64,
    /// The content key of the system prompt; `None` for none (`null`, `""` and `[]` alike: each
    /// costs nothing, so switching between them changes nothing the usage anchor covers).
    system_key: Option<u64>,
    /// The content key of the tool definitions; `None` for none, as `system_key`.
    tools_key: Option<u64>,
    /// Raw estimate per message.
    messages: Vec<u64>,
    /// Content hash per message: whether a replaced history kept the anchored prefix.
    message_keys: Vec<u64>,
    /// Sum of `messages`.
    messages_total: u64,
    anchor: Option<Anchor>,
    /// Sum of `messages[..anchor.covered]`.
    anchored_total: u64,
    /// Correction factors, one per model selected so far, in the order first selected.
    models: Vec<ModelCorrection>,
    /// The model usage is recorded for and whose factor scales estimates (index into `models`).
    model: usize,
    cache: HashMap<u64, u64>,
    bytes_estimated: u64,
}

impl ContextTracker {
    /// An empty tracker for `family` with correction 1.0, for a model not named yet.
    pub fn new(family: Family) -> ContextTracker {
        ContextTracker {
            family,
            system: 0,
            tools: 0,
            system_key: None,
            tools_key: None,
            messages: Vec::new(),
            message_keys: Vec::new(),
            messages_total: 0,
            anchor: None,
            anchored_total: 0,
            models: vec![ModelCorrection {
                name: String::new(),
                factor: 1.0,
            }],
            model: 0,
            cache: HashMap::new(),
            bytes_estimated: 0,
        }
    }

    /// The tokenizer family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// Sets the system prompt (a string or text blocks). Invalidates the usage anchor if the
    /// prompt changed; setting the same prompt again (a loop that rebuilds its request every
    /// turn) keeps it and costs no estimation.
    pub fn set_system(&mut self, system: &Value) {
        let key = part_key(system);
        if self.system_key == key {
            return;
        }
        self.system = self.estimate_content(system);
        self.system_key = key;
        self.anchor = None;
    }

    /// Sets the tool definitions. Invalidates the usage anchor if they changed (as
    /// [`Self::set_system`]).
    pub fn set_tools(&mut self, tools: &Value) {
        let key = part_key(tools);
        if self.tools_key == key {
            return;
        }
        self.bytes_estimated += json_len(tools);
        self.tools = estimate_tools(tools, self.family);
        self.tools_key = key;
        self.anchor = None;
    }

    /// [`Self::set_system`] for a prompt a caller hands in: anything but a string, an array of
    /// blocks or `null` (none) is refused and the tracker left unchanged (what the bindings'
    /// `set_system` do).
    pub fn try_set_system(&mut self, system: &Value) -> Result<(), NotARequestPart> {
        if !matches!(system, Value::String(_) | Value::Array(_) | Value::Null) {
            return Err(NotARequestPart::System(json_kind(system)));
        }
        self.set_system(system);
        Ok(())
    }

    /// [`Self::set_tools`] for definitions a caller hands in: anything but an array or `null`
    /// (none) is refused and the tracker left unchanged (what the bindings' `set_tools` do).
    pub fn try_set_tools(&mut self, tools: &Value) -> Result<(), NotARequestPart> {
        if !matches!(tools, Value::Array(_) | Value::Null) {
            return Err(NotARequestPart::Tools(json_kind(tools)));
        }
        self.set_tools(tools);
        Ok(())
    }

    /// Appends a message (`{"role": .., "content": ..}`, or an OpenAI Responses input item),
    /// estimated as [`estimate_message`](super::estimate_message) does.
    pub fn push_message(&mut self, message: &Value) {
        let body = match message_body(message) {
            MessageBody::Content(content) => self.estimate_content(content),
            MessageBody::Item(item) => self.estimate_cached(item),
            MessageBody::Nothing => 0,
        };
        let tokens = estimate_message_frame(message, self.family) + body;
        self.messages.push(tokens);
        self.message_keys.push(content_key(message));
        self.messages_total += tokens;
    }

    /// [`Self::push_message`] for a message a caller hands in: anything but a JSON object is
    /// refused and the tracker left unchanged (what the bindings' `push_message` do).
    pub fn try_push_message(&mut self, message: &Value) -> Result<(), NotAMessage> {
        if !message.is_object() {
            return Err(NotAMessage::Pushed(json_kind(message)));
        }
        self.push_message(message);
        Ok(())
    }

    /// [`Self::replace_messages`] for a history a caller hands in: a history holding anything
    /// but JSON objects is refused, naming the first such entry, and the tracker left unchanged.
    pub fn try_replace_messages(&mut self, messages: &[Value]) -> Result<(), NotAMessage> {
        if let Some(index) = messages.iter().position(|m| !m.is_object()) {
            return Err(NotAMessage::InHistory {
                index,
                kind: json_kind(&messages[index]),
            });
        }
        self.replace_messages(messages);
        Ok(())
    }

    /// Replaces the whole history (e.g. after compaction, or a host that rebuilds its history
    /// every turn). Blocks seen before come from the cache. The usage anchor survives when the
    /// new history starts with the very messages it covered (same content, in order); any change
    /// to them (compaction, an edited earlier message, even of the same length) drops it.
    pub fn replace_messages(&mut self, messages: &[Value]) {
        let anchor = self.anchor.take();
        let old_keys = std::mem::take(&mut self.message_keys);
        self.messages.clear();
        self.messages_total = 0;
        for message in messages {
            self.push_message(message);
        }
        if let Some(anchor) = anchor
            && old_keys.get(..anchor.covered) == self.message_keys.get(..anchor.covered)
        {
            self.anchor = Some(anchor);
            self.anchored_total = self.messages[..anchor.covered].iter().sum();
        }
    }

    /// Drops messages from index `len` on; the anchor survives if it covered no dropped message.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.messages.len() {
            return;
        }
        self.messages.truncate(len);
        self.message_keys.truncate(len);
        self.messages_total = self.messages.iter().sum();
        if self.anchor.is_some_and(|a| a.covered > len) {
            self.anchor = None;
        }
    }

    /// Number of messages tracked.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether no message is tracked.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Records a response's usage as covering every message pushed so far (push the response's
    /// own message first), and updates the correction factor.
    pub fn record_usage(&mut self, usage: Usage) {
        self.record_usage_at(usage, self.messages.len());
    }

    /// Records usage covering the first `covered` messages (more than the messages tracked
    /// counts as all of them).
    ///
    /// The correction factor moves toward the usage / estimate ratio of the covered prefix,
    /// the ratio clamped to the factor's range first, so one absurd report cannot push the
    /// factor to a bound by itself.
    ///
    /// Usage with no prompt tokens (`input + cache_creation + cache_read == 0`) is ignored: every
    /// request has a prompt, so such usage is missing rather than measured (a proxy that reports
    /// only `output_tokens`, a stream cut before `message_start`'s usage), and anchoring to it
    /// would make a full context look empty to the budget.
    pub fn record_usage_at(&mut self, usage: Usage, covered: usize) {
        if usage.input_total() == 0 {
            return;
        }
        let covered = covered.min(self.messages.len());
        let covered_messages: u64 = self.messages[..covered].iter().sum();
        let raw = self.fixed() + covered_messages;
        let total = usage.total();
        if raw >= CORRECTION_MIN_TOKENS && total > 0 {
            // One observation moves the factor by at most `CORRECTION_ALPHA` of the range: a
            // ratio outside it is no tokenizer drift but a bad report (a proxy's cumulative
            // usage, a count near `u64::MAX`), and taken whole it set the factor to a bound at
            // once, skewing every estimate for the turns it took to decay.
            let ratio = (total as f64 / raw as f64).clamp(CORRECTION_MIN, CORRECTION_MAX);
            let factor = &mut self.models[self.model].factor;
            let blended = CORRECTION_ALPHA * ratio + (1.0 - CORRECTION_ALPHA) * *factor;
            *factor = blended.clamp(CORRECTION_MIN, CORRECTION_MAX);
        }
        self.anchor = Some(Anchor {
            covered,
            tokens: total,
            model: self.model,
        });
        self.anchored_total = covered_messages;
    }

    /// The current model's correction factor (usage / estimate, smoothed and clamped to
    /// [[`CORRECTION_MIN`], [`CORRECTION_MAX`]]).
    pub fn correction(&self) -> f64 {
        self.models[self.model].factor
    }

    /// Sets the current model's correction factor (e.g. carried over from an earlier session
    /// with the same model), clamped to its range. A value that is not a positive finite
    /// number is refused and the factor kept.
    pub fn set_correction(&mut self, correction: f64) -> Result<(), InvalidCorrection> {
        if !(correction.is_finite() && correction > 0.0) {
            return Err(InvalidCorrection(correction));
        }
        self.models[self.model].factor = correction.clamp(CORRECTION_MIN, CORRECTION_MAX);
        Ok(())
    }

    /// Selects the model the next requests go to: usage recorded from now on moves its
    /// correction factor, and estimates are scaled by it.
    ///
    /// - A model selected before gets back the factor it had.
    /// - A model selected for the first time starts from the current model's factor (most
    ///   often a model of the same family, the best guess until its own usage arrives).
    /// - While the unnamed model is selected (a new tracker, or `""` selected), the next model
    ///   named takes it over: usage recorded before counts as that model's.
    ///
    /// The usage anchor stays (the other model's count of the prefix is closer than an
    /// estimate), but [`tokens`](Self::tokens) no longer calls it exact until the selected
    /// model reports usage of its own.
    pub fn set_model(&mut self, model: &str) {
        if let Some(index) = self.model_index(model) {
            self.model = index;
        } else if self.models[self.model].name.is_empty() {
            self.models[self.model].name = model.to_owned();
        } else {
            let factor = self.models[self.model].factor;
            self.models.push(ModelCorrection {
                name: model.to_owned(),
                factor,
            });
            self.model = self.models.len() - 1;
        }
    }

    /// The model selected by [`set_model`](Self::set_model); empty before any is.
    pub fn model(&self) -> &str {
        &self.models[self.model].name
    }

    /// The correction factor of `model`, if it was ever selected.
    pub fn correction_for(&self, model: &str) -> Option<f64> {
        self.model_index(model)
            .map(|index| self.models[index].factor)
    }

    /// Where `model`'s correction is kept in `models`, if it was ever selected.
    fn model_index(&self, model: &str) -> Option<usize> {
        self.models.iter().position(|m| m.name == model)
    }

    /// Tokens in the context now, and how they were obtained.
    pub fn tokens(&self) -> TokenCount {
        match self.anchor {
            Some(anchor) if anchor.covered == self.messages.len() && anchor.model == self.model => {
                TokenCount {
                    tokens: anchor.tokens,
                    method: CountMethod::Exact,
                }
            }
            Some(anchor) => TokenCount {
                // Saturating: the anchor is a caller's usage, possibly near `u64::MAX`.
                tokens: anchor
                    .tokens
                    .saturating_add(self.corrected(self.messages_total - self.anchored_total)),
                method: CountMethod::UsageEstimate,
            },
            None => TokenCount {
                tokens: self.corrected(self.fixed() + self.messages_total),
                method: CountMethod::Estimate,
            },
        }
    }

    /// Total bytes fed to the estimator so far (cache hits cost nothing): the work counter
    /// behind the O(new bytes) guarantee.
    pub fn bytes_estimated(&self) -> u64 {
        self.bytes_estimated
    }

    fn fixed(&self) -> u64 {
        self.system + self.tools + Overheads::of(self.family).per_request
    }

    fn corrected(&self, raw: u64) -> u64 {
        (raw as f64 * self.correction()).ceil() as u64
    }

    fn estimate_content(&mut self, content: &Value) -> u64 {
        match content {
            Value::Array(blocks) => blocks.iter().map(|b| self.estimate_cached(b)).sum(),
            Value::Null => 0,
            other => self.estimate_cached(other),
        }
    }

    fn estimate_cached(&mut self, block: &Value) -> u64 {
        let key = content_key(block);
        if let Some(&tokens) = self.cache.get(&key) {
            return tokens;
        }
        self.bytes_estimated += json_len(block);
        let tokens = match block {
            Value::String(text) => estimate_text(text, self.family),
            other => estimate_block(other, self.family),
        };
        if self.cache.len() >= CACHE_CAPACITY {
            self.cache.clear();
        }
        self.cache.insert(key, tokens);
        tokens
    }
}

/// Approximate byte size of a value's text (strings' lengths plus a few bytes per node).
fn json_len(value: &Value) -> u64 {
    match value {
        Value::String(s) => s.len() as u64,
        Value::Array(items) => items.iter().map(json_len).sum::<u64>() + 2,
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.len() as u64 + json_len(v) + 4)
            .sum(),
        Value::Number(_) => 8,
        Value::Bool(_) | Value::Null => 4,
    }
}

/// The key of a system prompt or of tool definitions: `None` for none (`null`, `""`, `[]`), as a
/// new tracker has, so that saying "none" another way keeps the usage anchor.
fn part_key(value: &Value) -> Option<u64> {
    match value {
        Value::Null => None,
        Value::String(text) if text.is_empty() => None,
        Value::Array(items) if items.is_empty() => None,
        other => Some(content_key(other)),
    }
}

fn content_key(value: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    hash_value(value, &mut hasher);
    hasher.finish()
}

/// Hashes a JSON value structurally (key order included, as it is in the request).
fn hash_value(value: &Value, hasher: &mut DefaultHasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => (2u8, n.to_string()).hash(hasher),
        Value::String(s) => (3u8, s).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                hash_value(item, hasher);
            }
        }
        Value::Object(map) => {
            (5u8, map.len()).hash(hasher);
            for (k, v) in map {
                k.hash(hasher);
                hash_value(v, hasher);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::tokens::request::estimate_request;
    use serde_json::json;

    fn user(i: usize) -> Value {
        json!({"role": "user", "content": [{"type": "text", "text": format!("message number {i}: {}", "lorem ipsum dolor ".repeat(20))}]})
    }

    #[test]
    fn estimate_matches_the_request_estimate_without_usage() {
        let mut t = ContextTracker::new(Family::Claude);
        let system = json!("You are terse.");
        let tools =
            json!([{"name": "ls", "description": "list", "input_schema": {"type": "object"}}]);
        t.set_system(&system);
        t.set_tools(&tools);
        let mut messages: Vec<Value> = (0..5).map(user).collect();
        // OpenAI Responses items and entries that are no message objects count the same way.
        messages.extend([
            json!({"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "a.txt b.txt"}),
            json!("a bare string"),
            json!(3),
            Value::Null,
        ]);
        for m in &messages {
            t.push_message(m);
        }
        let expected = estimate_request(Some(&system), Some(&tools), &messages, Family::Claude);
        assert_eq!(
            t.tokens(),
            TokenCount {
                tokens: expected.total(),
                method: CountMethod::Estimate
            }
        );
    }

    #[test]
    fn usage_anchors_and_new_messages_are_estimated() {
        let mut t = ContextTracker::new(Family::Claude);
        t.push_message(&user(0));
        t.push_message(&json!({"role": "assistant", "content": "ok"}));
        t.record_usage(Usage {
            input_tokens: 10,
            cache_read_input_tokens: 990,
            output_tokens: 20,
            ..Usage::default()
        });
        assert_eq!(
            t.tokens(),
            TokenCount {
                tokens: 1020,
                method: CountMethod::Exact
            }
        );
        t.push_message(&user(1));
        let after = t.tokens();
        assert_eq!(after.method, CountMethod::UsageEstimate);
        let raw = estimate_message_frame(&user(1), Family::Claude)
            + estimate_block(&user(1)["content"][0], Family::Claude);
        assert_eq!(
            after.tokens,
            1020 + (raw as f64 * t.correction()).ceil() as u64
        );
        // Truncating below the anchor invalidates it.
        t.truncate(1);
        assert_eq!(t.tokens().method, CountMethod::Estimate);
    }

    #[test]
    fn correction_learns_and_clamps() {
        let mut t = ContextTracker::new(Family::Claude);
        for i in 0..3 {
            t.push_message(&user(i));
        }
        let raw = t.tokens().tokens;
        assert!(raw >= CORRECTION_MIN_TOKENS);
        t.record_usage(Usage {
            input_tokens: raw * 12 / 10,
            ..Usage::default()
        });
        assert!(t.correction() > 1.0 && t.correction() < 1.2);
        for _ in 0..50 {
            t.record_usage(Usage {
                input_tokens: raw * 10,
                ..Usage::default()
            });
        }
        // Each observation is clamped to the range first: the factor nears the bound.
        assert!(t.correction() > CORRECTION_MAX - 1e-6 && t.correction() <= CORRECTION_MAX);
        for _ in 0..50 {
            t.record_usage(Usage {
                input_tokens: 1,
                ..Usage::default()
            });
        }
        assert!(t.correction() >= CORRECTION_MIN && t.correction() < CORRECTION_MIN + 1e-6);
        let learned = t.correction();
        for invalid in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
            let error = t.set_correction(invalid).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with("the correction factor must be a positive")
            );
            assert_eq!(t.correction(), learned);
        }
        assert_eq!(t.set_correction(9.0), Ok(()));
        assert_eq!(t.correction(), CORRECTION_MAX);
    }

    /// Records usage `ratio` times `raw`, the tracker's uncorrected estimate of what it holds.
    fn report(t: &mut ContextTracker, raw: u64, ratio: f64) {
        t.record_usage(Usage {
            input_tokens: (raw as f64 * ratio) as u64,
            ..Usage::default()
        });
    }

    #[test]
    fn each_model_learns_its_own_correction() {
        let mut t = ContextTracker::new(Family::Claude);
        for i in 0..3 {
            t.push_message(&user(i));
        }
        assert_eq!(t.model(), "");
        let raw = t.tokens().tokens;
        // The first model named is the one the tracker was tracking: it keeps what was learnt.
        report(&mut t, raw, 1.3);
        let learned = t.correction();
        assert!(learned > 1.05, "{learned}");
        t.set_model("model-a");
        assert_eq!(t.model(), "model-a");
        assert_eq!(t.correction(), learned);
        assert_eq!(t.correction_for("model-a"), Some(learned));
        assert_eq!(t.correction_for(""), None);
        for _ in 0..20 {
            report(&mut t, raw, 1.4);
        }
        let a = t.correction();
        assert!((a - 1.4).abs() < 0.01, "{a}");
        // A new model starts from the current factor, then learns on its own.
        t.set_model("model-b");
        assert_eq!(t.correction(), a);
        for _ in 0..20 {
            report(&mut t, raw, 0.9);
        }
        let b = t.correction();
        assert!((b - 0.9).abs() < 0.01, "{b}");
        assert_eq!(t.correction_for("model-a"), Some(a));
        // Back to the first model: its factor is as it left it, and estimates use it.
        t.set_model("model-a");
        assert_eq!(t.correction(), a);
        t.push_message(&user(99));
        let before = t.tokens();
        assert_eq!(before.method, CountMethod::UsageEstimate);
        t.set_model("model-b");
        let after = t.tokens();
        assert!(after.tokens < before.tokens, "{after:?} vs {before:?}");
        assert_eq!(t.correction_for("model-c"), None);
        // Setting a factor sets the current model's only.
        assert_eq!(t.set_correction(1.2), Ok(()));
        assert_eq!(t.correction_for("model-b"), Some(1.2));
        assert_eq!(t.correction_for("model-a"), Some(a));
    }

    #[test]
    fn usage_of_another_model_is_not_exact() {
        let mut t = ContextTracker::new(Family::Claude);
        t.set_model("model-a");
        for i in 0..3 {
            t.push_message(&user(i));
        }
        t.record_usage(Usage {
            input_tokens: 5_000,
            ..Usage::default()
        });
        let exact = TokenCount {
            tokens: 5_000,
            method: CountMethod::Exact,
        };
        assert_eq!(t.tokens(), exact);
        // Selecting the same model again changes nothing.
        t.set_model("model-a");
        assert_eq!(t.tokens(), exact);
        // Another model's count of the prefix is kept, but is no longer exact.
        t.set_model("model-b");
        assert_eq!(
            t.tokens(),
            TokenCount {
                tokens: 5_000,
                method: CountMethod::UsageEstimate,
            }
        );
        t.set_model("model-a");
        assert_eq!(t.tokens(), exact);
        // Once the selected model reports, its count is exact again.
        t.set_model("model-b");
        t.record_usage(Usage {
            input_tokens: 5_200,
            ..Usage::default()
        });
        assert_eq!(
            t.tokens(),
            TokenCount {
                tokens: 5_200,
                method: CountMethod::Exact,
            }
        );
    }

    #[test]
    fn a_turn_costs_only_its_new_bytes() {
        let mut t = ContextTracker::new(Family::Claude);
        let messages: Vec<Value> = (0..200).map(user).collect();
        let mut last = 0;
        for m in &messages {
            t.push_message(m);
            let turn = t.bytes_estimated() - last;
            assert!(turn <= json_len(m), "turn re-estimated old bytes: {turn}");
            last = t.bytes_estimated();
            let _ = t.tokens();
        }
        // Re-syncing after compaction only estimates the new summary block.
        let before = t.bytes_estimated();
        let mut compacted = vec![
            json!({"role": "user", "content": [{"type": "text", "text": "summary of the earlier turns"}]}),
        ];
        compacted.extend_from_slice(&messages[150..]);
        t.replace_messages(&compacted);
        assert!(t.bytes_estimated() - before <= 64);
        assert_eq!(t.len(), 51);
    }

    #[test]
    fn usage_from_json() {
        let anthropic = json!({"input_tokens": 5, "cache_creation_input_tokens": 7, "cache_read_input_tokens": 11, "output_tokens": 13});
        assert_eq!(Usage::from_json(&anthropic).unwrap().total(), 36);
        let openai = json!({"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105});
        assert_eq!(Usage::from_json(&openai).unwrap().total(), 105);
        assert_eq!(Usage::from_json(&json!({"foo": 1})), None);
    }

    #[test]
    fn a_callers_usage_with_a_count_that_is_not_one_is_refused() {
        let parsed = |v: Value| Usage::parse(&v);
        assert_eq!(
            parsed(
                json!({"input_tokens": 5, "cache_read_input_tokens": null, "output_tokens": 2, "service_tier": "standard"})
            ),
            Ok(Usage {
                input_tokens: 5,
                output_tokens: 2,
                ..Usage::default()
            })
        );
        assert_eq!(
            parsed(json!({"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10})),
            Usage::from_json(&json!({"prompt_tokens": 9, "completion_tokens": 1}))
                .ok_or(InvalidUsage::NoCounts)
        );
        for (usage, field) in [
            (
                json!({"input_tokens": -5, "output_tokens": 3}),
                "input_tokens",
            ),
            (
                json!({"input_tokens": 1500.5, "output_tokens": 3}),
                "input_tokens",
            ),
            (
                json!({"input_tokens": 100, "cache_read_input_tokens": "900"}),
                "cache_read_input_tokens",
            ),
            (json!({"input_tokens": 1e20}), "input_tokens"),
            (
                json!({"prompt_tokens": 100, "completion_tokens": -1}),
                "completion_tokens",
            ),
        ] {
            match parsed(usage.clone()) {
                Err(InvalidUsage::NotACount { field: found, .. }) => {
                    assert_eq!(found, field, "{usage}");
                }
                other => panic!("{usage}: {other:?}"),
            }
        }
        for nothing in [json!({"foo": 1}), json!([1]), json!(3), Value::Null] {
            assert_eq!(parsed(nothing), Err(InvalidUsage::NoCounts));
        }
        let error = parsed(json!({"input_tokens": -5})).unwrap_err().to_string();
        assert_eq!(
            error,
            "usage field `input_tokens` must be a non-negative integer, got -5"
        );
    }

    /// A host that hands over its whole history every turn keeps the usage anchor for the
    /// prefix the usage covered; compaction or an edit inside that prefix drops it.
    #[test]
    fn replacing_the_history_keeps_the_anchor_only_for_an_unchanged_prefix() {
        let history: Vec<Value> = (0..4).map(user).collect();
        let anchored = || {
            let mut t = ContextTracker::new(Family::Claude);
            t.replace_messages(&history[..2]);
            t.record_usage(Usage {
                input_tokens: 5_000,
                ..Usage::default()
            });
            t
        };
        // The same history again: still exact.
        let mut t = anchored();
        t.replace_messages(&history[..2]);
        assert_eq!(
            t.tokens(),
            TokenCount {
                tokens: 5_000,
                method: CountMethod::Exact
            }
        );
        // The same history and two new messages: the usage plus their estimate.
        t.replace_messages(&history);
        let mut pushed = anchored();
        pushed.push_message(&history[2]);
        pushed.push_message(&history[3]);
        assert_eq!(t.tokens(), pushed.tokens());
        assert_eq!(t.tokens().method, CountMethod::UsageEstimate);
        // An earlier message edited, same length: the usage no longer stands.
        let mut edited = history.clone();
        let text = edited[1]["content"][0]["text"]
            .as_str()
            .unwrap()
            .replace('l', "L");
        edited[1]["content"][0]["text"] = json!(text);
        let mut t = anchored();
        t.replace_messages(&edited);
        assert_eq!(t.tokens().method, CountMethod::Estimate);
        // Compacted (shorter, or a different first message): neither.
        let mut t = anchored();
        t.replace_messages(&history[..1]);
        assert_eq!(t.tokens().method, CountMethod::Estimate);
        let mut t = anchored();
        t.replace_messages(&history[1..]);
        assert_eq!(t.tokens().method, CountMethod::Estimate);
        // Truncating within the prefix and replacing with it again does not bring it back.
        let mut t = anchored();
        t.truncate(1);
        t.replace_messages(&history[..2]);
        assert_eq!(t.tokens().method, CountMethod::Estimate);
    }

    #[test]
    fn messages_handed_in_must_be_objects() {
        let mut t = ContextTracker::new(Family::Claude);
        t.push_message(&user(0));
        let before = t.tokens();
        assert_eq!(
            t.try_push_message(&json!("hello")),
            Err(NotAMessage::Pushed("a string"))
        );
        let error = t.try_replace_messages(&[user(1), json!(3)]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "message 1 must be a JSON object (a message or an OpenAI Responses item), got a number"
        );
        assert_eq!((t.len(), t.tokens()), (1, before));
        assert_eq!(t.try_push_message(&user(1)), Ok(()));
        assert_eq!(t.try_replace_messages(&[user(2)]), Ok(()));
        assert_eq!(t.len(), 1);
    }

    /// A tool definition not in a list counted as no tools, without a word; C refused it, and
    /// Python and Node took it.
    #[test]
    fn a_system_prompt_or_tools_in_no_request_shape_are_refused() {
        let mut t = ContextTracker::new(Family::Claude);
        t.try_set_system(&json!("You are terse.")).unwrap();
        t.try_set_tools(&json!([{"name": "ls", "input_schema": {"type": "object"}}]))
            .unwrap();
        t.push_message(&user(0));
        let before = t.tokens();
        let tool = json!({"name": "read", "description": "reads a file", "input_schema": {"type": "object"}});
        assert_eq!(
            t.try_set_tools(&tool).unwrap_err().to_string(),
            "the tool definitions must be an array or null, got an object"
        );
        assert_eq!(
            t.try_set_system(&json!({"type": "text", "text": "one block"})),
            Err(NotARequestPart::System("an object"))
        );
        for bad in [json!(3), json!(true)] {
            assert!(t.try_set_system(&bad).is_err(), "{bad}");
            assert!(t.try_set_tools(&bad).is_err(), "{bad}");
        }
        assert!(t.try_set_tools(&json!("ls")).is_err());
        assert_eq!(t.tokens(), before);
        // `null` is none, a list of blocks a prompt.
        t.try_set_tools(&Value::Null).unwrap();
        t.try_set_system(&json!([{"type": "text", "text": "You are terse."}]))
            .unwrap();
        t.try_set_system(&Value::Null).unwrap();
        assert!(t.tokens().tokens < before.tokens);
    }

    #[test]
    fn setting_the_same_system_and_tools_keeps_the_anchor() {
        let system = json!("You are terse.");
        let tools =
            json!([{"name": "ls", "description": "list", "input_schema": {"type": "object"}}]);
        let mut t = ContextTracker::new(Family::Claude);
        t.set_system(&system);
        t.set_tools(&tools);
        t.push_message(&user(0));
        t.record_usage(Usage {
            input_tokens: 700,
            ..Usage::default()
        });
        let bytes = t.bytes_estimated();
        // A loop that rebuilds its request each turn sets the same prompt and tools again.
        t.set_system(&system);
        t.set_tools(&tools);
        assert_eq!(
            t.tokens(),
            TokenCount {
                tokens: 700,
                method: CountMethod::Exact
            }
        );
        assert_eq!(t.bytes_estimated(), bytes);
        // A changed prompt still invalidates the anchor, and is counted.
        t.set_system(&json!("You are verbose and thorough."));
        assert_eq!(t.tokens().method, CountMethod::Estimate);
        let before = t.tokens().tokens;
        t.set_tools(&json!([]));
        assert!(t.tokens().tokens < before);
    }

    /// `null`, `""` and `[]` all say "no system prompt" or "no tools", as a new tracker has:
    /// saying it another way keeps the usage anchor. It dropped it, and the count fell from the
    /// provider's usage to the bare estimate (about 40% of it here), so a budget check could miss
    /// a compaction.
    #[test]
    fn no_system_prompt_or_tools_said_another_way_keeps_the_anchor() {
        let mut t = ContextTracker::new(Family::Claude);
        t.push_message(&json!({"role": "user", "content": "hello ".repeat(200)}));
        t.record_usage(Usage {
            input_tokens: 1_000,
            ..Usage::default()
        });
        let exact = TokenCount {
            tokens: 1_000,
            method: CountMethod::Exact,
        };
        for none in [Value::Null, json!(""), json!([]), Value::Null] {
            t.set_system(&none);
            t.set_tools(&none);
            assert_eq!(t.tokens(), exact, "{none}");
        }
        // Each is no tokens: a prompt set and then taken away counts the same way.
        t.set_system(&json!("You are terse."));
        assert_eq!(t.tokens().method, CountMethod::Estimate);
        let with_prompt = t.tokens().tokens;
        for none in [json!(""), json!([]), Value::Null] {
            t.set_system(&json!("You are terse."));
            t.set_system(&none);
            assert!(t.tokens().tokens < with_prompt, "{none}");
        }
        // On a tracker without usage, each "none" counts nothing.
        let mut bare = ContextTracker::new(Family::Claude);
        bare.push_message(&json!({"role": "user", "content": "hello ".repeat(200)}));
        let without = bare.tokens();
        for none in [Value::Null, json!(""), json!([])] {
            bare.set_system(&json!("You are terse."));
            bare.set_tools(&json!([{"name": "ls", "input_schema": {"type": "object"}}]));
            bare.set_system(&none);
            bare.set_tools(&none);
            assert_eq!(bare.tokens(), without, "{none}");
        }
    }

    #[test]
    fn usage_without_prompt_tokens_does_not_anchor() {
        let mut t = ContextTracker::new(Family::Claude);
        for i in 0..3 {
            t.push_message(&user(i));
        }
        t.record_usage(Usage {
            input_tokens: 900,
            ..Usage::default()
        });
        let correction = t.correction();
        t.push_message(&json!({"role": "assistant", "content": "done"}));
        let before = t.tokens();
        assert_eq!(before.method, CountMethod::UsageEstimate);
        // Only the output reported: the prompt's size is unknown, not zero.
        t.record_usage(Usage::from_json(&json!({"output_tokens": 50})).unwrap());
        assert_eq!(t.tokens(), before);
        assert_eq!(t.correction(), correction);
        t.record_usage(Usage::default());
        assert_eq!(t.tokens(), before);
    }

    /// One absurd report moved the factor straight to its bound (1.6 from 1.0, every later
    /// estimate 60% high while it decayed over the next turns); now by at most
    /// `CORRECTION_ALPHA` of the distance to it.
    #[test]
    fn one_absurd_usage_moves_the_correction_only_one_step() {
        for (input_tokens, bound) in [(u64::MAX, CORRECTION_MAX), (1, CORRECTION_MIN)] {
            let mut t = ContextTracker::new(Family::Claude);
            for i in 0..3 {
                t.push_message(&user(i));
            }
            t.record_usage(Usage {
                input_tokens,
                ..Usage::default()
            });
            let expected = (1.0 - CORRECTION_ALPHA) + CORRECTION_ALPHA * bound;
            assert!(
                (t.correction() - expected).abs() < 1e-12,
                "{input_tokens}: {}",
                t.correction()
            );
        }
    }

    #[test]
    fn absurd_usage_saturates_instead_of_overflowing() {
        let huge = json!({"input_tokens": u64::MAX, "cache_read_input_tokens": 7, "output_tokens": u64::MAX});
        assert_eq!(Usage::from_json(&huge).unwrap().total(), u64::MAX);
        let mut t = ContextTracker::new(Family::Claude);
        t.push_message(&user(0));
        t.record_usage(Usage::from_json(&huge).unwrap());
        t.push_message(&user(1));
        assert_eq!(t.tokens().tokens, u64::MAX);
    }
}
