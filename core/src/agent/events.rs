//! What a run reports, as it happens.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model hit one of the request's stop sequences.
    StopSequence,
    /// The model declined to answer (`stop_reason: "refusal"`, or OpenAI's `content_filter`).
    Refusal,
    /// The model hit `max_tokens` more often than the continuation limit allows, or a response
    /// cut with nothing of it kept could only be asked for again with the same request.
    MaxTokens,
    /// [`max_turns`](super::Limits::max_turns) turns were taken (a turn asked again counts
    /// once).
    MaxTurns,
    /// The token or cost budget was spent.
    Budget,
    /// The run was cancelled.
    Aborted,
    /// The prompt stayed over the context window: over the blocking limit after compaction,
    /// or refused by the provider as too long when compaction could not shrink the history (a
    /// lone prompt without a compaction hook, a failed summary) or again after it.
    PromptTooLong,
    /// A model or tool error ended the run.
    Error,
}

impl StopReason {
    /// The reason's wire name, as serialised (`"end_turn"`, `"prompt_too_long"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EndTurn => "end_turn",
            Self::StopSequence => "stop_sequence",
            Self::Refusal => "refusal",
            Self::MaxTokens => "max_tokens",
            Self::MaxTurns => "max_turns",
            Self::Budget => "budget",
            Self::Aborted => "aborted",
            Self::PromptTooLong => "prompt_too_long",
            Self::Error => "error",
        }
    }
}

/// A context-management step taken before a model call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ContextAction {
    /// Old tool results were cleared.
    Microcompact {
        /// How many tool results were cleared.
        cleared: usize,
        /// Estimated tokens before.
        tokens_before: u64,
    },
    /// History was replaced by a summary.
    Compaction {
        /// Messages before.
        messages_before: usize,
        /// Messages after.
        messages_after: usize,
        /// Why: `auto` (threshold) or `reactive` (the provider said the prompt was too long).
        trigger: &'static str,
    },
}

/// Which model call an [`AgentEvent::Usage`] accounts for, an [`AgentEvent::Retry`] is made
/// for, or an [`AgentEvent::ModelFallback`] switched models in. (Named for its first use, the
/// usage event's `call`; the three events share it so that the key means the same in each.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageCall {
    /// A turn's call (`"turn"`): a response, or a call of the turn that broke off, failed or
    /// was cancelled after reporting usage; for a retry, any call of a turn.
    Turn,
    /// A call of the built-in summariser (`"compaction"`): the summary request, asked again
    /// with a raised output limit after a cut, sent again without a field the server refused,
    /// broken off or cancelled after reporting usage. A host's compaction hook makes no call
    /// the loop sees, and has none.
    Compaction,
}

impl UsageCall {
    /// The call's wire name, as serialised (`"turn"`, `"compaction"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Turn => "turn",
            Self::Compaction => "compaction",
        }
    }
}

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A model call starts.
    TurnStart {
        /// 1-based turn number. A turn asked again repeats its number (after a broken stream,
        /// a switch to the fallback model, a raised output limit, a refused request field, a
        /// reactive compaction after a refusal as too long): it counts once toward
        /// [`max_turns`](super::Limits::max_turns).
        turn: u32,
        /// Estimated input tokens of the request.
        estimated_input_tokens: u64,
    },
    /// Text streamed by the model.
    TextDelta {
        /// The text.
        text: String,
    },
    /// Thinking streamed by the model.
    ThinkingDelta {
        /// The thinking text.
        thinking: String,
    },
    /// A tool call started running. A call that never starts has no `tool_started`, only its
    /// [`ToolFinished`](AgentEvent::ToolFinished): an unknown tool or input its schema refuses
    /// (`rejected`), a hook's refusal (`denied`), a cancellation or discard before it was
    /// admitted (`skipped`).
    ToolStarted {
        /// The `tool_use` id.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// The input.
        input: Value,
    },
    /// A tool reported progress.
    ToolProgress {
        /// The `tool_use` id.
        tool_use_id: String,
        /// What it reported.
        data: Value,
    },
    /// A tool call ended: one per call handed to the tools, whether it started or not (see
    /// [`ToolStarted`](AgentEvent::ToolStarted)). A call whose input is not valid JSON, in a
    /// response that did not stop for tool use, is never handed to them and has no events.
    ToolFinished {
        /// The `tool_use` id.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// Whether its result is an error.
        is_error: bool,
        /// How it ended: the [`CallStatus`](crate::exec::CallStatus) name (`succeeded`,
        /// `failed`, `timed_out`, `cancelled`, ...).
        status: String,
        /// How long it ran.
        #[serde(serialize_with = "as_millis")]
        duration: Duration,
    },
    /// The model call is being retried (by the client: a rate limit, an overload, a server
    /// error, a connection reset, a timeout). A call of the built-in summariser reports its
    /// retries too (`call`: `compaction`), before the compaction's `context` event.
    Retry {
        /// Which call is retried: a turn's (`turn`) or the built-in summariser's
        /// (`compaction`), as [`Usage`](AgentEvent::Usage)'s `call` says.
        call: UsageCall,
        /// The attempt about to be made (2 for the first retry).
        attempt: u32,
        /// The HTTP status that caused it: `null` for a failure without one (a connection
        /// error, a timeout, or an error event the provider sent in a 200 before anything was
        /// delivered, such as Anthropic's `overloaded_error`).
        status: Option<u16>,
        /// The class of the failure, as the client's errors name it (`overloaded`,
        /// `rate_limited`, `server`, `connection`, `timeout`, ...; see
        /// [`ModelEvent::Retry`](super::ModelEvent::Retry)): what says why the loop waits
        /// when `status` is `null`. `null` from a model that does not say.
        code: Option<&'static str>,
        /// The provider is overloaded: an HTTP 529, or an overload without a 529 (an
        /// `overloaded_error` event, OpenAI's `server_is_overloaded`). Consecutive overloads
        /// count toward
        /// [`fallback_after_529_retries`](super::AgentConfig::fallback_after_529_retries).
        overloaded: bool,
        /// The wait before it.
        #[serde(serialize_with = "as_millis")]
        wait: Duration,
    },
    /// The model was overloaded and the run switched to the fallback model. The text and tool
    /// calls streamed since the turn's `turn_start` are discarded (calls started early are
    /// cancelled and reported); the turn is retried with `to`, which answers for the rest of
    /// the run. A call of the built-in summariser switches alike, before the compaction's
    /// `context` event (its retries, `call` `compaction`, precede it): the summary is asked of
    /// `to`.
    ModelFallback {
        /// Whose call was overloaded: a turn's (`turn`) or the built-in summariser's
        /// (`compaction`), as [`Retry`](AgentEvent::Retry)'s `call` says.
        call: UsageCall,
        /// The model that was overloaded.
        from: String,
        /// The fallback model.
        to: String,
        /// `overloaded` (the call failed after the client's retries) or `repeated_529` (too
        /// many consecutive overload retries within the call,
        /// [`fallback_after_529_retries`](super::AgentConfig::fallback_after_529_retries)). The
        /// label is kept for both kinds of overload it counts: HTTP 529s and overloads without
        /// one (an `overloaded_error` event first in a 200, OpenAI's `server_is_overloaded`).
        reason: &'static str,
        /// What the provider said; for `repeated_529`, how many overloads were seen and which
        /// ("3 consecutive HTTP 529 responses", "3 consecutive overloaded errors (without an
        /// HTTP 529: ...)", or both counted: "3 consecutive overloaded responses (1 HTTP 529, 2
        /// overloaded errors without one)").
        error: String,
    },
    /// A response was cut by `max_tokens` under a limit the model could go beyond: it is
    /// discarded (its text and calls, as after `model_fallback`: calls started early are
    /// cancelled and reported; its usage was reported and counts) and the same turn is asked
    /// again with the higher limit, which the `turn_start` that follows repeats the turn
    /// number for ([`AgentConfig::escalated_max_tokens`](super::AgentConfig::escalated_max_tokens)).
    MaxTokensRaised {
        /// The turn asked again.
        turn: u32,
        /// The limit the cut response had.
        from: u64,
        /// The limit the turn is asked again with.
        to: u64,
    },
    /// Context management happened.
    Context(ContextAction),
    /// The prompt cache was read much less than on the previous turn's call (a call that
    /// failed after the provider reported its usage counts: its cache read was real). Not
    /// reported after a change the loop made on purpose (compaction, microcompact) nor after a
    /// switch to the fallback model, whose cache is its own.
    CacheBreak {
        /// Cached-read tokens on the previous turn.
        previous: u64,
        /// Cached-read tokens now.
        current: u64,
        /// The prefix components whose bytes changed (`system`, `tools`, `messages`).
        changed: Vec<&'static str>,
    },
    /// Usage of one billed model call: every model call whose provider reported usage (or
    /// that completed without reporting any) is accounted for by exactly one `usage` event —
    /// each turn's response, a turn's call that broke off, failed or was cancelled after the
    /// provider reported its usage (billed, though discarded), and each call of the built-in
    /// summariser (`call`: `compaction`). The reported usage of the
    /// events adds up to the stop event's totals: the sum of `input_tokens` +
    /// `cache_creation_input_tokens` + `cache_read_input_tokens` over the events is
    /// the [`Stop`](AgentEvent::Stop) event's `input_tokens`, that of `output_tokens` its
    /// `output_tokens`. A call that completed without usage the loop can read (a Chat server
    /// that does not report it: `usage` is `null`) still has its event: the budgets count it by
    /// its estimate, the totals do not (the sum is over reported usage only); so does a stream
    /// that broke off before reporting usage (OpenAI's report it only at their end), counted by
    /// the estimate of its request and of what it streamed, and one cancelled after it delivered
    /// an event but before reporting usage, counted by the estimate of its request. A call that failed before the
    /// provider reported anything (an HTTP error, a refused request) was not billed and has no
    /// event.
    ///
    /// A turn's call's event comes before that call's `turn_end`; a summariser call's comes
    /// before the `context` event of the compaction it made (and there is none when the
    /// summary was not used).
    Usage {
        /// 1-based turn number. For a turn's call, the turn's (a turn asked again repeats it);
        /// for a summariser call, the turn the compaction is made for: the number the next
        /// `turn_start` carries (the turns taken so far plus one; for a reactive compaction
        /// after a turn the provider refused as too long, that turn's, which is asked again
        /// under its number), whether or not the run goes on to make that turn.
        turn: u32,
        /// Which call the usage is for: a turn's (`turn`) or the built-in summariser's
        /// (`compaction`).
        call: UsageCall,
        /// The `usage` object as reported (`null` when the call reported none).
        usage: Value,
        /// What the estimator had predicted for the input of the call's request (for a
        /// summariser call, of the summary request).
        estimated_input_tokens: u64,
        /// Time to first token, when measured.
        #[serde(serialize_with = "as_opt_millis")]
        time_to_first_token: Option<Duration>,
    },
    /// A model call ended.
    TurnEnd {
        /// 1-based turn number.
        turn: u32,
        /// The provider's stop reason.
        stop_reason: Option<String>,
    },
    /// The run ended. Always the last event.
    Stop {
        /// Why.
        reason: StopReason,
        /// The error, when `reason` is `error` (or a note, for `prompt_too_long`, `budget` and
        /// a `max_tokens` stop of code `max_tokens_no_progress`).
        error: Option<String>,
        /// A stable, machine-readable name of what `error` says, set exactly when `error` is.
        ///
        /// For `reason` `error`: a failed model call's code, which from the client is the code
        /// the bindings' errors carry (`authentication`, `permission`, `not_found`,
        /// `rate_limited` (the retries ran out), `quota_exceeded`, `invalid_request`, `server`,
        /// `connection`, `timeout`, `protocol` (an oversized event too);
        /// `invalid_configuration` for a client configuration error), else
        /// `overloaded` (no fallback model, or it was overloaded too), `stream_truncated` (the
        /// retried turn was cut again), or a host model's own
        /// ([`ModelError::with_code`](super::ModelError::with_code); `model_error` for
        /// [`ModelError::other`](super::ModelError::other)); or the loop's: `invalid_history`
        /// (a conversation handed in that the API would refuse; no request was made),
        /// `invalid_configuration`, `invalid_tool_definition`, `internal` (the model or the
        /// loop itself panicked, or the model's stream ended without a final item), `hook_failed` (the compaction hook
        /// panicked). For `prompt_too_long`: `prompt_too_long`; for `budget`: `token_budget`
        /// or `cost_budget`; for `max_tokens`: `max_tokens_no_progress` when nothing of the
        /// cut response could be kept and the next request would be the one just cut (after a
        /// cut by the context window: even after the compaction before it; a
        /// `max_tokens` stop after [`max_continuations`](super::AgentConfig::max_continuations)
        /// has none).
        error_code: Option<&'static str>,
        /// The HTTP status of the failed model call that ended the run (for an error event in
        /// a 200, the status it names as its numeric `code`). Set only when the run stopped
        /// because a model call failed — reason `error` with a model's code (the client's, a
        /// stream cut again, an overload with no fallback or after it, a host model's), or
        /// `prompt_too_long` after the provider refused the prompt and compaction could not
        /// help — and the failure had one; `null` for every other stop, and for a failure
        /// without a status (a lost connection, a timeout, a stream cut without an error event,
        /// a host model's [`ModelError::other`](super::ModelError::other) unless it added
        /// [`FailureDetails`](super::FailureDetails)). After a switch to the fallback model,
        /// the fallback's failure is the one reported.
        status: Option<u16>,
        /// The provider's request id of that failed call (its `request-id` or `x-request-id`
        /// header; for a stream cut again, the call cut), to quote to the provider's support.
        /// Set on the same stops as `status`, when the response's headers arrived; `null`
        /// otherwise.
        request_id: Option<String>,
        /// The wait the provider asked for (`retry-after-ms` or `retry-after`) in its last
        /// answer to that call, in milliseconds: set on a stop whose call got an HTTP error
        /// status naming a wait (a rate limit's 429, an overload's 529, a server error's 5xx
        /// such as a 503) after the client's retries ran out; when to schedule a new run.
        /// `null` otherwise: the client keeps no wait for other statuses (a 4xx's other than
        /// a 429), nor has one for an error event inside a stream; a host model sets it in its
        /// [`FailureDetails`](super::FailureDetails).
        #[serde(serialize_with = "as_opt_millis")]
        retry_after: Option<Duration>,
        /// The conversation, valid for the API (every `tool_use` answered; a paused turn's
        /// message, when a run stops after a `pause_turn` and it is last, without the trailing
        /// whitespace the API refuses at the end of a final assistant message).
        messages: Vec<Value>,
        /// Turns taken: model calls, but a turn asked again (after a broken stream, a switch
        /// to the fallback model, a raised output limit, a refused request field, a reactive
        /// compaction after a refusal as too long) counts once, and the summariser's calls not
        /// at all.
        turns: u32,
        /// Tool calls handed to the tools: the number of `tool_finished` events, one per call
        /// whatever its status (a call refused as unknown, skipped or cancelled counts too),
        /// including calls started early in a response that was then discarded (a switch to
        /// the fallback model, a raised output limit, a broken stream, a cancel) or that did
        /// not stop for tool use (`end_turn`, `refusal`, `stop_sequence`, `pause_turn`, a cut
        /// by `max_tokens` or the context window), whose results never entered history. Such a
        /// call is a concurrency-safe one, started while the response streamed; it is
        /// cancelled as soon as the stop reason says the response's calls get no results, but
        /// may have run in part or whole before (its `tool_finished` status says how it
        /// ended). A call never handed to them has no events and does not count: one whose
        /// input was not valid JSON (answered with an error), or any other call of a
        /// response that did not stop for tool use (it waited for the stop reason, and was
        /// never run).
        tool_calls: u32,
        /// Input tokens reported in total (including cache reads and writes), over every
        /// call: the turns' and the summariser's; the sum of the `usage` events' (see
        /// [`AgentEvent::Usage`]).
        input_tokens: u64,
        /// Output tokens reported in total, over every call; the sum of the `usage` events'.
        output_tokens: u64,
    },
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

fn as_opt_millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64() * 1e3),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_reason_s_name_is_its_serialised_form() {
        use StopReason::*;
        for reason in [
            EndTurn,
            StopSequence,
            Refusal,
            MaxTokens,
            MaxTurns,
            Budget,
            Aborted,
            PromptTooLong,
            Error,
        ] {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
    }

    #[test]
    fn a_usage_call_s_name_is_its_serialised_form() {
        for call in [UsageCall::Turn, UsageCall::Compaction] {
            assert_eq!(serde_json::to_value(call).unwrap(), call.as_str());
        }
    }
}
