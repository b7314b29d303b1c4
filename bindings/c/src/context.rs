//! Context budgeting: the thresholds at which to warn, compact and refuse to send
//! (`fl_context_budget`), and the token count of a growing conversation anchored on the
//! provider's usage (`fl_context_tracker`).

use std::ffi::c_char;

use ferroloop_core::tokens::budget::{BudgetOverrides, InvalidAutocompactPercent, InvalidBudget};
use ferroloop_core::tokens::json_text::parse_json_for_counting;
use ferroloop_core::tokens::{
    BudgetState, ContextBudget, ContextTracker, CountMethod, ModelTable, Usage,
};
use serde_json::Value;

use crate::boundary::{self, FfiError, FfiResult};
use crate::status::fl_status;
use crate::text::{self, Out};
use crate::tokens::family_arg;

/// The value of an `fl_context_budget_options` field that keeps the default for the window
/// (`UINT64_MAX`).
pub const FL_CONTEXT_BUDGET_DEFAULT: u64 = u64::MAX;

/// Overrides of a budget's thresholds. Start from `fl_context_budget_options_default()`, whose
/// fields all keep the defaults, and set the ones to change.
///
/// The defaults are Claude Code's: at most 20,000 output tokens reserved out of the window,
/// auto-compact 13,000 below the effective window, warn 20,000 below the auto-compact point,
/// block 3,000 below the effective window. For windows too small to hold them (below about
/// 100,000 tokens) the defaults shrink in proportion; a field set here is used as given, and a
/// default never crosses it (the auto-compact default rises to a `blocking_buffer` given, the
/// blocking default falls to an `autocompact_buffer` given). The `autocompact_buffer` must be at
/// least the `blocking_buffer`, judged on the values given and the unscaled defaults (13,000 and
/// 3,000), so that it does not depend on the window; and the settings must not leave an
/// auto-compact threshold of 0 where the blocking threshold is above 0 (a context compacted
/// before every request). The same rule as Python's and Node's constructors.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct fl_context_budget_options {
    /// At most this much output is reserved out of the window (`FL_CONTEXT_BUDGET_DEFAULT`:
    /// 20,000, scaled for small windows).
    pub output_reserve_cap: u64,
    /// Auto-compact this far below the effective window (`FL_CONTEXT_BUDGET_DEFAULT`: 13,000,
    /// scaled for small windows).
    pub autocompact_buffer: u64,
    /// Warn this far below the auto-compact threshold (`FL_CONTEXT_BUDGET_DEFAULT`: 20,000,
    /// scaled for small windows).
    pub warning_buffer: u64,
    /// Block this far below the effective window (`FL_CONTEXT_BUDGET_DEFAULT`: 3,000, scaled
    /// for small windows).
    pub blocking_buffer: u64,
    /// Auto-compact at this percentage of the effective window instead, when that is lower than
    /// the buffer-based threshold (Claude Code's `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`): in
    /// (0, 100]. 0 (the default): no percentage. A negative, NaN, infinite or larger value is
    /// `FL_STATUS_INVALID_ARGUMENT`.
    pub autocompact_percent: f64,
}

/// Where a token count stands against a budget. The numeric values are part of the ABI and
/// ordered: each state is more urgent than the one before.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum fl_context_state {
    /// Below the warning threshold.
    FL_CONTEXT_OK = 0,
    /// At or above the warning threshold: tell the user context is running low.
    FL_CONTEXT_WARNING = 1,
    /// At or above the auto-compact threshold: compact before the next request.
    FL_CONTEXT_AUTO_COMPACT = 2,
    /// At or above the blocking threshold: do not send without compacting.
    FL_CONTEXT_BLOCKING = 3,
}

/// A budget's limits and computed thresholds, in tokens. A count is in a state from its
/// threshold on: `warning <= autocompact <= blocking <= effective_window` always hold (a budget
/// whose buffers would break that order is refused); where two are equal, the more urgent
/// state wins.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct fl_context_thresholds {
    /// The model's context window.
    pub window: u64,
    /// The request's max output tokens.
    pub max_output_tokens: u64,
    /// The window minus the reserved output.
    pub effective_window: u64,
    /// `FL_CONTEXT_WARNING` from this count on.
    pub warning: u64,
    /// `FL_CONTEXT_AUTO_COMPACT` from this count on.
    pub autocompact: u64,
    /// `FL_CONTEXT_BLOCKING` from this count on.
    pub blocking: u64,
}

/// Context thresholds for one model (opaque). Create it with `fl_context_budget_new` or
/// `fl_context_budget_new_for_model`, release it with `fl_context_budget_free`.
///
/// Immutable: the reading functions may be called from any number of threads at once;
/// `fl_context_budget_free` must not overlap them.
pub struct fl_context_budget {
    budget: ContextBudget,
}

/// The options that keep every default (`FL_CONTEXT_BUDGET_DEFAULT` buffers, no percentage).
/// Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fl_context_budget_options_default() -> fl_context_budget_options {
    fl_context_budget_options {
        output_reserve_cap: FL_CONTEXT_BUDGET_DEFAULT,
        autocompact_buffer: FL_CONTEXT_BUDGET_DEFAULT,
        warning_buffer: FL_CONTEXT_BUDGET_DEFAULT,
        blocking_buffer: FL_CONTEXT_BUDGET_DEFAULT,
        autocompact_percent: 0.0,
    }
}

/// The settings of `options` (NULL: none) a budget is built with: a field other than
/// `FL_CONTEXT_BUDGET_DEFAULT` (or, for the percentage, other than 0) is given.
///
/// # Safety
/// `options` must be NULL or point to an `fl_context_budget_options`.
unsafe fn overrides_of(options: *const fl_context_budget_options) -> BudgetOverrides {
    // SAFETY: the caller's promise; NULL is handled by `as_ref`.
    let Some(options) = (unsafe { options.as_ref() }).copied() else {
        return BudgetOverrides::default();
    };
    let given = |value: u64| (value != FL_CONTEXT_BUDGET_DEFAULT).then_some(value);
    let percent = options.autocompact_percent;
    BudgetOverrides {
        output_reserve_cap: given(options.output_reserve_cap),
        autocompact_buffer: given(options.autocompact_buffer),
        warning_buffer: given(options.warning_buffer),
        blocking_buffer: given(options.blocking_buffer),
        // 0 (positive or negative zero) is "no percentage"; everything else goes to the core's
        // check.
        autocompact_percent: (percent != 0.0).then_some(percent),
    }
}

/// The core's refusal of a budget, as `FL_STATUS_INVALID_ARGUMENT` with its message (the C
/// field names are the core's).
fn budget_error(error: InvalidBudget) -> FfiError {
    match error {
        InvalidBudget::Percent(InvalidAutocompactPercent(percent)) => FfiError::invalid(format!(
            "autocompact_percent must be in (0, 100] (or 0 for none), got {percent}"
        )),
        other => FfiError::invalid(other.to_string()),
    }
}

/// Stores a new budget in `*out`.
fn store_budget(budget: ContextBudget, out: Out<*mut fl_context_budget>) {
    let handle = Box::new(fl_context_budget { budget });
    // SAFETY: not NULL (checked by `Out::new`) and writable (the caller's promise).
    unsafe { out.write(Box::into_raw(handle)) };
}

/// Creates a budget for a context `window` and the request's `max_output_tokens`, with the
/// overrides in `options` (NULL: the defaults, as from `fl_context_budget_options_default`),
/// and stores it in `*out`. The caller owns it and releases it with `fl_context_budget_free`.
///
/// Any window is accepted, 0 included (every count is then `FL_CONTEXT_BLOCKING`). Returns
/// `FL_STATUS_INVALID_ARGUMENT` for an `autocompact_percent` outside (0, 100] other than 0, for
/// an `autocompact_buffer` smaller than the `blocking_buffer` (as judged in
/// `fl_context_budget_options`: the auto-compact point would lie above the blocking point, so
/// the state would never be `FL_CONTEXT_AUTO_COMPACT`; the message names both fields), and for
/// settings that leave an auto-compact threshold of 0 below a blocking threshold above 0 (the
/// context would be compacted before every request). `*out` is then left unchanged.
/// Thread-safe.
///
/// # Safety
/// `options` must be NULL or point to an `fl_context_budget_options`; `out` must be valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_budget_new(
    window: u64,
    max_output_tokens: u64,
    options: *const fl_context_budget_options,
    out: *mut *mut fl_context_budget,
) -> fl_status {
    boundary::run(|| {
        let out = Out::new(out, "out")?;
        // SAFETY: the caller's promise on `options`.
        let overrides = unsafe { overrides_of(options) };
        let budget = ContextBudget::with_overrides(window, max_output_tokens, &overrides)
            .map_err(budget_error)?;
        store_budget(budget, out);
        Ok(())
    })
}

/// Creates a budget for the model named `model` (`model_len` bytes of UTF-8), its context
/// window and max output tokens taken from the built-in model table, with the overrides in
/// `options` (NULL: the defaults), and stores it in `*out`. The caller owns it and releases it
/// with `fl_context_budget_free`.
///
/// The longest matching name prefix wins, regardless of letter case; gateway spellings find the
/// same entry (`openai/gpt-4o`, `anthropic/claude-3.5-sonnet`,
/// `us.anthropic.claude-3-5-haiku-20241022-v1:0`); a `[1m]` suffix selects a 1,000,000-token
/// window. A model not in the table (or an empty name) gets a 200,000-token window and 32,000
/// max output tokens: read the limits chosen with `fl_context_budget_thresholds`.
///
/// Returns `FL_STATUS_INVALID_UTF8` for a name that is not UTF-8, `FL_STATUS_INVALID_ARGUMENT`
/// for a bad `autocompact_percent` or settings a budget cannot keep (as
/// `fl_context_budget_new`). Thread-safe.
///
/// # Safety
/// `model` must be valid for reads of `model_len` bytes; `options` must be NULL or point to an
/// `fl_context_budget_options`; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_budget_new_for_model(
    model: *const c_char,
    model_len: usize,
    options: *const fl_context_budget_options,
    out: *mut *mut fl_context_budget,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `model`.
        let model = unsafe { text::str_arg(model, model_len, "model") }?;
        let out = Out::new(out, "out")?;
        // SAFETY: the caller's promise on `options`.
        let overrides = unsafe { overrides_of(options) };
        let budget =
            ContextBudget::for_model_with_overrides(model, &ModelTable::default(), &overrides)
                .map_err(budget_error)?;
        store_budget(budget, out);
        Ok(())
    })
}

/// Releases a budget. NULL is accepted and ignored.
///
/// # Safety
/// `budget` must be NULL or a budget from `fl_context_budget_new*`, not freed yet; it must not
/// be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_budget_free(budget: *mut fl_context_budget) {
    boundary::run_void(|| {
        if !budget.is_null() {
            // SAFETY: a pointer from `Box::into_raw` in `store_budget`, freed only once.
            drop(unsafe { Box::from_raw(budget) });
        }
    });
}

/// Writes the state of a context holding `tokens` tokens into `*state`: the most urgent state
/// whose threshold `tokens` reaches. Thread-safe.
///
/// # Safety
/// `budget` must be a live budget; `state` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_budget_state(
    budget: *const fl_context_budget,
    tokens: u64,
    state: *mut fl_context_state,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `budget`.
        let budget = unsafe { text::handle_ref(budget, "budget") }?;
        let state = Out::new(state, "state")?;
        let value = match budget.budget.state(tokens) {
            BudgetState::Ok => fl_context_state::FL_CONTEXT_OK,
            BudgetState::Warning => fl_context_state::FL_CONTEXT_WARNING,
            BudgetState::AutoCompact => fl_context_state::FL_CONTEXT_AUTO_COMPACT,
            BudgetState::Blocking => fl_context_state::FL_CONTEXT_BLOCKING,
        };
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { state.write(value) };
        Ok(())
    })
}

/// Writes the budget's limits and computed thresholds into `*thresholds`. Thread-safe.
///
/// # Safety
/// `budget` must be a live budget; `thresholds` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_budget_thresholds(
    budget: *const fl_context_budget,
    thresholds: *mut fl_context_thresholds,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `budget`.
        let budget = &unsafe { text::handle_ref(budget, "budget") }?.budget;
        let thresholds = Out::new(thresholds, "thresholds")?;
        let value = fl_context_thresholds {
            window: budget.window,
            max_output_tokens: budget.max_output_tokens,
            effective_window: budget.effective_window(),
            warning: budget.warning_threshold(),
            autocompact: budget.autocompact_threshold(),
            blocking: budget.blocking_threshold(),
        };
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { thresholds.write(value) };
        Ok(())
    })
}

/// Writes the percentage of the auto-compact threshold still free with `tokens` in the context
/// (0 to 100; 0 when the threshold is 0) into `*percent`. Thread-safe.
///
/// # Safety
/// `budget` must be a live budget; `percent` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_budget_percent_left(
    budget: *const fl_context_budget,
    tokens: u64,
    percent: *mut f64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `budget`.
        let budget = unsafe { text::handle_ref(budget, "budget") }?;
        let percent = Out::new(percent, "percent")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { percent.write(budget.budget.percent_left(tokens)) };
        Ok(())
    })
}

/// How a tracker's token count was obtained. The numeric values are part of the ABI.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum fl_count_method {
    /// Straight from the provider's usage: nothing was appended since (`"exact"` in Python and
    /// Node).
    FL_COUNT_EXACT = 0,
    /// The provider's usage for the covered prefix plus an estimate of the messages appended
    /// since (`"usage+estimate"`).
    FL_COUNT_USAGE_ESTIMATE = 1,
    /// Estimated only: no usage recorded yet, or the covered prefix was changed (`"estimate"`).
    FL_COUNT_ESTIMATE = 2,
}

/// A tracker's token count and how it was obtained.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct fl_token_count {
    /// Tokens in the context.
    pub tokens: u64,
    /// How `tokens` was obtained.
    pub method: fl_count_method,
}

/// The token size of a growing conversation (opaque): the provider's `usage` is authoritative
/// for the messages it covered; only the messages appended after it are estimated, scaled by a
/// correction factor learned from earlier usage. Each message is estimated once, when pushed.
///
/// Create it with `fl_context_tracker_new`; set the system prompt and tools, push every message
/// (the assistant's responses included), record each response's usage, read the count with
/// `fl_context_tracker_tokens` (and compare it with an `fl_context_budget`); release it with
/// `fl_context_tracker_free`.
///
/// Not thread-safe: use a tracker from one thread at a time (it may move between threads).
pub struct fl_context_tracker {
    tracker: ContextTracker,
}

/// Parses `json[..len]` as the JSON argument `name`; a lone surrogate escape in a string
/// counts as U+FFFD, as in Python and Node.
///
/// # Safety
/// `json` must be valid for reads of `len` bytes.
unsafe fn json_arg(json: *const c_char, len: usize, name: &str) -> FfiResult<Value> {
    // SAFETY: forwarded from the caller.
    let text = unsafe { text::str_arg(json, len, name) }?;
    parse_json_for_counting(text)
        .map_err(|error| FfiError::invalid(format!("`{name}` is not valid JSON: {error}")))
}

/// The tracker behind a handle and the parsed JSON argument.
///
/// # Safety
/// As for `handle_mut` and `json_arg`.
unsafe fn tracker_and_json<'a>(
    tracker: *mut fl_context_tracker,
    json: *const c_char,
    len: usize,
    name: &str,
) -> FfiResult<(&'a mut ContextTracker, Value)> {
    // SAFETY: forwarded from the caller.
    let handle = unsafe { text::handle_mut(tracker, "tracker") }?;
    // SAFETY: forwarded from the caller.
    let value = unsafe { json_arg(json, len, name) }?;
    Ok((&mut handle.tracker, value))
}

/// Creates a tracker for the tokenizer family named `tokenizer` (`tokenizer_len` bytes; as for
/// `fl_tokens_estimate_text`; NULL / length 0: `"claude"`), empty and with correction 1.0, and
/// stores it in `*out`. The caller owns it and releases it with `fl_context_tracker_free`.
///
/// Returns `FL_STATUS_INVALID_ARGUMENT` for an unknown family. Thread-safe.
///
/// # Safety
/// `tokenizer` must be valid for reads of `tokenizer_len` bytes; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_new(
    tokenizer: *const c_char,
    tokenizer_len: usize,
    out: *mut *mut fl_context_tracker,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tokenizer`.
        let family = unsafe { family_arg(tokenizer, tokenizer_len) }?;
        let out = Out::new(out, "out")?;
        let handle = Box::new(fl_context_tracker {
            tracker: ContextTracker::new(family),
        });
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// Releases a tracker. NULL is accepted and ignored.
///
/// # Safety
/// `tracker` must be NULL or a tracker from `fl_context_tracker_new`, not freed yet; it must not
/// be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_free(tracker: *mut fl_context_tracker) {
    boundary::run_void(|| {
        if !tracker.is_null() {
            // SAFETY: a pointer from `Box::into_raw` in `fl_context_tracker_new`, freed once.
            drop(unsafe { Box::from_raw(tracker) });
        }
    });
}

/// Sets the system prompt: `system_json` (`len` bytes) is the request's `system` as JSON, a
/// string (`"\"You are terse.\""`), an array of text blocks, or `null` for none. Setting a
/// different prompt drops the usage anchor (the next count is an estimate); setting the same
/// one again costs nothing and keeps it.
///
/// Returns `FL_STATUS_INVALID_ARGUMENT` for JSON that does not parse or is not a string, an
/// array or null (the tracker is then unchanged).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `system_json` must be valid for reads
/// of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_set_system(
    tracker: *mut fl_context_tracker,
    system_json: *const c_char,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `tracker` and `system_json`.
        let (tracker, system) =
            unsafe { tracker_and_json(tracker, system_json, len, "system_json") }?;
        tracker
            .try_set_system(&system)
            .map_err(|error| FfiError::invalid(format!("`system_json`: {error}")))
    })
}

/// Sets the tool definitions: `tools_json` (`len` bytes) is the request's `tools` array as JSON
/// (`[]` or `null` for none). Changing them drops the usage anchor, as for
/// `fl_context_tracker_set_system`.
///
/// Returns `FL_STATUS_INVALID_ARGUMENT` for JSON that does not parse or is not an array or null
/// (the tracker is then unchanged).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `tools_json` must be valid for reads
/// of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_set_tools(
    tracker: *mut fl_context_tracker,
    tools_json: *const c_char,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `tracker` and `tools_json`.
        let (tracker, tools) = unsafe { tracker_and_json(tracker, tools_json, len, "tools_json") }?;
        tracker
            .try_set_tools(&tools)
            .map_err(|error| FfiError::invalid(format!("`tools_json`: {error}")))
    })
}

/// Appends a message: `message_json` (`len` bytes) is one message object as JSON
/// (`{"role":"user","content":...}`, Anthropic or OpenAI shape). Only this message is estimated.
///
/// Returns `FL_STATUS_INVALID_ARGUMENT` for JSON that does not parse or is not an object (the
/// tracker is then unchanged).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `message_json` must be valid for
/// reads of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_push_message(
    tracker: *mut fl_context_tracker,
    message_json: *const c_char,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `tracker` and `message_json`.
        let (tracker, message) =
            unsafe { tracker_and_json(tracker, message_json, len, "message_json") }?;
        tracker
            .try_push_message(&message)
            .map_err(|error| FfiError::invalid(format!("`message_json`: {error}")))
    })
}

/// Replaces every message (after compaction, or an edit of the history): `messages_json`
/// (`len` bytes) is an array of message objects as JSON. Blocks seen before are not estimated
/// again. The usage recorded stays if the messages it covered open the new history unchanged
/// (same content, in order); otherwise it is dropped.
///
/// Returns `FL_STATUS_INVALID_ARGUMENT` for JSON that does not parse, is not an array, or holds
/// something other than objects (the tracker is then unchanged).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `messages_json` must be valid for
/// reads of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_replace_messages(
    tracker: *mut fl_context_tracker,
    messages_json: *const c_char,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `tracker` and `messages_json`.
        let (tracker, messages) =
            unsafe { tracker_and_json(tracker, messages_json, len, "messages_json") }?;
        let Value::Array(messages) = messages else {
            return Err(FfiError::invalid("`messages_json` must be a JSON array"));
        };
        tracker
            .try_replace_messages(&messages)
            .map_err(|error| FfiError::invalid(format!("`messages_json`: {error}")))
    })
}

/// Keeps the first `len` messages (a larger `len` changes nothing). The usage anchor survives
/// when it covered no dropped message.
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_truncate(
    tracker: *mut fl_context_tracker,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_mut(tracker, "tracker") }?;
        handle.tracker.truncate(len);
        Ok(())
    })
}

/// Writes the number of messages tracked into `*len`.
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `len` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_len(
    tracker: *const fl_context_tracker,
    len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_ref(tracker, "tracker") }?;
        let len = Out::new(len, "len")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { len.write(handle.tracker.len()) };
        Ok(())
    })
}

/// Parses a usage object.
///
/// # Safety
/// `usage_json` must be valid for reads of `len` bytes.
unsafe fn usage_arg(usage_json: *const c_char, len: usize) -> FfiResult<Usage> {
    // SAFETY: forwarded from the caller.
    let value = unsafe { json_arg(usage_json, len, "usage_json") }?;
    Usage::parse(&value).map_err(|error| FfiError::invalid(format!("`usage_json`: {error}")))
}

/// Records a response's usage as covering every message pushed so far (push the response's own
/// message first): `usage_json` (`len` bytes) is the `usage` object as JSON, Anthropic
/// (`input_tokens`, `cache_creation_input_tokens`, `cache_read_input_tokens`, `output_tokens`)
/// or OpenAI (`prompt_tokens`, `completion_tokens`) shape. Also updates the correction factor.
/// Usage with no prompt tokens (only `output_tokens`) is missing rather than measured: it is
/// ignored (`FL_STATUS_OK`, nothing changes).
///
/// Returns `FL_STATUS_INVALID_ARGUMENT` for JSON that does not parse, has no token counts, or
/// has a count field that is not a non-negative integer (`null` is absent) (the tracker is then
/// unchanged).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `usage_json` must be valid for reads
/// of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_record_usage(
    tracker: *mut fl_context_tracker,
    usage_json: *const c_char,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_mut(tracker, "tracker") }?;
        // SAFETY: the caller's promise on `usage_json`.
        let usage = unsafe { usage_arg(usage_json, len) }?;
        handle.tracker.record_usage(usage);
        Ok(())
    })
}

/// As `fl_context_tracker_record_usage`, for usage covering only the first `covered` messages
/// (more than the messages tracked counts as all of them).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `usage_json` must be valid for reads
/// of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_record_usage_at(
    tracker: *mut fl_context_tracker,
    usage_json: *const c_char,
    len: usize,
    covered: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_mut(tracker, "tracker") }?;
        // SAFETY: the caller's promise on `usage_json`.
        let usage = unsafe { usage_arg(usage_json, len) }?;
        handle.tracker.record_usage_at(usage, covered);
        Ok(())
    })
}

/// Writes the context's token count now, and how it was obtained, into `*count`.
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `count` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_tokens(
    tracker: *const fl_context_tracker,
    count: *mut fl_token_count,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_ref(tracker, "tracker") }?;
        let count = Out::new(count, "count")?;
        let tokens = handle.tracker.tokens();
        let method = match tokens.method {
            CountMethod::Exact => fl_count_method::FL_COUNT_EXACT,
            CountMethod::UsageEstimate => fl_count_method::FL_COUNT_USAGE_ESTIMATE,
            CountMethod::Estimate => fl_count_method::FL_COUNT_ESTIMATE,
        };
        let value = fl_token_count {
            tokens: tokens.tokens,
            method,
        };
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { count.write(value) };
        Ok(())
    })
}

/// Writes the current model's correction factor applied to estimates (usage / estimate,
/// smoothed, within [0.8, 1.6]; 1.0 until usage is recorded) into `*correction`.
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `correction` must be valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_correction(
    tracker: *const fl_context_tracker,
    correction: *mut f64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_ref(tracker, "tracker") }?;
        let correction = Out::new(correction, "correction")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { correction.write(handle.tracker.correction()) };
        Ok(())
    })
}

/// Sets the current model's correction factor (for example carried over from an earlier
/// session with the same model), clamped to [0.8, 1.6]. Returns `FL_STATUS_INVALID_ARGUMENT`
/// for a value that is not a positive finite number (the factor is then kept).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_set_correction(
    tracker: *mut fl_context_tracker,
    correction: f64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_mut(tracker, "tracker") }?;
        handle
            .tracker
            .set_correction(correction)
            .map_err(|error| FfiError::invalid(error.to_string()))
    })
}

/// Selects the model the next requests go to (`model_len` bytes of UTF-8): usage recorded from
/// now on moves its correction factor, and estimates are scaled by it. A model selected before
/// gets back the factor it had; one selected for the first time starts from the current
/// model's factor; while the unnamed model is selected (a new tracker, or an empty name), the
/// next model named takes it over (usage recorded before counts as its). Usage recorded before
/// a switch stays, but `fl_context_tracker_tokens` reports it as `FL_COUNT_USAGE_ESTIMATE`, not
/// exact, until the selected model reports usage of its own.
///
/// Returns `FL_STATUS_INVALID_UTF8` for a name that is not UTF-8 (the tracker unchanged).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `model` must be valid for reads of
/// `model_len` bytes (NULL only when `model_len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_set_model(
    tracker: *mut fl_context_tracker,
    model: *const c_char,
    model_len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_mut(tracker, "tracker") }?;
        // SAFETY: the caller's promise on `model`.
        let model = unsafe { text::str_arg(model, model_len, "model") }?;
        handle.tracker.set_model(model);
        Ok(())
    })
}

/// Writes the correction factor the model named `model` (`model_len` bytes of UTF-8) learned
/// into `*correction`, or 0.0 if it was never selected with `fl_context_tracker_set_model` (a
/// factor is never 0: it stays within [0.8, 1.6]).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `model` must be valid for reads of
/// `model_len` bytes (NULL only when `model_len` is 0); `correction` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_correction_for(
    tracker: *const fl_context_tracker,
    model: *const c_char,
    model_len: usize,
    correction: *mut f64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_ref(tracker, "tracker") }?;
        // SAFETY: the caller's promise on `model`.
        let model = unsafe { text::str_arg(model, model_len, "model") }?;
        let correction = Out::new(correction, "correction")?;
        let factor = handle.tracker.correction_for(model).unwrap_or(0.0);
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { correction.write(factor) };
        Ok(())
    })
}

/// Writes the number of bytes run through the estimator so far into `*bytes` (a work counter:
/// blocks seen before cost nothing again).
///
/// # Safety
/// `tracker` must be a live tracker not used concurrently; `bytes` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_context_tracker_bytes_estimated(
    tracker: *const fl_context_tracker,
    bytes: *mut u64,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `tracker`.
        let handle = unsafe { text::handle_ref(tracker, "tracker") }?;
        let bytes = Out::new(bytes, "bytes")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { bytes.write(handle.tracker.bytes_estimated()) };
        Ok(())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::ptr;

    use super::*;

    fn budget(
        window: u64,
        max_output: u64,
        options: Option<&fl_context_budget_options>,
    ) -> (fl_status, *mut fl_context_budget) {
        let mut out = ptr::null_mut();
        let options = options.map_or(ptr::null(), ptr::from_ref);
        // SAFETY: a local or NULL options, and a local out.
        let status = unsafe { fl_context_budget_new(window, max_output, options, &mut out) };
        (status, out)
    }

    fn thresholds(handle: *const fl_context_budget) -> fl_context_thresholds {
        let mut out = fl_context_thresholds::default();
        // SAFETY: a live budget and a local.
        let status = unsafe { fl_context_budget_thresholds(handle, &mut out) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        out
    }

    #[test]
    fn thresholds_and_states_match_the_core() {
        for (window, max_output) in [
            (200_000, 32_000),
            (8_192, 8_192),
            (16_385, 4_096),
            (0, 0),
            (1, 64_000),
        ] {
            let (status, handle) = budget(window, max_output, None);
            assert_eq!(status, fl_status::FL_STATUS_OK);
            let core = ContextBudget::new(window, max_output);
            let got = thresholds(handle);
            assert_eq!(
                got,
                fl_context_thresholds {
                    window,
                    max_output_tokens: max_output,
                    effective_window: core.effective_window(),
                    warning: core.warning_threshold(),
                    autocompact: core.autocompact_threshold(),
                    blocking: core.blocking_threshold(),
                }
            );
            // Default options are the same as no options (the small-window scaling is kept).
            let defaults = fl_context_budget_options_default();
            let (_, with_defaults) = budget(window, max_output, Some(&defaults));
            assert_eq!(thresholds(with_defaults), got);
            for tokens in [
                0,
                got.warning.saturating_sub(1),
                got.warning,
                got.autocompact,
                got.blocking,
                u64::MAX,
            ] {
                let mut state = fl_context_state::FL_CONTEXT_OK;
                // SAFETY: a live budget and a local.
                let status = unsafe { fl_context_budget_state(handle, tokens, &mut state) };
                assert_eq!(status, fl_status::FL_STATUS_OK);
                assert_eq!(state as u32, core.state(tokens) as u32);
            }
            // SAFETY: from `fl_context_budget_new`, freed once each.
            unsafe {
                fl_context_budget_free(handle);
                fl_context_budget_free(with_defaults);
            }
        }
    }

    #[test]
    fn bad_percentages_are_refused() {
        for bad in [f64::NAN, -5.0, 100.5, f64::INFINITY, f64::NEG_INFINITY] {
            let mut options = fl_context_budget_options_default();
            options.autocompact_percent = bad;
            let (status, handle) = budget(200_000, 32_000, Some(&options));
            assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT, "{bad}");
            assert!(handle.is_null());
        }
        let mut options = fl_context_budget_options_default();
        options.autocompact_percent = 50.0;
        let (status, handle) = budget(200_000, 32_000, Some(&options));
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(thresholds(handle).autocompact, 90_000);
        // SAFETY: from `fl_context_budget_new`, freed once.
        unsafe { fl_context_budget_free(handle) };
    }
}
