//! Token estimation and context budgeting for JavaScript (`ferroloop::tokens`).
//!
//! Messages, tools and usage objects cross as JSON text (`JSON.stringify` in `lib/tokens.js`).

use ferroloop::tokens::{self as core_tokens, Family, ModelTable, Usage};
use napi_derive::napi;
use serde_json::Value;

use crate::error::{FerroloopError, invalid_json};
use crate::exec::{saturating_count, whole};
use crate::guard;

fn family(name: Option<String>) -> Result<Family, FerroloopError> {
    match name {
        None => Ok(Family::default()),
        Some(name) => name.parse().map_err(|err: core_tokens::UnknownFamily| {
            FerroloopError::invalid_argument(err.to_string())
        }),
    }
}

/// The value of JSON text from `JSON.stringify`; a lone surrogate in a string counts as U+FFFD
/// (see [`core_tokens::json_text`]), as in a plain string and in Python and C.
fn parse_json(text: &str, what: &str) -> Result<Value, FerroloopError> {
    core_tokens::json_text::parse_json_for_counting(text).map_err(|err| invalid_json(what, &err))
}

/// Estimated tokens of `text` for a tokenizer family (`claude` by default).
#[napi(js_name = "estimateText")]
pub fn estimate_text(text: String, tokenizer: Option<String>) -> napi::Result<f64> {
    guard::sync(|| Ok(core_tokens::estimate_text(&text, family(tokenizer)?) as f64))
}

/// Estimated tokens of UTF-8 bytes (invalid sequences count as other characters).
#[napi(js_name = "estimateBytes")]
pub fn estimate_bytes(bytes: &[u8], tokenizer: Option<String>) -> napi::Result<f64> {
    guard::sync(|| Ok(core_tokens::estimate_bytes(bytes, family(tokenizer)?) as f64))
}

/// Estimated tokens of a JSON value (`estimateTokens` of an array or an object): an array is a
/// list of messages; an object with `messages`, `system` or `tools` (or an OpenAI Responses
/// body's `input` or `instructions`) is a request body; an
/// object with a `role` is one message; any other object is one content block (the core's
/// `estimate_value`, what Python's `estimate_tokens` reads).
#[napi(js_name = "estimateJson")]
pub fn estimate_json(json: String, tokenizer: Option<String>) -> napi::Result<f64> {
    guard::sync(|| {
        let family = family(tokenizer)?;
        let value = parse_json(&json, "the value")?;
        let tokens = core_tokens::estimate_value(&value, family).ok_or_else(|| {
            FerroloopError::invalid_argument(
                "estimateTokens takes a string, bytes, an array of messages, a message, a content block or a request object",
            )
        })?;
        Ok(tokens as f64)
    })
}

/// Estimated tokens of a request, by part.
#[napi(object)]
#[derive(Debug, Clone, Copy)]
pub struct RequestEstimate {
    /// The system prompt.
    pub system: f64,
    /// Tool definitions (with the tool-use preamble).
    pub tools: f64,
    /// Every message (with per-message overheads).
    pub messages: f64,
    /// Per-request overhead.
    pub overhead: f64,
    /// The sum.
    pub total: f64,
}

/// Estimates a Messages (or Chat Completions) request body given as JSON.
#[napi(js_name = "estimateRequestJson")]
pub fn estimate_request_json(
    body_json: String,
    tokenizer: Option<String>,
) -> napi::Result<RequestEstimate> {
    guard::sync(|| {
        let body = parse_json(&body_json, "the request")?;
        if !body.is_object() {
            // An array (the messages alone, by mistake) would be estimated as an empty request.
            return Err(FerroloopError::invalid_argument(
                "estimateRequest expects a request object ({ system, tools, messages })",
            )
            .into());
        }
        let estimate = core_tokens::estimate_request_body(&body, family(tokenizer)?);
        Ok(RequestEstimate {
            system: estimate.system as f64,
            tools: estimate.tools as f64,
            messages: estimate.messages as f64,
            overhead: estimate.overhead as f64,
            total: estimate.total() as f64,
        })
    })
}

/// Budget settings; unset fields take Claude Code's defaults.
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct ContextBudgetOptions {
    /// The model's context window (required unless `model` is given; not with `model`).
    pub window: Option<f64>,
    /// The request's max output tokens (required unless `model` is given; not with `model`).
    pub max_output_tokens: Option<f64>,
    /// Take window and max output from the built-in model table (instead of `window` and
    /// `max_output_tokens`).
    pub model: Option<String>,
    /// At most this much output is reserved out of the window (20,000).
    pub output_reserve_cap: Option<f64>,
    /// Auto-compact this far below the effective window (13,000).
    pub autocompact_buffer: Option<f64>,
    /// Warn this far below the auto-compact threshold (20,000).
    pub warning_buffer: Option<f64>,
    /// Block this far below the effective window (3,000).
    pub blocking_buffer: Option<f64>,
    /// Auto-compact at this percentage of the effective window when lower.
    pub autocompact_percent: Option<f64>,
}

/// The core's refusal of a budget, naming the options by their JavaScript names.
fn budget_message(error: core_tokens::budget::InvalidBudget) -> String {
    error.message_naming(|name| match name {
        "autocompact_buffer" => "autocompactBuffer",
        "blocking_buffer" => "blockingBuffer",
        "autocompact_percent" => "autocompactPercent",
        other => other,
    })
}

/// Context thresholds for one model.
#[napi(js_name = "ContextBudget")]
#[derive(Debug)]
pub struct NativeContextBudget {
    inner: core_tokens::ContextBudget,
}

#[napi]
impl NativeContextBudget {
    /// A budget from explicit limits or a model name.
    #[napi(constructor)]
    pub fn new(options: ContextBudgetOptions) -> napi::Result<Self> {
        guard::sync(|| {
            let setting =
                |value: Option<f64>, what: &str| value.map(|n| whole(n, what)).transpose();
            let overrides = core_tokens::budget::BudgetOverrides {
                output_reserve_cap: setting(options.output_reserve_cap, "outputReserveCap")?,
                autocompact_buffer: setting(options.autocompact_buffer, "autocompactBuffer")?,
                warning_buffer: setting(options.warning_buffer, "warningBuffer")?,
                blocking_buffer: setting(options.blocking_buffer, "blockingBuffer")?,
                autocompact_percent: options.autocompact_percent,
            };
            // The core's rule, as Python's and C's constructors apply it: a setting given applies
            // as given and only the defaults scale; refused when the budget would block before
            // it compacts, or compact at zero tokens.
            let built = match (&options.model, options.window, options.max_output_tokens) {
                (None, Some(window), Some(max_output)) => {
                    core_tokens::ContextBudget::with_overrides(
                        whole(window, "window")?,
                        whole(max_output, "maxOutputTokens")?,
                        &overrides,
                    )
                }
                (Some(model), None, None) => core_tokens::ContextBudget::for_model_with_overrides(
                    model,
                    &ModelTable::default(),
                    &overrides,
                ),
                // A model beside explicit limits was dropped without a word: say which to keep.
                _ => {
                    return Err(FerroloopError::invalid_argument(
                        "ContextBudget needs either { window, maxOutputTokens } or { model }",
                    )
                    .into());
                }
            };
            let inner =
                built.map_err(|error| FerroloopError::invalid_argument(budget_message(error)))?;
            Ok(Self { inner })
        })
    }

    /// The model's context window.
    #[napi(getter)]
    pub fn window(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.window as f64))
    }

    /// The request's max output tokens.
    #[napi(getter)]
    pub fn max_output_tokens(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.max_output_tokens as f64))
    }

    /// Window minus the reserved output.
    #[napi(getter)]
    pub fn effective_window(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.effective_window() as f64))
    }

    /// Compact at or above this many tokens.
    #[napi(getter)]
    pub fn autocompact_threshold(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.autocompact_threshold() as f64))
    }

    /// Warn at or above this many tokens.
    #[napi(getter)]
    pub fn warning_threshold(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.warning_threshold() as f64))
    }

    /// Do not send at or above this many tokens.
    #[napi(getter)]
    pub fn blocking_threshold(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.blocking_threshold() as f64))
    }

    /// `ok`, `warning`, `auto_compact` or `blocking` for a token count.
    #[napi]
    pub fn state(&self, tokens: f64) -> napi::Result<String> {
        guard::sync(|| Ok(self.inner.state(token_count(tokens)?).as_str().to_owned()))
    }

    /// Percentage of the auto-compact threshold still free.
    #[napi(js_name = "percentLeft")]
    pub fn percent_left(&self, tokens: f64) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.percent_left(token_count(tokens)?)))
    }
}

/// A token count to place against a budget: a whole non-negative number, where 2^64 and above
/// (what `tokens()` gives for a count saturated at `u64::MAX`: the nearest JS number) stand
/// for `u64::MAX`, a context past every threshold, instead of being refused.
fn token_count(tokens: f64) -> Result<u64, FerroloopError> {
    if tokens.is_finite() && tokens >= 18_446_744_073_709_551_616.0 {
        return Ok(u64::MAX);
    }
    whole(tokens, "tokens")
}

/// A token count and how it was obtained.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct TokenCount {
    /// Tokens in the context.
    pub tokens: f64,
    /// `exact`, `usage+estimate` or `estimate`.
    pub method: String,
}

/// Tracks the token size of a growing conversation, anchored on provider usage.
#[napi(js_name = "ContextTracker")]
#[derive(Debug)]
pub struct NativeContextTracker {
    inner: core_tokens::ContextTracker,
}

#[napi]
impl NativeContextTracker {
    /// A tracker for a tokenizer family (`claude` by default).
    #[napi(constructor)]
    pub fn new(tokenizer: Option<String>) -> napi::Result<Self> {
        guard::sync(|| {
            Ok(Self {
                inner: core_tokens::ContextTracker::new(family(tokenizer)?),
            })
        })
    }

    /// The tokenizer family.
    #[napi(getter)]
    pub fn tokenizer(&self) -> napi::Result<String> {
        guard::sync(|| Ok(self.inner.family().name().to_owned()))
    }

    /// Sets the system prompt (JSON: a string, blocks, or null for none; anything else is an
    /// invalid argument and the tracker is left unchanged).
    #[napi(js_name = "setSystemJson")]
    pub fn set_system_json(&mut self, system_json: String) -> napi::Result<()> {
        guard::sync(|| {
            let system = parse_json(&system_json, "system")?;
            self.inner
                .try_set_system(&system)
                .map_err(|error| FerroloopError::invalid_argument(error.to_string()).into())
        })
    }

    /// Sets the tool definitions (JSON: an array, or null for none; anything else is an invalid
    /// argument and the tracker is left unchanged).
    #[napi(js_name = "setToolsJson")]
    pub fn set_tools_json(&mut self, tools_json: String) -> napi::Result<()> {
        guard::sync(|| {
            let tools = parse_json(&tools_json, "tools")?;
            self.inner
                .try_set_tools(&tools)
                .map_err(|error| FerroloopError::invalid_argument(error.to_string()).into())
        })
    }

    /// Appends a message (JSON: an object, a message or an OpenAI Responses item; anything else
    /// is an invalid argument).
    #[napi(js_name = "pushMessageJson")]
    pub fn push_message_json(&mut self, message_json: String) -> napi::Result<()> {
        guard::sync(|| {
            let message = parse_json(&message_json, "the message")?;
            self.inner
                .try_push_message(&message)
                .map_err(|error| FerroloopError::invalid_argument(error.to_string()).into())
        })
    }

    /// Replaces the whole history (JSON array of objects; anything else in it is an invalid
    /// argument naming the first), e.g. after compaction; the usage recorded stays if the
    /// messages it covered open the new history unchanged.
    #[napi(js_name = "replaceMessagesJson")]
    pub fn replace_messages_json(&mut self, messages_json: String) -> napi::Result<()> {
        guard::sync(|| {
            let messages = match parse_json(&messages_json, "messages")? {
                Value::Array(items) => items,
                _ => {
                    return Err(
                        FerroloopError::invalid_argument("messages must be an array").into(),
                    );
                }
            };
            self.inner
                .try_replace_messages(&messages)
                .map_err(|error| FerroloopError::invalid_argument(error.to_string()).into())
        })
    }

    /// Keeps the first `length` messages (more than there are, `Infinity` included: all).
    #[napi]
    pub fn truncate(&mut self, length: f64) -> napi::Result<()> {
        guard::sync(|| {
            self.inner.truncate(saturating_count(length, "length")?);
            Ok(())
        })
    }

    /// Number of messages tracked.
    #[napi(getter)]
    pub fn length(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.len() as f64))
    }

    /// Records a response's usage (JSON, Anthropic or OpenAI field names) covering the first
    /// `covered` messages (all of them when absent; more than there are, `Infinity` included,
    /// counts as all). A count that is not a non-negative integer (`null` is absent), or no count
    /// at all, is an invalid argument.
    #[napi(js_name = "recordUsageJson")]
    pub fn record_usage_json(
        &mut self,
        usage_json: String,
        covered: Option<f64>,
    ) -> napi::Result<()> {
        guard::sync(|| {
            let value = parse_json(&usage_json, "usage")?;
            let usage = Usage::parse(&value)
                .map_err(|error| FerroloopError::invalid_argument(error.to_string()))?;
            match covered {
                None => self.inner.record_usage(usage),
                Some(n) => self
                    .inner
                    .record_usage_at(usage, saturating_count(n, "covered")?),
            }
            Ok(())
        })
    }

    /// The current model's online correction factor (usage / estimate, clamped).
    #[napi(getter)]
    pub fn correction(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.correction()))
    }

    /// Overrides the current model's correction factor (e.g. restored from a previous session).
    #[napi(setter)]
    pub fn set_correction(&mut self, correction: f64) -> napi::Result<()> {
        guard::sync(|| {
            self.inner
                .set_correction(correction)
                .map_err(|error| FerroloopError::invalid_argument(error.to_string()).into())
        })
    }

    /// The model whose correction factor applies ('' until set).
    #[napi(getter)]
    pub fn model(&self) -> napi::Result<String> {
        guard::sync(|| Ok(self.inner.model().to_owned()))
    }

    /// Selects the model the next requests go to: each model learns its own correction factor
    /// (one selected before gets its factor back, a new one starts from the current factor);
    /// usage recorded before stays, but is no longer exact.
    #[napi(setter)]
    pub fn set_model(&mut self, model: String) -> napi::Result<()> {
        guard::sync(|| {
            self.inner.set_model(&model);
            Ok(())
        })
    }

    /// The correction factor `model` learned, or null if it was never selected.
    #[napi]
    pub fn correction_for(&self, model: String) -> napi::Result<Option<f64>> {
        guard::sync(|| Ok(self.inner.correction_for(&model)))
    }

    /// The context's size now.
    #[napi]
    pub fn tokens(&self) -> napi::Result<TokenCount> {
        guard::sync(|| {
            let count = self.inner.tokens();
            Ok(TokenCount {
                tokens: count.tokens as f64,
                method: count.method.as_str().to_owned(),
            })
        })
    }

    /// Bytes run through the estimator so far (a work counter: O(new bytes) per turn).
    #[napi(getter)]
    pub fn bytes_estimated(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.bytes_estimated() as f64))
    }
}

/// Exact tokens of `text` for `o200k` or `cl100k` (cargo feature `exact`). The families with no
/// offline vocabulary are an `unsupported` error with the core's reason in every build; the
/// others are one too in a build without the feature.
#[napi(js_name = "countTokens")]
pub fn count_tokens(text: String, tokenizer: String) -> napi::Result<f64> {
    guard::sync(|| {
        let family = family(Some(tokenizer))?;
        count_exact(&text, family).map_err(Into::into)
    })
}

/// Whether this build counts tokens exactly (`countTokens`; the cargo feature `exact`), as
/// Python's `has_exact_counting()`.
#[napi(js_name = "hasExactCounting")]
pub fn has_exact_counting() -> napi::Result<bool> {
    guard::sync(|| Ok(cfg!(feature = "exact")))
}

#[cfg(feature = "exact")]
fn count_exact(text: &str, family: Family) -> Result<f64, FerroloopError> {
    core_tokens::count_exact(text, family)
        .map(|n| n as f64)
        .map_err(|err| FerroloopError::new(crate::error::ErrorCode::Unsupported, err.to_string()))
}

#[cfg(not(feature = "exact"))]
fn count_exact(_text: &str, family: Family) -> Result<f64, FerroloopError> {
    // A family no build can count gets the reason a build with the feature gives, not advice
    // to rebuild with a feature that would refuse it too.
    core_tokens::exact_family(family).map_err(|err| {
        FerroloopError::new(crate::error::ErrorCode::Unsupported, err.to_string())
    })?;
    Err(FerroloopError::new(
        crate::error::ErrorCode::Unsupported,
        format!(
            "countTokens({family}): this build of the addon has no exact tokenizer (built without the cargo feature `exact`); use estimateTokens"
        ),
    ))
}

/// The token estimate of a text fed in pieces: the whole text's estimate, in memory bounded by
/// its longest line.
#[napi(js_name = "TextEstimator")]
#[derive(Debug)]
pub struct NativeTextEstimator {
    inner: core_tokens::TextEstimator,
}

#[napi]
impl NativeTextEstimator {
    /// An estimator for a tokenizer family (`claude` by default), before any text.
    #[napi(constructor)]
    pub fn new(tokenizer: Option<String>) -> napi::Result<Self> {
        guard::sync(|| {
            Ok(Self {
                inner: core_tokens::TextEstimator::new(family(tokenizer)?),
            })
        })
    }

    /// Adds the next piece, as text.
    #[napi(js_name = "feedText")]
    pub fn feed_text(&mut self, text: String) -> napi::Result<()> {
        guard::sync(|| {
            self.inner.feed(text.as_bytes());
            Ok(())
        })
    }

    /// Adds the next piece, as UTF-8 bytes (a character may be split between two pieces).
    #[napi(js_name = "feedBytes")]
    pub fn feed_bytes(&mut self, bytes: &[u8]) -> napi::Result<()> {
        guard::sync(|| {
            self.inner.feed(bytes);
            Ok(())
        })
    }

    /// The estimate of the text fed so far (0 for none).
    #[napi]
    pub fn estimate(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.estimate() as f64))
    }

    /// The estimate of the text fed so far followed by `tail`, which is not fed: JavaScript
    /// holds back a high surrogate that ended a string piece until the next piece can complete
    /// its pair, and asks with it here (where it counts as U+FFFD) when asked in between.
    #[napi(js_name = "estimateWith")]
    pub fn estimate_with(&self, tail: String) -> napi::Result<f64> {
        guard::sync(|| {
            let mut with_tail = self.inner.clone();
            with_tail.feed(tail.as_bytes());
            Ok(with_tail.estimate() as f64)
        })
    }
}
