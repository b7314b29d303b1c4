//! Context management on the message history: microcompact, prompt-cache breakpoints, the
//! cache-break detector, compaction, and the tool-pairing invariant.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use serde_json::{Value, json};

use super::config::CLEARED_TOOL_RESULT;

/// Iterates over the content blocks of `message` (a string content has none).
fn blocks(message: &Value) -> impl Iterator<Item = &Value> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn block_type(block: &Value) -> &str {
    block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The ids of the `tool_use` blocks of an assistant message.
pub fn tool_use_ids(message: &Value) -> Vec<String> {
    blocks(message)
        .filter(|b| block_type(b) == "tool_use")
        .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Checks the invariant the API enforces: every `tool_use` of an assistant message has its own
/// id and is answered by exactly one `tool_result` in the next message (a user message), whose
/// tool results come before anything else in it, and no `tool_result` answers nothing.
pub fn check_tool_pairing(messages: &[Value]) -> Result<(), String> {
    for (i, message) in messages.iter().enumerate() {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if role == "user" {
            let expected: HashSet<String> = match i.checked_sub(1).map(|p| &messages[p]) {
                Some(prev) if prev.get("role").and_then(Value::as_str) == Some("assistant") => {
                    tool_use_ids(prev).into_iter().collect()
                }
                _ => HashSet::new(),
            };
            // The results open the message: the API refuses text (or anything) before them
            // ("Messages following tool_use blocks must begin with ... tool_result blocks").
            if let Some(j) = blocks(message)
                .skip_while(|b| block_type(b) == "tool_result")
                .position(|b| block_type(b) == "tool_result")
            {
                let leading = blocks(message)
                    .take_while(|b| block_type(b) == "tool_result")
                    .count();
                return Err(format!(
                    "message {i}: content block {} is a tool_result after other content; a \
                     message's tool results must come first",
                    leading + j
                ));
            }
            let mut seen = HashSet::new();
            for block in blocks(message).filter(|b| block_type(b) == "tool_result") {
                let id = block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !expected.contains(id) {
                    return Err(format!(
                        "message {i}: tool_result {id:?} answers no tool_use"
                    ));
                }
                if !seen.insert(id.to_owned()) {
                    return Err(format!("message {i}: tool_result {id:?} appears twice"));
                }
            }
            if let Some(missing) = expected.iter().find(|id| !seen.contains(*id)) {
                return Err(format!(
                    "message {i}: tool_use {missing:?} has no tool_result"
                ));
            }
        } else if role == "assistant" && !tool_use_ids(message).is_empty() {
            // One result per id: two calls sharing one could not both be answered.
            let mut ids = HashSet::new();
            if let Some(id) = tool_use_ids(message)
                .into_iter()
                .find(|id| !ids.insert(id.clone()))
            {
                return Err(format!("message {i}: tool_use id {id:?} appears twice"));
            }
            let next = messages.get(i + 1);
            if next.and_then(|m| m.get("role")).and_then(Value::as_str) != Some("user") {
                return Err(format!(
                    "message {i}: tool_use blocks not followed by a user message"
                ));
            }
        }
    }
    Ok(())
}

/// Checks a conversation handed to the loop to continue ([`Agent::run_messages`]): a non-empty list
/// of `user` and `assistant` messages whose content is a non-empty string or a non-empty array of
/// typed blocks (every text block with text, a string not empty, calls only in assistant messages
/// and results only in user ones, every call with an id, a name and an object input), beginning and
/// ending with a user message, whose tool calls and results pair up ([`check_tool_pairing`]). The
/// loop keeps that shape as it appends to the history; a history without it would only come back
/// from the API as a 400, after a round trip.
///
/// [`Agent::run_messages`]: super::Agent::run_messages
pub fn check_history(messages: &[Value]) -> Result<(), String> {
    let Some(last) = messages.last() else {
        return Err("the conversation is empty".to_owned());
    };
    for (i, message) in messages.iter().enumerate() {
        let Some(object) = message.as_object() else {
            return Err(format!("message {i} is not an object"));
        };
        match object.get("role") {
            Some(Value::String(role)) if role == "user" || role == "assistant" => {}
            Some(role) => {
                return Err(format!(
                    "message {i}: the role must be \"user\" or \"assistant\", not {role}"
                ));
            }
            None => return Err(format!("message {i} has no role")),
        }
        // The API refuses empty content and empty or whitespace-only text blocks ("text
        // content blocks must contain non-whitespace text") in every message but a final
        // assistant one, which a conversation handed to the loop never has.
        match object.get("content") {
            Some(Value::String(text)) => {
                if let Some(blank) = blank(text) {
                    return Err(format!("message {i}: the content is {blank}"));
                }
            }
            Some(Value::Array(blocks)) => {
                if blocks.is_empty() {
                    return Err(format!("message {i}: the content is empty"));
                }
                if let Some(j) = blocks
                    .iter()
                    .position(|block| !block.get("type").is_some_and(Value::is_string))
                {
                    return Err(format!("message {i}: content block {j} has no type"));
                }
                // A text block's text is a string: the API refuses one without it.
                if let Some((j, block)) = blocks.iter().enumerate().find(|(_, block)| {
                    block_type(block) == "text" && !block.get("text").is_some_and(Value::is_string)
                }) {
                    return Err(match block.get("text") {
                        None => format!("message {i}: text block {j} has no text"),
                        Some(text) => format!(
                            "message {i}: the text of text block {j} must be a string, not {text}"
                        ),
                    });
                }
                if let Some((j, blank)) = blocks.iter().enumerate().find_map(|(j, block)| {
                    let text = block.get("text").and_then(Value::as_str);
                    let blank = text
                        .filter(|_| block_type(block) == "text")
                        .and_then(blank)?;
                    Some((j, blank))
                }) {
                    return Err(format!("message {i}: text block {j} is {blank}"));
                }
                // Calls are the assistant's, their results the user's.
                let misplaced = if role_is(object, "user") {
                    "tool_use"
                } else {
                    "tool_result"
                };
                if let Some(j) = blocks.iter().position(|b| block_type(b) == misplaced) {
                    return Err(format!(
                        "message {i}: content block {j} is a {misplaced}, which a {} message \
                         cannot hold",
                        object["role"].as_str().unwrap_or_default()
                    ));
                }
                // A call needs its id (its result names it) and its tool's name.
                if let Some((j, field)) = blocks.iter().enumerate().find_map(|(j, block)| {
                    let missing = ["id", "name"].into_iter().find(|field| {
                        block
                            .get(*field)
                            .and_then(Value::as_str)
                            .is_none_or(str::is_empty)
                    })?;
                    (block_type(block) == "tool_use").then_some((j, missing))
                }) {
                    return Err(format!("message {i}: tool_use block {j} has no {field}"));
                }
                // The API requires a call's input to be an object; the loop's own calls are
                // answered with one, a host's would be refused on every request.
                if let Some((j, block)) = blocks.iter().enumerate().find(|(_, block)| {
                    block_type(block) == "tool_use"
                        && !block.get("input").is_some_and(Value::is_object)
                }) {
                    let input = block.get("input").unwrap_or(&Value::Null);
                    return Err(format!(
                        "message {i}: the input of tool_use block {j} must be an object, not {input}"
                    ));
                }
            }
            _ => {
                return Err(format!(
                    "message {i}: the content must be a string or an array of content blocks"
                ));
            }
        }
    }
    // "first message must use the \"user\" role"
    if messages
        .first()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        != Some("user")
    {
        return Err("message 0: the first message must be a user message".to_owned());
    }
    if last.get("role").and_then(Value::as_str) != Some("user") {
        return Err("the last message must be a user message".to_owned());
    }
    check_tool_pairing(messages)
}

/// Renames each `tool_use` whose id an earlier message already used (a backend that numbers
/// each response's calls, `call_0` every turn), and the `tool_result` answering it in the next
/// message: Anthropic refuses a request whose `tool_use` ids repeat ("tool_use ids must be
/// unique"), and a result answers the call just before it, so nothing is lost. The history must
/// pass [`check_tool_pairing`]. Returns how many calls were renamed.
pub(crate) fn rename_repeated_tool_use_ids(messages: &mut [Value]) -> usize {
    let mut seen: HashSet<String> = HashSet::new();
    let mut renamed = 0;
    for i in 0..messages.len() {
        if messages[i].get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let ids = tool_use_ids(&messages[i]);
        let mut renames: Vec<(String, String)> = Vec::new();
        for (j, id) in ids.iter().enumerate() {
            if !seen.contains(id) {
                continue;
            }
            let base = format!("toolu_ferroloop_h{i}_{j}");
            let mut fresh = base.clone();
            let mut attempt = 1;
            while seen.contains(&fresh) || ids.contains(&fresh) {
                attempt += 1;
                fresh = format!("{base}_{attempt}");
            }
            renames.push((id.clone(), fresh));
        }
        seen.extend(ids);
        for (old, new) in &renames {
            rename_block_id(&mut messages[i], "tool_use", "id", old, new);
            if let Some(next) = messages.get_mut(i + 1) {
                rename_block_id(next, "tool_result", "tool_use_id", old, new);
            }
            seen.insert(new.clone());
        }
        renamed += renames.len();
    }
    renamed
}

/// Sets `field` to `new` in the first block of type `kind` of `message` whose `field` is `old`.
fn rename_block_id(message: &mut Value, kind: &str, field: &str, old: &str, new: &str) {
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return;
    };
    if let Some(block) = content
        .iter_mut()
        .find(|b| block_type(b) == kind && b.get(field).and_then(Value::as_str) == Some(old))
    {
        block[field] = Value::String(new.to_owned());
    }
}

/// Whether a message object's role is `role`.
fn role_is(message: &serde_json::Map<String, Value>, role: &str) -> bool {
    message.get("role").and_then(Value::as_str) == Some(role)
}

/// How a text the API refuses as blank reads in an error ("empty", "only whitespace"), or
/// `None` for a text with something in it.
fn blank(text: &str) -> Option<&'static str> {
    if text.is_empty() {
        Some("empty")
    } else if text.trim().is_empty() {
        Some("only whitespace")
    } else {
        None
    }
}

/// Removes the `tool_use` blocks of an assistant message (used when a response is cut before
/// its calls could be answered). Returns how many were removed.
pub fn strip_tool_uses(message: &mut Value) -> usize {
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return 0;
    };
    let before = content.len();
    content.retain(|b| block_type(b) != "tool_use");
    before - content.len()
}

/// Removes the blocks of a message that the API refuses in history: empty and whitespace-only
/// text blocks ("text content blocks must contain non-whitespace text"; models stream a "\n\n"
/// block before a call), blocks without a type (a broken proxy's), which mean nothing, and
/// calls without a tool name (a server that lost a call's first delta), which name nothing to
/// run and are not answered. Returns how many were removed.
pub(crate) fn drop_unsendable_blocks(message: &mut Value) -> usize {
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return 0;
    };
    let before = content.len();
    let has_text = |b: &Value, field: &str| {
        b.get(field)
            .and_then(Value::as_str)
            .is_some_and(|text| blank(text).is_none())
    };
    content.retain(|b| match b.get("type").and_then(Value::as_str) {
        None => false,
        Some("text") => has_text(b, "text"),
        Some("tool_use") => b
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(names_a_tool),
        Some(_) => true,
    });
    before - content.len()
}

/// Whether a call's `name` names a tool at all: a call whose name is empty or whitespace only
/// (a server that lost the call's first delta) is never run nor kept in history.
pub(crate) fn names_a_tool(name: &str) -> bool {
    blank(name).is_none()
}

/// Replaces the input of each `tool_use` block that is not a JSON object by `{}`: the API
/// requires an object there, and such a call (its input another JSON value, or invalid JSON
/// whose readable part is one) is answered with an error and never run with it. Returns how
/// many were replaced.
pub(crate) fn object_tool_inputs(message: &mut Value) -> usize {
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return 0;
    };
    let mut replaced = 0;
    for block in content.iter_mut().filter(|b| block_type(b) == "tool_use") {
        if !block.get("input").is_some_and(Value::is_object) {
            block["input"] = json!({});
            replaced += 1;
        }
    }
    replaced
}

/// Removes every thinking block (`thinking`, `redacted_thinking`) from the assistant messages
/// of a history, for a switch to another model: a block's signature is bound to the model that
/// made it, and another model refuses it ("Invalid `signature` in `thinking` block"). An
/// assistant message left empty is removed (it held thinking only, no call). Returns how many
/// blocks were removed.
pub(crate) fn drop_thinking(messages: &mut Vec<Value>) -> usize {
    let mut removed = 0;
    for message in messages.iter_mut() {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        if let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) {
            let before = content.len();
            content.retain(|b| !matches!(block_type(b), "thinking" | "redacted_thinking"));
            removed += before - content.len();
        }
    }
    if removed > 0 {
        messages.retain(|m| {
            m.get("role").and_then(Value::as_str) != Some("assistant") || !is_empty_message(m)
        });
    }
    removed
}

/// Removes the thinking blocks (`thinking`, `redacted_thinking`) that end a message: the API
/// refuses an assistant message whose final block is one ("The final block in an assistant
/// message cannot be `thinking`"), which a response leaves when what followed its thought (a
/// call) is dropped, or when it ended after thinking only. Thinking of an earlier turn may be
/// left out; a turn whose calls are answered keeps its blocks. Returns how many were removed.
pub(crate) fn drop_trailing_thinking(message: &mut Value) -> usize {
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return 0;
    };
    let before = content.len();
    while content
        .last()
        .is_some_and(|b| matches!(block_type(b), "thinking" | "redacted_thinking"))
    {
        content.pop();
    }
    before - content.len()
}

/// Removes, from the assistant messages of a request's copy of history, the thinking blocks
/// that end them (a host's history may hold such a message; the API refuses it, and an earlier
/// turn's thinking may be left out), the unsigned thinking (a Chat model's reasoning, which
/// Anthropic refuses) of those without calls (Chat reads reasoning back with calls only), and
/// the messages left empty by it (thinking only: the API merges the user turns around them).
/// The final message is left alone (a paused turn, which the loop keeps sendable). Returns how
/// many blocks were removed.
pub(crate) fn drop_trailing_thinking_before_last(messages: &mut Vec<Value>) -> usize {
    let Some(before_last) = messages.len().checked_sub(1) else {
        return 0;
    };
    let mut removed = 0;
    let mut emptied = false;
    for message in &mut messages[..before_last] {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let mut dropped = 0;
        if tool_use_ids(message).is_empty() {
            dropped += drop_unsigned_thinking(message);
        }
        dropped += drop_trailing_thinking(message);
        removed += dropped;
        emptied |= dropped > 0 && is_empty_message(message);
    }
    if emptied {
        let last = before_last;
        let mut i = 0;
        messages.retain(|m| {
            let keep = i == last
                || m.get("role").and_then(Value::as_str) != Some("assistant")
                || !is_empty_message(m);
            i += 1;
            keep
        });
    }
    removed
}

/// Removes the thinking blocks of a message that have no signature (a response cut while it
/// was thinking: the API refuses such a block, and an earlier turn's thinking may be left out).
/// Returns how many were removed.
pub(crate) fn drop_unsigned_thinking(message: &mut Value) -> usize {
    drop_blocks_without(message, "thinking", "signature")
}

/// Removes the blocks of type `kind` whose `field` is missing or an empty string. Returns how
/// many were removed.
fn drop_blocks_without(message: &mut Value, kind: &str, field: &str) -> usize {
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return 0;
    };
    let before = content.len();
    content.retain(|b| {
        block_type(b) != kind
            || b.get(field)
                .and_then(Value::as_str)
                .is_some_and(|value| !value.is_empty())
    });
    before - content.len()
}

/// Removes the calls the provider runs itself (`server_tool_use`, `mcp_tool_use`) that have no
/// result block in the message: a response cut by `max_tokens` before the provider ran one.
/// The API refuses such a call sent back (a paused turn, `pause_turn`, is another matter: it
/// goes back as it is). Returns how many were removed.
pub(crate) fn drop_unanswered_server_tool_uses(message: &mut Value) -> usize {
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return 0;
    };
    let answered: HashSet<String> = content
        .iter()
        .filter(|b| block_type(b).ends_with("_tool_result"))
        .filter_map(|b| {
            b.get("tool_use_id")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    let before = content.len();
    content.retain(|b| {
        !matches!(block_type(b), "server_tool_use" | "mcp_tool_use")
            || b.get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| answered.contains(id))
    });
    before - content.len()
}

/// Trims the trailing whitespace of the last message when it is the assistant's (a paused turn,
/// `pause_turn`, sent back for the model to continue): the API refuses "final assistant content
/// [that ends] with trailing whitespace". Text blocks at the end that are left empty are
/// removed. Works on a request's copy (history keeps the text as it came while the turn goes
/// on), and on the history a run stopping after a paused turn hands back.
pub(crate) fn trim_final_assistant_text(messages: &mut [Value]) {
    let Some(last) = messages.last_mut() else {
        return;
    };
    if last.get("role").and_then(Value::as_str) != Some("assistant") {
        return;
    }
    match last.get_mut("content") {
        Some(Value::String(text)) => {
            let kept = text.trim_end().len();
            text.truncate(kept);
        }
        Some(Value::Array(content)) => {
            while let Some(block) = content.last_mut() {
                if block_type(block) != "text" {
                    break;
                }
                let Some(Value::String(text)) = block.get_mut("text") else {
                    break;
                };
                let kept = text.trim_end().len();
                text.truncate(kept);
                if !text.is_empty() {
                    break;
                }
                content.pop();
            }
        }
        _ => {}
    }
}

/// Whether the `tool_result` answering a call id is one of a compactable tool (`compactable`
/// empty: every tool), the calls' names read from `messages`.
fn compactable_results<'a>(
    messages: &[Value],
    compactable: &'a [String],
) -> impl Fn(&str) -> bool + 'a {
    let mut names: HashMap<String, String> = HashMap::new();
    for message in messages {
        for block in blocks(message).filter(|b| block_type(b) == "tool_use") {
            if let (Some(id), Some(name)) = (
                block.get("id").and_then(Value::as_str),
                block.get("name").and_then(Value::as_str),
            ) {
                names.insert(id.to_owned(), name.to_owned());
            }
        }
    }
    move |id: &str| {
        compactable.is_empty()
            || names
                .get(id)
                .is_some_and(|name| compactable.iter().any(|c| c == name))
    }
}

/// How many `tool_result` blocks of the last message are of a compactable tool (`compactable`
/// empty: every tool): those [`microcompact`] would count toward `keep` there.
pub(crate) fn last_compactable_result_count(messages: &[Value], compactable: &[String]) -> usize {
    let Some(last) = messages.last() else {
        return 0;
    };
    let is_compactable = compactable_results(messages, compactable);
    blocks(last)
        .filter(|b| block_type(b) == "tool_result")
        .filter(|b| {
            is_compactable(
                b.get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )
        })
        .count()
}

/// Whether a message has no content left.
pub fn is_empty_message(message: &Value) -> bool {
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks.is_empty(),
        Some(Value::String(text)) => text.is_empty(),
        _ => true,
    }
}

/// Clears the content of old tool results: every `tool_result` of a compactable tool except the
/// `keep` most recent is replaced by [`CLEARED_TOOL_RESULT`]. `compactable` empty means every
/// tool. Returns how many results were cleared now (already-cleared ones are not counted).
pub fn microcompact(messages: &mut [Value], keep: usize, compactable: &[String]) -> usize {
    let is_compactable = compactable_results(messages, compactable);
    let mut positions = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        for (b, block) in blocks(message).enumerate() {
            let id = block
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if block_type(block) == "tool_result" && is_compactable(id) {
                positions.push((m, b));
            }
        }
    }
    let old = positions.len().saturating_sub(keep);
    let mut cleared = 0;
    for &(m, b) in &positions[..old] {
        if let Some(block) = messages[m]
            .get_mut("content")
            .and_then(Value::as_array_mut)
            .and_then(|c| c.get_mut(b))
            && block.get("content") != Some(&Value::String(CLEARED_TOOL_RESULT.into()))
        {
            block["content"] = Value::String(CLEARED_TOOL_RESULT.into());
            cleared += 1;
        }
    }
    cleared
}

/// How many `cache_control` breakpoints a request may hold ("A maximum of 4 blocks with
/// cache_control may be provided").
const MAX_CACHE_BREAKPOINTS: usize = 4;

/// Adds `cache_control` breakpoints to a request about to be sent: the system prompt, the last
/// tool definition and the last block of the last message (three of the four the API allows).
/// Breakpoints the request already holds (a host's own, on its documents) are kept while the
/// request stays within the four; beyond that the earliest are removed (the API reads the prompt
/// as tools, system, messages), since the one on the last message caches everything before it
/// anyway. The history itself is not changed: this works on the request's copy.
pub fn place_cache_breakpoints(request: &mut Value) {
    add_cache_breakpoints(request);
    let sites = cache_control_sites(request);
    let marked = |request: &Value, site: &Site| {
        site_object(request, site).is_some_and(|object| object.get("cache_control").is_some())
    };
    let mut excess = sites
        .iter()
        .filter(|(_, site)| marked(request, site))
        .count()
        .saturating_sub(MAX_CACHE_BREAKPOINTS);
    for (ours, site) in &sites {
        if excess == 0 {
            break;
        }
        if *ours {
            continue;
        }
        if let Some(object) = site_object_mut(request, site).and_then(Value::as_object_mut)
            && object.remove("cache_control").is_some()
        {
            excess -= 1;
        }
    }
}

/// Where a `cache_control` marker may sit in a request: a tool definition, a system block, a
/// message's block, or a block of a tool result's content (`(message, block, nested)`).
#[derive(Debug, Clone, Copy)]
enum Site {
    Tool(usize),
    System(usize),
    Block(usize, usize),
    Nested(usize, usize, usize),
}

fn site_pointer(site: &Site) -> String {
    match site {
        Site::Tool(i) => format!("/tools/{i}"),
        Site::System(i) => format!("/system/{i}"),
        Site::Block(m, b) => format!("/messages/{m}/content/{b}"),
        Site::Nested(m, b, n) => format!("/messages/{m}/content/{b}/content/{n}"),
    }
}

fn site_object<'a>(request: &'a Value, site: &Site) -> Option<&'a Value> {
    request.pointer(&site_pointer(site))
}

fn site_object_mut<'a>(request: &'a mut Value, site: &Site) -> Option<&'a mut Value> {
    request.pointer_mut(&site_pointer(site))
}

/// The places of a request that may carry a `cache_control` marker, in the order the API reads
/// the prompt (tool definitions, system blocks, message blocks with the blocks nested in tool
/// results), each with whether it is one [`add_cache_breakpoints`] marks. Only these: a
/// `cache_control` key inside a tool's schema or a call's input is data, not a breakpoint.
fn cache_control_sites(request: &Value) -> Vec<(bool, Site)> {
    let mut sites = Vec::new();
    let items = |key: &str| request.get(key).and_then(Value::as_array);
    if let Some(tools) = items("tools") {
        sites.extend((0..tools.len()).map(|i| (i + 1 == tools.len(), Site::Tool(i))));
    }
    if let Some(system) = items("system") {
        sites.extend((0..system.len()).map(|i| (i + 1 == system.len(), Site::System(i))));
    }
    let messages = items("messages").map(Vec::as_slice).unwrap_or(&[]);
    for (m, message) in messages.iter().enumerate() {
        let Some(content) = message.get("content").and_then(Value::as_array) else {
            continue;
        };
        let ours = if m + 1 == messages.len() {
            content.iter().rposition(may_carry_cache_control)
        } else {
            None
        };
        for (b, block) in content.iter().enumerate() {
            sites.push((ours == Some(b), Site::Block(m, b)));
            if block_type(block) == "tool_result"
                && let Some(nested) = block.get("content").and_then(Value::as_array)
            {
                sites.extend((0..nested.len()).map(|n| (false, Site::Nested(m, b, n))));
            }
        }
    }
    sites
}

fn add_cache_breakpoints(request: &mut Value) {
    let ephemeral = json!({"type": "ephemeral"});
    // A system block or a tool definition that is no object (a host's `extra`, which
    // `AgentConfig::check` refuses; a request built by hand) takes no marker: indexing it by a
    // key would panic.
    if let Some(system) = request.get_mut("system") {
        if let Value::String(text) = system {
            *system = json!([{"type": "text", "text": text.clone()}]);
        }
        if let Some(last) = system
            .as_array_mut()
            .and_then(|b| b.last_mut())
            .and_then(Value::as_object_mut)
        {
            last.insert("cache_control".to_owned(), ephemeral.clone());
        }
    }
    if let Some(last) = request
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .and_then(|t| t.last_mut())
        .and_then(Value::as_object_mut)
    {
        last.insert("cache_control".to_owned(), ephemeral.clone());
    }
    if let Some(last) = request
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .and_then(|m| m.last_mut())
    {
        if let Some(Value::String(text)) = last.get("content") {
            last["content"] = json!([{"type": "text", "text": text.clone()}]);
        }
        // The API refuses a breakpoint on a thinking block or an empty text block; a paused
        // turn (`pause_turn`) sends an assistant message last, which may end with either.
        if let Some(block) = last
            .get_mut("content")
            .and_then(Value::as_array_mut)
            .and_then(|c| c.iter_mut().rev().find(|b| may_carry_cache_control(b)))
        {
            block["cache_control"] = ephemeral;
        }
    }
}

fn may_carry_cache_control(block: &Value) -> bool {
    match block_type(block) {
        "thinking" | "redacted_thinking" => false,
        "text" => block
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|text| !text.is_empty()),
        _ => block.is_object(),
    }
}

fn hash_of(value: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

/// Detects prompt-cache breaks: a drop in cached-read tokens between consecutive turns of more
/// than 5% and more than 2,000 tokens, reported with the prefix components that changed.
#[derive(Debug, Default)]
pub struct CacheBreakDetector {
    last_cache_read: Option<u64>,
    system_hash: u64,
    tools_hash: u64,
    /// Hashes of the messages sent last time, in order.
    message_hashes: Vec<u64>,
}

impl CacheBreakDetector {
    /// Forgets the previous turn: the next observation sets a new baseline. For a prompt
    /// changed on purpose (compaction, microcompact), whose cache read is expected to fall.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Records the request of a turn and its reported cached-read tokens; returns the changed
    /// components when the cache broke.
    pub fn observe(
        &mut self,
        request: &Value,
        cache_read: u64,
    ) -> Option<(u64, Vec<&'static str>)> {
        let system_hash = request.get("system").map(hash_of).unwrap_or_default();
        let tools_hash = request.get("tools").map(hash_of).unwrap_or_default();
        let message_hashes: Vec<u64> = request
            .get("messages")
            .and_then(Value::as_array)
            .map(|m| {
                m.iter()
                    .map(|msg| hash_of(&strip_cache_control(msg)))
                    .collect()
            })
            .unwrap_or_default();
        let mut report = None;
        if let Some(previous) = self.last_cache_read {
            let dropped = previous.saturating_sub(cache_read);
            if dropped > 2_000 && dropped * 20 > previous {
                let mut changed = Vec::new();
                if system_hash != self.system_hash {
                    changed.push("system");
                }
                if tools_hash != self.tools_hash {
                    changed.push("tools");
                }
                let common = self.message_hashes.len().min(message_hashes.len());
                if self.message_hashes[..common] != message_hashes[..common] {
                    changed.push("messages");
                }
                report = Some((previous, changed));
            }
        }
        self.last_cache_read = Some(cache_read);
        self.system_hash = system_hash;
        self.tools_hash = tools_hash;
        self.message_hashes = message_hashes;
        report
    }
}

fn strip_cache_control(message: &Value) -> Value {
    let mut message = message.clone();
    if let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) {
        for block in content {
            if let Some(map) = block.as_object_mut() {
                map.remove("cache_control");
            }
        }
    }
    message
}

/// The prompt of the built-in summariser.
pub const SUMMARY_PROMPT: &str = "Summarize this conversation so far for your own later use: the \
user's goal, what has been done, the key facts and file paths found, and what remains. Be \
concise and specific. Answer with the summary only.";

/// How the summary block of a compacted history begins.
const SUMMARY_PREAMBLE: &str =
    "This session continues from an earlier conversation, summarised here:\n\n";

/// Whether `block` is the summary block of an earlier compaction.
fn is_summary_block(block: &Value) -> bool {
    block_type(block) == "text"
        && block
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|text| text.starts_with(SUMMARY_PREAMBLE))
}

/// Rebuilds history after compaction: the summary, then the latest user prompt (the last user
/// message that is not only tool results), as one user message. When that message is itself
/// the product of an earlier compaction, its old summary is left out: the new summary covers
/// it, and summaries would otherwise pile up with every compaction.
pub fn history_from_summary(messages: &[Value], summary: &str) -> Vec<Value> {
    let mut content = vec![json!({
        "type": "text",
        "text": format!("{SUMMARY_PREAMBLE}{summary}"),
    })];
    let last_prompt = messages.iter().rev().find(|m| {
        m.get("role").and_then(Value::as_str) == Some("user")
            && match m.get("content") {
                Some(Value::String(_)) => true,
                Some(Value::Array(blocks)) => blocks.iter().any(|b| block_type(b) != "tool_result"),
                _ => false,
            }
    });
    match last_prompt.and_then(|m| m.get("content")) {
        Some(Value::String(text)) => content.push(json!({"type": "text", "text": text})),
        Some(Value::Array(blocks)) => content.extend(
            blocks
                .iter()
                .filter(|b| block_type(b) != "tool_result" && !is_summary_block(b))
                .cloned(),
        ),
        _ => {}
    }
    vec![json!({"role": "user", "content": content})]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": name, "input": {}})
    }

    fn result(id: &str, text: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": text})
    }

    #[test]
    fn pairing_accepts_answered_calls_and_rejects_the_rest() {
        let good = vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": [call("a", "read"), call("b", "grep")]}),
            json!({"role": "user", "content": [result("b", "x"), result("a", "y")]}),
        ];
        assert!(check_tool_pairing(&good).is_ok());
        let mut missing = good.clone();
        missing[2]["content"].as_array_mut().unwrap().pop();
        assert!(
            check_tool_pairing(&missing)
                .unwrap_err()
                .contains("no tool_result")
        );
        let mut twice = good.clone();
        twice[2]["content"]
            .as_array_mut()
            .unwrap()
            .push(result("a", "z"));
        assert!(check_tool_pairing(&twice).unwrap_err().contains("twice"));
        let dangling = vec![json!({"role": "assistant", "content": [call("a", "read")]})];
        assert!(check_tool_pairing(&dangling).is_err());
        // Two calls of one message with one id: one result cannot answer both, and the API
        // refuses the id repeated ("tool_use ids must be unique"). (Found by the fuzz target
        // `agent_history`.)
        let mut shared_id = good.clone();
        shared_id[1]["content"][1]["id"] = json!("a");
        shared_id[2]["content"][0]["tool_use_id"] = json!("a");
        shared_id[2]["content"].as_array_mut().unwrap().pop();
        assert_eq!(
            check_tool_pairing(&shared_id).unwrap_err(),
            "message 1: tool_use id \"a\" appears twice"
        );
    }

    #[test]
    fn microcompact_keeps_the_recent_results_of_compactable_tools() {
        let mut messages = vec![json!({"role": "user", "content": "go"})];
        for i in 0..8 {
            let name = if i == 0 { "bash" } else { "read" };
            messages.push(json!({"role": "assistant", "content": [call(&format!("t{i}"), name)]}));
            messages.push(json!({"role": "user", "content": [result(&format!("t{i}"), "data")]}));
        }
        let compactable = vec!["read".to_owned()];
        assert_eq!(microcompact(&mut messages, 5, &compactable), 2);
        assert_eq!(
            messages[2]["content"][0]["content"], "data",
            "bash is not compactable"
        );
        assert_eq!(messages[4]["content"][0]["content"], CLEARED_TOOL_RESULT);
        assert_eq!(messages[6]["content"][0]["content"], CLEARED_TOOL_RESULT);
        assert_eq!(messages[8]["content"][0]["content"], "data");
        assert_eq!(
            microcompact(&mut messages, 5, &compactable),
            0,
            "idempotent"
        );
        assert!(check_tool_pairing(&messages).is_ok());
    }

    /// A system block or a tool definition that is no object (from a host's `extra`) panicked
    /// here ("cannot access key \"cache_control\" in JSON string"), which killed the run's task:
    /// the run ended without a `stop` event.
    #[test]
    fn breakpoints_skip_system_blocks_and_tools_that_are_not_objects() {
        for (system, tools) in [
            (json!(["plain"]), json!(["web_search"])),
            (json!([42]), json!([42])),
            (json!([[]]), json!([null])),
        ] {
            let mut request = json!({
                "system": system.clone(),
                "tools": tools.clone(),
                "messages": [{"role": "user", "content": "one"}],
            });
            place_cache_breakpoints(&mut request);
            assert_eq!(request["system"], system);
            assert_eq!(request["tools"], tools);
            assert_eq!(
                request["messages"][0]["content"][0]["cache_control"]["type"],
                "ephemeral"
            );
        }
    }

    #[test]
    fn breakpoints_go_on_system_tools_and_last_message() {
        let mut request = json!({
            "system": "be brief",
            "tools": [{"name": "a"}, {"name": "b"}],
            "messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
        });
        place_cache_breakpoints(&mut request);
        assert_eq!(request["system"][0]["cache_control"]["type"], "ephemeral");
        assert!(request["tools"][0].get("cache_control").is_none());
        assert_eq!(request["tools"][1]["cache_control"]["type"], "ephemeral");
        assert_eq!(
            request["messages"][1]["content"][0]["cache_control"]["type"],
            "ephemeral"
        );
        assert_eq!(request["messages"][0]["content"], "one");
    }

    #[test]
    fn breakpoints_over_four_lose_the_host_s_earliest_and_never_touch_data() {
        let marker = json!({"type": "ephemeral"});
        let cached = |t: &str| json!({"type": "text", "text": t, "cache_control": marker});
        let schema = json!({"type": "object", "properties": {"cache_control": {"type": "string"}}});
        let mut request = json!({
            "tools": [
                {"name": "a", "input_schema": schema, "cache_control": marker},
                {"name": "b", "input_schema": schema},
            ],
            "system": "s",
            "messages": [
                {"role": "user", "content": [cached("one"), cached("two")]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t", "name": "a", "input": {"cache_control": "x"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [cached("three")]},
                    cached("four"),
                    {"type": "text", "text": "last"},
                ]},
            ],
        });
        place_cache_breakpoints(&mut request);
        let sites = cache_control_sites(&request);
        let marked: Vec<String> = sites
            .iter()
            .filter(|(_, site)| {
                site_object(&request, site)
                    .unwrap()
                    .get("cache_control")
                    .is_some()
            })
            .map(|(_, site)| site_pointer(site))
            .collect();
        assert_eq!(
            marked,
            [
                "/tools/1",
                "/system/0",
                "/messages/2/content/1",
                "/messages/2/content/2",
            ],
            "{request:#}"
        );
        // Data that happens to be called cache_control stays.
        assert_eq!(request["tools"][0]["input_schema"], schema);
        assert_eq!(request["tools"][1]["input_schema"], schema);
        assert_eq!(
            request["messages"][1]["content"][0]["input"]["cache_control"],
            "x"
        );
        // Within the limit, nothing of the host's is removed.
        let mut small =
            json!({"messages": [{"role": "user", "content": [cached("one"), text_block("two")]}]});
        place_cache_breakpoints(&mut small);
        assert!(
            small["messages"][0]["content"][0]
                .get("cache_control")
                .is_some()
        );
        assert!(
            small["messages"][0]["content"][1]
                .get("cache_control")
                .is_some()
        );
    }

    fn text_block(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }

    #[test]
    fn no_breakpoint_goes_on_a_thinking_block_or_an_empty_text() {
        let mut request = json!({
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
                {"type": "text", "text": ""},
                {"type": "thinking", "thinking": "t", "signature": "x"},
            ]}],
        });
        place_cache_breakpoints(&mut request);
        let blocks = request["messages"][1]["content"].as_array().unwrap();
        let marked: Vec<bool> = blocks
            .iter()
            .map(|b| b.get("cache_control").is_some())
            .collect();
        assert_eq!(marked, [true, false, false]);
    }

    #[test]
    fn cache_break_is_reported_with_the_changed_component() {
        let mut detector = CacheBreakDetector::default();
        let request =
            json!({"system": "s", "tools": [], "messages": [{"role": "user", "content": "a"}]});
        assert!(detector.observe(&request, 50_000).is_none());
        assert!(
            detector.observe(&request, 49_500).is_none(),
            "small drops are noise"
        );
        let changed =
            json!({"system": "s2", "tools": [], "messages": [{"role": "user", "content": "a"}]});
        let (previous, parts) = detector.observe(&changed, 1_000).unwrap();
        assert_eq!(previous, 49_500);
        assert_eq!(parts, vec!["system"]);
    }

    #[test]
    fn summary_history_keeps_the_last_prompt() {
        let messages = vec![
            json!({"role": "user", "content": "find the bug"}),
            json!({"role": "assistant", "content": [call("a", "read")]}),
            json!({"role": "user", "content": [result("a", "code")]}),
        ];
        let history = history_from_summary(&messages, "read main.rs");
        assert_eq!(history.len(), 1);
        assert_eq!(history[0]["content"][1]["text"], "find the bug");
        assert!(check_tool_pairing(&history).is_ok());
        // Compacted again: the new summary replaces the old one, the prompt stays.
        let again = history_from_summary(&history, "read main.rs, fixed it");
        let texts: Vec<&str> = again[0]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[0].ends_with("read main.rs, fixed it"));
        assert_eq!(texts[1], "find the bug");
    }
}
