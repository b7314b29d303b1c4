//! A JSON string-body scanner for the decoders' fast paths.

use std::borrow::Cow;

use serde_json::value::RawValue;

/// Decodes the body of a JSON string that starts right after its opening quote. Returns the
/// text (borrowed when it holds no escapes) and the offset just past the closing quote, or
/// `None` if the string is unterminated or not valid JSON (the caller then falls back to the
/// general parser, which reports the error).
#[inline]
pub(crate) fn string_body(s: &str) -> Option<(Cow<'_, str>, usize)> {
    let bytes = s.as_bytes();
    let i = memchr::memchr2(b'"', b'\\', bytes)?;
    if has_control(&bytes[..i]) {
        return None;
    }
    if bytes[i] == b'"' {
        return Some((Cow::Borrowed(s.get(..i)?), i + 1));
    }
    let mut out = String::with_capacity(i + 16);
    let used = decode_into(s, &mut out)?;
    Some((Cow::Owned(out), used))
}

/// Like [`string_body`], but appends the decoded text to `out` (no allocation beyond `out`'s
/// growth, escapes or not). Returns the offset just past the closing quote; on `None`, `out` is
/// left as it was.
pub(crate) fn push_body(s: &str, out: &mut String) -> Option<usize> {
    let len = out.len();
    let used = decode_into(s, out);
    if used.is_none() {
        out.truncate(len);
    }
    used
}

/// A JSON string body cut into well-formed text and the halves of characters it shares with its
/// neighbours: a stream may split a character outside the Basic Multilingual Plane between two
/// deltas, each delta's string then holding one lone surrogate escape (`..\ud83d"` and
/// `"\ude00..`). JavaScript's string concatenation (the TypeScript SDK's accumulation) joins
/// them back into the character; [`Halves`] lets a decoder do the same. A lone surrogate
/// anywhere else reads as U+FFFD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Halves<'a> {
    /// A lone low surrogate escape that starts the body.
    pub(crate) low_first: Option<u16>,
    /// The rest of the body, decoded.
    pub(crate) text: Cow<'a, str>,
    /// A lone high surrogate escape that ends the body (not in `text`).
    pub(crate) high_last: Option<u16>,
}

impl<'a> Halves<'a> {
    /// Whether the body was empty (`""`: no text and no half).
    pub(crate) fn is_empty(&self) -> bool {
        self.low_first.is_none() && self.text.is_empty() && self.high_last.is_none()
    }

    /// Text without halves at its ends.
    pub(crate) fn whole(text: impl Into<Cow<'a, str>>) -> Halves<'a> {
        Halves {
            low_first: None,
            text: text.into(),
            high_last: None,
        }
    }
}

/// Like [`string_body`], but a lone surrogate escape is not an error: at the body's start (low
/// half) or end (high half) it is returned apart, anywhere else it reads as U+FFFD (see
/// [`Halves`]). Text without lone surrogates costs what [`string_body`] costs.
#[inline]
pub(crate) fn string_body_halves(s: &str) -> Option<(Halves<'_>, usize)> {
    if let Some((text, used)) = string_body(s) {
        return Some((Halves::whole(text), used));
    }
    let mut halves = Halves::whole("");
    let mut out = String::with_capacity(s.len());
    let used = decode(s, &mut out, Some(&mut halves))?;
    halves.text = Cow::Owned(out);
    Some((halves, used))
}

/// A JSON string kept raw by a typed form (`&RawValue`, which serde_json does not check for lone
/// surrogates), read with [`string_body_halves`]; a value that is not a string is serde_json's
/// error.
pub(crate) fn raw_string_halves(raw: &RawValue) -> Result<Halves<'_>, serde_json::Error> {
    let json = raw.get();
    if let Some(body) = json.strip_prefix('"')
        && let Some((halves, used)) = string_body_halves(body)
        && used == body.len()
    {
        return Ok(halves);
    }
    serde_json::from_str::<String>(json).map(Halves::whole)
}

/// The character of a high and a low surrogate (U+FFFD if they are not one).
pub(crate) fn surrogate_pair(high: u16, low: u16) -> char {
    match (high, low) {
        (0xD800..=0xDBFF, 0xDC00..=0xDFFF) => {
            let code = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
            char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
        }
        _ => char::REPLACEMENT_CHARACTER,
    }
}

/// Appends a string delta to `text`, which ends with a provisional U+FFFD while `held` is a
/// high half (see [`join_held`]); returns what the delta adds to the text once the halves are
/// joined (the delta's event).
#[inline]
pub(crate) fn push_halves<'a>(
    text: &mut String,
    held: &mut Option<u16>,
    piece: Halves<'a>,
) -> Cow<'a, str> {
    if held.is_none() && piece.low_first.is_none() && piece.high_last.is_none() {
        // The usual delta: no half anywhere.
        text.push_str(&piece.text);
        return piece.text;
    }
    if piece.is_empty() {
        return piece.text;
    }
    if held.is_some()
        && let Some(kept) = text.strip_suffix(char::REPLACEMENT_CHARACTER).map(str::len)
    {
        text.truncate(kept);
    }
    let joined = join_held(held, piece);
    text.push_str(&joined);
    if held.is_some() {
        text.push(char::REPLACEMENT_CHARACTER);
    }
    joined
}

/// The text a string delta adds once joined with `held`, the high half the previous delta
/// ended with: the pair's character when the delta starts with the low half, else U+FFFD for
/// each half without its other. `held` becomes the delta's own trailing high half. An empty
/// delta leaves a held half waiting (JavaScript's `"\ud83d" + "" + "\ude00"` is one
/// character).
#[inline]
pub(crate) fn join_held<'a>(held: &mut Option<u16>, piece: Halves<'a>) -> Cow<'a, str> {
    if piece.is_empty() {
        return piece.text;
    }
    let previous = std::mem::replace(held, piece.high_last);
    let lead = match (previous, piece.low_first) {
        (None, None) => return piece.text,
        (Some(high), Some(low)) => surrogate_pair(high, low),
        (Some(_), None) | (None, Some(_)) => char::REPLACEMENT_CHARACTER,
    };
    let mut joined = String::with_capacity(lead.len_utf8() + piece.text.len());
    joined.push(lead);
    joined.push_str(&piece.text);
    Cow::Owned(joined)
}

/// Appends the decoded body to `out`; on `None`, `out` may hold part of it.
fn decode_into(s: &str, out: &mut String) -> Option<usize> {
    decode(s, out, None)
}

/// [`decode_into`]; with `halves`, lone surrogates are read as [`string_body_halves`] reads
/// them (their ends recorded in `halves`, whose `text` is not touched).
fn decode(s: &str, out: &mut String, mut halves: Option<&mut Halves<'_>>) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = memchr::memchr2(b'"', b'\\', bytes)?;
    loop {
        if has_control(&bytes[start..i]) {
            return None;
        }
        out.push_str(s.get(start..i)?);
        if bytes[i] == b'"' {
            return Some(i + 1);
        }
        let escape = *bytes.get(i + 1)?;
        i += 2;
        match escape {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let escape_at = i - 2;
                let unit = hex4(bytes.get(i..i + 4)?)?;
                i += 4;
                let code = match unit {
                    0xD800..=0xDBFF => {
                        let low = match bytes.get(i..i + 2) {
                            Some(b"\\u") => hex4(bytes.get(i + 2..i + 6)?)?,
                            _ => 0,
                        };
                        if (0xDC00..=0xDFFF).contains(&low) {
                            i += 6;
                            0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            let halves = halves.as_deref_mut()?;
                            if bytes.get(i) == Some(&b'"') {
                                // The string's last character: half of one the next string ends.
                                halves.high_last = u16::try_from(unit).ok();
                                start = i;
                                continue;
                            }
                            u32::from(char::REPLACEMENT_CHARACTER)
                        }
                    }
                    0xDC00..=0xDFFF => {
                        let halves = halves.as_deref_mut()?;
                        if escape_at == 0 {
                            // The string's first character: half of one the previous string began.
                            halves.low_first = u16::try_from(unit).ok();
                            start = i;
                            i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
                            continue;
                        }
                        u32::from(char::REPLACEMENT_CHARACTER)
                    }
                    _ => unit,
                };
                out.push(char::from_u32(code)?);
            }
            _ => return None,
        }
        start = i;
        i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
    }
}

fn has_control(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| b < 0x20)
}

fn hex4(digits: &[u8]) -> Option<u32> {
    let mut value = 0u32;
    for &d in digits {
        let nibble = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        value = (value << 4) | u32::from(nibble);
    }
    Some(value)
}

/// Whether `s` is only JSON whitespace.
pub(crate) fn is_json_whitespace(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_serde_json() {
        for body in [
            r#"plain""#,
            r#"a\"b\\c\/d\be\ff\ng\rh\ti""#,
            r#"\u00e9\u6f22\ud83d\ude00 tail""#,
            r#"漢字 and 😀""#,
            r#"""#,
        ] {
            let (text, used) = string_body(body).unwrap();
            assert_eq!(used, body.len());
            let expected: String = serde_json::from_str(&format!("\"{body}")).unwrap();
            assert_eq!(text, expected);
            let mut out = String::from("kept ");
            assert_eq!(push_body(body, &mut out), Some(used));
            assert_eq!(out, format!("kept {expected}"));
        }
        assert!(matches!(
            string_body(r#"abc" rest"#),
            Some((Cow::Borrowed("abc"), 4))
        ));
    }

    #[test]
    fn long_strings_with_escapes_and_controls() {
        let long = "x".repeat(200);
        let body = format!("{long}\\n{long}\" tail");
        let (text, used) = string_body(&body).unwrap();
        assert_eq!(text, format!("{long}\n{long}"));
        assert_eq!(&body[used..], " tail");
        let with_control = format!("{long}\u{1}{long}\"");
        assert!(string_body(&with_control).is_none());
        let control_after_escape = format!("{long}\\n\u{1}\"");
        assert!(string_body(&control_after_escape).is_none());
    }

    #[test]
    fn halves_at_the_ends_are_kept_apart() {
        fn halves(body: &str) -> Option<(Halves<'_>, &str)> {
            string_body_halves(body).map(|(h, used)| (h, &body[used..]))
        }
        let (h, rest) = halves(r#"ab\ud83d" tail"#).unwrap();
        assert_eq!(
            (h.low_first, h.text.as_ref(), h.high_last, rest),
            (None, "ab", Some(0xD83D), " tail")
        );
        let (h, _) = halves(r#"\ude00cd""#).unwrap();
        assert_eq!(
            (h.low_first, h.text.as_ref(), h.high_last),
            (Some(0xDE00), "cd", None)
        );
        // Only a lone half: the low one first, then the high one.
        let (h, _) = halves(r#"\udc00\ud800""#).unwrap();
        assert_eq!(
            (h.low_first, h.text.as_ref(), h.high_last),
            (Some(0xDC00), "", Some(0xD800))
        );
        let (h, _) = halves(r#"\ud800""#).unwrap();
        assert_eq!(
            (h.low_first, h.text.as_ref(), h.high_last),
            (None, "", Some(0xD800))
        );
        // Lone halves inside the text, or a low half after text, read as U+FFFD; a pair is a
        // character.
        let (h, _) = halves(r#"a\ud800b\udc00\ud83d\ude00\ud800\u0041x\ude00""#).unwrap();
        assert_eq!(
            (h.low_first, h.text.as_ref(), h.high_last),
            (None, "a\u{FFFD}b\u{FFFD}\u{1F600}\u{FFFD}Ax\u{FFFD}", None)
        );
        // Valid text is read as `string_body` reads it, borrowed when it can be.
        let (h, _) = halves(r#"plain""#).unwrap();
        assert!(matches!(h.text, Cow::Borrowed("plain")));
        assert_eq!(h, Halves::whole("plain"));
        // Everything else JSON rejects is still rejected.
        for body in [r#"\ud800\u12""#, r#"\ud800"#, r#"\x""#, "a\nb\""] {
            assert!(string_body_halves(body).is_none(), "{body:?}");
        }
        assert_eq!(surrogate_pair(0xD83D, 0xDE00), '\u{1F600}');
        assert_eq!(surrogate_pair(0xDBFF, 0xDFFF), '\u{10FFFF}');
        assert_eq!(surrogate_pair(0xDE00, 0xD83D), char::REPLACEMENT_CHARACTER);
        assert_eq!(surrogate_pair(0x0041, 0xDE00), char::REPLACEMENT_CHARACTER);
    }

    #[test]
    fn rejects_what_json_rejects() {
        for body in [
            r#"abc"#,
            r#"a\"#,
            r#"\x""#,
            r#"\ud83d""#,
            r#"\ude00""#,
            r#"\u12""#,
            "a\nb\"",
            r#"\n\u0"#,
        ] {
            assert!(string_body(body).is_none(), "{body:?}");
            let mut out = String::from("kept");
            assert!(push_body(body, &mut out).is_none(), "{body:?}");
            assert_eq!(out, "kept");
            assert!(
                serde_json::from_str::<String>(&format!("\"{body}")).is_err(),
                "{body:?}"
            );
        }
    }
}
