//! Property tests of the request estimator and the tracker over arbitrary JSON shaped like
//! requests (messages, Responses items, blocks with and without media, and things that are none
//! of those).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use ferroloop::tokens::{
    ContextTracker, CountMethod, Family, Usage, estimate_request, estimate_request_body,
    estimate_value,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// JSON values whose keys and `type`s are the ones the estimator reads.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1_000i64..1_000).prop_map(|n| Value::from(n as f64 / 8.0)),
        "[a-z \n é漢]{0,16}".prop_map(Value::String),
        prop_oneof![
            Just("text"),
            Just("image"),
            Just("document"),
            Just("tool_use"),
            Just("tool_result"),
            Just("function_call"),
            Just("function_call_output"),
            Just("reasoning"),
            Just("web_fetch_tool_result"),
            Just("input_file"),
            Just("user"),
            Just("iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"),
        ]
        .prop_map(Value::from),
    ];
    let key = prop_oneof![
        Just("type"),
        Just("role"),
        Just("content"),
        Just("text"),
        Just("source"),
        Just("data"),
        Just("input"),
        Just("output"),
        Just("arguments"),
        Just("summary"),
        Just("name"),
        Just("width"),
        Just("height"),
        Just("file_data"),
        Just("image_url"),
        Just("messages"),
        Just("instructions"),
        Just("x"),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..6).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Pushed one by one, any list of entries counts what the request estimate counts.
    #[test]
    fn the_tracker_counts_what_the_request_estimate_counts(
        system in json_value(),
        messages in proptest::collection::vec(json_value(), 0..8),
    ) {
        for family in [Family::Claude, Family::O200k] {
            let mut tracker = ContextTracker::new(family);
            tracker.set_system(&system);
            for message in &messages {
                tracker.push_message(message);
            }
            let expected = estimate_request(Some(&system), None, &messages, family);
            prop_assert_eq!(tracker.tokens().tokens, expected.total());
            let body = json!({"system": system, "messages": messages});
            prop_assert_eq!(estimate_request_body(&body, family), expected);
            prop_assert_eq!(estimate_value(&body, family), Some(expected.total()));
        }
    }

    /// Handing over the same history again after usage keeps the count; any value is read as
    /// usage without a panic, and what `parse` accepts `from_json` reads the same.
    #[test]
    fn replacing_with_the_same_history_keeps_the_usage(
        messages in proptest::collection::vec(json_value(), 0..8),
        usage in json_value(),
        input in 1u64..1_000_000,
    ) {
        let mut tracker = ContextTracker::new(Family::Claude);
        tracker.replace_messages(&messages);
        tracker.record_usage(Usage { input_tokens: input, ..Usage::default() });
        let before = tracker.tokens();
        prop_assert_eq!(before.method, CountMethod::Exact);
        tracker.replace_messages(&messages);
        prop_assert_eq!(tracker.tokens(), before);
        if let Ok(parsed) = Usage::parse(&usage) {
            prop_assert_eq!(Usage::from_json(&usage), Some(parsed));
        }
    }
}
