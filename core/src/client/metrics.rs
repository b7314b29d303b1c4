//! What one request cost: attempts, timings, bytes, token usage.

use std::time::Duration;

use super::retry::RetryEvent;

/// Measurements of one request (all attempts together).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestMetrics {
    /// The request id of the response that was used.
    pub request_id: Option<String>,
    /// Attempts made (1 when nothing was retried).
    pub attempts: u32,
    /// Every retry, in order.
    pub retries: Vec<RetryEvent>,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub http_version: Option<&'static str>,
    /// From the start of the request to the headers of the response used.
    pub time_to_headers: Option<Duration>,
    /// From the start of the request to its first event.
    pub time_to_first_event: Option<Duration>,
    /// From the start of the request to its first content (Anthropic: the first
    /// `content_block_delta`; OpenAI Responses: the first `*.delta` event; OpenAI Chat: the
    /// first chunk).
    pub time_to_first_token: Option<Duration>,
    /// From the start of the request to the end of the response.
    pub total: Option<Duration>,
    /// Response body bytes received, all attempts together: the error bodies of retried
    /// attempts (as much of them as was read) count with the body of the response used.
    pub bytes_received: u64,
    /// Events received from the response used.
    pub events: u64,
    /// The provider's `usage` object, merged across the events that carry one (a later
    /// non-null value replaces an earlier one: Anthropic's counts are cumulative).
    pub usage: Option<serde_json::Map<String, serde_json::Value>>,
}

impl RequestMetrics {
    /// Merges a `usage` object into [`RequestMetrics::usage`].
    pub(crate) fn merge_usage(&mut self, usage: &serde_json::Value) {
        let Some(fields) = usage.as_object() else {
            return;
        };
        let merged = self.usage.get_or_insert_with(serde_json::Map::new);
        for (key, value) in fields {
            if !value.is_null() {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The version label of a response.
pub(crate) fn version_label(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_assigned_not_added_and_nulls_keep_earlier_values() {
        let mut metrics = RequestMetrics::default();
        metrics.merge_usage(&serde_json::json!({"input_tokens": 10, "output_tokens": 1}));
        metrics.merge_usage(&serde_json::json!({"input_tokens": null, "output_tokens": 42}));
        let usage = metrics.usage.unwrap();
        assert_eq!(usage["input_tokens"], 10);
        assert_eq!(usage["output_tokens"], 42);
    }
}
