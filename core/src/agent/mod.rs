//! The agent loop: model call → stream decode → tool executor (eager start of sealed safe calls)
//! → tool results → next turn, with context management before each call.
//!
//! - Each turn: microcompact and compaction as the [`ContextTracker`](crate::tokens::ContextTracker)
//!   requires, then the request (tool definitions in a stable order, `cache_control` breakpoints
//!   on the system prompt, the tools and the last message), then the stream. A sealed
//!   concurrency-safe call starts at once; the first unsafe call and everything after it waits for
//!   the message to end with `stop_reason: "tool_use"`; a message whose stop reason is another
//!   gets no results, and its calls started early are cancelled as soon as that stop reason
//!   arrives (they may have run, in part or whole). Results join history in request order as
//!   one user message.
//! - Recovery: a turn cut by `max_tokens` under a limit the model could go beyond is asked
//!   again once with it raised ([`AgentConfig::escalated_max_tokens`],
//!   [`AgentEvent::MaxTokensRaised`]); then `max_tokens` in text is continued (3 times by
//!   default) with a "resume directly"
//!   message, and calls started early are cancelled and reported; a prompt-too-long error leads
//!   to one reactive compaction and a retry (none when compaction could not shrink the history:
//!   a lone prompt without a compaction hook, or a summary call that failed — the run stops with
//!   `prompt_too_long`); a truncated stream is discarded (its calls too) and the turn retried
//!   once, and so is one that failed after it started with a failure a new call may not meet
//!   (an overload without a fallback model, a server error, a rate limit, a timeout: the client
//!   retries those only while nothing was delivered).
//! - Model fallback ([`AgentConfig::fallback_model`]): a call that fails with
//!   [`ModelError::Overloaded`] after the client's retries, or that sees
//!   [`AgentConfig::fallback_after_529_retries`] consecutive 529 retries, is discarded like a
//!   truncated one (early calls cancelled, nothing enters history) and the turn is retried once
//!   with the fallback model, which then answers for the rest of the run
//!   ([`AgentEvent::ModelFallback`]).
//! - Errors: a run that fails ends with [`AgentEvent::Stop`] holding the error and a stable
//!   `error_code` (the client error's code, or the loop's own: `invalid_history`, `internal`,
//!   ...), which hosts match on instead of the message; a host [`Model`] names its failures with
//!   [`ModelError::with_code`].
//! - Providers: history and requests are in the Anthropic Messages shape. Against OpenAI Chat
//!   Completions endpoints the [`openai`] module translates the request on the way out and the
//!   decoded stream and final message on the way back, and against the OpenAI Responses API
//!   the [`responses`] module does (the client does this for `Provider::OpenAiChat` and
//!   `Provider::OpenAiResponses`; [`replay::ScriptedModel::openai_chat`] and
//!   [`replay::ScriptedModel::openai_responses`] in-process).
//! - Invariant: every `tool_use` in history is answered by exactly one `tool_result` in the next
//!   message — after an abort, a retry or a compaction too ([`check_tool_pairing`]); a call id
//!   a response repeats (or leaves empty) is renamed so that it holds, and so is one an earlier
//!   turn used (Anthropic refuses repeated `tool_use` ids anywhere in a request; a host's
//!   history holding some has the later calls and their results renamed).
//! - Requests the API takes: history keeps no blank text block (in tool results neither), no
//!   thinking a response left last in its message, no thought a cut (`max_tokens`, the context
//!   window, a refusal) left without its signature, no call input other than an object, tool
//!   results first in their message and none empty when in error. Other unsigned thinking stays
//!   in history: it is a Chat model's reasoning, which Chat servers need back with the calls it
//!   came with (the loop cannot tell it from an Anthropic thought that came without its
//!   signature, which a whole Anthropic response does not hold). A paused turn goes back
//!   without trailing whitespace, at most four `cache_control` breakpoints go out, and the
//!   fallback model is not sent the primary's thinking; thinking a host's history leaves at the
//!   end of an earlier assistant message, and unsigned thinking in one without calls, is left
//!   out of the request. A configuration (tool
//!   names outside `^[a-zA-Z0-9_-]{1,64}$` too) or a conversation the API would refuse on
//!   every request stops the run before any. A server that refuses `stream_options` is asked
//!   again without it, for the rest of the run.

mod call_ids;
mod config;
mod context;
mod events;
mod host_wait;
mod model;
pub mod openai;
pub mod replay;
pub mod responses;
mod run;
mod wire;

pub use config::{AgentConfig, CLEARED_TOOL_RESULT, Limits, Price};
pub use context::{
    CacheBreakDetector, SUMMARY_PROMPT, check_history, check_tool_pairing, history_from_summary,
    microcompact, place_cache_breakpoints, strip_tool_uses, tool_use_ids,
};
pub use events::{AgentEvent, ContextAction, StopReason, UsageCall};
pub use host_wait::HostWait;
pub use model::{FailureDetails, Model, ModelError, ModelEvent, ModelStream, is_prompt_too_long};
pub use run::{Agent, AgentRun, CompactHook, RunOptions};
