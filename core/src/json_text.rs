//! JSON text with lone surrogate escapes, read as hosts mean it.
//!
//! A JavaScript string may hold a lone surrogate (half of a UTF-16 pair, as a string cut in the
//! middle of an emoji), and so may a Python `str`. `JSON.stringify` writes one as a `\udXXX`
//! escape, which is valid JSON text but names no Unicode scalar value, so serde_json refuses the
//! whole document ("unexpected end of hex escape"). A plain string with a lone surrogate reaches
//! Rust with it replaced by U+FFFD (napi's UTF-8 conversion, Python's lossy encoding): the
//! escapes are read the same way here, wherever JSON text from a host or a gateway is read (the
//! token estimates, the stream decoders, the Node binding's JSON from JavaScript).

use std::borrow::Cow;

use serde::de::DeserializeOwned;

/// How deeply a JSON value ferroloop takes may nest arrays and objects: 127 levels, serde_json's
/// recursion limit when it reads JSON text (it refuses the 128th), which every value from Node,
/// C, the CLI and the providers crosses as text. Python's objects are converted without JSON
/// text and are held to the same limit, so that a value one binding takes (a tool's input or
/// result, a request body) every other takes too.
pub const MAX_NESTING: usize = 127;

/// The value of JSON `text` in which a lone surrogate escape reads as U+FFFD (see
/// [`lone_surrogates_replaced`]); anything else invalid is refused. Text that parses as it is is
/// read once, without a scan for escapes.
pub fn from_str_lossy<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    serde_json::from_str(text).or_else(|error| match lone_surrogates_replaced(text) {
        Cow::Owned(replaced) => serde_json::from_str(&replaced),
        Cow::Borrowed(_) => Err(error),
    })
}

/// `text` with every `\u` escape of a lone surrogate replaced by `\ufffd` (a valid pair of
/// escapes is kept). Text without such an escape is returned as is, without a copy.
///
/// Escapes occur only inside JSON strings, and a backslash anywhere starts one, so a scan over
/// the escapes (each backslash with what follows it) needs no tracking of strings. Invalid JSON
/// stays invalid: only the four hex digits of a surrogate escape are ever changed.
pub fn lone_surrogates_replaced(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    // Bytes of `text` before `copied` are in `out` already.
    let mut copied = 0;
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'\\') {
        let escape = at + offset;
        if bytes.get(escape + 1) != Some(&b'u') {
            // `\\`, `\"`, `\n`, ...: two bytes, whatever the second is (a backslash at the
            // very end has none).
            at = (escape + 2).min(bytes.len());
            continue;
        }
        let Some(unit) = hex_unit(bytes, escape + 2) else {
            at = escape + 2;
            continue;
        };
        at = escape + 6;
        if !(0xd800..=0xdfff).contains(&unit) {
            continue;
        }
        if unit <= 0xdbff
            && bytes.get(at) == Some(&b'\\')
            && bytes.get(at + 1) == Some(&b'u')
            && hex_unit(bytes, at + 2).is_some_and(|low| (0xdc00..=0xdfff).contains(&low))
        {
            // A high surrogate followed by a low one: a valid pair, kept.
            at += 6;
            continue;
        }
        let shown = out.get_or_insert_with(|| String::with_capacity(text.len()));
        shown.push_str(&text[copied..escape]);
        shown.push_str("\\ufffd");
        copied = at;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut shown) => {
            shown.push_str(&text[copied..]);
            Cow::Owned(shown)
        }
    }
}

/// The UTF-16 unit of the four hex digits at `bytes[at..at + 4]`, if they are four hex digits.
fn hex_unit(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits.iter().try_fold(0u32, |unit, &digit| {
        Some(unit * 16 + char::from(digit).to_digit(16)?)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let text = r#"{"a":"x\ud83d","b":"\ude00y","c":"\ud83d\ude00","d":"\\ud800"}"#;
        let fixed = lone_surrogates_replaced(text);
        assert_eq!(
            fixed,
            r#"{"a":"x\ufffd","b":"\ufffdy","c":"\ud83d\ude00","d":"\\ud800"}"#
        );
        let value: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(value["a"], "x\u{fffd}");
        assert_eq!(value["c"], "\u{1f600}");
        assert_eq!(
            value["d"], "\\ud800",
            "an escaped backslash starts no escape"
        );
        // Two high halves in a row, a high half before a non-surrogate escape.
        assert_eq!(
            lone_surrogates_replaced(r#""\uD800\uD800\u0041""#),
            r#""\ufffd\ufffd\u0041""#
        );
    }

    #[test]
    fn a_document_with_a_lone_surrogate_reads_as_with_a_replacement_character() {
        let lone: Value =
            from_str_lossy(r#"{"messages":[{"role":"user","content":"x\ud800"}]}"#).unwrap();
        let replaced: Value =
            serde_json::from_str(r#"{"messages":[{"role":"user","content":"x\ufffd"}]}"#).unwrap();
        assert_eq!(lone, replaced);
        assert!(from_str_lossy::<Value>(r#"{"a":"\ud800"#).is_err());
    }

    #[test]
    fn text_without_lone_surrogates_is_borrowed() {
        for text in [
            r#"{"a":"\u00e9\n\\u","b":[1,2]}"#,
            "",
            r#""\ud83d\ude00""#,
            "\\u12",
            "x\\",
        ] {
            assert!(matches!(lone_surrogates_replaced(text), Cow::Borrowed(t) if t == text));
        }
    }
}
