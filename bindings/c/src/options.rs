//! Options given as a JSON object (`fl_client_new`, `fl_agent_new`): a C host has no keyword
//! arguments, and a struct would have to grow (and break the ABI) with every option Python and
//! Node gain. Each option is read by name with its type checked; a key nobody read is an error,
//! so a misspelt option is never silently ignored.
//!
//! The keys mirror Python's keyword arguments (`max_retries`, `fallback_model`), with durations
//! in milliseconds and a `_ms` suffix (the C convention). `null` counts as "not given", as
//! Python's `None` and JavaScript's `undefined` do.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::boundary::{FfiError, FfiResult};

/// The fields of an options object, consumed as they are read.
pub(crate) struct JsonOptions {
    /// What the options configure, for messages (`client`, `agent`).
    what: &'static str,
    fields: Map<String, Value>,
    /// Every key read so far (the known options, listed when a key is unknown).
    known: Vec<&'static str>,
}

/// A short rendering of a value for an error message.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

impl JsonOptions {
    /// Parses `json`, which must be a JSON object; empty text means no options.
    pub(crate) fn parse(json: &str, what: &'static str) -> FfiResult<Self> {
        let fields = if json.trim().is_empty() {
            Map::new()
        } else {
            match serde_json::from_str(json) {
                Ok(Value::Object(fields)) => fields,
                Ok(other) => {
                    return Err(FfiError::invalid(format!(
                        "{what} options must be a JSON object, not {}",
                        shown(&other)
                    )));
                }
                Err(error) => {
                    return Err(FfiError::invalid(format!(
                        "{what} options are not valid JSON: {error}"
                    )));
                }
            }
        };
        Ok(Self {
            what,
            fields,
            known: Vec::new(),
        })
    }

    /// Takes the value of `key` (`None` when absent or `null`).
    fn take(&mut self, key: &'static str) -> Option<Value> {
        self.known.push(key);
        self.fields.remove(key).filter(|value| !value.is_null())
    }

    /// The error for a value of the wrong type.
    fn wrong(&self, key: &str, expected: &str, value: &Value) -> FfiError {
        FfiError::invalid(format!(
            "{} option \"{key}\" must be {expected}, not {}",
            self.what,
            shown(value)
        ))
    }

    /// A string option.
    pub(crate) fn string(&mut self, key: &'static str) -> FfiResult<Option<String>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(self.wrong(key, "a string", &other)),
        }
    }

    /// A boolean option.
    pub(crate) fn boolean(&mut self, key: &'static str) -> FfiResult<Option<bool>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(flag)),
            Some(other) => Err(self.wrong(key, "true or false", &other)),
        }
    }

    /// A non-negative integer option that fits `T`.
    pub(crate) fn count<T: Count>(&mut self, key: &'static str) -> FfiResult<Option<T>> {
        match self.take(key) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .and_then(|n| T::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    let expected = format!("a non-negative integer of at most {}", T::LARGEST);
                    self.wrong(key, &expected, &value)
                }),
        }
    }

    /// A size limit in characters: a non-negative integer, or `"unlimited"` for none (what
    /// Python's `math.inf` and Node's `Infinity` say; JSON has no infinity, and `null` already
    /// means "not given", the default limit).
    pub(crate) fn limit(&mut self, key: &'static str) -> FfiResult<Option<Limit>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(word)) if word == UNLIMITED => Ok(Some(Limit::Unlimited)),
            Some(value) => value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .map(|chars| Some(Limit::Chars(chars)))
                .ok_or_else(|| {
                    let expected = format!(
                        "a non-negative integer of at most {} or \"{UNLIMITED}\"",
                        usize::LARGEST
                    );
                    self.wrong(key, &expected, &value)
                }),
        }
    }

    /// A duration option, in whole milliseconds.
    pub(crate) fn millis(&mut self, key: &'static str) -> FfiResult<Option<Duration>> {
        Ok(self.count::<u64>(key)?.map(Duration::from_millis))
    }

    /// A JSON object option.
    pub(crate) fn object(&mut self, key: &'static str) -> FfiResult<Option<Map<String, Value>>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Object(fields)) => Ok(Some(fields)),
            Some(other) => Err(self.wrong(key, "a JSON object", &other)),
        }
    }

    /// An array-of-strings option.
    pub(crate) fn strings(&mut self, key: &'static str) -> FfiResult<Option<Vec<String>>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => Ok(Some(
                items
                    .into_iter()
                    .filter_map(|item| match item {
                        Value::String(text) => Some(text),
                        _ => None,
                    })
                    .collect(),
            )),
            Some(other) => Err(self.wrong(key, "an array of strings", &other)),
        }
    }

    /// An object-of-strings option (`{"name": "value"}`), as pairs in the object's order.
    pub(crate) fn string_pairs(
        &mut self,
        key: &'static str,
    ) -> FfiResult<Option<Vec<(String, String)>>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Object(fields)) if fields.values().all(Value::is_string) => Ok(Some(
                fields
                    .into_iter()
                    .filter_map(|(name, value)| match value {
                        Value::String(text) => Some((name, text)),
                        _ => None,
                    })
                    .collect(),
            )),
            Some(other) => Err(self.wrong(key, "an object of strings", &other)),
        }
    }

    /// Fails on a key no reader asked for, naming it and the known ones.
    pub(crate) fn finish(self) -> FfiResult {
        let Some(unknown) = self.fields.keys().next() else {
            return Ok(());
        };
        let mut known = self.known;
        known.sort_unstable();
        known.dedup();
        Err(FfiError::invalid(format!(
            "unknown {} option \"{unknown}\" (known: {})",
            self.what,
            known.join(", ")
        )))
    }
}

/// The word a size limit takes for "no limit".
pub(crate) const UNLIMITED: &str = "unlimited";

/// A size limit option's value (see [`JsonOptions::limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// At most this many characters.
    Chars(usize),
    /// No limit.
    Unlimited,
}

/// The integer types an option may have.
pub(crate) trait Count: TryFrom<u64> {
    /// The largest value (for messages).
    const LARGEST: u64;
}

impl Count for u32 {
    const LARGEST: u64 = u32::MAX as u64;
}

impl Count for u64 {
    const LARGEST: u64 = u64::MAX;
}

impl Count for usize {
    // Lossless: usize is at most 64 bits on every target Rust supports.
    const LARGEST: u64 = usize::MAX as u64;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::status::fl_status;
    use proptest::prelude::*;

    fn message(result: FfiResult<impl std::fmt::Debug>) -> String {
        let error = result.expect_err("an error");
        assert_eq!(error.status, fl_status::FL_STATUS_INVALID_ARGUMENT);
        error.message
    }

    #[test]
    fn empty_text_is_no_options() {
        let options = JsonOptions::parse("  ", "client").unwrap();
        assert!(options.finish().is_ok());
    }

    #[test]
    fn not_an_object_or_not_json_is_refused() {
        assert_eq!(
            message(JsonOptions::parse("[1]", "client").map(|_| ())),
            "client options must be a JSON object, not [1]"
        );
        assert!(
            message(JsonOptions::parse("{\"a\":", "agent").map(|_| ()))
                .starts_with("agent options are not valid JSON: ")
        );
    }

    #[test]
    fn wrong_types_name_the_key() {
        let mut options = JsonOptions::parse(r#"{"max_retries": "3"}"#, "client").unwrap();
        assert_eq!(
            message(options.count::<u32>("max_retries")),
            "client option \"max_retries\" must be a non-negative integer of at most 4294967295, \
             not \"3\""
        );
        let mut options = JsonOptions::parse(r#"{"max_turns": -1}"#, "agent").unwrap();
        assert!(message(options.count::<u32>("max_turns")).contains("\"max_turns\""));
        let mut options = JsonOptions::parse(r#"{"headers": {"a": 1}}"#, "client").unwrap();
        assert_eq!(
            message(options.string_pairs("headers")),
            "client option \"headers\" must be an object of strings, not {\"a\":1}"
        );
        let mut options = JsonOptions::parse(r#"{"flag": 1}"#, "client").unwrap();
        assert!(message(options.boolean("flag")).contains("true or false"));
    }

    #[test]
    fn null_is_not_given_and_values_are_read() {
        let mut options = JsonOptions::parse(
            r#"{"a": null, "b": "x", "c": 7, "d": [ "p", "q" ], "e": {"k": "v"}, "f": true}"#,
            "client",
        )
        .unwrap();
        assert_eq!(options.string("a").unwrap(), None);
        assert_eq!(options.string("b").unwrap().as_deref(), Some("x"));
        assert_eq!(options.millis("c").unwrap(), Some(Duration::from_millis(7)));
        assert_eq!(
            options.strings("d").unwrap(),
            Some(vec!["p".to_owned(), "q".to_owned()])
        );
        assert_eq!(
            options.string_pairs("e").unwrap(),
            Some(vec![("k".to_owned(), "v".to_owned())])
        );
        assert_eq!(options.boolean("f").unwrap(), Some(true));
        assert!(options.finish().is_ok());
    }

    #[test]
    fn unknown_keys_are_named_with_the_known_ones() {
        let mut options = JsonOptions::parse(r#"{"max_retrys": 3}"#, "client").unwrap();
        assert_eq!(options.count::<u32>("max_retries").unwrap(), None);
        assert_eq!(options.string("provider").unwrap(), None);
        assert_eq!(
            message(options.finish()),
            "unknown client option \"max_retrys\" (known: max_retries, provider)"
        );
    }

    #[test]
    fn limits_are_counts_or_unlimited() {
        let mut options = JsonOptions::parse(
            r#"{"a": 0, "b": 50000, "c": "unlimited", "d": null}"#,
            "executor",
        )
        .unwrap();
        assert_eq!(options.limit("a").unwrap(), Some(Limit::Chars(0)));
        assert_eq!(options.limit("b").unwrap(), Some(Limit::Chars(50_000)));
        assert_eq!(options.limit("c").unwrap(), Some(Limit::Unlimited));
        assert_eq!(options.limit("d").unwrap(), None);
        assert_eq!(options.limit("e").unwrap(), None);
        assert!(options.finish().is_ok());
        for value in [r#""inf""#, "-1", "1.5", "true", "[]", r#""Unlimited""#] {
            let json = format!(r#"{{"max_result_chars": {value}}}"#);
            let mut options = JsonOptions::parse(&json, "tool").unwrap();
            let expected = format!(
                "tool option \"max_result_chars\" must be a non-negative integer of at most {} \
                 or \"unlimited\", not {value}",
                usize::MAX
            );
            assert_eq!(message(options.limit("max_result_chars")), expected);
        }
    }

    #[test]
    fn counts_out_of_range_are_refused() {
        let mut options = JsonOptions::parse(r#"{"n": 4294967296}"#, "agent").unwrap();
        assert!(message(options.count::<u32>("n")).contains("at most 4294967295"));
        let mut options = JsonOptions::parse(r#"{"n": 1.5}"#, "agent").unwrap();
        assert!(options.count::<u64>("n").is_err());
    }

    proptest! {
        /// Whatever the text, parsing and reading never panic; an object whose keys were not
        /// all read is refused, naming a key that was not read.
        #[test]
        fn any_text_is_read_or_refused(text in ".{0,64}", key in "[a-z_]{1,12}") {
            if let Ok(mut options) = JsonOptions::parse(&text, "client") {
                let _ = options.string("provider");
                let _ = options.count::<u32>("max_retries");
                let _ = options.millis("timeout_ms");
                let _ = options.string_pairs("headers");
                let _ = options.finish();
            }
            let json = serde_json::json!({ key.clone(): 1 }).to_string();
            let mut options = JsonOptions::parse(&json, "agent").unwrap();
            let read = options.count::<u32>("max_turns");
            if key == "max_turns" {
                prop_assert_eq!(read.unwrap(), Some(1));
                prop_assert!(options.finish().is_ok());
            } else {
                let message = options.finish().unwrap_err().message;
                let expected = format!("\"{key}\"");
                prop_assert!(message.contains(&expected), "{}", message);
            }
        }

        /// Any JSON value in any option's place is read or refused with the key named.
        #[test]
        fn any_value_is_read_or_refused_naming_the_key(value in arbitrary_json()) {
            let json = serde_json::json!({ "opt": value }).to_string();
            for read in 0..7 {
                let mut options = JsonOptions::parse(&json, "agent").unwrap();
                let outcome = match read {
                    0 => options.string("opt").map(|_| ()),
                    1 => options.boolean("opt").map(|_| ()),
                    2 => options.count::<u32>("opt").map(|_| ()),
                    3 => options.object("opt").map(|_| ()),
                    4 => options.strings("opt").map(|_| ()),
                    5 => options.limit("opt").map(|_| ()),
                    _ => options.string_pairs("opt").map(|_| ()),
                };
                if let Err(error) = outcome {
                    prop_assert!(error.message.contains("\"opt\""), "{}", error.message);
                } else {
                    prop_assert!(options.finish().is_ok());
                }
            }
        }
    }

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{0,4}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }
}
