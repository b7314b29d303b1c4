//! An incremental "complete-so-far" view of a JSON document that is still arriving.
//!
//! Fragments are appended to one buffer and scanned once, left to right, by a small state machine
//! that remembers, for every open container, the last point where the text could be cut and
//! closed into valid JSON. Asking for the view costs O(nesting depth) to compute the repair
//! ([`PartialJson::repair`]) plus the copy of the prefix if the caller wants the text or a parsed
//! value; it never re-scans what was already scanned. That is the difference with the SDKs, which
//! re-parse the whole buffer on every delta (quadratic in the input size).
//!
//! Semantics follow `jiter`'s partial mode (what the Python SDKs use): incomplete keys, literals
//! (`tru`, `nul`) and dangling members (`{"a":`) are dropped; a dangling number keeps its longest
//! valid prefix (`12.` → `12`, `1e` → `1`, `-` → dropped); open containers are closed; an
//! unterminated string value is dropped ([`PartialMode::DropIncompleteStrings`], jiter `"on"`) or
//! kept up to its last complete character ([`PartialMode::TrailingStrings`]).

use serde_json::Value;

/// What to do with a string value that has not been closed yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartialMode {
    /// Drop it (jiter `partial_mode="on"`, what the Anthropic SDK's snapshot uses).
    #[default]
    DropIncompleteStrings,
    /// Keep what arrived, cut before an incomplete escape sequence (jiter `"trailing-strings"`).
    TrailingStrings,
}

/// The repair that turns the text scanned so far into valid JSON: keep `text[..cut]`, then
/// append `suffix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// Length of the prefix of the buffer to keep.
    pub cut: usize,
    /// Closing characters to append (`"`, `]`, `}`).
    pub suffix: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// After `{` or `[`: a member or the closing bracket.
    FirstOrEnd,
    /// After `,`: a member.
    Next,
    /// After an object key: `:`.
    Colon,
    /// After `:`: the member's value.
    Value,
    /// After a member: `,` or the closing bracket.
    AfterMember,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    kind: Kind,
    phase: Phase,
    /// Where the container's text may be cut: after its last complete member, or just after
    /// its opening bracket.
    committed: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Number {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Number {
    fn is_complete(self) -> bool {
        matches!(self, Self::Zero | Self::Int | Self::Frac | Self::ExpDigits)
    }

    fn step(self, b: u8) -> Option<Self> {
        Some(match (self, b) {
            (Self::Minus, b'0') => Self::Zero,
            (Self::Minus, b'1'..=b'9') => Self::Int,
            (Self::Int, b'0'..=b'9') => Self::Int,
            (Self::Zero | Self::Int, b'.') => Self::Dot,
            (Self::Zero | Self::Int | Self::Frac, b'e' | b'E') => Self::Exp,
            (Self::Dot | Self::Frac, b'0'..=b'9') => Self::Frac,
            (Self::Exp, b'+' | b'-') => Self::ExpSign,
            (Self::Exp | Self::ExpSign | Self::ExpDigits, b'0'..=b'9') => Self::ExpDigits,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// Just after a backslash.
    Backslash,
    /// Inside `\uXXXX`, with this many hex digits still to come.
    Hex(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    None,
    Str {
        key: bool,
        /// Position just after the last complete character of the content: the cut point for
        /// [`PartialMode::TrailingStrings`].
        clean_end: usize,
        /// Where in an escape sequence the scanner is.
        escape: Escape,
        /// Accumulated hex value of the current `\u` escape.
        hex: u16,
        /// Where a complete high-surrogate escape that still needs its low half started.
        pending_high: Option<usize>,
    },
    Num {
        state: Number,
        /// End of the longest valid number prefix, if any.
        valid_end: Option<usize>,
    },
    Lit {
        word: &'static [u8],
        matched: u8,
    },
}

/// A JSON document arriving in fragments, with an incremental complete-so-far view.
#[derive(Debug, Clone, Default)]
pub struct PartialJson {
    text: String,
    scanned: usize,
    stack: Vec<Frame>,
    root_done: Option<usize>,
    token: TokenState,
    error_at: Option<usize>,
    work: u64,
}

#[derive(Debug, Clone, Copy)]
struct TokenState(Token);

impl Default for TokenState {
    fn default() -> Self {
        Self(Token::None)
    }
}

impl PartialJson {
    /// An empty document.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a fragment. Costs O(fragment): nothing is scanned until a view is asked for.
    pub fn push(&mut self, fragment: &str) {
        self.text.push_str(fragment);
    }

    /// The raw text received so far.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Consumes the document, returning its raw text.
    pub fn into_string(self) -> String {
        self.text
    }

    /// Bytes the scanner has examined in total (for tests that prove linearity).
    pub fn work(&self) -> u64 {
        self.work
    }

    /// Whether the text seen so far is not a prefix of any valid JSON document; the view then
    /// stops at the last valid point.
    pub fn is_invalid(&self) -> bool {
        self.error_at.is_some()
    }

    /// Scans the bytes appended since the last call. Each byte is scanned once in total.
    pub fn scan(&mut self) {
        if self.error_at.is_some() {
            return;
        }
        // Taken out for the loop so `step` can borrow `self` mutably; put back below.
        let text = std::mem::take(&mut self.text);
        let bytes = text.as_bytes();
        let mut pos = self.scanned;
        while pos < bytes.len() {
            match self.step(bytes, pos) {
                Ok(next) => {
                    self.work += (next - pos) as u64;
                    pos = next;
                }
                Err(()) => {
                    self.error_at = Some(pos);
                    break;
                }
            }
        }
        self.scanned = pos;
        self.text = text;
    }

    /// The repair that makes the text scanned so far valid JSON, or `None` when no value has
    /// started yet (or only a dropped one). Scans new bytes first; the repair itself costs
    /// O(nesting depth).
    pub fn repair(&mut self, mode: PartialMode) -> Option<Repair> {
        self.scan();
        let mut suffix = String::new();
        let cut = match self.token.0 {
            Token::Num {
                valid_end: Some(end),
                ..
            } => end,
            Token::Str {
                key: false,
                clean_end,
                pending_high,
                ..
            } if mode == PartialMode::TrailingStrings => {
                suffix.push('"');
                pending_high.map_or(clean_end, |start| start.min(clean_end))
            }
            _ => match self.stack.last() {
                Some(frame) => frame.committed,
                None => self.root_done?,
            },
        };
        for frame in self.stack.iter().rev() {
            suffix.push(match frame.kind {
                Kind::Object => '}',
                Kind::Array => ']',
            });
        }
        Some(Repair { cut, suffix })
    }

    /// The complete-so-far JSON text (see the module docs), or `None` if there is none yet.
    pub fn view_text(&mut self, mode: PartialMode) -> Option<String> {
        let repair = self.repair(mode)?;
        let prefix = self.text.get(..repair.cut)?;
        let mut out = String::with_capacity(repair.cut + repair.suffix.len());
        out.push_str(prefix);
        out.push_str(&repair.suffix);
        Some(out)
    }

    /// The complete-so-far value, or `None` if there is none yet.
    pub fn view(&mut self, mode: PartialMode) -> Option<Value> {
        let text = self.view_text(mode)?;
        serde_json::from_str(&text).ok()
    }

    /// Parses the whole text as one complete document.
    pub fn parse_complete(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.text)
    }

    fn value_done(&mut self, end: usize) {
        match self.stack.last_mut() {
            Some(frame) => {
                frame.committed = end;
                frame.phase = Phase::AfterMember;
            }
            None => self.root_done = Some(end),
        }
    }

    fn expects_value(&self) -> bool {
        match self.stack.last() {
            Some(f) => match f.kind {
                Kind::Array => matches!(f.phase, Phase::FirstOrEnd | Phase::Next),
                Kind::Object => f.phase == Phase::Value,
            },
            None => self.root_done.is_none(),
        }
    }

    /// Scans from `pos`; returns the position after what was consumed.
    fn step(&mut self, bytes: &[u8], pos: usize) -> Result<usize, ()> {
        match self.token.0 {
            Token::Str { .. } => return self.step_string(bytes, pos),
            Token::Num { state, valid_end } => {
                let b = bytes[pos];
                if let Some(next) = state.step(b) {
                    let valid_end = if next.is_complete() {
                        Some(pos + 1)
                    } else {
                        valid_end
                    };
                    self.token.0 = Token::Num {
                        state: next,
                        valid_end,
                    };
                    return Ok(pos + 1);
                }
                if !state.is_complete() {
                    return Err(());
                }
                self.token.0 = Token::None;
                self.value_done(pos);
                // fall through: `b` is a delimiter handled below
            }
            Token::Lit { word, matched } => {
                if bytes[pos] != word[usize::from(matched)] {
                    return Err(());
                }
                let matched = matched + 1;
                if usize::from(matched) == word.len() {
                    self.token.0 = Token::None;
                    self.value_done(pos + 1);
                } else {
                    self.token.0 = Token::Lit { word, matched };
                }
                return Ok(pos + 1);
            }
            Token::None => {}
        }
        let b = bytes[pos];
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => return Ok(pos + 1),
            _ => {}
        }
        let closes_empty_array = b == b']'
            && self
                .stack
                .last()
                .is_some_and(|f| f.kind == Kind::Array && f.phase == Phase::FirstOrEnd);
        if self.expects_value() && !closes_empty_array {
            return self.start_value(b, pos);
        }
        let Some(frame) = self.stack.last_mut() else {
            return Err(()); // trailing garbage after the root value
        };
        match (frame.kind, frame.phase, b) {
            (Kind::Object, Phase::FirstOrEnd | Phase::Next, b'"') => {
                self.token.0 = Token::Str {
                    key: true,
                    clean_end: pos + 1,
                    escape: Escape::None,
                    hex: 0,
                    pending_high: None,
                };
            }
            (Kind::Object, Phase::Colon, b':') => frame.phase = Phase::Value,
            (_, Phase::AfterMember, b',') => frame.phase = Phase::Next,
            (Kind::Object, Phase::FirstOrEnd | Phase::AfterMember, b'}')
            | (Kind::Array, Phase::FirstOrEnd | Phase::AfterMember, b']') => {
                self.stack.pop();
                self.value_done(pos + 1);
            }
            _ => return Err(()),
        }
        Ok(pos + 1)
    }

    fn start_value(&mut self, b: u8, pos: usize) -> Result<usize, ()> {
        let token = match b {
            b'{' | b'[' => {
                let kind = if b == b'{' { Kind::Object } else { Kind::Array };
                self.stack.push(Frame {
                    kind,
                    phase: Phase::FirstOrEnd,
                    committed: pos + 1,
                });
                return Ok(pos + 1);
            }
            b'"' => Token::Str {
                key: false,
                clean_end: pos + 1,
                escape: Escape::None,
                hex: 0,
                pending_high: None,
            },
            b'-' => Token::Num {
                state: Number::Minus,
                valid_end: None,
            },
            b'0' => Token::Num {
                state: Number::Zero,
                valid_end: Some(pos + 1),
            },
            b'1'..=b'9' => Token::Num {
                state: Number::Int,
                valid_end: Some(pos + 1),
            },
            b't' => Token::Lit {
                word: b"true",
                matched: 1,
            },
            b'f' => Token::Lit {
                word: b"false",
                matched: 1,
            },
            b'n' => Token::Lit {
                word: b"null",
                matched: 1,
            },
            _ => return Err(()),
        };
        self.token.0 = token;
        Ok(pos + 1)
    }

    /// Consumes string content from `pos`, jumping over plain runs with memchr.
    fn step_string(&mut self, bytes: &[u8], pos: usize) -> Result<usize, ()> {
        let Token::Str {
            key,
            mut clean_end,
            mut escape,
            mut hex,
            mut pending_high,
        } = self.token.0
        else {
            return Ok(pos);
        };
        let mut i = pos;
        // On an error the state reached so far is still stored, so the view does not depend on
        // where the fragments were cut.
        let outcome = 'scan: {
            while i < bytes.len() {
                match escape {
                    Escape::None => {
                        let found = memchr::memchr2(b'"', b'\\', &bytes[i..]);
                        let run_end = found.map_or(bytes.len(), |offset| i + offset);
                        // Control characters must be escaped inside JSON strings.
                        if let Some(control) = bytes[i..run_end].iter().position(|&b| b < 0x20) {
                            if pending_high.is_none() {
                                clean_end = i + control;
                            }
                            break 'scan Err(());
                        }
                        let Some(offset) = found else {
                            if pending_high.is_some() {
                                break 'scan Err(());
                            }
                            i = bytes.len();
                            clean_end = i;
                            break;
                        };
                        let at = i + offset;
                        // A high surrogate must be followed directly by its low half.
                        if pending_high.is_some() && (offset > 0 || bytes[at] == b'"') {
                            break 'scan Err(());
                        }
                        if bytes[at] == b'"' {
                            self.token.0 = Token::None;
                            if key {
                                if let Some(frame) = self.stack.last_mut() {
                                    frame.phase = Phase::Colon;
                                }
                            } else {
                                self.value_done(at + 1);
                            }
                            return Ok(at + 1);
                        }
                        clean_end = at;
                        escape = Escape::Backslash;
                        i = at + 1;
                    }
                    Escape::Backslash => {
                        match bytes[i] {
                            b'u' => {
                                escape = Escape::Hex(4);
                                hex = 0;
                            }
                            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't'
                                if pending_high.is_none() =>
                            {
                                escape = Escape::None;
                                clean_end = i + 1;
                            }
                            _ => break 'scan Err(()),
                        }
                        i += 1;
                    }
                    Escape::Hex(left) => {
                        let digit = match bytes[i] {
                            b @ b'0'..=b'9' => b - b'0',
                            b @ b'a'..=b'f' => b - b'a' + 10,
                            b @ b'A'..=b'F' => b - b'A' + 10,
                            _ => break 'scan Err(()),
                        };
                        hex = (hex << 4) | u16::from(digit);
                        i += 1;
                        if left > 1 {
                            escape = Escape::Hex(left - 1);
                            continue;
                        }
                        escape = Escape::None;
                        let is_low = (0xDC00..=0xDFFF).contains(&hex);
                        if is_low != pending_high.is_some() {
                            break 'scan Err(()); // a lone surrogate half: not valid JSON
                        }
                        // `\uXXXX` is six bytes; a high surrogate needs its low half before the
                        // text up to here can be cut into valid JSON.
                        pending_high = (0xD800..=0xDBFF).contains(&hex).then(|| i - 6);
                        clean_end = i;
                    }
                }
            }
            Ok(i)
        };
        self.token.0 = Token::Str {
            key,
            clean_end,
            escape,
            hex,
            pending_high,
        };
        outcome
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view_of(text: &str, mode: PartialMode) -> Option<Value> {
        let mut p = PartialJson::new();
        p.push(text);
        p.view(mode)
    }

    fn drop(text: &str) -> Option<Value> {
        view_of(text, PartialMode::DropIncompleteStrings)
    }

    fn trail(text: &str) -> Option<Value> {
        view_of(text, PartialMode::TrailingStrings)
    }

    #[test]
    fn complete_documents_view_as_themselves() {
        for doc in [
            r#"{"a":[1,2.5,-3e2,true,false,null,"x\"y"],"b":{}}"#,
            "[]",
            "12",
            r#""s""#,
        ] {
            let expected: Value = serde_json::from_str(doc).unwrap();
            assert_eq!(drop(doc), Some(expected), "{doc}");
        }
    }

    #[test]
    fn nothing_yet() {
        assert_eq!(drop(""), None);
        assert_eq!(drop("   "), None);
        assert_eq!(drop(r#""abc"#), None);
        assert_eq!(trail(r#""abc"#), Some(json!("abc")));
    }

    #[test]
    fn unterminated_string() {
        assert_eq!(drop(r#"{"a": "hel"#), Some(json!({})));
        assert_eq!(trail(r#"{"a": "hel"#), Some(json!({"a": "hel"})));
        assert_eq!(drop(r#"["x", "y"#), Some(json!(["x"])));
        assert_eq!(trail(r#"["x", "y"#), Some(json!(["x", "y"])));
        assert_eq!(drop(r#"{"ke"#), Some(json!({})));
        assert_eq!(trail(r#"{"ke"#), Some(json!({})));
        assert_eq!(trail(r#"{"a": 1, "ke"#), Some(json!({"a": 1})));
        assert_eq!(trail(r#"{"k": "é漢😀"#), Some(json!({"k": "é漢😀"})));
    }

    #[test]
    fn escape_cut_mid_sequence() {
        assert_eq!(trail(r#"{"a": "x\"#), Some(json!({"a": "x"})));
        assert_eq!(trail(r#"{"a": "x\n"#), Some(json!({"a": "x\n"})));
        assert_eq!(trail(r#"{"a": "x\u00"#), Some(json!({"a": "x"})));
        assert_eq!(trail(r#"{"a": "x\u00e9"#), Some(json!({"a": "xé"})));
        // A high surrogate without its low half is cut until the pair is complete.
        assert_eq!(trail(r#"{"a": "x\ud83d"#), Some(json!({"a": "x"})));
        assert_eq!(trail(r#"{"a": "x\ud83d\ude"#), Some(json!({"a": "x"})));
        assert_eq!(trail(r#"{"a": "x\ud83d\ude00"#), Some(json!({"a": "x😀"})));
        assert_eq!(drop(r#"{"a": "x\ud83d\ude00"}"#), Some(json!({"a": "x😀"})));
    }

    #[test]
    fn dangling_numbers() {
        assert_eq!(drop(r#"{"n": 12."#), Some(json!({"n": 12})));
        assert_eq!(drop(r#"{"n": -"#), Some(json!({})));
        assert_eq!(drop(r#"{"n": 1e"#), Some(json!({"n": 1})));
        assert_eq!(drop(r#"{"n": 1e-"#), Some(json!({"n": 1})));
        assert_eq!(drop(r#"{"n": 1.5e+3"#), Some(json!({"n": 1500.0})));
        assert_eq!(drop("[1, 23"), Some(json!([1, 23])));
        assert_eq!(drop("-0."), Some(json!(-0.0)));
        assert_eq!(drop("-"), None);
    }

    #[test]
    fn partial_literals_are_dropped() {
        assert_eq!(drop(r#"{"a": tru"#), Some(json!({})));
        assert_eq!(drop(r#"[true, nul"#), Some(json!([true])));
        assert_eq!(drop(r#"[fals"#), Some(json!([])));
        assert_eq!(drop(r#"[false"#), Some(json!([false])));
    }

    #[test]
    fn unclosed_nested_containers() {
        assert_eq!(
            drop(r#"{"a": [1, {"b": [true, {"c""#),
            Some(json!({"a": [1, {"b": [true, {}]}]}))
        );
        assert_eq!(drop(r#"{"a": {"b": "#), Some(json!({"a": {}})));
        assert_eq!(drop(r#"{"a": ["#), Some(json!({"a": []})));
        assert_eq!(drop(r#"[[[["#), Some(json!([[[[]]]])));
        assert_eq!(drop(r#"{"a": 1,"#), Some(json!({"a": 1})));
        assert_eq!(drop(r#"{"a": 1, "b":"#), Some(json!({"a": 1})));
        assert_eq!(drop(r#"{"a""#), Some(json!({})));
    }

    #[test]
    fn lone_surrogates_are_invalid() {
        for text in [
            r#"["\ud83dx"]"#,
            r#"["\ud83d"]"#,
            r#"["\ude00"]"#,
            r#"["\ud83d\n"]"#,
            r#"["\ud83d\u0041"]"#,
        ] {
            let mut p = PartialJson::new();
            p.push(text);
            p.scan();
            assert!(p.is_invalid(), "{text}");
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
        }
    }

    #[test]
    fn invalid_text_stops_the_view_at_the_error() {
        let mut p = PartialJson::new();
        p.push(r#"{"a": 1, "b": x"#);
        assert_eq!(
            p.view(PartialMode::DropIncompleteStrings),
            Some(json!({"a": 1}))
        );
        assert!(p.is_invalid());
        let mut p = PartialJson::new();
        p.push(r#"{"a": 1} {"#);
        assert_eq!(
            p.view(PartialMode::DropIncompleteStrings),
            Some(json!({"a": 1}))
        );
        assert!(p.is_invalid());
    }

    #[test]
    fn fragment_by_fragment_matches_whole() {
        let doc = r#"{"path": "a\\b\u00e9\ud83d\ude00", "lines": [1, -2.5e3, true, null, {"x": []}], "s": "tail"}"#;
        for mode in [
            PartialMode::DropIncompleteStrings,
            PartialMode::TrailingStrings,
        ] {
            let mut incremental = PartialJson::new();
            for (i, ch) in doc.char_indices() {
                incremental.push(&doc[i..i + ch.len_utf8()]);
                let got = incremental.view(mode);
                let expected = view_of(&doc[..i + ch.len_utf8()], mode);
                assert_eq!(got, expected, "prefix {:?}", &doc[..i + ch.len_utf8()]);
            }
            assert_eq!(
                incremental.view(mode),
                Some(serde_json::from_str(doc).unwrap())
            );
        }
    }

    /// The view is incremental: one-character deltas, with a repair computed after every delta,
    /// scan each byte exactly once.
    #[test]
    fn per_delta_repair_scans_each_byte_once() {
        let unit = r#"{"k": "value with \"escapes\" and ünïcödé", "n": [1, 2.5, true]}, "#;
        let mut doc = String::from("[");
        while doc.len() < 1 << 20 {
            doc.push_str(unit);
        }
        doc.push_str("null]");
        let mut p = PartialJson::new();
        let mut buf = [0u8; 4];
        for ch in doc.chars() {
            p.push(ch.encode_utf8(&mut buf));
            let repair = p.repair(PartialMode::DropIncompleteStrings).unwrap();
            assert!(repair.suffix.len() <= 4);
        }
        assert!(!p.is_invalid());
        assert_eq!(p.work(), doc.len() as u64);
        let view = p.view(PartialMode::DropIncompleteStrings).unwrap();
        assert!(view.as_array().unwrap().len() > 1000);
    }
}
