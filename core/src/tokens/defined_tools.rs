//! The cost of tools the provider defines itself.
//!
//! An Anthropic request names such a tool by its type and options
//! (`{"type": "bash_20250124", "name": "bash"}`, `{"type": "web_search_20250305", "name":
//! "web_search", "max_uses": 3}`): the definition the model reads is inserted by the API, so the
//! few tokens of what is sent say nothing of what it costs. Counting the sent JSON put a bash
//! tool at ~15 tokens where Anthropic documents 245, and a computer-use tool at ~30 where it
//! documents over 1,200: an under-estimate, which is what costs a `prompt_too_long`.

use serde_json::Value;

/// Anthropic's documented input-token costs of the tools it defines for the client to run, by
/// the tool type's prefix (the type without its version date):
///
/// - `bash_*`: 245 tokens;
/// - `text_editor_*`: 700 tokens;
/// - `computer_*`: 735 tokens for the definition, plus the computer-use system prompt that comes
///   with it (documented as 466–499 tokens; the upper figure is counted).
pub const DOCUMENTED_DEFINED_TOOLS: [(&str, u64); 3] = [
    ("bash_", 245),
    ("text_editor_", 700),
    ("computer_", 735 + 499),
];

/// Tokens counted for a provider-defined tool whose cost is not documented (web search, web
/// fetch, code execution, memory, ...), on top of the JSON the request sends for it (its options,
/// such as a list of allowed domains, which the API passes on to the model). It is the text
/// editor's 700, the largest documented definition of a single tool short of computer use: an
/// over-estimate only compacts a little early.
pub const UNDOCUMENTED_DEFINED_TOOL_TOKENS: u64 = 700;

/// What a tool definition is, for its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinedTool {
    /// A provider-defined tool with a documented cost, in tokens.
    Documented(u64),
    /// A provider-defined tool without one: [`UNDOCUMENTED_DEFINED_TOOL_TOKENS`] plus the JSON
    /// sent for it.
    Undocumented,
}

/// Whether `tool` is an Anthropic-defined tool, and which kind: it has a `name` and a `type`
/// other than `custom` and `function`, and no schema (a tool the client defines always has one:
/// `input_schema`, or OpenAI's `parameters` or `function`). OpenAI's built-in tools
/// (`{"type": "web_search_preview"}`) have no name and are not read as one.
pub fn anthropic_defined_tool(tool: &Value) -> Option<DefinedTool> {
    let kind = tool.get("type")?.as_str()?;
    let client_defined = ["input_schema", "parameters", "function"]
        .iter()
        .any(|key| tool.get(key).is_some());
    if matches!(kind, "custom" | "function") || client_defined || tool.get("name").is_none() {
        return None;
    }
    let documented = DOCUMENTED_DEFINED_TOOLS
        .iter()
        .find(|(prefix, _)| kind.starts_with(prefix));
    Some(match documented {
        Some(&(_, tokens)) => DefinedTool::Documented(tokens),
        None => DefinedTool::Undocumented,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn documented_tools_cost_their_figure_whatever_their_version() {
        for (tool, tokens) in [
            (json!({"type": "bash_20250124", "name": "bash"}), 245),
            (json!({"type": "bash_20241022", "name": "bash"}), 245),
            (
                json!({"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}),
                700,
            ),
            (
                json!({"type": "computer_20250124", "name": "computer",
                       "display_width_px": 1024, "display_height_px": 768}),
                1234,
            ),
        ] {
            assert_eq!(
                anthropic_defined_tool(&tool),
                Some(DefinedTool::Documented(tokens)),
                "{tool}"
            );
        }
    }

    #[test]
    fn other_provider_tools_are_undocumented_and_client_tools_are_not_defined_ones() {
        for tool in [
            json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3}),
            json!({"type": "web_fetch_20250910", "name": "web_fetch"}),
            json!({"type": "code_execution_20250825", "name": "code_execution"}),
            json!({"type": "memory_20250818", "name": "memory"}),
        ] {
            assert_eq!(
                anthropic_defined_tool(&tool),
                Some(DefinedTool::Undocumented),
                "{tool}"
            );
        }
        for tool in [
            json!({"name": "get_weather", "input_schema": {"type": "object"}}),
            json!({"type": "custom", "name": "get_weather", "input_schema": {"type": "object"}}),
            // A custom tool whose type is left out and whose schema is missing (invalid, but
            // counted by what it holds, not as a provider tool).
            json!({"name": "bash"}),
            json!({"type": 7, "name": "odd"}),
            // OpenAI's shapes: Chat and Responses function tools, a Responses built-in tool.
            json!({"type": "function", "function": {"name": "lookup"}}),
            json!({"type": "function", "name": "shell", "parameters": {}}),
            json!({"type": "web_search_preview"}),
            json!("bash_20250124"),
        ] {
            assert_eq!(anthropic_defined_tool(&tool), None, "{tool}");
        }
    }
}
