//! The class of a provider's error payload: one rule for an error event inside a stream (the
//! decoder's [`DecodeError::provider_kind`](super::DecodeError::provider_kind), what every
//! binding and the agent use) and an HTTP error body (the client's `ClientError`, feature
//! `client`), so that the same payload is the same class wherever it arrives.

use super::ProviderErrorKind;

impl ProviderErrorKind {
    /// The class of an error payload from the names it gives itself (its error `type` and its
    /// `code`, in any order; empty ones are ignored) and its message.
    ///
    /// A prompt that does not fit the context window is recognised by name or by message (see
    /// [`prompt_too_long`]) before anything else, since providers send it as a plain invalid
    /// request. Then OpenAI's `insufficient_quota`, then the names of each class. A payload
    /// that names no class but gives an HTTP status as its code (OpenRouter's
    /// `{"error": {"code": 502, ...}}`, mid-stream) is the class of that status
    /// ([`ProviderErrorKind::of_status`]). A payload that names neither is
    /// [`Other`](ProviderErrorKind::Other): the decoders' `provider_error`, which the client and
    /// the agent loop, needing a class to act on, report as `server` (a failure of the provider,
    /// not of the request).
    pub fn classify(names: &[&str], message: &str) -> ProviderErrorKind {
        let named = |candidates: &[&str]| names.iter().any(|name| candidates.contains(name));
        if prompt_too_long(names, message).is_some() {
            ProviderErrorKind::PromptTooLong
        } else if named(&["insufficient_quota"]) {
            ProviderErrorKind::QuotaExceeded
        } else if named(&["overloaded_error", "server_is_overloaded"]) {
            ProviderErrorKind::Overloaded
        } else if named(&["rate_limit_error", "rate_limit_exceeded"]) {
            ProviderErrorKind::RateLimited
        } else if named(&["authentication_error", "invalid_api_key"]) {
            ProviderErrorKind::Authentication
        } else if named(&["permission_error"]) {
            ProviderErrorKind::Permission
        } else if named(&["not_found_error"]) {
            ProviderErrorKind::NotFound
        } else if named(&["invalid_request_error", "request_too_large"]) {
            ProviderErrorKind::InvalidRequest
        } else if named(&["api_error", "server_error"]) {
            ProviderErrorKind::Server
        } else {
            names
                .iter()
                .find_map(|name| status_of_code(name))
                .map_or(ProviderErrorKind::Other, ProviderErrorKind::of_status)
        }
    }

    /// The class of an HTTP status, as the client classifies a response that names no class:
    /// 401 authentication, 403 permission, 404 not found, 429 rate limited, 529 overloaded,
    /// 408 and other 5xx server, other 4xx invalid request; anything else (not a failure
    /// status) [`Other`](ProviderErrorKind::Other).
    pub fn of_status(status: u16) -> ProviderErrorKind {
        match status {
            401 => ProviderErrorKind::Authentication,
            403 => ProviderErrorKind::Permission,
            404 => ProviderErrorKind::NotFound,
            429 => ProviderErrorKind::RateLimited,
            529 => ProviderErrorKind::Overloaded,
            408 | 500..=599 => ProviderErrorKind::Server,
            400..=499 => ProviderErrorKind::InvalidRequest,
            _ => ProviderErrorKind::Other,
        }
    }
}

/// The HTTP error status (400–599) an error payload's `code` names, as OpenRouter's
/// `{"error": {"code": 502}}` does (the status its upstream answered); none for a named code.
pub(crate) fn status_of_code(code: &str) -> Option<u16> {
    code.parse::<u16>()
        .ok()
        .filter(|status| (400..600).contains(status))
}

/// The sizes an overflowing prompt's error states: the prompt's tokens and the model's limit,
/// each when the message says it.
pub type PromptSizes = (Option<u64>, Option<u64>);

/// `Some(sizes)` when an error payload says the prompt does not fit the context window, by one
/// of its names (`context_length_exceeded`, llama.cpp's `exceed_context_size_error`) or by its
/// message: Anthropic's "prompt is too long: 201234 tokens > 200000 maximum", OpenAI's (and
/// vLLM's) "maximum context length is 128000 tokens. However, your messages resulted in 130000
/// tokens", Mistral's "Prompt contains 40000 tokens and 0 draft tokens, too large for model with
/// 32768 maximum context length", llama.cpp's server's "the request exceeds the available
/// context size" and LM Studio's "Trying to keep the first 5120 tokens when context the
/// overflows. However, the model is loaded with context length of only 4096 tokens". Letter
/// case does not matter.
pub fn prompt_too_long(names: &[&str], message: &str) -> Option<PromptSizes> {
    let named = |name: &str| names.contains(&name);
    // ASCII lowering keeps byte offsets, so positions found in `lower` index `message`.
    let lower = message.to_ascii_lowercase();
    if let Some(at) = lower.find("prompt is too long") {
        let numbers = numbers(&message[at..]);
        return Some((numbers.first().copied(), numbers.get(1).copied()));
    }
    if named("exceed_context_size_error") || lower.contains("exceeds the available context size") {
        return Some((None, None));
    }
    if let Some(at) = lower.find("loaded with context length of only") {
        let tokens = lower
            .find("keep the first")
            .and_then(|first| numbers(&message[first..at]).first().copied());
        return Some((tokens, numbers(&message[at..]).first().copied()));
    }
    if named("context_length_exceeded") || lower.contains("maximum context length") {
        const PHRASE: &str = "maximum context length";
        // The limit follows "maximum context length is", or comes right before the phrase.
        let limit = match lower.find("maximum context length is") {
            Some(at) => numbers(&message[at..]).first().copied(),
            None => lower.find(PHRASE).and_then(|at| {
                let before = message[..at].trim_end();
                let word = before
                    .rsplit(char::is_whitespace)
                    .next()
                    .unwrap_or_default();
                numbers(word).last().copied()
            }),
        };
        // The request's size is the largest other number (a breakdown follows it).
        let tokens = numbers(message)
            .into_iter()
            .filter(|number| Some(*number) != limit)
            .max();
        return Some((tokens, limit));
    }
    None
}

/// The unsigned integers in `text`, in order (commas inside a number are skipped).
pub(crate) fn numbers(text: &str) -> Vec<u64> {
    let mut found = Vec::new();
    let mut current: Option<u64> = None;
    let bytes = text.as_bytes();
    for (index, byte) in bytes.iter().enumerate() {
        match byte {
            b'0'..=b'9' => {
                let digit = u64::from(byte - b'0');
                current = Some(
                    current
                        .unwrap_or(0)
                        .saturating_mul(10)
                        .saturating_add(digit),
                );
            }
            b',' if current.is_some() && bytes.get(index + 1).is_some_and(u8::is_ascii_digit) => {}
            _ => {
                if let Some(number) = current.take() {
                    found.push(number);
                }
            }
        }
    }
    found.extend(current);
    found
}
