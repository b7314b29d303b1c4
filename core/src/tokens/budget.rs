//! Context-window thresholds: when to warn, when to compact, when to refuse to send.
//!
//! The defaults are Claude Code's: effective window = context window − min(max output tokens,
//! 20,000); auto-compact at effective − 13,000; warning (and error) 20,000 below the auto-compact
//! point; blocking at effective − 3,000. Windows too small to hold those buffers (below about
//! 100,000 tokens) get them shrunk in proportion ([`ContextBudget::new`]).
//!
//! Settings given explicitly ([`ContextBudget::with_overrides`], what every binding's constructor
//! takes) apply as given; only the defaults scale. A configuration is refused when it would
//! block before it compacts or compact at zero tokens ([`ContextBudget::check`]).

/// An auto-compact percentage outside (0, 100] ([`ContextBudget::with_autocompact_percent`]).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("the auto-compact percentage must be in (0, 100], got {0}")]
pub struct InvalidAutocompactPercent(pub f64);

/// A budget that would block before it compacts ([`ContextBudget::validate`]): its auto-compact
/// buffer is smaller than its blocking buffer, so its auto-compact point lies above its blocking
/// point and the state would go from [`BudgetState::Warning`] straight to
/// [`BudgetState::Blocking`], never reporting [`BudgetState::AutoCompact`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactsAfterBlocking {
    /// The auto-compact buffer (tokens below the effective window).
    pub autocompact_buffer: u64,
    /// The blocking buffer (tokens below the effective window).
    pub blocking_buffer: u64,
}

/// A budget whose auto-compact threshold is 0 while its blocking threshold is not
/// ([`ContextBudget::check`]): every count, 0 included, would be [`BudgetState::AutoCompact`],
/// so a loop would compact before every request (an `autocompact_buffer` of 13,000 on an
/// 8,192-token window).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactsAtZero {
    /// The effective window (the window less the output reserve).
    pub effective_window: u64,
    /// The auto-compact buffer.
    pub autocompact_buffer: u64,
    /// The auto-compact percentage, if one is set.
    pub autocompact_percent: Option<f64>,
}

impl CompactsAfterBlocking {
    fn message(&self, name: &dyn Fn(&'static str) -> &'static str) -> String {
        format!(
            "{} ({}) is smaller than {} ({}): the context would block before it compacts",
            name("autocompact_buffer"),
            self.autocompact_buffer,
            name("blocking_buffer"),
            self.blocking_buffer
        )
    }
}

impl std::fmt::Display for CompactsAfterBlocking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(&|name| name))
    }
}

impl std::error::Error for CompactsAfterBlocking {}

impl CompactsAtZero {
    fn message(&self, name: &dyn Fn(&'static str) -> &'static str) -> String {
        let percent = self.autocompact_percent.map_or(String::new(), |p| {
            format!(" or {} ({p})", name("autocompact_percent"))
        });
        format!(
            "the auto-compact threshold is 0 tokens: {} ({}){percent} leaves nothing of the \
             effective window ({} tokens), so the context would be compacted before every request",
            name("autocompact_buffer"),
            self.autocompact_buffer,
            self.effective_window
        )
    }
}

impl std::fmt::Display for CompactsAtZero {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(&|name| name))
    }
}

impl std::error::Error for CompactsAtZero {}

/// Why [`ContextBudget::with_overrides`] or [`ContextBudget::check`] refuses a budget.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum InvalidBudget {
    /// The auto-compact percentage is outside (0, 100].
    #[error(transparent)]
    Percent(#[from] InvalidAutocompactPercent),
    /// The context would block before it compacts.
    #[error(transparent)]
    CompactsAfterBlocking(#[from] CompactsAfterBlocking),
    /// The context would compact at zero tokens.
    #[error(transparent)]
    CompactsAtZero(#[from] CompactsAtZero),
}

impl InvalidBudget {
    /// The message, each setting named as `name` spells the core's name of it
    /// (`autocompact_buffer`, `blocking_buffer`, `autocompact_percent`): how a binding says it
    /// in its own spelling (Node's `autocompactBuffer`). The percentage's names the setting,
    /// where [`Display`](std::fmt::Display) says "the auto-compact percentage".
    pub fn message_naming(&self, name: impl Fn(&'static str) -> &'static str) -> String {
        match self {
            Self::Percent(InvalidAutocompactPercent(percent)) => format!(
                "{} must be in (0, 100], got {percent}",
                name("autocompact_percent")
            ),
            Self::CompactsAfterBlocking(error) => error.message(&name),
            Self::CompactsAtZero(error) => error.message(&name),
        }
    }
}

/// Settings of a [`ContextBudget`] given explicitly ([`ContextBudget::with_overrides`]); `None`
/// keeps the default (Claude Code's, scaled down for small windows).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BudgetOverrides {
    /// At most this much output is reserved out of the window.
    pub output_reserve_cap: Option<u64>,
    /// Auto-compact this far below the effective window.
    pub autocompact_buffer: Option<u64>,
    /// Warn this far below the auto-compact threshold.
    pub warning_buffer: Option<u64>,
    /// Block this far below the effective window.
    pub blocking_buffer: Option<u64>,
    /// Auto-compact at this percentage of the effective window when lower, in (0, 100].
    pub autocompact_percent: Option<f64>,
}

/// Claude Code's output reserve cap.
pub const DEFAULT_OUTPUT_RESERVE_CAP: u64 = 20_000;
/// Claude Code's auto-compact buffer.
pub const DEFAULT_AUTOCOMPACT_BUFFER: u64 = 13_000;
/// Claude Code's warning buffer.
pub const DEFAULT_WARNING_BUFFER: u64 = 20_000;
/// Claude Code's blocking buffer.
pub const DEFAULT_BLOCKING_BUFFER: u64 = 3_000;

/// A model's context window and output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// Context window in tokens (input + output).
    pub context_window: u64,
    /// Maximum output tokens per response.
    pub max_output_tokens: u64,
}

/// The built-in model table: `(model-name prefix, context window, max output tokens)`. The
/// longest matching prefix wins; a `[1m]` suffix on the model name (Claude Code's convention for
/// the 1M-context beta) selects a 1,000,000-token window.
pub const BUILTIN_MODELS: &[(&str, u64, u64)] = &[
    // From the models' overview pages (platform.claude.com, 2026): the 1M-token window is the
    // default from Opus 4.6 and Sonnet 4.6 on, without a `[1m]` suffix or beta.
    ("claude-fable-5", 1_000_000, 128_000),
    ("claude-mythos-5", 1_000_000, 128_000),
    ("claude-opus-5", 1_000_000, 128_000),
    ("claude-sonnet-5", 1_000_000, 128_000),
    ("claude-haiku-5-5", 1_000_000, 128_000),
    ("claude-opus-4-8", 1_000_000, 128_000),
    ("claude-opus-4-7", 1_000_000, 128_000),
    ("claude-opus-4-6", 1_000_000, 128_000),
    ("claude-sonnet-4-6", 1_000_000, 64_000),
    ("claude-opus-4-5", 200_000, 64_000),
    ("claude-opus-4-1", 200_000, 32_000),
    ("claude-opus-4", 200_000, 32_000),
    ("claude-sonnet-4-5", 200_000, 64_000),
    ("claude-sonnet-4", 200_000, 64_000),
    ("claude-haiku-4-5", 200_000, 64_000),
    ("claude-3-7-sonnet", 200_000, 64_000),
    ("claude-3-5-sonnet", 200_000, 8_192),
    ("claude-3-5-haiku", 200_000, 8_192),
    ("claude-3-opus", 200_000, 4_096),
    ("claude-3-haiku", 200_000, 4_096),
    ("claude-2-1", 200_000, 4_096),
    ("claude-2", 100_000, 4_096),
    ("claude-instant", 100_000, 4_096),
    // The chat snapshots of GPT-5 have the smaller window of ChatGPT's model.
    ("gpt-5-chat", 128_000, 16_384),
    ("gpt-5", 400_000, 128_000),
    // Which the `gpt-4` prefix would otherwise give 8,192.
    ("gpt-4.5", 128_000, 16_384),
    ("chatgpt-4o", 128_000, 16_384),
    ("gpt-4.1", 1_047_576, 32_768),
    ("gpt-4o", 128_000, 16_384),
    ("gpt-4-turbo", 128_000, 4_096),
    // GPT-4 Turbo's preview snapshots, which the `gpt-4` prefix would otherwise give 8,192.
    ("gpt-4-1106", 128_000, 4_096),
    ("gpt-4-0125", 128_000, 4_096),
    ("gpt-4-vision", 128_000, 4_096),
    // The 32K variant and its snapshots, which the `gpt-4` prefix would otherwise give 8,192.
    ("gpt-4-32k", 32_768, 32_768),
    ("gpt-4", 8_192, 8_192),
    // The current GPT-3.5 Turbo (and `-16k`, `-1106`, `-0125`) has 16,385 tokens; the
    // first snapshots and the instruct model had 4,096, which the prefix would overstate.
    ("gpt-3.5-turbo-16k", 16_385, 4_096),
    ("gpt-3.5-turbo-instruct", 4_096, 4_096),
    ("gpt-3.5-turbo-0613", 4_096, 4_096),
    ("gpt-3.5-turbo-0301", 4_096, 4_096),
    ("gpt-3.5-turbo", 16_385, 4_096),
    // Codex's o4-mini-based model, which no prefix above matches.
    ("codex-mini", 200_000, 100_000),
    ("o1-mini", 128_000, 65_536),
    ("o1-preview", 128_000, 32_768),
    ("o1", 200_000, 100_000),
    ("o3", 200_000, 100_000),
    ("o4-mini", 200_000, 100_000),
];

/// Limits for models not in the table (Claude Code's defaults).
pub const DEFAULT_LIMITS: ModelLimits = ModelLimits {
    context_window: 200_000,
    max_output_tokens: 32_000,
};

/// The window selected by a `[1m]` model-name suffix.
pub const ONE_MILLION: u64 = 1_000_000;

/// Model name → limits, longest prefix first; built from [`BUILTIN_MODELS`] and overridable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelTable {
    entries: Vec<(String, ModelLimits)>,
    fallback: ModelLimits,
}

impl Default for ModelTable {
    fn default() -> Self {
        let mut table = ModelTable {
            entries: Vec::new(),
            fallback: DEFAULT_LIMITS,
        };
        for &(prefix, context_window, max_output_tokens) in BUILTIN_MODELS {
            table.insert(
                prefix,
                ModelLimits {
                    context_window,
                    max_output_tokens,
                },
            );
        }
        table
    }
}

impl ModelTable {
    /// Adds or replaces the limits for models whose name starts with `prefix`.
    /// Prefixes match regardless of letter case.
    pub fn insert(&mut self, prefix: &str, limits: ModelLimits) {
        let prefix = prefix.to_ascii_lowercase();
        self.entries.retain(|(p, _)| *p != prefix);
        self.entries.push((prefix, limits));
        self.entries
            .sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
    }

    /// Sets the limits used for unknown models.
    pub fn set_fallback(&mut self, limits: ModelLimits) {
        self.fallback = limits;
    }

    /// The limits of `model`.
    ///
    /// Gateway spellings of a model name find the same entry: a provider path
    /// (`openai/gpt-4o`, `publishers/anthropic/models/claude-...`), a Bedrock id
    /// (`us.anthropic.claude-3-5-haiku-20241022-v1:0`), OpenRouter's dotted versions
    /// (`anthropic/claude-3.5-sonnet`) and any letter case. The longest prefix matching the
    /// name as given or one of those forms wins, so an entry spelled like the gateway's name
    /// takes precedence.
    pub fn lookup(&self, model: &str) -> ModelLimits {
        self.known(model).unwrap_or_else(|| {
            let mut limits = self.fallback;
            if has_one_million_suffix(model) {
                limits.context_window = ONE_MILLION;
            }
            limits
        })
    }

    /// The limits of `model` if an entry of the table matches it (as [`lookup`](Self::lookup)
    /// finds them), `None` where `lookup` would give the fallback: for a caller that must not
    /// act on a guess, such as raising a request's output limit past what the model may take.
    pub fn known(&self, model: &str) -> Option<ModelLimits> {
        // Any letter case, like the rest of the name (`[1M]` is how some people write it).
        let suffix = model
            .len()
            .checked_sub(4)
            .and_then(|at| model.get(at..).map(|tail| (at, tail)));
        let (name, one_million) = match suffix {
            Some((at, tail)) if tail.eq_ignore_ascii_case("[1m]") => (&model[..at], true),
            _ => (model, false),
        };
        let name = name.to_ascii_lowercase();
        let base = name.rsplit('/').next().unwrap_or(&name);
        let base = base.find("claude").map_or(base, |at| &base[at..]);
        let dashed = base.replace('.', "-");
        let mut best: Option<(usize, ModelLimits)> = None;
        for candidate in [name.as_str(), base, dashed.as_str()] {
            // Entries are sorted longest first: the first match is the candidate's longest.
            if let Some((prefix, limits)) = self
                .entries
                .iter()
                .find(|(prefix, _)| candidate.starts_with(prefix.as_str()))
                && best.is_none_or(|(len, _)| prefix.len() > len)
            {
                best = Some((prefix.len(), *limits));
            }
        }
        let (_, mut limits) = best?;
        if one_million {
            limits.context_window = ONE_MILLION;
        }
        Some(limits)
    }
}

/// Whether `model` ends with Claude Code's `[1m]` suffix, in any letter case.
fn has_one_million_suffix(model: &str) -> bool {
    model
        .len()
        .checked_sub(4)
        .and_then(|at| model.get(at..))
        .is_some_and(|tail| tail.eq_ignore_ascii_case("[1m]"))
}

/// Where a token count stands against the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BudgetState {
    /// Below the warning threshold.
    Ok,
    /// At or above the warning threshold: tell the user context is running low.
    Warning,
    /// At or above the auto-compact threshold: compact before the next request.
    AutoCompact,
    /// At or above the blocking threshold: do not send without compacting.
    Blocking,
}

impl BudgetState {
    /// The state's stable name, the same in every binding: `ok`, `warning`, `auto_compact`,
    /// `blocking` (Python's and Node's `state()`; C's `FL_CONTEXT_AUTO_COMPACT` spells the same).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warning => "warning",
            Self::AutoCompact => "auto_compact",
            Self::Blocking => "blocking",
        }
    }
}

impl std::fmt::Display for BudgetState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Context thresholds for one model; every field is configurable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextBudget {
    /// The model's context window.
    pub window: u64,
    /// The request's max output tokens.
    pub max_output_tokens: u64,
    /// At most this much output is reserved out of the window (20,000).
    pub output_reserve_cap: u64,
    /// Auto-compact this far below the effective window (13,000).
    pub autocompact_buffer: u64,
    /// Warn this far below the auto-compact threshold (20,000).
    pub warning_buffer: u64,
    /// Block this far below the effective window (3,000).
    pub blocking_buffer: u64,
    /// Auto-compact at this percentage of the effective window instead, if lower than the
    /// buffer-based threshold (Claude Code's `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`).
    pub autocompact_percent: Option<f64>,
}

impl ContextBudget {
    /// A budget with Claude Code's default buffers.
    ///
    /// Those are sized for 200,000-token windows. When the output reserve and the auto-compact
    /// and warning buffers would take more than half of `window` (windows below about 100,000
    /// tokens: `gpt-4`'s 8,192 would otherwise be blocking at zero tokens, `gpt-3.5-turbo`
    /// compacting at zero), the reserve and all three buffers shrink in proportion so that they
    /// take exactly half. Larger windows get the defaults unchanged.
    pub fn new(window: u64, max_output_tokens: u64) -> ContextBudget {
        let mut budget = ContextBudget {
            window,
            max_output_tokens,
            output_reserve_cap: DEFAULT_OUTPUT_RESERVE_CAP,
            autocompact_buffer: DEFAULT_AUTOCOMPACT_BUFFER,
            warning_buffer: DEFAULT_WARNING_BUFFER,
            blocking_buffer: DEFAULT_BLOCKING_BUFFER,
            autocompact_percent: None,
        };
        let reserve = max_output_tokens.min(budget.output_reserve_cap);
        let spent = reserve + budget.autocompact_buffer + budget.warning_buffer;
        let half = window / 2;
        if spent > half {
            // `spent` is at most 53,000 and `half` is below it: no overflow, no division by 0.
            let scale = |v: u64| v * half / spent;
            // Each threshold is the window less a sum of these, so the sums are what is scaled
            // and rounded, once each; the buffers are their differences. Rounded one by one,
            // two roundings could take two tokens from a sum where the window lost one, and a
            // window one token smaller would then compact one token later.
            let reserve_scaled = scale(reserve);
            let to_autocompact = scale(reserve + budget.autocompact_buffer);
            let to_blocking = scale(reserve + budget.blocking_buffer);
            budget.output_reserve_cap = reserve_scaled;
            budget.autocompact_buffer = to_autocompact - reserve_scaled;
            budget.warning_buffer = half - to_autocompact;
            budget.blocking_buffer = to_blocking - reserve_scaled;
        }
        budget
    }

    /// The budget for a model from the table.
    pub fn for_model(model: &str, table: &ModelTable) -> ContextBudget {
        let limits = table.lookup(model);
        ContextBudget::new(limits.context_window, limits.max_output_tokens)
    }

    /// A budget with the settings given in `overrides`, checked ([`check`](Self::check)): what
    /// every binding's constructor builds.
    ///
    /// The rule: a setting given applies as given; one not given takes Claude Code's default,
    /// scaled down on a small window as [`new`](Self::new) scales it. Whether the auto-compact
    /// buffer is at least the blocking buffer is judged on the values given and the unscaled
    /// defaults (13,000 and 3,000), so that it does not depend on the window; a scaled default
    /// then never crosses a value given (the auto-compact default rises to a blocking buffer
    /// given, the blocking default falls to an auto-compact buffer given). Passing a default's
    /// value explicitly (`blocking_buffer = 3,000` on an 8,192-token window) is therefore
    /// accepted, where the scaled auto-compact buffer (1,293) made it an error.
    pub fn with_overrides(
        window: u64,
        max_output_tokens: u64,
        overrides: &BudgetOverrides,
    ) -> Result<ContextBudget, InvalidBudget> {
        let autocompact = overrides
            .autocompact_buffer
            .unwrap_or(DEFAULT_AUTOCOMPACT_BUFFER);
        let blocking = overrides.blocking_buffer.unwrap_or(DEFAULT_BLOCKING_BUFFER);
        if autocompact < blocking {
            return Err(CompactsAfterBlocking {
                autocompact_buffer: autocompact,
                blocking_buffer: blocking,
            }
            .into());
        }
        let mut budget = ContextBudget::new(window, max_output_tokens);
        if let Some(cap) = overrides.output_reserve_cap {
            budget.output_reserve_cap = cap;
        }
        if let Some(buffer) = overrides.warning_buffer {
            budget.warning_buffer = buffer;
        }
        if let Some(buffer) = overrides.autocompact_buffer {
            budget.autocompact_buffer = buffer;
            budget.blocking_buffer = budget.blocking_buffer.min(buffer);
        }
        if let Some(buffer) = overrides.blocking_buffer {
            budget.blocking_buffer = buffer;
            budget.autocompact_buffer = budget.autocompact_buffer.max(buffer);
        }
        if let Some(percent) = overrides.autocompact_percent {
            budget = budget.with_autocompact_percent(percent)?;
        }
        budget.check()?;
        Ok(budget)
    }

    /// [`with_overrides`](Self::with_overrides) for a model from the table.
    pub fn for_model_with_overrides(
        model: &str,
        table: &ModelTable,
        overrides: &BudgetOverrides,
    ) -> Result<ContextBudget, InvalidBudget> {
        let limits = table.lookup(model);
        ContextBudget::with_overrides(limits.context_window, limits.max_output_tokens, overrides)
    }

    /// Checks what [`validate`](Self::validate) checks (the budget compacts before it blocks),
    /// and that it does not compact at zero tokens: an auto-compact threshold of 0 is refused
    /// while the blocking threshold is above 0 (the context would be compacted before every
    /// request, a loop that never sends). A window too small for anything (blocking threshold
    /// 0: every count blocking) passes, as `validate` lets it.
    pub fn check(&self) -> Result<(), InvalidBudget> {
        self.validate()?;
        if self.autocompact_threshold() == 0 && self.blocking_threshold() > 0 {
            return Err(CompactsAtZero {
                effective_window: self.effective_window(),
                autocompact_buffer: self.autocompact_buffer,
                autocompact_percent: self.autocompact_percent,
            }
            .into());
        }
        Ok(())
    }

    /// Returns the budget with a percentage auto-compact override: compact at `percent` % of
    /// the effective window. `percent` must be in (0, 100]; NaN, 0, a negative or a larger value
    /// is an error rather than a silent clamp (the bindings report it as a bad argument).
    pub fn with_autocompact_percent(
        mut self,
        percent: f64,
    ) -> Result<ContextBudget, InvalidAutocompactPercent> {
        if !(percent.is_finite() && percent > 0.0 && percent <= 100.0) {
            return Err(InvalidAutocompactPercent(percent));
        }
        self.autocompact_percent = Some(percent);
        Ok(self)
    }

    /// Checks that the budget compacts before it blocks: its auto-compact buffer must be at
    /// least its blocking buffer (equal buffers are one point, where the more urgent state,
    /// blocking, wins). Every binding's constructor refuses a budget that fails this, after
    /// applying its overrides (Python's `ValueError`, Node's `InvalidArgumentError`, C's
    /// `FL_STATUS_INVALID_ARGUMENT`). [`check`](Self::check) also refuses a budget that would
    /// compact at zero tokens.
    ///
    /// The defaults always pass, also when [`new`](Self::new) scales them for a small window.
    /// A percentage override only lowers the auto-compact point, so it cannot break the order,
    /// and it does not excuse buffers that do: it is checked on the buffers alone. A window
    /// smaller than the buffers passes: every threshold is then 0 and every count blocking.
    pub fn validate(&self) -> Result<(), CompactsAfterBlocking> {
        if self.autocompact_buffer < self.blocking_buffer {
            return Err(CompactsAfterBlocking {
                autocompact_buffer: self.autocompact_buffer,
                blocking_buffer: self.blocking_buffer,
            });
        }
        Ok(())
    }

    /// The window minus the reserved output.
    pub fn effective_window(&self) -> u64 {
        self.window
            .saturating_sub(self.max_output_tokens.min(self.output_reserve_cap))
    }

    /// Tokens at which to compact automatically.
    pub fn autocompact_threshold(&self) -> u64 {
        let effective = self.effective_window();
        let by_buffer = effective.saturating_sub(self.autocompact_buffer);
        match self.autocompact_percent {
            // The field is public: a value `with_autocompact_percent` would refuse is ignored
            // rather than clamped to a threshold nobody asked for.
            Some(pct) if pct.is_finite() && pct > 0.0 && pct <= 100.0 => {
                let by_percent = (effective as f64 * pct / 100.0) as u64;
                by_percent.min(by_buffer)
            }
            _ => by_buffer,
        }
    }

    /// Tokens at which to warn (and report the error state, as Claude Code does).
    pub fn warning_threshold(&self) -> u64 {
        self.autocompact_threshold()
            .saturating_sub(self.warning_buffer)
    }

    /// Tokens at which to refuse sending.
    pub fn blocking_threshold(&self) -> u64 {
        self.effective_window().saturating_sub(self.blocking_buffer)
    }

    /// The state of a context holding `tokens`.
    pub fn state(&self, tokens: u64) -> BudgetState {
        if tokens >= self.blocking_threshold() {
            BudgetState::Blocking
        } else if tokens >= self.autocompact_threshold() {
            BudgetState::AutoCompact
        } else if tokens >= self.warning_threshold() {
            BudgetState::Warning
        } else {
            BudgetState::Ok
        }
    }

    /// Percentage of the auto-compact threshold still free (0–100).
    pub fn percent_left(&self, tokens: u64) -> f64 {
        let threshold = self.autocompact_threshold();
        if threshold == 0 {
            return 0.0;
        }
        (100.0 * (1.0 - tokens as f64 / threshold as f64)).clamp(0.0, 100.0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn state_names_are_the_bindings_names() {
        let names: Vec<String> = [
            BudgetState::Ok,
            BudgetState::Warning,
            BudgetState::AutoCompact,
            BudgetState::Blocking,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(names, ["ok", "warning", "auto_compact", "blocking"]);
    }

    #[test]
    fn claude_code_defaults() {
        let b = ContextBudget::new(200_000, 32_000);
        assert_eq!(b.effective_window(), 180_000);
        assert_eq!(b.autocompact_threshold(), 167_000);
        assert_eq!(b.warning_threshold(), 147_000);
        assert_eq!(b.blocking_threshold(), 177_000);
        assert_eq!(b.state(0), BudgetState::Ok);
        assert_eq!(b.state(146_999), BudgetState::Ok);
        assert_eq!(b.state(147_000), BudgetState::Warning);
        assert_eq!(b.state(167_000), BudgetState::AutoCompact);
        assert_eq!(b.state(177_000), BudgetState::Blocking);
        // A small max output reserves only itself.
        assert_eq!(
            ContextBudget::new(200_000, 8_192).effective_window(),
            191_808
        );
    }

    /// A budget whose auto-compact point lies above its blocking point is refused, naming both
    /// buffers; the defaults (scaled or not) always compact first.
    #[test]
    fn a_budget_that_would_block_before_it_compacts_is_refused() {
        let mut b = ContextBudget::new(200_000, 32_000);
        b.autocompact_buffer = 1_000;
        let error = b.validate().unwrap_err();
        assert_eq!(
            (error.autocompact_buffer, error.blocking_buffer),
            (1_000, 3_000)
        );
        let text = error.to_string();
        assert!(
            text.contains("autocompact_buffer (1000)") && text.contains("blocking_buffer (3000)"),
            "{text}"
        );
        // Without the check it went from warning to blocking, never auto-compact.
        assert_eq!(b.state(b.blocking_threshold()), BudgetState::Blocking);
        assert!(b.autocompact_threshold() > b.blocking_threshold());
        // A percentage does not excuse the buffers.
        let b = b.with_autocompact_percent(50.0).unwrap();
        assert!(b.validate().is_err());
        let mut equal = ContextBudget::new(200_000, 32_000);
        equal.autocompact_buffer = 3_000;
        assert_eq!(equal.validate(), Ok(()));
        for window in [0, 1, 1_000, 8_192, 16_385, 100_000, 200_000, 1_000_000] {
            for max_output in [0, 4_096, 32_000, 128_000] {
                let b = ContextBudget::new(window, max_output);
                assert_eq!(b.validate(), Ok(()), "{window} {max_output}");
                assert!(b.autocompact_threshold() <= b.blocking_threshold());
            }
        }
    }

    /// Settings given apply as given and only the defaults scale: passing a default's value
    /// explicitly on a small window (`blocking_buffer = 3,000` on 8,192 tokens) was an error,
    /// because the auto-compact buffer had been scaled to 1,293 first.
    #[test]
    fn explicit_settings_apply_as_given_and_defaults_scale() {
        let given = |o: BudgetOverrides| ContextBudget::with_overrides(8_192, 8_192, &o);
        let b = given(BudgetOverrides {
            blocking_buffer: Some(3_000),
            ..BudgetOverrides::default()
        })
        .unwrap();
        assert_eq!(b.blocking_buffer, 3_000);
        // The scaled auto-compact default rose to the blocking buffer given, no further.
        assert_eq!(b.autocompact_buffer, 3_000);
        assert_eq!(b.state(0), BudgetState::Ok);
        assert!(b.warning_threshold() < b.autocompact_threshold());
        assert!(b.autocompact_threshold() <= b.blocking_threshold());
        // Nothing given: the scaled defaults of `new`.
        assert_eq!(
            given(BudgetOverrides::default()).unwrap(),
            ContextBudget::new(8_192, 8_192)
        );
        // An auto-compact buffer given below the scaled blocking default lowers that default.
        let b = given(BudgetOverrides {
            autocompact_buffer: Some(3_000),
            warning_buffer: Some(1_000),
            ..BudgetOverrides::default()
        })
        .unwrap();
        assert_eq!((b.autocompact_buffer, b.warning_buffer), (3_000, 1_000));
        assert_eq!(
            b.blocking_buffer,
            ContextBudget::new(8_192, 8_192).blocking_buffer
        );
        // The order is judged against the unscaled defaults, whatever the window.
        for window in [8_192, 200_000] {
            let error = ContextBudget::with_overrides(
                window,
                8_192,
                &BudgetOverrides {
                    blocking_buffer: Some(20_000),
                    ..BudgetOverrides::default()
                },
            )
            .unwrap_err();
            assert_eq!(
                error,
                InvalidBudget::CompactsAfterBlocking(CompactsAfterBlocking {
                    autocompact_buffer: 13_000,
                    blocking_buffer: 20_000
                })
            );
        }
        let bad_percent = given(BudgetOverrides {
            autocompact_percent: Some(0.0),
            ..BudgetOverrides::default()
        });
        assert!(matches!(bad_percent, Err(InvalidBudget::Percent(_))));
        // Large windows: the defaults and a setting given, as before.
        let b = ContextBudget::for_model_with_overrides(
            "claude-sonnet-4-5",
            &ModelTable::default(),
            &BudgetOverrides {
                autocompact_buffer: Some(50_000),
                ..BudgetOverrides::default()
            },
        )
        .unwrap();
        assert_eq!(
            (b.autocompact_threshold(), b.blocking_threshold()),
            (130_000, 177_000)
        );
    }

    /// An auto-compact threshold of 0 while the blocking threshold is not is refused: every
    /// count, 0 included, was `AutoCompact` (`autocompact_buffer = 13,000` on 8,192 tokens).
    #[test]
    fn a_budget_that_compacts_at_zero_tokens_is_refused() {
        let overrides = BudgetOverrides {
            autocompact_buffer: Some(13_000),
            ..BudgetOverrides::default()
        };
        let error = ContextBudget::with_overrides(8_192, 8_192, &overrides).unwrap_err();
        let InvalidBudget::CompactsAtZero(at_zero) = error else {
            panic!("{error:?}");
        };
        assert_eq!(at_zero.autocompact_buffer, 13_000);
        let text = error.to_string();
        assert!(
            text.contains("autocompact_buffer (13000)") && text.contains("every request"),
            "{text}"
        );
        // The same budget built field by field: `check` refuses it, `validate` (the order
        // only) does not.
        let mut b = ContextBudget::new(8_192, 8_192);
        b.autocompact_buffer = 13_000;
        assert_eq!(b.state(0), BudgetState::AutoCompact);
        assert!(b.validate().is_ok());
        assert!(matches!(b.check(), Err(InvalidBudget::CompactsAtZero(_))));
        // So is a percentage that rounds the threshold down to 0.
        let tiny_percent = BudgetOverrides {
            autocompact_percent: Some(0.001),
            ..BudgetOverrides::default()
        };
        let error = ContextBudget::with_overrides(8_192, 8_192, &tiny_percent).unwrap_err();
        assert!(
            error.to_string().contains("autocompact_percent (0.001)"),
            "{error}"
        );
        // A window too small for anything stays accepted: every count is blocking.
        let tiny = BudgetOverrides {
            autocompact_buffer: Some(5_000),
            blocking_buffer: Some(4_000),
            ..BudgetOverrides::default()
        };
        let b = ContextBudget::with_overrides(1_000, 100, &tiny).unwrap();
        assert_eq!(b.state(0), BudgetState::Blocking);
        // The defaults always pass.
        for window in [
            0, 1, 1_000, 8_192, 16_385, 32_768, 100_000, 200_000, 1_000_000,
        ] {
            for max_output in [0, 4_096, 32_000, 128_000] {
                let b = ContextBudget::new(window, max_output);
                assert_eq!(b.check(), Ok(()), "{window} {max_output}");
            }
        }
    }

    #[test]
    fn percentages_outside_zero_to_a_hundred_are_refused() {
        for bad in [f64::NAN, 0.0, -5.0, 100.5, 250.0, f64::INFINITY] {
            let refused = ContextBudget::new(200_000, 32_000).with_autocompact_percent(bad);
            assert!(refused.is_err(), "{bad} accepted");
        }
        assert!(
            ContextBudget::new(200_000, 32_000)
                .with_autocompact_percent(100.0)
                .is_ok()
        );
    }

    #[test]
    fn percentage_override_only_lowers() {
        let b = ContextBudget::new(200_000, 32_000)
            .with_autocompact_percent(50.0)
            .unwrap();
        assert_eq!(b.autocompact_threshold(), 90_000);
        assert_eq!(b.state(90_000), BudgetState::AutoCompact);
        let b = ContextBudget::new(200_000, 32_000)
            .with_autocompact_percent(99.0)
            .unwrap();
        assert_eq!(b.autocompact_threshold(), 167_000);
        // Accepted percentages below 1 are used as given.
        let b = ContextBudget::new(200_000, 32_000)
            .with_autocompact_percent(0.5)
            .unwrap();
        assert_eq!(b.autocompact_threshold(), 900);
        // Out-of-range values set on the field directly are ignored.
        let mut b = ContextBudget::new(200_000, 32_000);
        b.autocompact_percent = Some(-3.0);
        assert_eq!(b.autocompact_threshold(), 167_000);
    }

    #[test]
    fn oversized_buffers_saturate() {
        let mut b = ContextBudget::new(1_000, 32_000);
        b.output_reserve_cap = u64::MAX;
        b.autocompact_buffer = u64::MAX;
        assert_eq!(b.effective_window(), 0);
        assert_eq!(b.state(0), BudgetState::Blocking);
        assert_eq!(b.percent_left(10), 0.0);
        assert_eq!(ContextBudget::new(0, 0).state(0), BudgetState::Blocking);
    }

    #[test]
    fn small_windows_keep_every_state_reachable() {
        let table = ModelTable::default();
        for model in ["gpt-4", "gpt-3.5-turbo"] {
            let b = ContextBudget::for_model(model, &table);
            assert_eq!(b.state(0), BudgetState::Ok, "{model}");
            let (warning, compact, blocking) = (
                b.warning_threshold(),
                b.autocompact_threshold(),
                b.blocking_threshold(),
            );
            assert!(
                0 < warning && warning < compact && compact < blocking,
                "{model}: {warning} {compact} {blocking}"
            );
            assert!(blocking < b.effective_window() && b.effective_window() < b.window);
            // The reserve and the two lower buffers take half the window.
            assert!(warning.abs_diff(b.window / 2) <= 4, "{model}: {warning}");
        }
        for window in [1, 2, 100, 1_000, 10_000, 105_999] {
            let b = ContextBudget::new(window, 64_000);
            assert!(b.warning_threshold() <= b.autocompact_threshold());
            assert!(b.autocompact_threshold() <= b.blocking_threshold());
            assert!(b.blocking_threshold() <= b.effective_window());
        }
        // Windows that hold the defaults keep them.
        let b = ContextBudget::new(106_000, 20_000);
        assert_eq!(b.effective_window(), 86_000);
        assert_eq!(b.autocompact_threshold(), 73_000);
        assert_eq!(b.warning_threshold(), 53_000);
        assert_eq!(b.blocking_threshold(), 83_000);
        let b = ContextBudget::for_model("gpt-4o", &table);
        assert_eq!(b.autocompact_threshold(), 128_000 - 16_384 - 13_000);
    }

    /// A binding names the settings in its refusals its own way; the text is the core's.
    #[test]
    fn refusals_name_the_settings_as_a_binding_spells_them() {
        let camel = |name: &'static str| match name {
            "autocompact_buffer" => "autocompactBuffer",
            "blocking_buffer" => "blockingBuffer",
            "autocompact_percent" => "autocompactPercent",
            other => other,
        };
        let after_blocking = InvalidBudget::from(CompactsAfterBlocking {
            autocompact_buffer: 1_000,
            blocking_buffer: 3_000,
        });
        assert_eq!(
            after_blocking.message_naming(|name| name),
            after_blocking.to_string()
        );
        assert_eq!(
            after_blocking.message_naming(camel),
            "autocompactBuffer (1000) is smaller than blockingBuffer (3000): the context would \
             block before it compacts"
        );
        let at_zero = InvalidBudget::from(CompactsAtZero {
            effective_window: 188_000,
            autocompact_buffer: 13_000,
            autocompact_percent: Some(0.0001),
        });
        assert_eq!(at_zero.message_naming(|name| name), at_zero.to_string());
        assert!(
            at_zero
                .message_naming(camel)
                .starts_with("the auto-compact threshold is 0 tokens: autocompactBuffer (13000) or autocompactPercent (0.0001)")
        );
        assert_eq!(
            InvalidBudget::from(InvalidAutocompactPercent(101.0)).message_naming(camel),
            "autocompactPercent must be in (0, 100], got 101"
        );
    }

    /// A window one token larger never compacts, warns or blocks earlier, nor a smaller maximum
    /// output: the thresholds grow with the window and shrink with the reserve, across the
    /// boundary where the defaults start to scale (a window of 105,999 tokens compacted at
    /// 73,001, one of 106,000 at 73,000, when each buffer was rounded on its own).
    #[test]
    fn thresholds_never_fall_as_the_window_grows() {
        let thresholds = |b: &ContextBudget| {
            [
                b.warning_threshold(),
                b.autocompact_threshold(),
                b.blocking_threshold(),
                b.effective_window(),
            ]
        };
        for max_output in [0, 1, 4_096, 8_192, 19_999, 20_000, 32_000, 128_000] {
            let mut previous = thresholds(&ContextBudget::new(0, max_output));
            for window in 1..=120_000 {
                let b = ContextBudget::new(window, max_output);
                let current = thresholds(&b);
                assert!(
                    current.iter().zip(&previous).all(|(c, p)| c >= p),
                    "window {window}, max output {max_output}: {current:?} after {previous:?}"
                );
                assert_eq!(b.validate(), Ok(()), "window {window}");
                previous = current;
            }
        }
        for window in [8_192, 50_000, 105_999, 106_000, 200_000] {
            let mut previous = thresholds(&ContextBudget::new(window, 0));
            for max_output in 1..=60_000 {
                let current = thresholds(&ContextBudget::new(window, max_output));
                assert!(
                    current.iter().zip(&previous).all(|(c, p)| c <= p),
                    "window {window}, max output {max_output}: {current:?} after {previous:?}"
                );
                previous = current;
            }
        }
        assert_eq!(
            ContextBudget::new(105_999, 32_000).autocompact_threshold(),
            73_000
        );
    }

    /// `known` finds what `lookup` finds, and nothing where `lookup` guesses.
    #[test]
    fn only_models_the_table_holds_are_known() {
        let table = ModelTable::default();
        for model in [
            "claude-sonnet-4-5",
            "anthropic/claude-3.5-haiku",
            "gpt-4o",
            "CLAUDE-SONNET-4-5[1M]",
        ] {
            assert_eq!(table.known(model), Some(table.lookup(model)), "{model}");
        }
        for model in ["m", "llama-3-70b", "my-model[1m]"] {
            assert_eq!(table.known(model), None, "{model}");
        }
        assert_eq!(table.lookup("llama-3-70b"), DEFAULT_LIMITS);
        assert_eq!(table.lookup("my-model[1m]").context_window, ONE_MILLION);
        assert_eq!(
            table.lookup("my-model[1m]").max_output_tokens,
            DEFAULT_LIMITS.max_output_tokens
        );
    }

    #[test]
    fn model_table() {
        let mut t = ModelTable::default();
        assert_eq!(
            t.lookup("claude-sonnet-4-5-20250929").max_output_tokens,
            64_000
        );
        assert_eq!(
            t.lookup("claude-sonnet-4-5[1m]").context_window,
            ONE_MILLION
        );
        assert_eq!(t.lookup("gpt-4o-mini").context_window, 128_000);
        assert_eq!(t.lookup("gpt-4-0613").context_window, 8_192);
        for turbo in [
            "gpt-4-1106-preview",
            "gpt-4-0125-preview",
            "gpt-4-vision-preview",
            "gpt-4-turbo-preview",
        ] {
            assert_eq!(t.lookup(turbo).context_window, 128_000, "{turbo}");
        }
        assert_eq!(t.lookup("something-else"), DEFAULT_LIMITS);
        let limits = |model: &str| t.lookup(model);
        // Gateway spellings.
        assert_eq!(limits("openai/gpt-4").context_window, 8_192);
        assert_eq!(limits("openai/gpt-4.1-mini").context_window, 1_047_576);
        assert_eq!(
            limits("anthropic/claude-3.5-haiku").max_output_tokens,
            8_192
        );
        assert_eq!(
            limits("us.anthropic.claude-3-5-haiku-20241022-v1:0").max_output_tokens,
            8_192
        );
        assert_eq!(
            limits("anthropic/claude-opus-4.5"),
            limits("claude-opus-4-5-20251101")
        );
        assert_eq!(
            limits("publishers/anthropic/models/claude-3-opus@20240229").max_output_tokens,
            4_096
        );
        assert_eq!(limits("GPT-4-0613").context_window, 8_192);
        assert_eq!(
            limits("anthropic/claude-3.5-sonnet[1m]").context_window,
            ONE_MILLION
        );
        assert_eq!(limits("claude-sonnet-4-5[1M]").context_window, ONE_MILLION);
        assert_eq!(limits("CLAUDE-SONNET-4-5[1M]").max_output_tokens, 64_000);
        assert_eq!(limits("[1m]").context_window, ONE_MILLION);
        assert_eq!(limits("é[1M]").context_window, ONE_MILLION);
        t.insert(
            "gpt-4o",
            ModelLimits {
                context_window: 64_000,
                max_output_tokens: 1_000,
            },
        );
        assert_eq!(t.lookup("gpt-4o-mini").context_window, 64_000);
        let b = ContextBudget::for_model("claude-opus-4-1", &t);
        assert_eq!(b.autocompact_threshold(), 167_000);
    }

    /// Models a shorter prefix gave another model's limits: GPT-4.5 was an 8,192-token `gpt-4`
    /// (blocking at about 4,000 tokens), `o1-mini` a 200K `o1`, Claude 2.1 a 100K Claude 2.
    #[test]
    fn models_a_shorter_prefix_misread() {
        let t = ModelTable::default();
        let limits = |model: &str| {
            let l = t.lookup(model);
            (l.context_window, l.max_output_tokens)
        };
        assert_eq!(limits("gpt-4.5-preview"), (128_000, 16_384));
        assert_eq!(
            limits("openai/gpt-4.5-preview-2025-02-27"),
            (128_000, 16_384)
        );
        assert_eq!(limits("chatgpt-4o-latest"), (128_000, 16_384));
        assert_eq!(limits("gpt-5-chat-latest"), (128_000, 16_384));
        assert_eq!(limits("gpt-5-mini"), (400_000, 128_000));
        assert_eq!(limits("o1-mini-2024-09-12"), (128_000, 65_536));
        assert_eq!(limits("o1-preview"), (128_000, 32_768));
        assert_eq!(limits("o1-2024-12-17"), (200_000, 100_000));
        assert_eq!(limits("claude-2.1"), (200_000, 4_096));
        assert_eq!(limits("claude-2.0"), (100_000, 4_096));
        assert_eq!(limits("claude-instant-1.2"), (100_000, 4_096));
        assert_eq!(limits("gpt-4-0613"), (8_192, 8_192));
    }

    /// A variant with a larger window is not the base model its name starts with: `gpt-4-32k`
    /// got `gpt-4`'s 8,192 tokens; the 4K snapshots of GPT-3.5 Turbo got 16K.
    #[test]
    fn variants_with_other_windows_are_not_their_base_model() {
        let t = ModelTable::default();
        let limits = |model: &str| {
            let l = t.lookup(model);
            (l.context_window, l.max_output_tokens)
        };
        for model in [
            "gpt-4-32k",
            "gpt-4-32k-0613",
            "openai/gpt-4-32k-0314",
            "GPT-4-32K",
        ] {
            assert_eq!(limits(model), (32_768, 32_768), "{model}");
        }
        for model in [
            "gpt-3.5-turbo-16k",
            "gpt-3.5-turbo-16k-0613",
            "gpt-3.5-turbo-0125",
        ] {
            assert_eq!(limits(model), (16_385, 4_096), "{model}");
        }
        for model in [
            "gpt-3.5-turbo-instruct",
            "gpt-3.5-turbo-0613",
            "gpt-3.5-turbo-0301",
        ] {
            assert_eq!(limits(model), (4_096, 4_096), "{model}");
        }
        assert_eq!(limits("codex-mini-latest"), (200_000, 100_000));
        assert_eq!(limits("gpt-4-0613"), (8_192, 8_192));
        assert_eq!(limits("gpt-4"), (8_192, 8_192));
        // Every small window keeps every state reachable.
        for model in ["gpt-4-32k", "gpt-3.5-turbo-instruct"] {
            let b = ContextBudget::for_model(model, &t);
            assert_eq!(b.state(0), BudgetState::Ok, "{model}");
            assert!(b.warning_threshold() < b.autocompact_threshold());
            assert!(b.autocompact_threshold() < b.blocking_threshold());
        }
    }

    /// Models whose 1M-token window is their default: a shorter prefix of an older model
    /// (`claude-opus-4`, `claude-sonnet-4`) must not give them 200K.
    #[test]
    fn current_claude_models_have_their_1m_windows() {
        let t = ModelTable::default();
        for model in [
            "claude-fable-5-1",
            "claude-fable-5",
            "claude-mythos-5-1",
            "claude-opus-5-5",
            "claude-opus-5",
            "claude-sonnet-5-5",
            "claude-sonnet-5",
            "claude-haiku-5-5",
            "claude-opus-4-8",
            "claude-opus-4-7",
            "claude-opus-4-6",
            "anthropic/claude-opus-4.6",
            "claude-sonnet-4-6",
        ] {
            assert_eq!(t.lookup(model).context_window, ONE_MILLION, "{model}");
        }
        assert_eq!(t.lookup("claude-opus-5-5").max_output_tokens, 128_000);
        assert_eq!(t.lookup("claude-sonnet-4-6").max_output_tokens, 64_000);
        // Older models keep theirs.
        assert_eq!(t.lookup("claude-opus-4-20250514").context_window, 200_000);
        assert_eq!(t.lookup("claude-sonnet-4-5").context_window, 200_000);
        assert_eq!(t.lookup("claude-haiku-4-5").context_window, 200_000);
        let b = ContextBudget::for_model("claude-opus-5-5", &t);
        assert_eq!(b.autocompact_threshold(), 1_000_000 - 20_000 - 13_000);
    }
}
