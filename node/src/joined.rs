//! Strings JavaScript sends joined into one (`parts.join('')`) with their UTF-16 lengths: one
//! string crossing for a batch instead of one per string, or JSON.
//!
//! The text is read as UTF-8 first: when its UTF-8 length equals its UTF-16 length it is all
//! ASCII (any other character takes more UTF-8 bytes than UTF-16 code units), so the UTF-16
//! lengths are byte lengths and each part is a plain slice. Otherwise it is read again as
//! UTF-16 and each part decoded (an unpaired surrogate becomes U+FFFD).

use napi::{JsString, JsStringUtf16};

/// The joined text, in the encoding it is split in.
pub(crate) enum Joined<'env> {
    /// Validated once as a whole (a part is then a slice, not a validation of its own).
    Ascii(String),
    Wide(JsStringUtf16<'env>),
}

/// Splits a joined text into its parts, in order.
pub(crate) struct Parts<'env> {
    text: Joined<'env>,
    offset: usize,
}

impl<'env> Parts<'env> {
    /// Reads `text`, `units` UTF-16 code units long in all (the sum of the parts' lengths).
    pub(crate) fn read(text: JsString<'env>, units: usize) -> napi::Result<Self> {
        let utf8 = text.into_utf8()?;
        let text = if utf8.len() == units {
            Joined::Ascii(utf8.into_owned()?)
        } else {
            Joined::Wide(text.into_utf16()?)
        };
        Ok(Self { text, offset: 0 })
    }

    /// The next part, `len` UTF-16 code units long; `None` past the end of the text.
    pub(crate) fn next(&mut self, len: usize) -> Option<String> {
        let end = self.offset.checked_add(len)?;
        let part = match &self.text {
            Joined::Ascii(text) => text.get(self.offset..end)?.to_owned(),
            Joined::Wide(text) => {
                let units = text.as_slice().get(self.offset..end)?;
                let mut part = String::with_capacity(units.len());
                part.extend(
                    char::decode_utf16(units.iter().copied())
                        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)),
                );
                part
            }
        };
        self.offset = end;
        Some(part)
    }
}
