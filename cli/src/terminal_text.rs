//! Text from the model, the tools or a server, made safe to print on a terminal.
//!
//! The terminal view of `ferroloop run` prints what the model writes as it streams, and the
//! model often repeats what a tool read: a file, a log, a web page. Written raw, an escape
//! sequence in that text is obeyed by the terminal: it can retitle the window, move the cursor
//! and overwrite the lines above (hiding what a tool did), or, with OSC 52, set the clipboard.
//! On a terminal every control character is therefore shown as a visible symbol instead, except
//! the newline and the tab. Output that is not a terminal (a pipe, a file, `--json`) stays exact.

use std::borrow::Cow;

/// `text` with its control characters made visible, for a terminal.
///
/// C0 controls (`\0`–`\x1f` but `\n` and `\t`) become their Control Pictures symbol (ESC is
/// `␛`), DEL is `␡`, and the C1 controls (U+0080–U+009F, which some terminals read as 7-bit
/// escapes: U+009B is a CSI) are `�`. A carriage return is dropped: in model text it is the
/// first half of a CRLF, and alone it would send the cursor back over the line. Text without
/// controls is returned as is, without a copy.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(needs_replacing) else {
        return Cow::Borrowed(text);
    };
    let mut shown = String::with_capacity(text.len() + 8);
    shown.push_str(&text[..first]);
    for c in text[first..].chars() {
        match c {
            '\r' => {}
            c if !needs_replacing(c) => shown.push(c),
            '\u{7f}' => shown.push('\u{2421}'),
            c if u32::from(c) < 0x20 => {
                // U+2400 + the control's code: `␀` … `␟`, always a valid character.
                shown.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'));
            }
            _ => shown.push('\u{fffd}'),
        }
    }
    Cow::Owned(shown)
}

/// Whether `c` is a control character other than the newline and the tab.
fn needs_replacing(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for text in ["", "hello\n\tworld", "naïve 日本語 🚀"] {
            assert!(matches!(for_terminal(text), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        // Set the clipboard (OSC 52), clear the screen, move the cursor up, retitle the window.
        let text = "a\x1b]52;c;cm0gLXJmIH4=\x07b\x1b[2J\x1b[1Ac\x1b]0;pwned\x1b\\d";
        let shown = for_terminal(text);
        assert!(
            !shown.contains('\x1b') && !shown.contains('\x07'),
            "{shown}"
        );
        assert_eq!(shown, "a␛]52;c;cm0gLXJmIH4=␇b␛[2J␛[1Ac␛]0;pwned␛\\d");
    }

    #[test]
    fn every_control_but_newline_and_tab_is_replaced() {
        for code in (0u32..0x20).chain([0x7f]).chain(0x80..0xa0) {
            let c = char::from_u32(code).unwrap();
            let shown = for_terminal(&format!("x{c}y")).into_owned();
            match c {
                '\n' | '\t' => assert_eq!(shown, format!("x{c}y")),
                '\r' => assert_eq!(shown, "xy"),
                _ => {
                    assert!(!shown.chars().any(char::is_control), "{code:#x}: {shown:?}");
                    assert_eq!(shown.chars().count(), 3, "{code:#x}: {shown:?}");
                }
            }
        }
        assert_eq!(for_terminal("\u{9b}31m"), "\u{fffd}31m");
        assert_eq!(for_terminal("line\r\nnext\r"), "line\nnext");
    }
}
