//! Property tests of the incremental partial-JSON view.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use ferroloop::decode::partial_json::{PartialJson, PartialMode};
use proptest::prelude::*;
use serde_json::Value;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Binary fractions print and parse back exactly (serde_json without `float_roundtrip`
        // may be off by one ulp on arbitrary floats).
        (-1_000_000i64..1_000_000).prop_map(|n| Value::from(n as f64 / 8.0)),
        "[a-z\"\\\\\n é漢😀]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(("[a-z\"é]{0,6}", inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

fn fresh_view(text: &str, mode: PartialMode) -> Option<Value> {
    let mut p = PartialJson::new();
    p.push(text);
    p.view(mode)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Fed in arbitrary fragments, the incremental view equals the view of the same prefix
    /// parsed fresh, is valid JSON at every prefix, and equals the document once complete.
    #[test]
    fn incremental_view_matches_fresh_view(value in json_value(), pretty in any::<bool>(), cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12)) {
        let text = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { serde_json::to_string(&value).unwrap() };
        let boundaries: Vec<usize> = (0..=text.len()).filter(|&i| text.is_char_boundary(i)).collect();
        let mut points: Vec<usize> = cuts.iter().map(|c| boundaries[c.index(boundaries.len())]).collect();
        points.push(text.len());
        points.sort_unstable();
        points.dedup();
        for mode in [PartialMode::DropIncompleteStrings, PartialMode::TrailingStrings] {
            let mut incremental = PartialJson::new();
            let mut start = 0;
            for &end in &points {
                incremental.push(&text[start..end]);
                start = end;
                let got = incremental.view(mode);
                prop_assert_eq!(&got, &fresh_view(&text[..end], mode));
                if let Some(text_view) = incremental.view_text(mode) {
                    prop_assert!(serde_json::from_str::<Value>(&text_view).is_ok(), "{}", text_view);
                }
            }
            prop_assert!(!incremental.is_invalid());
            prop_assert_eq!(incremental.view(mode), Some(value.clone()));
            prop_assert_eq!(incremental.work(), text.len() as u64);
        }
    }

    /// Arbitrary text never panics, and the view, when there is one, is valid JSON: the
    /// scanner stops at the first byte that cannot continue a JSON document.
    #[test]
    fn arbitrary_text_gives_a_valid_view_or_none(text in "[\\[\\]{}\",:0-9eE.+\\-a-fnrtu\\\\ ]{0,64}") {
        for mode in [PartialMode::DropIncompleteStrings, PartialMode::TrailingStrings] {
            let mut p = PartialJson::new();
            p.push(&text);
            if let Some(view) = p.view_text(mode) {
                prop_assert!(serde_json::from_str::<Value>(&view).is_ok(), "{:?} -> {:?}", text, view);
            }
            if serde_json::from_str::<Value>(&text).is_ok() {
                prop_assert!(!p.is_invalid());
                prop_assert_eq!(p.view(mode), serde_json::from_str::<Value>(&text).ok());
            }
        }
    }
}
