//! A JSON string-body scanner for the decoders' fast paths.

use std::borrow::Cow;

/// Decodes the body of a JSON string that starts right after its opening quote. Returns the
/// text (borrowed when it holds no escapes) and the offset just past the closing quote, or
/// `None` if the string is unterminated or not valid JSON (the caller then falls back to the
/// general parser, which reports the error).
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

/// Appends the decoded body to `out`; on `None`, `out` may hold part of it.
fn decode_into(s: &str, out: &mut String) -> Option<usize> {
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
                let high = hex4(bytes.get(i..i + 4)?)?;
                i += 4;
                let code = match high {
                    0xD800..=0xDBFF => {
                        if bytes.get(i..i + 2)? != b"\\u" {
                            return None;
                        }
                        let low = hex4(bytes.get(i + 2..i + 6)?)?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return None;
                        }
                        i += 6;
                        0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return None,
                    _ => high,
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
