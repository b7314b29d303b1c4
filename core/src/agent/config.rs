//! How an agent is configured.

use std::collections::HashMap;

use serde_json::Value;

use crate::tokens::{ContextBudget, Family};

/// Prices per million tokens, for the cost budget.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache writes.
    pub cache_write: f64,
    /// Cache reads.
    pub cache_read: f64,
}

/// What a run may spend before it stops with [`StopReason::Budget`](super::StopReason::Budget).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    /// Turns at most (default 50): model responses the loop goes on from. A request sent again
    /// for the same turn (a fallback model, a retried truncated stream, a raised `max_tokens`, a
    /// field the server refused, a reactive compaction after a refusal as too long) counts
    /// once, so model calls may exceed it.
    pub max_turns: u32,
    /// `max_tokens` of each request (default 8,192).
    pub max_tokens: u64,
    /// Input + output tokens reported over the whole run, at most (a call whose usage is not
    /// reported, as from a Chat server without stream usage, counts as estimated). Checked
    /// after each call the run would go on from: a last answer that ends the run itself
    /// (`end_turn`, ...) stops with its own reason, whatever it spent.
    pub token_budget: Option<u64>,
    /// Cost over the whole run, at most, in the price table's currency (a call whose usage is
    /// not reported counts as estimated). The table must price the model and the fallback
    /// model: a run with a budget it cannot count stops before any request.
    pub cost_budget: Option<f64>,
    /// Prices by model name prefix (the host's price table).
    pub prices: HashMap<String, Price>,
}

impl Limits {
    /// The default limits: 50 turns, 8,192 output tokens per call, no budget.
    pub fn new() -> Self {
        Self {
            max_turns: 50,
            max_tokens: 8_192,
            ..Self::default()
        }
    }
}

/// The agent's configuration.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The model name sent in requests.
    pub model: String,
    /// The system prompt (a blank one is not sent).
    pub system: Option<String>,
    /// Limits and budgets.
    pub limits: Limits,
    /// Context thresholds (Claude Code's defaults for the model unless set).
    pub budget: ContextBudget,
    /// The tokenizer family for estimates.
    pub family: Family,
    /// The output limit a turn cut by `max_tokens` is asked again with, once, before it is
    /// continued (default 64,000, Claude Code's; `None`, or a value not above
    /// [`Limits::max_tokens`]: never). Requests go out with the
    /// small [`Limits::max_tokens`], which keeps the output the provider reserves (and the
    /// window the budget keeps free) small; a response that needs more — a big file written in
    /// one tool call, which a continuation cannot finish since a cut call is not run — is
    /// discarded (its calls cancelled, its usage counted) and the same turn is sent again
    /// with the limit raised to the least of this, the model's output ceiling, the
    /// context window less the request's input and the output the token and cost budgets
    /// leave. The continuations that follow a cut at the
    /// raised limit keep it as far as the window left by their grown input allows; the next
    /// turn goes back to [`Limits::max_tokens`].
    ///
    /// The limit is not raised for a model the built-in model table does not know (its
    /// ceiling would be a guess, and the provider would refuse a limit over it), when that
    /// least value is not above the request's limit, when `extra` sets the output limit
    /// (`max_tokens`, `max_completion_tokens` or `max_output_tokens`: the host fixed it), once
    /// the server refused the limit field, nor for a cut by the context window
    /// (`model_context_window_exceeded`), which a higher limit cannot help.
    pub escalated_max_tokens: Option<u64>,
    /// How many times a `max_tokens` stop in text is continued (default 3). A cut response of
    /// which nothing can be kept is continued only while the next request differs (the note
    /// naming its cut calls is added once); then the run stops with `max_tokens` and the error
    /// code `max_tokens_no_progress` (for a cut by the context window, once the context
    /// management before the next call ran: its compaction may change the request, and the run
    /// goes on when it did).
    pub max_continuations: u32,
    /// The user message sent to continue after `max_tokens` (followed by a note naming the
    /// tools the cut response called: those calls are not run).
    pub continuation_prompt: String,
    /// Tools whose old results microcompact may clear (empty: every tool).
    pub compactable_tools: Vec<String>,
    /// How many recent tool results microcompact keeps (default 5). The results of the last
    /// turn, which the model has not read yet, are kept whatever this says.
    pub keep_recent_tool_results: usize,
    /// Place `cache_control` breakpoints (system, tools, last message).
    pub prompt_caching: bool,
    /// Extra fields merged into every request (temperature, metadata, thinking, ...): a `system`
    /// here is the system prompt (as blocks, say, with their own `cache_control`) and may not be
    /// given beside [`system`](Self::system); a `stream` must be `true`. A `tools`
    /// array is added to the executor's tool definitions rather than replacing them: that is
    /// where tools the provider runs go (Anthropic server tools such as
    /// `{"type": "web_search_20250305", "name": "web_search"}`).
    pub extra: serde_json::Map<String, Value>,
    /// The model to switch to when the model is overloaded: a call that fails with
    /// [`ModelError::Overloaded`](super::ModelError::Overloaded) (after the client's retries),
    /// or that sees [`fallback_after_529_retries`](Self::fallback_after_529_retries)
    /// consecutive 529 retries, is discarded and the turn retried once with this model, which
    /// then answers for the rest of the run; history's thinking blocks are dropped at the
    /// switch (their signatures are bound to the model that made them). The built-in
    /// summariser's call falls back alike, and its summary is asked of this model. `None`: no
    /// fallback; an overload announced after the response started (an `overloaded_error`
    /// event mid-stream, which the client cannot retry) is then a broken stream, and the turn is
    /// asked again once of the same model; one after the client's retries stops the run.
    pub fallback_model: Option<String>,
    /// Consecutive HTTP 529 retries within one call after which the loop stops waiting for the
    /// model and falls back (default 3; 0: only when the call fails). Only with a
    /// [`fallback_model`](Self::fallback_model). A retry of an overload that came without a
    /// 529 counts too ([`ModelEvent::Retry`](super::ModelEvent::Retry)'s `overloaded`): an
    /// `overloaded_error` event before anything was delivered, OpenAI's `server_is_overloaded`.
    /// Either way the [`ModelFallback`](super::AgentEvent::ModelFallback) event's reason is
    /// `repeated_529`, and its error counts which overloads were seen. The built-in
    /// summariser's call counts as a turn's does (a compaction while the model is overloaded
    /// goes to the fallback rather than wait through every retry and fail).
    pub fallback_after_529_retries: u32,
}

/// The text that replaces an old tool result's content on microcompact.
pub const CLEARED_TOOL_RESULT: &str = "[Old tool result content cleared]";

impl AgentConfig {
    /// A configuration for `model` with the defaults.
    pub fn new(model: impl Into<String>) -> Self {
        let model = model.into();
        let limits = Limits::new();
        let budget = ContextBudget::for_model(&model, &crate::tokens::ModelTable::default());
        Self {
            model,
            system: None,
            limits,
            budget,
            family: Family::default(),
            escalated_max_tokens: Some(64_000),
            max_continuations: 3,
            continuation_prompt: "Output token limit hit. Resume directly — no apology, no recap \
                                  of what you were doing. Pick up mid-thought if that is where the \
                                  cut happened."
                .into(),
            compactable_tools: Vec::new(),
            keep_recent_tool_results: 5,
            prompt_caching: true,
            extra: serde_json::Map::new(),
            fallback_model: None,
            fallback_after_529_retries: 3,
        }
    }

    /// Checks what the API would refuse only after a round trip, or only once the case arises
    /// mid-run: an empty model (or fallback model) name, extra `messages` or `model` (which
    /// would replace the loop's own), an extra `system` beside a configured system prompt, an
    /// extra `stream` other than `true`, extra `tools` that are not an array of objects, an extra
    /// `system` that is neither text nor an array of objects (content blocks), an output limit
    /// (`max_tokens`) of 0 or not greater than an extra `thinking.budget_tokens`, a
    /// `tool_choice` forcing tool use (`any`, `tool`) with thinking on, an empty
    /// continuation prompt while `max_tokens` stops are continued (it would be sent as an empty
    /// user message), a cost budget for a model (or fallback model) the price table does
    /// not price (the budget could never be reached), and a context budget that would block
    /// before it compacts ([`ContextBudget::validate`]).
    pub fn check(&self) -> Result<(), String> {
        // `budget` is a public field: every binding's budget constructor validates, but a
        // budget edited in place (or built field by field) reaches the loop unchecked, and a
        // run with it would refuse requests as too long without ever compacting first.
        self.budget
            .validate()
            .map_err(|err| format!("context budget: {err}"))?;
        // Refused here once rather than by each binding: every binding's Agent runs this check
        // when it is made, and a run checks it again for configurations built in Rust.
        if self.model.trim().is_empty() {
            return Err("the model name is empty".to_owned());
        }
        // Else the run would fail only when it switches, perhaps hours in.
        if self
            .fallback_model
            .as_deref()
            .is_some_and(|fallback| fallback.trim().is_empty())
        {
            return Err("the fallback model name is empty".to_owned());
        }
        // Extra fields are merged over the request the loop builds: these would replace what
        // the loop keeps (the conversation, the model it may switch to the fallback).
        for (key, instead) in [
            (
                "messages",
                "start the run with the conversation as its messages",
            ),
            ("model", "set the configuration's model"),
        ] {
            if self.extra.contains_key(key) {
                return Err(format!(
                    "extra \"{key}\" would replace the loop's own: {instead}"
                ));
            }
        }
        // A system prompt given both ways: the extra one was sent and the configured one dropped
        // without a word. Given only in `extra` (blocks with `cache_control`), it is the prompt.
        if self.extra.contains_key("system") && self.system_prompt().is_some() {
            return Err(
                "extra \"system\" would replace the system prompt given: give it one way"
                    .to_owned(),
            );
        }
        // The loop reads a stream: `"stream": false` was overwritten without a word.
        if let Some(stream) = self
            .extra
            .get("stream")
            .filter(|s| **s != Value::Bool(true))
        {
            return Err(format!(
                "extra \"stream\" must be true if given (the loop reads a stream), not {stream}"
            ));
        }
        if let Some(tools) = self.extra.get("tools") {
            let Some(tools) = tools.as_array() else {
                return Err(format!(
                    "extra \"tools\" must be an array of tool definitions, not {tools}"
                ));
            };
            if let Some(tool) = tools.iter().find(|tool| !tool.is_object()) {
                return Err(format!(
                    "extra \"tools\" must hold tool definitions (objects), not {tool}"
                ));
            }
        }
        // The API takes a system prompt as text or as content blocks, nothing else.
        match self.extra.get("system") {
            None | Some(Value::String(_)) => {}
            Some(Value::Array(blocks)) if blocks.iter().all(Value::is_object) => {}
            Some(system) => {
                return Err(format!(
                    "extra \"system\" must be text or an array of content blocks (objects), \
                     not {system}"
                ));
            }
        }
        // The API refuses an output limit at or under the thinking budget; with the default
        // limit a budget over 8,191 would be refused on every request.
        let budget = self
            .extra
            .get("thinking")
            .filter(|thinking| thinking.get("type").and_then(Value::as_str) == Some("enabled"))
            .and_then(|thinking| thinking.get("budget_tokens"))
            .and_then(Value::as_u64);
        let max_tokens = self
            .extra
            .get("max_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(self.limits.max_tokens);
        if max_tokens == 0 {
            return Err("max_tokens is 0: the model could not answer anything".to_owned());
        }
        if let Some(budget) = budget
            && max_tokens <= budget
        {
            return Err(format!(
                "max_tokens ({max_tokens}) must be greater than thinking.budget_tokens \
                 ({budget}): raise the output limit or lower the budget"
            ));
        }
        // "Thinking may not be enabled when tool_choice forces tool use": with thinking on,
        // only `auto` and `none` are taken.
        let thinking_on = self
            .extra
            .get("thinking")
            .and_then(|thinking| thinking.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|kind| kind != "disabled");
        let forced = self
            .extra
            .get("tool_choice")
            .and_then(|choice| choice.get("type"))
            .and_then(Value::as_str)
            .filter(|kind| matches!(*kind, "any" | "tool"));
        if let Some(forced) = forced
            && thinking_on
        {
            return Err(format!(
                "tool_choice \"{forced}\" forces tool use, which the API refuses with thinking \
                 on: use \"auto\" or turn thinking off"
            ));
        }
        // The cost is counted from the price table only: a budget for a model it does not
        // price would never be reached, and the run would spend without the limit it was given.
        if self.limits.cost_budget.is_some() {
            for model in std::iter::once(&self.model).chain(self.fallback_model.as_ref()) {
                if self.price_of(model).is_none() {
                    return Err(format!(
                        "a cost budget is set, but the price table has no price for the model \
                         {model:?}: its cost could not be counted"
                    ));
                }
            }
        }
        if self.max_continuations > 0 && self.continuation_prompt.trim().is_empty() {
            return Err(
                "the continuation prompt is empty (set max_continuations to 0 to stop at max_tokens instead)"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// The output limit to ask a turn cut by `max_tokens` again with, if it may be raised
    /// ([`escalated_max_tokens`](Self::escalated_max_tokens)): `model` is the model the request
    /// went to, `current` the limit it had and `input_tokens` what its input counted.
    pub(crate) fn raised_max_tokens(
        &self,
        model: &str,
        current: u64,
        input_tokens: u64,
    ) -> Option<u64> {
        let wanted = self.escalated_max_tokens?;
        // The host's own limit (the OpenAI translations send these as they are) is kept.
        if ["max_tokens", "max_completion_tokens", "max_output_tokens"]
            .iter()
            .any(|field| self.extra.contains_key(*field))
        {
            return None;
        }
        let limits = crate::tokens::ModelTable::default().known(model)?;
        // Input and output share the window (the configured one, or the model's after a
        // switch to a fallback with a smaller one): Anthropic refuses a request whose input
        // and `max_tokens` exceed it, where the small limit was answered.
        let window = self.budget.window.min(limits.context_window);
        let room = window.saturating_sub(input_tokens);
        let raised = wanted.min(limits.max_output_tokens).min(room);
        (raised > current).then_some(raised)
    }

    /// The system prompt as sent: none when it is blank (the API refuses an empty system text
    /// block, and with prompt caching it would carry a breakpoint, which an empty block may
    /// not).
    pub(crate) fn system_prompt(&self) -> Option<&str> {
        self.system
            .as_deref()
            .filter(|system| !system.trim().is_empty())
    }

    /// The price of the configured model (longest matching prefix), if the table has one.
    pub fn price(&self) -> Option<Price> {
        self.price_of(&self.model)
    }

    /// The price of `model` (longest matching prefix), if the table has one.
    pub fn price_of(&self, model: &str) -> Option<Price> {
        self.limits
            .prices
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, price)| *price)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The API refuses `max_tokens` at or under `thinking.budget_tokens` ("max_tokens must be
    /// greater than thinking.budget_tokens"): with the default 8,192 a host asking for a
    /// 10,000-token thinking budget got that 400 on every request.
    #[test]
    fn a_thinking_budget_not_under_max_tokens_is_refused() {
        let mut config = AgentConfig::new("claude-sonnet-4-5");
        config.extra.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": 10_000}),
        );
        let error = config.check().unwrap_err();
        assert!(error.contains("budget_tokens (10000)"), "{error}");
        assert!(error.contains("max_tokens (8192)"), "{error}");
        config.limits.max_tokens = 10_000;
        assert!(config.check().is_err(), "equal is refused too");
        config.limits.max_tokens = 16_000;
        assert_eq!(config.check(), Ok(()));
        // A max_tokens in the extra fields is the one sent.
        config.extra.insert("max_tokens".into(), json!(4_096));
        assert!(config.check().unwrap_err().contains("max_tokens (4096)"));
        config.extra.remove("max_tokens");
        // An output limit of 0 is refused by the API whatever the thinking.
        config.extra.remove("thinking");
        config.limits.max_tokens = 0;
        assert!(config.check().unwrap_err().contains("max_tokens"));
        config.limits.max_tokens = 1_024;
        // Thinking without a budget (adaptive, or disabled) has nothing to compare.
        config.limits.max_tokens = 1_024;
        config
            .extra
            .insert("thinking".into(), json!({"type": "adaptive"}));
        assert_eq!(config.check(), Ok(()));
        config
            .extra
            .insert("thinking".into(), json!({"type": "disabled"}));
        assert_eq!(config.check(), Ok(()));
    }

    /// A budget whose auto-compact buffer is below its blocking buffer would block a run
    /// before compacting it; `check` ran without `ContextBudget::validate`, so the loop took it.
    #[test]
    fn a_budget_that_blocks_before_compacting_is_refused() {
        let mut config = AgentConfig::new("claude-sonnet-4-5");
        assert_eq!(config.check(), Ok(()));
        config.budget.blocking_buffer = 20_000;
        config.budget.autocompact_buffer = 3_000;
        let error = config.check().unwrap_err();
        assert!(error.starts_with("context budget: "), "{error}");
        assert!(error.contains("autocompact_buffer (3000)"), "{error}");
        // Equal buffers are one point: accepted.
        config.budget.autocompact_buffer = 20_000;
        assert_eq!(config.check(), Ok(()));
    }

    /// A cost budget for a model the price table does not price was never reached: the cost
    /// of such a model counts as nothing, and the run spent without limit.
    #[test]
    fn a_cost_budget_needs_a_price_for_each_model() {
        let mut config = AgentConfig::new("claude-sonnet-4-5");
        config.limits.cost_budget = Some(1.0);
        let error = config.check().unwrap_err();
        assert!(error.contains("\"claude-sonnet-4-5\""), "{error}");
        config
            .limits
            .prices
            .insert("claude-sonnet".into(), Price::default());
        assert_eq!(config.check(), Ok(()));
        config.fallback_model = Some("claude-haiku-4-5".into());
        assert!(config.check().unwrap_err().contains("claude-haiku-4-5"));
        config
            .limits
            .prices
            .insert("claude-".into(), Price::default());
        assert_eq!(config.check(), Ok(()));
        // No budget, no price needed.
        config.limits.cost_budget = None;
        config.limits.prices.clear();
        assert_eq!(config.check(), Ok(()));
    }

    /// The message names no function of one binding (it read "run_messages", the Rust name,
    /// in Python, Node and C, where the run is started otherwise).
    #[test]
    fn extra_fields_the_loop_owns_are_refused_in_words_every_binding_fits() {
        for (key, advice) in [
            (
                "messages",
                "start the run with the conversation as its messages",
            ),
            ("model", "set the configuration's model"),
        ] {
            let mut config = AgentConfig::new("claude-sonnet-4-5");
            config.extra.insert(key.into(), json!([]));
            assert_eq!(
                config.check(),
                Err(format!(
                    "extra \"{key}\" would replace the loop's own: {advice}"
                ))
            );
        }
    }

    /// A system prompt given in `extra` and in the configuration was sent from `extra`, the
    /// configured one dropped without a word; `"stream": false` was overwritten. Both are refused
    /// at the start; a system prompt in `extra` alone, or `"stream": true`, is taken.
    #[test]
    fn an_extra_system_beside_the_configured_one_and_an_extra_stream_off_are_refused() {
        let mut config = AgentConfig::new("claude-sonnet-4-5");
        config.system = Some("You are terse.".into());
        config
            .extra
            .insert("system".into(), json!([{"type": "text", "text": "Other."}]));
        assert_eq!(
            config.check(),
            Err("extra \"system\" would replace the system prompt given: give it one way".into())
        );
        config.system = None;
        assert_eq!(config.check(), Ok(()));
        config.system = Some("  ".into());
        assert_eq!(config.check(), Ok(()), "a blank prompt is not sent");
        for (stream, ok) in [
            (json!(false), false),
            (json!("yes"), false),
            (json!(true), true),
        ] {
            let mut config = AgentConfig::new("claude-sonnet-4-5");
            config.extra.insert("stream".into(), stream.clone());
            assert_eq!(config.check().is_ok(), ok, "{stream}");
        }
    }

    /// An extra system prompt or tool definition of the wrong shape (a number, a string where
    /// a block or a definition goes) reached the request builder, where placing the cache
    /// breakpoints panicked and the run ended without a `stop` event.
    #[test]
    fn extra_system_and_tools_of_the_wrong_shape_are_refused() {
        for (key, value, ok) in [
            ("system", json!("Be brief."), true),
            (
                "system",
                json!([{"type": "text", "text": "Be brief."}]),
                true,
            ),
            ("system", json!([]), true),
            ("system", json!(5), false),
            ("system", json!(["Be brief."]), false),
            ("system", json!([{"type": "text", "text": "a"}, 42]), false),
            (
                "tools",
                json!([{"type": "web_search_20250305", "name": "web_search"}]),
                true,
            ),
            ("tools", json!([]), true),
            ("tools", json!(["web_search"]), false),
            ("tools", json!([{"name": "a"}, null]), false),
            ("tools", json!({"name": "a"}), false),
        ] {
            let mut config = AgentConfig::new("claude-sonnet-4-5");
            config.extra.insert(key.into(), value.clone());
            let checked = config.check();
            assert_eq!(checked.is_ok(), ok, "{key}: {value} -> {checked:?}");
            if let Err(error) = checked {
                assert!(error.contains(&format!("extra \"{key}\"")), "{error}");
            }
        }
    }

    /// With thinking on, the API takes `tool_choice` `auto` or `none` only ("Thinking may not
    /// be enabled when tool_choice forces tool use"): every request of such a run was refused.
    #[test]
    fn a_forced_tool_choice_with_thinking_is_refused() {
        for thinking in [
            json!({"type": "enabled", "budget_tokens": 1_024}),
            json!({"type": "adaptive"}),
        ] {
            for forced in [
                json!({"type": "any"}),
                json!({"type": "tool", "name": "read"}),
            ] {
                let mut config = AgentConfig::new("claude-sonnet-4-5");
                config.extra.insert("thinking".into(), thinking.clone());
                config.extra.insert("tool_choice".into(), forced);
                let error = config.check().unwrap_err();
                assert!(error.contains("tool_choice"), "{error}");
            }
            let mut config = AgentConfig::new("claude-sonnet-4-5");
            config.extra.insert("thinking".into(), thinking.clone());
            config
                .extra
                .insert("tool_choice".into(), json!({"type": "auto"}));
            assert_eq!(config.check(), Ok(()));
        }
        let mut config = AgentConfig::new("claude-sonnet-4-5");
        config
            .extra
            .insert("thinking".into(), json!({"type": "disabled"}));
        config
            .extra
            .insert("tool_choice".into(), json!({"type": "any"}));
        assert_eq!(config.check(), Ok(()));
    }
}
