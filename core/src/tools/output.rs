//! Bounding what a tool hands back to the model: long lines, binary data, unbounded output.

use std::borrow::Cow;
use std::collections::VecDeque;

/// Bytes inspected for a NUL byte to call a file binary (git's heuristic uses the same size).
pub(crate) const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// Whether a file's first bytes mark it as binary: it contains a NUL byte.
pub(crate) fn looks_binary(prefix: &[u8]) -> bool {
    memchr::memchr(0, &prefix[..prefix.len().min(BINARY_SNIFF_BYTES)]).is_some()
}

/// A UTF-16 encoding announced by a byte order mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Utf16 {
    /// `FF FE`.
    LittleEndian,
    /// `FE FF`.
    BigEndian,
}

impl Utf16 {
    /// The encoding whose byte order mark `bytes` starts with, if any. The mark is 2 bytes.
    pub(crate) fn sniff(bytes: &[u8]) -> Option<Self> {
        match bytes {
            [0xFF, 0xFE, ..] => Some(Self::LittleEndian),
            [0xFE, 0xFF, ..] => Some(Self::BigEndian),
            _ => None,
        }
    }

    fn unit(self, pair: [u8; 2]) -> u16 {
        match self {
            Self::LittleEndian => u16::from_le_bytes(pair),
            Self::BigEndian => u16::from_be_bytes(pair),
        }
    }

    /// `bytes` (after the mark) as text, or `None` if they hold an unpaired surrogate or an
    /// odd trailing byte.
    pub(crate) fn decode(self, bytes: &[u8]) -> Option<String> {
        if !bytes.len().is_multiple_of(2) {
            return None;
        }
        let units = bytes
            .chunks_exact(2)
            .map(|pair| self.unit([pair[0], pair[1]]));
        char::decode_utf16(units)
            .collect::<Result<String, _>>()
            .ok()
    }

    /// `text` encoded, byte order mark first.
    pub(crate) fn encode(self, text: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + text.len() * 2);
        for unit in std::iter::once(0xFEFF).chain(text.encode_utf16()) {
            out.extend_from_slice(&match self {
                Self::LittleEndian => unit.to_le_bytes(),
                Self::BigEndian => unit.to_be_bytes(),
            });
        }
        out
    }
}

/// A reader turning a UTF-16 stream (its byte order mark already consumed) into UTF-8, in
/// bounded memory, so that `read` can number the lines of a file of any size. Unpaired
/// surrogates and an odd trailing byte become U+FFFD, as invalid UTF-8 does elsewhere.
pub(crate) struct Utf16Reader<R> {
    inner: R,
    encoding: Utf16,
    /// A byte of a code unit split across two reads of `inner`.
    odd_byte: Option<u8>,
    /// A high surrogate waiting for its low half, which the next read may bring.
    high_surrogate: Option<u16>,
    /// Raw bytes of the current chunk (kept to avoid an allocation per refill).
    raw: Vec<u8>,
    /// Decoded UTF-8 not yet handed out, from `out_start` on.
    out: Vec<u8>,
    out_start: usize,
    finished: bool,
}

impl<R: std::io::Read> Utf16Reader<R> {
    /// Bytes of `inner` decoded per refill.
    const CHUNK: usize = 16 * 1024;

    pub(crate) fn new(inner: R, encoding: Utf16) -> Self {
        Self {
            inner,
            encoding,
            odd_byte: None,
            high_surrogate: None,
            raw: vec![0; Self::CHUNK],
            out: Vec::new(),
            out_start: 0,
            finished: false,
        }
    }

    fn push_char(&mut self, c: char) {
        let mut buffer = [0u8; 4];
        self.out
            .extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
    }

    fn push_unit(&mut self, unit: u16) {
        if let Some(high) = self.high_surrogate.take() {
            if (0xDC00..=0xDFFF).contains(&unit) {
                let code =
                    0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                self.push_char(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                return;
            }
            self.push_char(char::REPLACEMENT_CHARACTER);
        }
        match unit {
            0xD800..=0xDBFF => self.high_surrogate = Some(unit),
            0xDC00..=0xDFFF => self.push_char(char::REPLACEMENT_CHARACTER),
            _ => self
                .push_char(char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER)),
        }
    }

    /// Decodes the next chunk of `inner` into `out` (which is empty).
    fn refill(&mut self) -> std::io::Result<()> {
        self.out.clear();
        self.out_start = 0;
        let mut chunk = std::mem::take(&mut self.raw);
        let start = usize::from(self.odd_byte.is_some());
        if let Some(byte) = self.odd_byte.take() {
            chunk[0] = byte;
        }
        let read = loop {
            match self.inner.read(&mut chunk[start..]) {
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    self.raw = chunk;
                    return Err(error);
                }
                Ok(read) => break read,
            }
        };
        self.decode_chunk(&chunk, start, read);
        self.raw = chunk;
        Ok(())
    }

    /// Decodes `read` new bytes of `chunk`, after the `start` bytes carried over.
    fn decode_chunk(&mut self, chunk: &[u8], start: usize, read: usize) {
        if read == 0 {
            self.finished = true;
            if start == 1 || self.high_surrogate.take().is_some() {
                self.push_char(char::REPLACEMENT_CHARACTER);
            }
            return;
        }
        let filled = start + read;
        let pairs = filled / 2;
        for index in 0..pairs {
            let unit = self.encoding.unit([chunk[2 * index], chunk[2 * index + 1]]);
            self.push_unit(unit);
        }
        if !filled.is_multiple_of(2) {
            self.odd_byte = Some(chunk[filled - 1]);
        }
    }
}

impl<R: std::io::Read> std::io::Read for Utf16Reader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.out_start == self.out.len() {
            if self.finished {
                return Ok(0);
            }
            self.refill()?;
        }
        let available = &self.out[self.out_start..];
        let count = available.len().min(buf.len());
        buf[..count].copy_from_slice(&available[..count]);
        self.out_start += count;
        Ok(count)
    }
}

/// `line` cut to at most `max_chars` characters, with a marker saying how many were dropped;
/// `dropped_before` counts characters the caller already dropped from the line's end (a line
/// read with a byte cap), so the marker is present and exact in that case too.
pub(crate) fn truncate_line(line: &str, max_chars: usize, dropped_before: usize) -> Cow<'_, str> {
    // A line no longer in bytes than the cap cannot be longer in characters.
    let cut = if line.len() <= max_chars {
        None
    } else {
        line.char_indices().nth(max_chars).map(|(cut, _)| cut)
    };
    let (kept, dropped_here) = match cut {
        None => (line, 0),
        Some(cut) => (&line[..cut], line[cut..].chars().count()),
    };
    let dropped = dropped_here + dropped_before;
    if dropped == 0 {
        Cow::Borrowed(line)
    } else {
        Cow::Owned(format!(
            "{kept}… [line truncated: {dropped} more characters]"
        ))
    }
}

/// Keeps the first `head_capacity` and the last `tail_capacity` bytes of a stream of any length,
/// in bounded memory, and renders them with an elision marker in between.
#[derive(Debug)]
pub(crate) struct HeadTailBuffer {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_capacity: usize,
    tail_capacity: usize,
    total: u64,
}

impl HeadTailBuffer {
    /// A buffer keeping at most `max_bytes` bytes: half from the start, half from the end.
    pub(crate) fn new(max_bytes: usize) -> Self {
        let (head_capacity, tail_capacity) = Self::capacities(max_bytes);
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_capacity,
            tail_capacity,
            total: 0,
        }
    }

    /// How `max_bytes` splits into the bytes kept from the start and from the end.
    pub(crate) fn capacities(max_bytes: usize) -> (usize, usize) {
        let head = max_bytes / 2;
        (head, max_bytes - head)
    }

    /// Appends a chunk of the stream.
    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let head_room = self.head_capacity - self.head.len();
        if head_room > 0 {
            let taken = head_room.min(chunk.len());
            self.head.extend_from_slice(&chunk[..taken]);
            chunk = &chunk[taken..];
        }
        if chunk.len() >= self.tail_capacity {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_capacity..]);
        } else {
            let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_capacity);
            self.tail.drain(..overflow);
            self.tail.extend(chunk);
        }
    }

    /// Total bytes pushed so far.
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The kept bytes as text (invalid UTF-8 replaced), with a marker where bytes were dropped.
    pub(crate) fn render(&self) -> String {
        let (tail_front, tail_back) = self.tail.as_slices();
        let kept = (self.head.len() + self.tail.len()) as u64;
        if kept == self.total {
            let mut all = Vec::with_capacity(self.head.len() + self.tail.len());
            all.extend_from_slice(&self.head);
            all.extend_from_slice(tail_front);
            all.extend_from_slice(tail_back);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(tail_front);
        tail.extend_from_slice(tail_back);
        let head = trim_incomplete_end(&self.head);
        let tail = trim_incomplete_start(&tail);
        let elided = self.total - head.len() as u64 - tail.len() as u64;
        format!(
            "{}\n\n... [{elided} bytes of output elided] ...\n\n{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(tail)
        )
    }
}

/// `bytes` without a UTF-8 sequence cut off at its end.
fn trim_incomplete_end(bytes: &[u8]) -> &[u8] {
    // A sequence is at most 4 bytes: look back at most 3 bytes for its lead byte.
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead
        }
        let needed = match byte {
            b if b & 0x80 == 0 => 1,
            b if b & 0xE0 == 0xC0 => 2,
            b if b & 0xF0 == 0xE0 => 3,
            b if b & 0xF8 == 0xF0 => 4,
            _ => return bytes, // not UTF-8 anyway; lossy rendering handles it
        };
        return if needed > back {
            &bytes[..bytes.len() - back]
        } else {
            bytes
        };
    }
    bytes
}

/// `bytes` without continuation bytes left over at its start from a cut sequence.
fn trim_incomplete_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|&&byte| byte & 0xC0 == 0x80)
        .count();
    &bytes[skip..]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut buffer = HeadTailBuffer::new(10);
        buffer.push(b"hello");
        buffer.push(b" you");
        assert_eq!(buffer.render(), "hello you");
        assert_eq!(buffer.total(), 9);
    }

    #[test]
    fn long_output_keeps_head_and_tail_with_a_marker() {
        let mut buffer = HeadTailBuffer::new(8);
        for chunk in [&b"0123"[..], b"456789", b"abcdefgh", b"XYZ"] {
            buffer.push(chunk);
        }
        let rendered = buffer.render();
        assert_eq!(
            rendered,
            "0123\n\n... [13 bytes of output elided] ...\n\nhXYZ"
        );
    }

    #[test]
    fn elision_never_splits_a_character() {
        let mut buffer = HeadTailBuffer::new(6);
        // 'é' is 2 bytes: the head (3 bytes) would cut the second 'é' in half.
        buffer.push("aéé".as_bytes());
        buffer.push(&[b'-'; 20]);
        buffer.push("ééé".as_bytes());
        let rendered = buffer.render();
        assert!(rendered.starts_with("aé\n"), "{rendered}");
        assert!(rendered.ends_with("\n\né"), "{rendered}");
        assert!(!rendered.contains('\u{FFFD}'), "{rendered}");
        assert!(rendered.contains("bytes of output elided"));
    }

    #[test]
    fn lines_are_truncated_on_character_boundaries() {
        assert_eq!(truncate_line("short", 10, 0), "short");
        assert_eq!(
            truncate_line("ééééé", 2, 0),
            "éé… [line truncated: 3 more characters]"
        );
        // Byte length over the cap but character count within it: untouched.
        assert_eq!(truncate_line("éé", 3, 0), "éé");
        // Characters dropped earlier always produce the marker, and add up.
        assert_eq!(
            truncate_line("ab", 2, 7),
            "ab… [line truncated: 7 more characters]"
        );
        assert_eq!(
            truncate_line("abcd", 2, 7),
            "ab… [line truncated: 9 more characters]"
        );
    }

    /// Hands out one byte per read, so every code unit and surrogate pair is split.
    struct OneByteAtATime<'a>(&'a [u8]);

    impl std::io::Read for OneByteAtATime<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some((&first, rest)) = self.0.split_first() else {
                return Ok(0);
            };
            buf[0] = first;
            self.0 = rest;
            Ok(1)
        }
    }

    #[test]
    fn utf16_decoding_survives_splits_anywhere_and_round_trips() {
        use std::io::Read as _;
        // The encoder against bytes written out by hand (the tools' tests build files with it).
        assert_eq!(
            Utf16::LittleEndian.encode("a𝄞"),
            [0xFF, 0xFE, 0x61, 0, 0x34, 0xD8, 0x1E, 0xDD]
        );
        assert_eq!(
            Utf16::BigEndian.encode("a𝄞"),
            [0xFE, 0xFF, 0, 0x61, 0xD8, 0x34, 0xDD, 0x1E]
        );
        let text = "héllo 𝄞 ✓\r\nend";
        for encoding in [Utf16::LittleEndian, Utf16::BigEndian] {
            let bytes = encoding.encode(text);
            assert_eq!(Utf16::sniff(&bytes), Some(encoding));
            assert_eq!(encoding.decode(&bytes[2..]).as_deref(), Some(text));
            let mut decoded = String::new();
            Utf16Reader::new(OneByteAtATime(&bytes[2..]), encoding)
                .read_to_string(&mut decoded)
                .unwrap();
            assert_eq!(decoded, text);
        }
        // A high surrogate followed by a non-surrogate, and a dangling one at the end.
        let units: [u16; 4] = [0xD834, 0x0061, 0x0062, 0xD834];
        let bytes: Vec<u8> = units.iter().flat_map(|unit| unit.to_le_bytes()).collect();
        let mut decoded = String::new();
        Utf16Reader::new(OneByteAtATime(&bytes), Utf16::LittleEndian)
            .read_to_string(&mut decoded)
            .unwrap();
        assert_eq!(decoded, "\u{FFFD}ab\u{FFFD}");
        assert_eq!(Utf16::LittleEndian.decode(&bytes), None);
        assert_eq!(Utf16::sniff(b"\xEF\xBB\xBFutf-8"), None);
    }

    #[test]
    fn binary_detection_looks_for_nul_in_the_prefix() {
        assert!(looks_binary(b"abc\0def"));
        assert!(!looks_binary("plain text é".as_bytes()));
        let mut late_nul = vec![b'a'; BINARY_SNIFF_BYTES];
        late_nul.push(0);
        assert!(!looks_binary(&late_nul));
    }
}
