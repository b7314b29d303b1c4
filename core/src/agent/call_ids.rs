//! Tool call ids made unique within one response, and against the history before it.
//!
//! The history invariant ([`check_tool_pairing`](super::check_tool_pairing)) and the API both
//! need every `tool_use` of a message to have its own id: results are matched to calls by id.
//! A server that sends the same id twice, or an empty one (nothing in the OpenAI-compatible
//! protocol forbids it), would otherwise give two results one id, which the next request cannot
//! carry. Such a call is renamed as it is sealed, before it is submitted, and the response's
//! message is rewritten to match when it completes; ids that are already unique are kept as
//! sent. Some backends number the calls of each response (`call_0` every turn): a call reusing
//! an id of history is renamed the same way, since Anthropic refuses a request whose `tool_use`
//! ids repeat anywhere ("tool_use ids must be unique").

use std::collections::HashSet;

use serde_json::Value;

use crate::decode::DecodeEvent;

/// The ids of one response's sealed tool calls, and the renames made among them.
#[derive(Debug, Default)]
pub(crate) struct ResponseCallIds {
    seen: HashSet<String>,
    /// (content block index, new id) of each renamed call.
    renamed: Vec<(usize, String)>,
}

impl ResponseCallIds {
    /// Ids for a response following `history`: its calls' ids count as taken.
    pub(crate) fn after(history: &[Value]) -> Self {
        let seen = history
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
            .flat_map(super::context::tool_use_ids)
            .collect();
        Self {
            seen,
            renamed: Vec::new(),
        }
    }

    /// Gives a sealed call (`ToolUseReady`, `ToolUseInvalid`) an id no earlier call of this
    /// response has; other events pass through unchanged. `turn` makes the new ids readable
    /// in logs.
    pub(crate) fn dedupe(&mut self, event: DecodeEvent, turn: u32) -> DecodeEvent {
        match event {
            DecodeEvent::ToolUseReady {
                index,
                id,
                name,
                input,
            } => DecodeEvent::ToolUseReady {
                id: self.unique(index, id, turn),
                index,
                name,
                input,
            },
            DecodeEvent::ToolUseInvalid {
                index,
                id,
                name,
                partial_json,
                error,
            } => DecodeEvent::ToolUseInvalid {
                id: self.unique(index, id, turn),
                index,
                name,
                partial_json,
                error,
            },
            other => other,
        }
    }

    fn unique(&mut self, index: usize, id: String, turn: u32) -> String {
        if !id.is_empty() && self.seen.insert(id.clone()) {
            return id;
        }
        let base = format!("toolu_ferroloop_{turn}_{index}");
        let mut fresh = base.clone();
        let mut attempt = 1;
        while !self.seen.insert(fresh.clone()) {
            attempt += 1;
            fresh = format!("{base}_{attempt}");
        }
        tracing::warn!(original = %id, renamed = %fresh, index, "tool call id repeated (in the response or history) or empty; renamed");
        self.renamed.push((index, fresh.clone()));
        fresh
    }

    /// Writes the new ids into the response's message (`content[index].id` of each renamed
    /// `tool_use` block), then gives an id to each `tool_use` block still without one (missing,
    /// empty or not a string): a call the stream sealed under another id than the final message
    /// gives it (a server whose final message lost a `call_id` it had streamed), or never
    /// sealed. No result carries the new id, so the loop answers such a call as not run; with
    /// `"id": ""` history could not be sent again.
    pub(crate) fn apply(&mut self, message: &mut Value, turn: u32) {
        let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
            return;
        };
        for (index, id) in &self.renamed {
            if let Some(block) = content.get_mut(*index)
                && block.get("type").and_then(Value::as_str) == Some("tool_use")
                && let Some(object) = block.as_object_mut()
            {
                object.insert("id".to_owned(), Value::String(id.clone()));
            }
        }
        let without_id = |block: &Value| {
            block.get("type").and_then(Value::as_str) == Some("tool_use")
                && block
                    .get("id")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
        };
        if !content.iter().any(without_id) {
            return;
        }
        // A fresh id must not be one the message already holds (a call never sealed).
        self.seen.extend(
            content
                .iter()
                .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
                .filter_map(|block| block.get("id").and_then(Value::as_str))
                .map(str::to_owned),
        );
        for (index, block) in content.iter_mut().enumerate() {
            if without_id(block)
                && let Some(object) = block.as_object_mut()
            {
                let fresh = self.unique(index, String::new(), turn);
                object.insert("id".to_owned(), Value::String(fresh));
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ready(index: usize, id: &str) -> DecodeEvent {
        DecodeEvent::ToolUseReady {
            index,
            id: id.to_owned(),
            name: "read".to_owned(),
            input: json!({}),
        }
    }

    fn id_of(event: &DecodeEvent) -> &str {
        match event {
            DecodeEvent::ToolUseReady { id, .. } | DecodeEvent::ToolUseInvalid { id, .. } => id,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ids_history_holds_are_taken() {
        let history = [
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_0", "name": "read", "input": {}},
            ]}),
        ];
        let mut ids = ResponseCallIds::after(&history);
        assert_eq!(
            id_of(&ids.dedupe(ready(0, "call_0"), 2)),
            "toolu_ferroloop_2_0"
        );
        assert_eq!(id_of(&ids.dedupe(ready(1, "call_1"), 2)), "call_1");
    }

    /// A call the final message holds without an id that no seal renamed (a Responses server
    /// whose `response.completed` lost a `call_id` the stream had sent, found by the
    /// `agent_stream` fuzz target): history kept it with `"id": ""`, which the next request
    /// cannot carry and `check_history` refuses. It gets a fresh id, taken like the others;
    /// the loop answers it as not run (no result carries that id).
    #[test]
    fn a_call_the_message_holds_without_an_id_gets_one() {
        let mut ids = ResponseCallIds::default();
        assert_eq!(id_of(&ids.dedupe(ready(0, "call_1"), 3)), "call_1");
        let mut message = json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "read", "input": {}},
            {"type": "tool_use", "id": "", "name": "read", "input": {}},
            {"type": "tool_use", "name": "read", "input": {}},
            {"type": "tool_use", "id": 7, "name": "read", "input": {}},
            {"type": "text", "text": "no id needed"},
        ]});
        ids.apply(&mut message, 3);
        let blocks = message["content"].as_array().unwrap();
        let got: Vec<&Value> = blocks.iter().map(|b| &b["id"]).collect();
        assert_eq!(
            got,
            [
                &json!("call_1"),
                &json!("toolu_ferroloop_3_1"),
                &json!("toolu_ferroloop_3_2"),
                &json!("toolu_ferroloop_3_3"),
                &Value::Null,
            ]
        );
    }

    #[test]
    fn unique_ids_are_kept_repeated_and_empty_ones_renamed() {
        let mut ids = ResponseCallIds::default();
        assert_eq!(id_of(&ids.dedupe(ready(0, "a"), 1)), "a");
        assert_eq!(id_of(&ids.dedupe(ready(1, "b"), 1)), "b");
        assert_eq!(id_of(&ids.dedupe(ready(2, "a"), 1)), "toolu_ferroloop_1_2");
        assert_eq!(id_of(&ids.dedupe(ready(3, ""), 1)), "toolu_ferroloop_1_3");
        let invalid = DecodeEvent::ToolUseInvalid {
            index: 4,
            id: "b".to_owned(),
            name: "read".to_owned(),
            partial_json: "{".to_owned(),
            error: "eof".to_owned(),
        };
        assert_eq!(id_of(&ids.dedupe(invalid, 1)), "toolu_ferroloop_1_4");
        // A later call that happens to use a generated id is renamed in turn.
        assert_eq!(
            id_of(&ids.dedupe(ready(5, "toolu_ferroloop_1_2"), 1)),
            "toolu_ferroloop_1_5"
        );
        assert_eq!(
            ids.dedupe(DecodeEvent::BlockStop { index: 0 }, 1),
            DecodeEvent::BlockStop { index: 0 }
        );

        let call = |id: &str| json!({"type": "tool_use", "id": id, "name": "read", "input": {}});
        let mut message = json!({"role": "assistant", "content": [
            call("a"), call("b"), call("a"), call(""), call("b"), call("toolu_ferroloop_1_2"),
        ]});
        ids.apply(&mut message, 1);
        let ids: Vec<&str> = message["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [
                "a",
                "b",
                "toolu_ferroloop_1_2",
                "toolu_ferroloop_1_3",
                "toolu_ferroloop_1_4",
                "toolu_ferroloop_1_5"
            ]
        );
    }
}
