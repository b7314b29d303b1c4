//! Text from the model, the tools or a server, made safe to print on a terminal.
//!
//! The terminal view of `ferroloop run` prints what the model writes as it streams, and the
//! model often repeats what a tool read: a file, a log, a web page. Written raw, an escape
//! sequence in that text is obeyed by the terminal: it can retitle the window, move the cursor
//! and overwrite the lines above (hiding what a tool did), or, with OSC 52, set the clipboard.
//! On a terminal every control character is therefore shown as a visible symbol instead, except
//! the newline and the tab. Invisible format characters are shown too, as `\u{...}` escapes: a
//! bidi override can reorder what the terminal displays ("Trojan Source": a tool result whose
//! bytes say one thing and whose display says another), and zero-width or tag characters can
//! hide text from the reader. Output that is not a terminal (a pipe, a file, `--json`) stays exact.

use std::borrow::Cow;

/// `text` with its control characters made visible, for a terminal.
///
/// C0 controls (`\0`–`\x1f` but `\n` and `\t`) become their Control Pictures symbol (ESC is
/// `␛`), DEL is `␡`, and the C1 controls (U+0080–U+009F, which some terminals read as 7-bit
/// escapes: U+009B is a CSI) are `�`. A carriage return is dropped: in model text it is the
/// first half of a CRLF, and alone it would send the cursor back over the line. Bidi format
/// characters and the invisible ones (see [`is_hidden_format`]) become `\u{202e}`-style escapes.
/// Text without any of these is returned as is, without a copy.
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
            c if is_hidden_format(c) => {
                shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            _ => shown.push('\u{fffd}'),
        }
    }
    Cow::Owned(shown)
}

/// Whether `c` is a control character other than the newline and the tab, or a hidden format
/// character.
fn needs_replacing(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_hidden_format(c)
}

/// Whether `c` is a format character that changes the display order or draws nothing: the bidi
/// marks, embeddings, overrides and isolates (U+061C, U+200E–U+200F, U+202A–U+202E,
/// U+2066–U+2069), zero-width space, word joiner and invisible operators (U+200B,
/// U+2060–U+2064), the BOM as zero-width no-break space (U+FEFF), interlinear annotation marks
/// (U+FFF9–U+FFFB) and the tag characters (U+E0000–U+E007F, used to smuggle text to models
/// unseen). Zero-width joiner and non-joiner (U+200C–U+200D) are kept: emoji sequences and
/// several scripts need them, and they reorder nothing.
fn is_hidden_format(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200b}'
            | '\u{200e}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
    )
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

    #[test]
    fn bidi_overrides_are_shown_escaped_not_obeyed() {
        // Trojan Source: displayed, the RLO ... PDI run would read reversed.
        let text = "access = \"user\u{202e} \u{2066}// admin\u{2069} \u{2066}\"";
        assert_eq!(
            for_terminal(text),
            "access = \"user\\u{202e} \\u{2066}// admin\\u{2069} \\u{2066}\""
        );
        let bidi = ['\u{061c}', '\u{200e}', '\u{200f}']
            .into_iter()
            .chain('\u{202a}'..='\u{202e}')
            .chain('\u{2066}'..='\u{2069}');
        for c in bidi {
            let shown = for_terminal(&format!("a{c}b")).into_owned();
            assert_eq!(shown, format!("a\\u{{{:x}}}b", u32::from(c)));
        }
    }

    #[test]
    fn invisible_format_characters_are_shown_escaped() {
        // A zero-width space, a word joiner, a BOM and tag characters spelling "hi" unseen.
        let shown = for_terminal("a\u{200b}b\u{2060}c\u{feff}d\u{e0068}\u{e0069}");
        assert_eq!(shown, "a\\u{200b}b\\u{2060}c\\u{feff}d\\u{e0068}\\u{e0069}");
        // Joiners draw emoji sequences and shape scripts: kept as they are.
        let family = "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467} \u{645}\u{200c}\u{6cc}";
        assert!(matches!(for_terminal(family), Cow::Borrowed(t) if t == family));
    }
}
