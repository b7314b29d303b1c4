//! OpenAI Responses stream decoding (see [`OpenAiResponsesDecoder`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::EventDecoder;
use super::error::{DecodeError, ProtocolError};
use super::events::DecodeEvent;
use super::json_str;

type Object = Map<String, Value>;

/// OpenAI Responses streaming: `response.*` events.
///
/// The snapshot starts from `response.created`; output items, content parts, text and function
/// call arguments accumulate from the delta events; `*.done` events replace the piece they name
/// with its final value; `response.completed` (or `response.incomplete`) carries the
/// authoritative final response, which replaces the snapshot. A function call is sealed at
/// `response.function_call_arguments.done` (or its `response.output_item.done`, whichever comes
/// first).
#[derive(Debug)]
pub struct OpenAiResponsesDecoder {
    snapshot: Option<Object>,
    /// Per output index: the function call there has been sealed.
    sealed: Vec<bool>,
    done: bool,
    failure: Option<DecodeError>,
    events: Vec<DecodeEvent>,
    record: bool,
}

impl Default for OpenAiResponsesDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// `response.output_text.delta`, borrowed: the hot path.
#[derive(Deserialize)]
struct TextDelta<'a> {
    output_index: usize,
    #[serde(default)]
    content_index: usize,
    #[serde(borrow)]
    delta: Cow<'a, str>,
}

fn malformed(event_type: &str, detail: &str) -> DecodeError {
    ProtocolError::Malformed {
        event_type: event_type.to_owned(),
        detail: detail.to_owned(),
    }
    .into()
}

fn index_field(event: &Object, key: &str, event_type: &str) -> Result<usize, DecodeError> {
    event
        .get(key)
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < 1 << 20)
        .ok_or_else(|| malformed(event_type, &format!("missing `{key}`")))
}

impl OpenAiResponsesDecoder {
    /// A decoder waiting for `response.created`.
    pub fn new() -> Self {
        Self {
            snapshot: None,
            sealed: Vec::new(),
            done: false,
            failure: None,
            events: Vec::new(),
            record: true,
        }
    }

    fn emit(&mut self, event: impl FnOnce() -> DecodeEvent) {
        if self.record {
            self.events.push(event());
        }
    }

    fn snapshot_mut(&mut self, event_type: &str) -> Result<&mut Object, DecodeError> {
        if self.done {
            return Err(ProtocolError::AfterEnd {
                event_type: event_type.to_owned(),
            }
            .into());
        }
        self.snapshot.as_mut().ok_or_else(|| {
            ProtocolError::BeforeStart {
                event_type: event_type.to_owned(),
            }
            .into()
        })
    }

    fn output_mut(&mut self, event_type: &str) -> Result<&mut Vec<Value>, DecodeError> {
        let snapshot = self.snapshot_mut(event_type)?;
        let output = snapshot
            .entry("output")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !output.is_array() {
            *output = Value::Array(Vec::new());
        }
        match output {
            Value::Array(items) => Ok(items),
            _ => Err(malformed(event_type, "`output` is not a list")),
        }
    }

    fn item_mut(&mut self, event_type: &str, index: usize) -> Result<&mut Object, DecodeError> {
        self.output_mut(event_type)?
            .get_mut(index)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| {
                ProtocolError::UnknownIndex {
                    event_type: event_type.to_owned(),
                    index: index as u64,
                }
                .into()
            })
    }

    fn part_mut(
        &mut self,
        event_type: &str,
        index: usize,
        part: usize,
    ) -> Result<&mut Object, DecodeError> {
        self.item_mut(event_type, index)?
            .get_mut("content")
            .and_then(Value::as_array_mut)
            .and_then(|parts| parts.get_mut(part))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| {
                ProtocolError::UnknownIndex {
                    event_type: event_type.to_owned(),
                    index: part as u64,
                }
                .into()
            })
    }

    fn on_text_delta(
        &mut self,
        event_type: &str,
        data: &str,
        field: &str,
    ) -> Result<(), DecodeError> {
        let delta: TextDelta<'_> =
            serde_json::from_str(data).map_err(|e| DecodeError::json(event_type, e))?;
        let part = self.part_mut(event_type, delta.output_index, delta.content_index)?;
        match part.get_mut(field) {
            Some(Value::String(text)) => text.push_str(&delta.delta),
            _ => {
                part.insert(
                    field.to_owned(),
                    Value::String(delta.delta.clone().into_owned()),
                );
            }
        }
        let index = delta.output_index;
        if field == "text" {
            self.emit(|| DecodeEvent::TextDelta {
                index,
                text: delta.delta.into_owned(),
            });
        } else {
            self.emit(|| DecodeEvent::RefusalDelta {
                index,
                refusal: delta.delta.into_owned(),
            });
        }
        Ok(())
    }

    /// Seals the function call at `index` with `arguments` (the final text when known).
    fn seal(&mut self, index: usize, cut_off: bool) {
        if self.sealed.len() <= index {
            self.sealed.resize(index + 1, false);
        }
        if self.sealed[index] {
            return;
        }
        let item = self
            .snapshot
            .as_ref()
            .and_then(|s| s.get("output"))
            .and_then(|o| o.get(index));
        let Some(item) =
            item.filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call"))
        else {
            return;
        };
        self.sealed[index] = true;
        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let (id, name, arguments) = (field("call_id"), field("name"), field("arguments"));
        let parsed = if json_str::is_json_whitespace(&arguments) {
            Ok(Value::Object(Map::new()))
        } else {
            serde_json::from_str::<Value>(&arguments)
        };
        self.events.push(match parsed {
            Ok(input) => DecodeEvent::ToolUseReady {
                index,
                id,
                name,
                input,
            },
            Err(_) if cut_off => DecodeEvent::ToolUseTruncated {
                index,
                id,
                name,
                partial_json: arguments,
            },
            Err(error) => DecodeEvent::ToolUseInvalid {
                index,
                id,
                name,
                partial_json: arguments,
                error: error.to_string(),
            },
        });
    }

    fn on_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        match event_type {
            "response.output_text.delta" => return self.on_text_delta(event_type, data, "text"),
            "response.refusal.delta" => return self.on_text_delta(event_type, data, "refusal"),
            _ => {}
        }
        let value: Value =
            serde_json::from_str(data).map_err(|e| DecodeError::json(event_type, e))?;
        let Value::Object(mut event) = value else {
            return Err(malformed(event_type, "the event is not an object"));
        };
        match event_type {
            "response.created" => {
                if self.snapshot.is_some() {
                    return Err(ProtocolError::DuplicateStart {
                        event_type: event_type.to_owned(),
                    }
                    .into());
                }
                let Some(Value::Object(response)) = event.remove("response") else {
                    return Err(malformed(event_type, "missing `response`"));
                };
                let message = self.record.then(|| Value::Object(response.clone()));
                self.snapshot = Some(response);
                if let Some(message) = message {
                    self.events.push(DecodeEvent::MessageStart { message });
                }
            }
            "response.in_progress" | "response.queued" => {
                let snapshot = self.snapshot_mut(event_type)?;
                if let Some(Value::Object(response)) = event.remove("response") {
                    for (key, value) in response {
                        if key != "output" {
                            snapshot.insert(key, value);
                        }
                    }
                }
            }
            "response.output_item.added" => {
                let index = index_field(&event, "output_index", event_type)?;
                let item = event.remove("item").unwrap_or(Value::Null);
                let output = self.output_mut(event_type)?;
                if index > output.len() {
                    return Err(ProtocolError::OutOfOrderIndex {
                        index: index as u64,
                        expected: output.len() as u64,
                    }
                    .into());
                }
                if index == output.len() {
                    output.push(item.clone());
                } else {
                    output[index] = item.clone();
                }
                self.emit(|| DecodeEvent::BlockStart { index, block: item });
            }
            "response.output_item.done" => {
                let index = index_field(&event, "output_index", event_type)?;
                let item = event.remove("item").unwrap_or(Value::Null);
                *self
                    .output_mut(event_type)?
                    .get_mut(index)
                    .ok_or_else(|| unknown_index(event_type, index))? = item;
                self.emit(|| DecodeEvent::BlockStop { index });
                self.seal(index, false);
            }
            "response.content_part.added" | "response.content_part.done" => {
                let index = index_field(&event, "output_index", event_type)?;
                let part_index = index_field(&event, "content_index", event_type)?;
                let part = event.remove("part").unwrap_or(Value::Null);
                let item = self.item_mut(event_type, index)?;
                let parts = item
                    .entry("content")
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(parts) = parts else {
                    return Err(malformed(event_type, "`content` is not a list"));
                };
                if part_index < parts.len() {
                    parts[part_index] = part;
                } else if part_index == parts.len() {
                    parts.push(part);
                } else {
                    return Err(unknown_index(event_type, part_index));
                }
            }
            "response.output_text.done" | "response.refusal.done" => {
                let field = if event_type == "response.output_text.done" {
                    "text"
                } else {
                    "refusal"
                };
                let index = index_field(&event, "output_index", event_type)?;
                let part_index = index_field(&event, "content_index", event_type)?;
                if let Some(text) = event.remove(field) {
                    self.part_mut(event_type, index, part_index)?
                        .insert(field.to_owned(), text);
                }
            }
            "response.output_text.annotation.added" => {
                let index = index_field(&event, "output_index", event_type)?;
                let part_index = index_field(&event, "content_index", event_type)?;
                let annotation = event.remove("annotation").unwrap_or(Value::Null);
                let part = self.part_mut(event_type, index, part_index)?;
                match part
                    .entry("annotations")
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    Value::Array(list) => list.push(annotation),
                    other => *other = Value::Array(vec![annotation]),
                }
            }
            "response.function_call_arguments.delta" => {
                let index = index_field(&event, "output_index", event_type)?;
                let Some(Value::String(fragment)) = event.remove("delta") else {
                    return Err(malformed(event_type, "missing `delta`"));
                };
                let item = self.item_mut(event_type, index)?;
                match item.get_mut("arguments") {
                    Some(Value::String(arguments)) => arguments.push_str(&fragment),
                    _ => {
                        item.insert("arguments".to_owned(), Value::String(fragment.clone()));
                    }
                }
                self.emit(|| DecodeEvent::InputJsonDelta {
                    index,
                    partial_json: fragment,
                });
            }
            "response.function_call_arguments.done" => {
                let index = index_field(&event, "output_index", event_type)?;
                if let Some(arguments) = event.remove("arguments") {
                    self.item_mut(event_type, index)?
                        .insert("arguments".to_owned(), arguments);
                }
                self.seal(index, false);
            }
            "response.completed" | "response.incomplete" => {
                self.snapshot_mut(event_type)?;
                let Some(Value::Object(response)) = event.remove("response") else {
                    return Err(malformed(event_type, "missing `response`"));
                };
                let cut_off = response
                    .get("incomplete_details")
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str)
                    == Some("max_output_tokens");
                let count = response
                    .get("output")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let status = response.get("status").cloned().unwrap_or(Value::Null);
                let usage = response.get("usage").cloned().unwrap_or(Value::Null);
                self.snapshot = Some(response);
                for index in 0..count {
                    self.seal(index, cut_off);
                }
                self.emit(|| DecodeEvent::MessageDelta {
                    delta: serde_json::json!({ "status": status }),
                    usage,
                });
                self.done = true;
                self.emit(|| DecodeEvent::MessageStop);
            }
            "response.failed" => {
                let response = event.remove("response").unwrap_or(Value::Null);
                let error = response
                    .get("error")
                    .cloned()
                    .unwrap_or_else(|| response.clone());
                if let Value::Object(response) = response {
                    self.snapshot = Some(response);
                }
                return Err(self.fail(error));
            }
            "error" => return Err(self.fail(Value::Object(event))),
            _ => {
                tracing::debug!(event_type, "unknown event passed through");
                self.emit(|| DecodeEvent::Unknown {
                    event_type: event_type.to_owned(),
                    data: Value::Object(event),
                });
            }
        }
        Ok(())
    }

    fn fail(&mut self, raw: Value) -> DecodeError {
        let error = DecodeError::provider(raw);
        tracing::debug!(%error, "provider error in stream");
        self.failure = error.replay();
        error
    }
}

fn unknown_index(event_type: &str, index: usize) -> DecodeError {
    ProtocolError::UnknownIndex {
        event_type: event_type.to_owned(),
        index: index as u64,
    }
    .into()
}

#[derive(Deserialize)]
struct TypeOnly<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

impl EventDecoder for OpenAiResponsesDecoder {
    fn push_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        match event_type {
            "" | "message" => {
                let peek: TypeOnly<'_> =
                    serde_json::from_str(data).map_err(|e| DecodeError::json(event_type, e))?;
                self.on_event(&peek.kind, data)
            }
            kind => self.on_event(kind, data),
        }
    }

    fn drain_events(&mut self, out: &mut Vec<DecodeEvent>) {
        out.append(&mut self.events);
    }

    fn set_record_events(&mut self, record: bool) {
        self.record = record;
    }

    fn message(&self) -> Value {
        self.snapshot.clone().map_or(Value::Null, Value::Object)
    }

    fn message_json(&self) -> String {
        // The snapshot serialized where it is (`None` is `null`), not copied into a `Value`.
        serde_json::to_string(&self.snapshot).unwrap_or_else(|_| "null".to_owned())
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn finish(&mut self) -> Result<Value, DecodeError> {
        DecodeError::finish_result(
            self.failure.as_ref(),
            self.done,
            self.snapshot.is_some(),
            (
                "the stream ended before `response.created`",
                "the stream ended before `response.completed`",
            ),
            || self.message(),
        )
    }
}
