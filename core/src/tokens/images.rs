//! Image and PDF costs from dimensions and page counts — never from the base64 length.
//!
//! Dimensions come from, in order: explicit `width`/`height` fields on the block or its source
//! (a ferroloop extension callers may add), or the image header (PNG, GIF, WebP, JPEG) decoded
//! from the first bytes of the base64 payload. When neither is available (URLs, file ids,
//! unknown formats) the documented flat ceiling of the provider applies.

use serde_json::Value;

use super::model::Family;

/// Anthropic: images whose long edge exceeds this are downscaled first.
pub const ANTHROPIC_MAX_LONG_EDGE: u32 = 1568;
/// Anthropic: pixels per token.
pub const ANTHROPIC_PIXELS_PER_TOKEN: u64 = 750;
/// Anthropic: images above ~1,600 tokens are downscaled, so this is also the flat ceiling used
/// when the dimensions are unknown.
pub const ANTHROPIC_MAX_IMAGE_TOKENS: u64 = 1_600;
/// OpenAI (GPT-4o family): base tokens per image.
pub const OPENAI_BASE_TOKENS: u64 = 85;
/// OpenAI: tokens per 512-px tile in `high` detail.
pub const OPENAI_TILE_TOKENS: u64 = 170;
/// OpenAI: the largest possible `high`-detail cost (768×2048 → 2×4 tiles), the flat ceiling used
/// when the dimensions are unknown.
pub const OPENAI_MAX_IMAGE_TOKENS: u64 = OPENAI_BASE_TOKENS + 8 * OPENAI_TILE_TOKENS;

/// How many base64 characters are decoded to find an image header (64 KiB of image: enough to
/// skip EXIF blocks in JPEGs).
const HEADER_BASE64_CHARS: usize = 87_384;

/// Anthropic's cost for a `width`×`height` image.
pub fn anthropic_image_tokens(width: u32, height: u32) -> u64 {
    let (mut w, mut h) = (f64::from(width), f64::from(height));
    let long = w.max(h);
    if long > f64::from(ANTHROPIC_MAX_LONG_EDGE) {
        let scale = f64::from(ANTHROPIC_MAX_LONG_EDGE) / long;
        w = (w * scale).floor();
        h = (h * scale).floor();
    }
    let tokens = (w * h / ANTHROPIC_PIXELS_PER_TOKEN as f64).ceil() as u64;
    tokens.clamp(1, ANTHROPIC_MAX_IMAGE_TOKENS)
}

/// OpenAI's tile formula for a `width`×`height` image (`low_detail`: the flat 85 tokens).
pub fn openai_image_tokens(width: u32, height: u32, low_detail: bool) -> u64 {
    if low_detail {
        return OPENAI_BASE_TOKENS;
    }
    let (mut w, mut h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    // Fit inside 2048×2048, then scale the short side down to 768.
    let fit = (2048.0 / w.max(h)).min(1.0);
    w *= fit;
    h *= fit;
    let short = (768.0 / w.min(h)).min(1.0);
    w *= short;
    h *= short;
    let tiles = (w / 512.0).ceil() as u64 * (h / 512.0).ceil() as u64;
    OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * tiles
}

/// Estimates an image block (`image`, `image_url` or `input_image`) for `family`.
pub fn estimate_image(block: &Value, family: Family) -> u64 {
    let low_detail = detail(block) == Some("low");
    match image_dimensions(block) {
        Some((w, h)) if family.is_openai() => openai_image_tokens(w, h, low_detail),
        Some((w, h)) => anthropic_image_tokens(w, h),
        None if family.is_openai() && low_detail => OPENAI_BASE_TOKENS,
        None if family.is_openai() => OPENAI_MAX_IMAGE_TOKENS,
        None => ANTHROPIC_MAX_IMAGE_TOKENS,
    }
}

fn detail(block: &Value) -> Option<&str> {
    block
        .get("detail")
        .or_else(|| block.get("image_url").and_then(|u| u.get("detail")))
        .and_then(Value::as_str)
}

fn explicit_dimensions(v: &Value) -> Option<(u32, u32)> {
    // A whole number written as a float (`1000.0`: a Python `float`, a C host's JSON) is that
    // number, as `JSON.stringify` writes it for Node, so every language counts the same image.
    let dim = |key: &str| {
        v.get(key)
            .and_then(crate::json_number::whole_u64)
            .and_then(|d| u32::try_from(d).ok())
    };
    Some((dim("width")?, dim("height")?))
}

/// The image's dimensions, from explicit fields or from its header. A zero width or height is
/// no image a provider accepts: it counts as unknown (the ceiling), not as a 1-token image.
pub fn image_dimensions(block: &Value) -> Option<(u32, u32)> {
    stated_dimensions(block).filter(|&(w, h)| w > 0 && h > 0)
}

fn stated_dimensions(block: &Value) -> Option<(u32, u32)> {
    let source = block.get("source");
    if let Some(dims) = explicit_dimensions(block).or_else(|| source.and_then(explicit_dimensions))
    {
        return Some(dims);
    }
    let base64 = if let Some(data) = source.and_then(|s| s.get("data")).and_then(Value::as_str) {
        data
    } else {
        let url = block
            .get("image_url")
            .and_then(|u| u.get("url").or(Some(u)))
            .and_then(Value::as_str)?;
        let rest = url.strip_prefix("data:")?;
        let comma = rest.find(',')?;
        &rest[comma + 1..]
    };
    let prefix = &base64.as_bytes()[..base64.len().min(HEADER_BASE64_CHARS)];
    header_dimensions(&decode_base64(prefix))
}

fn base64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// Decodes standard or URL-safe base64, skipping whitespace and stopping at padding or any
/// other byte.
fn decode_base64(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() / 4 * 3 + 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in input {
        let v = match base64_value(c) {
            Some(v) => v,
            None if c.is_ascii_whitespace() => continue,
            None => break,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
    ])))
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
    ])))
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        0,
    ]))
}

/// Width and height from a PNG, GIF, WebP or JPEG header.
pub fn header_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        // The width and height are IHDR's, which must come first; anything else there (Apple's
        // CgBI chunk, a corrupt file) would be read as arbitrary dimensions.
        if b.get(12..16) != Some(b"IHDR") {
            return None;
        }
        let w = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?);
        let h = u32::from_be_bytes(b.get(20..24)?.try_into().ok()?);
        return Some((w, h));
    }
    if b.starts_with(b"GIF8") {
        return Some((le16(b, 6)?, le16(b, 8)?));
    }
    if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        return match b.get(12..16)? {
            b"VP8 " => Some((le16(b, 26)? & 0x3FFF, le16(b, 28)? & 0x3FFF)),
            b"VP8L" => {
                let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
                Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
            }
            b"VP8X" => Some((le24(b, 24)? + 1, le24(b, 27)? + 1)),
            _ => None,
        };
    }
    if b.starts_with(&[0xFF, 0xD8]) {
        let mut at = 2;
        while at + 4 <= b.len() {
            if b[at] != 0xFF {
                return None;
            }
            let marker = b[at + 1];
            if marker == 0xFF {
                at += 1;
                continue;
            }
            let len = be16(b, at + 2)? as usize;
            let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
            if is_sof {
                return Some((be16(b, at + 7)?, be16(b, at + 5)?));
            }
            at += 2 + len;
        }
    }
    None
}

/// Counts the pages of a base64 PDF (see `pdf_pages` for how); 0 when no count is found
/// (a request estimate then goes by the size: [`PDF_FALLBACK_BYTES_PER_PAGE`]).
pub fn pdf_page_count(base64: &str) -> u64 {
    pdf_pages(&decode_base64(base64.as_bytes()))
}

/// Decodes standard or URL-safe base64 (see `decode_base64`).
pub(crate) fn decode(base64: &str) -> Vec<u8> {
    decode_base64(base64.as_bytes())
}

/// How many bytes `base64` decodes to (as [`decode`] reads it: whitespace skipped, up to the
/// padding or any other byte), without decoding it.
pub(crate) fn decoded_len(base64: &str) -> u64 {
    let mut digits = 0u64;
    for &c in base64.as_bytes() {
        if base64_value(c).is_some() {
            digits += 1;
        } else if !c.is_ascii_whitespace() {
            break;
        }
    }
    digits * 6 / 8
}

/// Decoded PDF bytes per page assumed when no page count can be read from a PDF (an encrypted
/// or damaged file, object streams in a filter other than Flate): 10 kB, what text-heavy PDFs
/// written by pdfTeX and office suites take per page (7–9 kB for the two 17- and 36-page
/// manuals that counted as one page before object streams were read). A scan or a PDF full of
/// images takes more per page, so this overestimates those, which a context budget prefers to
/// an underestimate.
pub const PDF_FALLBACK_BYTES_PER_PAGE: u64 = 10_000;

/// At most this many bytes are inflated from one PDF's object streams, all streams together:
/// bounds the memory and the work a hostile file (a deflate bomb) can cost.
const PDF_INFLATE_BUDGET: usize = 64 << 20;

/// The fewest bytes a page object can take (`<</Type/Page/Parent 1 0 R>>` is 27): a page
/// count a file states is capped at its bytes (raw and inflated) over this, so a forged
/// `/Count 999999999` in a small file does not estimate millions of tokens.
const PDF_MIN_PAGE_BYTES: u64 = 24;

/// Nesting levels of dictionaries and arrays tracked; deeper ones are skipped (still
/// balanced), so a file of `<<<<<<...` costs no memory.
const PDF_MAX_DEPTH: usize = 64;

/// Whether `bytes` is a PDF: `%PDF-` in its first 1,024 bytes, where readers look for the
/// header (some writers put junk before it).
pub(crate) fn looks_like_pdf(bytes: &[u8]) -> bool {
    memchr::memmem::find(&bytes[..bytes.len().min(1024)], b"%PDF-").is_some()
}

/// The pages of a decoded PDF: its count when one is found ([`pdf_pages`]), else one page per
/// [`PDF_FALLBACK_BYTES_PER_PAGE`] bytes (at least one) rather than a flat single page.
pub(crate) fn pdf_page_estimate(pdf: &[u8]) -> u64 {
    match pdf_pages(pdf) {
        0 => (pdf.len() as u64 / PDF_FALLBACK_BYTES_PER_PAGE).max(1),
        pages => pages,
    }
}

/// The page count of a decoded PDF, or 0 when none is found.
///
/// One linear pass of a small PDF lexer over the file (strings, comments and stream data
/// skipped, so their bytes are never read as dictionaries) that notes, per dictionary, its
/// `/Type`, `/Count` and `/N`. The count is, in order of preference: the largest `/Count` of a
/// `/Type /Pages` node (the root of the page tree holds the total; its descendants hold
/// parts); the `/N` of a linearization dictionary; the number of `/Type /Page` dictionaries.
/// Since PDF 1.5 the page tree is usually inside compressed object streams (`/Type /ObjStm`,
/// pdfTeX's default): those are inflated (up to [`PDF_INFLATE_BUDGET`] bytes in all) and
/// scanned the same way.
pub(crate) fn pdf_pages(pdf: &[u8]) -> u64 {
    let mut scan = PdfScan {
        inflate_budget: PDF_INFLATE_BUDGET,
        ..PdfScan::default()
    };
    scan.scan(pdf, true);
    let inspected = pdf.len() as u64 + (PDF_INFLATE_BUDGET - scan.inflate_budget) as u64;
    let stated = scan.pages_count.or(scan.linearized);
    let pages = stated.unwrap_or(scan.page_dicts);
    pages.min(inspected / PDF_MIN_PAGE_BYTES)
}

/// What one pass over PDF bytes found (see [`pdf_pages`]).
#[derive(Debug, Default)]
struct PdfScan {
    /// The largest `/Count` of a `/Type /Pages` dictionary.
    pages_count: Option<u64>,
    /// The `/N` of a `/Linearized` dictionary.
    linearized: Option<u64>,
    /// How many `/Type /Page` dictionaries were closed.
    page_dicts: u64,
    /// Bytes that may still be inflated from object streams.
    inflate_budget: usize,
}

/// The dictionary keys the scan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PdfKey {
    Type,
    Count,
    N,
    Linearized,
    Other,
}

/// An open dictionary or array.
#[derive(Debug, Default)]
struct PdfFrame {
    array: bool,
    /// The key whose value comes next (dictionaries alternate key, value).
    key: Option<PdfKey>,
    kind: Option<PdfKind>,
    count: Option<u64>,
    n: Option<u64>,
    linearized: bool,
}

/// A dictionary's `/Type`, among those the scan cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PdfKind {
    Pages,
    Page,
    ObjStm,
}

/// A token that may be a dictionary value.
#[derive(Debug, Clone, Copy)]
enum PdfToken<'a> {
    Name(&'a [u8]),
    Integer(u64),
    Other,
}

fn is_pdf_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' | b'\0')
}

fn is_pdf_delimiter(c: u8) -> bool {
    matches!(
        c,
        b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%'
    )
}

impl PdfScan {
    /// Scans `b`; object streams found are inflated and scanned when `inflate` (the bytes
    /// inflated from one are not: an object stream holds no streams).
    fn scan(&mut self, b: &[u8], inflate: bool) {
        let mut stack: Vec<PdfFrame> = Vec::new();
        // Levels opened beyond `PDF_MAX_DEPTH`, not on the stack.
        let mut overflow = 0usize;
        // Whether the dictionary just closed was an object stream's (a `stream` keyword
        // follows it directly).
        let mut closed_objstm = false;
        let mut at = 0;
        while at < b.len() {
            let c = b[at];
            let mut objstm_before = false;
            if is_pdf_space(c) {
                at += 1;
                continue;
            }
            match c {
                b'%' => {
                    at = memchr::memchr2(b'\r', b'\n', &b[at..]).map_or(b.len(), |e| at + e);
                    continue;
                }
                b'(' => {
                    at = skip_pdf_string(b, at);
                    value(&mut stack, PdfToken::Other);
                }
                b'<' if b.get(at + 1) == Some(&b'<') => {
                    at += 2;
                    value(&mut stack, PdfToken::Other);
                    push(&mut stack, &mut overflow, false);
                }
                b'<' => {
                    // A hex string.
                    at = memchr::memchr(b'>', &b[at..]).map_or(b.len(), |e| at + e + 1);
                    value(&mut stack, PdfToken::Other);
                }
                b'>' if b.get(at + 1) == Some(&b'>') => {
                    at += 2;
                    if let Some(frame) = pop(&mut stack, &mut overflow, false) {
                        objstm_before = frame.kind == Some(PdfKind::ObjStm);
                        self.closed(frame);
                    }
                }
                b'[' => {
                    at += 1;
                    value(&mut stack, PdfToken::Other);
                    push(&mut stack, &mut overflow, true);
                }
                b']' => {
                    at += 1;
                    pop(&mut stack, &mut overflow, true);
                }
                b'/' => {
                    let len = b[at + 1..]
                        .iter()
                        .take_while(|&&c| !is_pdf_space(c) && !is_pdf_delimiter(c))
                        .count();
                    value(&mut stack, PdfToken::Name(&b[at + 1..at + 1 + len]));
                    at += 1 + len;
                }
                _ if is_pdf_delimiter(c) => at += 1,
                _ => {
                    let len = b[at..]
                        .iter()
                        .take_while(|&&c| !is_pdf_space(c) && !is_pdf_delimiter(c))
                        .count();
                    let word = &b[at..at + len];
                    at += len;
                    match word {
                        b"stream" => {
                            at = self.stream(b, at, inflate && closed_objstm);
                        }
                        // Object boundaries: whatever a damaged object left open ends here.
                        b"obj" | b"endobj" => {
                            stack.clear();
                            overflow = 0;
                        }
                        _ => value(&mut stack, integer(word)),
                    }
                }
            }
            closed_objstm = objstm_before;
        }
    }

    /// Skips the data of a stream starting after the `stream` keyword at `at` (inflating and
    /// scanning it when `objstm`); returns where scanning resumes.
    fn stream(&mut self, b: &[u8], mut at: usize, objstm: bool) -> usize {
        if b.get(at) == Some(&b'\r') {
            at += 1;
        }
        if b.get(at) == Some(&b'\n') {
            at += 1;
        }
        let data = &b[at.min(b.len())..];
        // `/Length` may be an indirect reference: the `endstream` keyword bounds the data.
        let len = memchr::memmem::find(data, b"endstream").unwrap_or(data.len());
        if objstm && self.inflate_budget > 0 {
            // A truncated or oversized stream: what was inflated is still read.
            let inflated =
                crate::inflate::zlib_prefix(&data[..len], self.inflate_budget).unwrap_or_default();
            self.inflate_budget = self.inflate_budget.saturating_sub(inflated.len());
            self.scan(&inflated, false);
        }
        (at + len + b"endstream".len()).min(b.len())
    }

    /// Notes what a closed dictionary says.
    fn closed(&mut self, frame: PdfFrame) {
        match (frame.kind, frame.count) {
            (Some(PdfKind::Pages), Some(count)) => {
                self.pages_count = Some(self.pages_count.map_or(count, |c| c.max(count)));
            }
            (Some(PdfKind::Page), _) => self.page_dicts += 1,
            _ => {}
        }
        if frame.linearized
            && let Some(n) = frame.n
        {
            self.linearized = Some(n);
        }
    }
}

/// The index after the literal string starting at `b[at] == b'('` (parentheses nest; a
/// backslash escapes the next byte).
fn skip_pdf_string(b: &[u8], mut at: usize) -> usize {
    let mut depth = 0usize;
    while at < b.len() {
        match b[at] {
            b'\\' => at += 1,
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
        at += 1;
    }
    b.len()
}

/// A word as a non-negative integer (saturating), or another token.
fn integer(word: &[u8]) -> PdfToken<'static> {
    if word.is_empty() || !word.iter().all(u8::is_ascii_digit) {
        return PdfToken::Other;
    }
    PdfToken::Integer(word.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Hands a token to the innermost open dictionary: a key when none is pending, else the
/// pending key's value.
fn value(stack: &mut [PdfFrame], token: PdfToken<'_>) {
    let Some(frame) = stack.last_mut() else {
        return;
    };
    if frame.array {
        return;
    }
    match (frame.key.take(), token) {
        (None, PdfToken::Name(name)) => {
            frame.key = Some(match name {
                b"Type" => PdfKey::Type,
                b"Count" => PdfKey::Count,
                b"N" => PdfKey::N,
                b"Linearized" => PdfKey::Linearized,
                _ => PdfKey::Other,
            });
        }
        (Some(PdfKey::Type), PdfToken::Name(name)) => {
            frame.kind = match name {
                b"Pages" => Some(PdfKind::Pages),
                b"Page" => Some(PdfKind::Page),
                b"ObjStm" => Some(PdfKind::ObjStm),
                _ => None,
            };
        }
        (Some(PdfKey::Count), PdfToken::Integer(n)) => frame.count = Some(n),
        (Some(PdfKey::N), PdfToken::Integer(n)) => frame.n = Some(n),
        (Some(PdfKey::Linearized), _) => frame.linearized = true,
        _ => {}
    }
}

fn push(stack: &mut Vec<PdfFrame>, overflow: &mut usize, array: bool) {
    if stack.len() >= PDF_MAX_DEPTH {
        *overflow += 1;
    } else {
        stack.push(PdfFrame {
            array,
            ..PdfFrame::default()
        });
    }
}

/// Closes the innermost level if it is of the kind closed (an unbalanced `>>` or `]` is
/// ignored); the frame closed, if it was on the stack.
fn pop(stack: &mut Vec<PdfFrame>, overflow: &mut usize, array: bool) -> Option<PdfFrame> {
    if *overflow > 0 {
        *overflow -= 1;
        return None;
    }
    if stack.last().is_some_and(|frame| frame.array == array) {
        return stack.pop();
    }
    None
}

/// Standard base64 with padding, for tests that build data URLs and image blocks.
#[cfg(test)]
pub(crate) fn encode_base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0]);
        b
    }

    #[test]
    fn anthropic_formula() {
        assert_eq!(anthropic_image_tokens(1000, 1000), 1334);
        assert_eq!(anthropic_image_tokens(200, 200), 54);
        // 4000×3000 → 1568×1176 → 2459 tokens → capped by the ~1,600 downscale.
        assert_eq!(
            anthropic_image_tokens(4000, 3000),
            ANTHROPIC_MAX_IMAGE_TOKENS
        );
        assert_eq!(anthropic_image_tokens(0, 0), 1);
    }

    #[test]
    fn openai_formula() {
        // OpenAI's documented examples.
        assert_eq!(openai_image_tokens(1024, 1024, false), 765);
        assert_eq!(openai_image_tokens(2048, 4096, false), 1105);
        assert_eq!(openai_image_tokens(4096, 8192, true), 85);
        assert!(openai_image_tokens(768, 2048, false) <= OPENAI_MAX_IMAGE_TOKENS);
    }

    #[test]
    fn dimensions_from_headers_not_length() {
        let small = encode_base64(&png(100, 100));
        let mut padded = png(100, 100);
        padded.extend(std::iter::repeat_n(0u8, 300_000));
        let big = encode_base64(&padded);
        let block = |data: &str| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
        assert_eq!(image_dimensions(&block(&small)), Some((100, 100)));
        assert_eq!(
            estimate_image(&block(&small), Family::Claude),
            estimate_image(&block(&big), Family::Claude)
        );
        assert_eq!(estimate_image(&block(&small), Family::Claude), 14);
        let url = json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{small}")}});
        assert_eq!(estimate_image(&url, Family::O200k), 85 + 170);
    }

    #[test]
    fn other_formats() {
        let gif = b"GIF89a\x40\x01\xf0\x00".to_vec();
        assert_eq!(header_dimensions(&gif), Some((320, 240)));
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8];
        jpeg.extend_from_slice(&[0x01, 0xE0, 0x02, 0x80, 3]);
        assert_eq!(header_dimensions(&jpeg), Some((640, 480)));
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\0\0\0\0\0\0\0\0".to_vec();
        webp.extend_from_slice(&[0x3F, 0x01, 0x00, 0xEF, 0x00, 0x00]);
        assert_eq!(header_dimensions(&webp), Some((320, 240)));
        assert_eq!(header_dimensions(b"not an image"), None);
    }

    #[test]
    fn unknown_dimensions_use_the_ceiling() {
        let url =
            json!({"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}});
        assert_eq!(
            estimate_image(&url, Family::Claude),
            ANTHROPIC_MAX_IMAGE_TOKENS
        );
        assert_eq!(estimate_image(&url, Family::O200k), OPENAI_MAX_IMAGE_TOKENS);
        let hinted = json!({"type": "image", "width": 750, "height": 10, "source": {"type": "url", "url": "u"}});
        assert_eq!(estimate_image(&hinted, Family::Claude), 10);
    }

    /// Stated dimensions written as whole floats (`1000.0`, from Python or a C host) are those
    /// numbers, as Node's `JSON.stringify` writes them: they counted as unknown (the ceiling),
    /// so Python and C estimated 1,608 tokens where Node estimated 675. Fractions, negatives
    /// and values past 32 bits are still no dimension.
    #[test]
    fn dimensions_written_as_whole_floats_are_those_numbers() {
        let image = |w: Value, h: Value| json!({"type": "image", "width": w, "height": h, "source": {"type": "url", "url": "u"}});
        for family in [Family::Claude, Family::O200k] {
            assert_eq!(
                estimate_image(&image(json!(1000.0), json!(500.0)), family),
                estimate_image(&image(json!(1000), json!(500)), family)
            );
        }
        assert_eq!(
            image_dimensions(&image(json!(1000.0), json!(500))),
            Some((1000, 500))
        );
        for bad in [
            json!(1000.5),
            json!(-1.0),
            json!(4294967296.0),
            json!(1e300),
            json!("1000"),
        ] {
            assert_eq!(
                image_dimensions(&image(bad.clone(), json!(500))),
                None,
                "{bad}"
            );
        }
        assert_eq!(
            image_dimensions(&image(json!(4294967295.0), json!(1))),
            Some((u32::MAX, 1))
        );
    }

    #[test]
    fn a_png_without_ihdr_first_has_unknown_dimensions() {
        let mut cgbi = b"\x89PNG\r\n\x1a\n\0\0\0\x04CgBI\x50\0\x20\x06".to_vec();
        cgbi.extend_from_slice(&png(10, 10)[8..]);
        assert_eq!(header_dimensions(&cgbi), None);
        assert_eq!(header_dimensions(&png(10, 10)), Some((10, 10)));
    }

    #[test]
    fn zero_dimensions_are_unknown_not_free() {
        let block = |data: &str| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
        let zero = block(&encode_base64(&png(0, 0)));
        assert_eq!(image_dimensions(&zero), None);
        assert_eq!(
            estimate_image(&zero, Family::Claude),
            ANTHROPIC_MAX_IMAGE_TOKENS
        );
        assert_eq!(
            estimate_image(&zero, Family::O200k),
            OPENAI_MAX_IMAGE_TOKENS
        );
        let flat = block(&encode_base64(&png(4000, 0)));
        assert_eq!(
            estimate_image(&flat, Family::Claude),
            ANTHROPIC_MAX_IMAGE_TOKENS
        );
        let hinted = json!({"type": "image", "width": 0, "height": 10, "source": {"type": "url", "url": "u"}});
        assert_eq!(
            estimate_image(&hinted, Family::Claude),
            ANTHROPIC_MAX_IMAGE_TOKENS
        );
    }

    #[test]
    fn pdf_pages() {
        let pdf = b"%PDF-1.4\n1 0 obj<</Type /Pages /Count 2>>\n2 0 obj<</Type /Page>>\n3 0 obj<</Type/Page/Parent 1 0 R>>";
        assert_eq!(pdf_page_count(&encode_base64(pdf)), 2);
    }

    #[test]
    fn linearized_pdfs_with_compressed_pages_state_their_count() {
        let mut pdf = b"%PDF-1.5\n1 0 obj\n<< /Linearized 1 /L 72000 /H [ 600 140 ] /O 4 /E 9000 /N 12 /T 71000 >>\nendobj\n5 0 obj<</Type/ObjStm/N 40/First 300/Filter/FlateDecode>>stream\nx\x9c\x01\x02endstream".to_vec();
        // Twelve pages take more than a few hundred bytes (a stated count is capped by the size).
        pdf.extend(std::iter::repeat_n(b' ', 1_000));
        assert_eq!(pdf_page_count(&encode_base64(&pdf)), 12);
        // A `/N` outside the linearization dictionary (an object stream's) is not read.
        let plain = b"%PDF-1.4\n1 0 obj<</Type/ObjStm/N 40>>\n2 0 obj<</Type /Page>>";
        assert_eq!(pdf_page_count(&encode_base64(plain)), 1);
        let other = b"%PDF-1.5\n1 0 obj<</Linearized 1/L 5>>\n2 0 obj<</Type/ObjStm/N 40>>";
        assert_eq!(pdf_page_count(&encode_base64(other)), 0);
    }

    /// A PDF 1.5 as pdfTeX writes it: the catalog, the page tree and every page inside one
    /// Flate-compressed object stream (the root `/Pages` node's keys in another order than its
    /// children's), a content stream of binary data and a cross-reference stream; nothing
    /// about the pages in the clear.
    pub(crate) fn objstm_pdf(pages: u64) -> Vec<u8> {
        let half = pages / 2;
        let mut objects = format!(
            "1 0 2 40 3 90 4 140 << /Type /Catalog /Pages 2 0 R >> \
             << /Kids [3 0 R 4 0 R] /Count {pages} /Resources << /Font << /F1 9 0 R >> >> /Type /Pages >> \
             << /Type /Pages /Count {half} /Parent 2 0 R /Kids [] >> \
             << /Type /Pages /Count {} /Parent 2 0 R /Kids [] >> ",
            pages - half
        );
        for page in 0..pages {
            objects.push_str(&format!(
                "<< /Type /Page /Contents {} 0 R /Parent 3 0 R /MediaBox [0 0 612 792] /Annots [(a \\) string \\( with >> in it)] >> ",
                100 + page
            ));
        }
        let packed = miniz_oxide::deflate::compress_to_vec_zlib(objects.as_bytes(), 6);
        let mut pdf = b"%PDF-1.5\n%\xd0\xd4\xc5\xd8\n".to_vec();
        pdf.extend_from_slice(b"7 0 obj\n<< /Length 8 0 R /Filter /FlateDecode >>\nstream\n");
        pdf.extend((0..4_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        pdf.extend_from_slice(b"\nendstream\nendobj\n");
        pdf.extend_from_slice(
            format!(
                "5 0 obj\n<< /Type /ObjStm /N {} /First 16 /Length {} /Filter /FlateDecode >>\nstream\n",
                pages + 4,
                packed.len()
            )
            .as_bytes(),
        );
        pdf.extend_from_slice(&packed);
        pdf.extend_from_slice(b"\nendstream\nendobj\n");
        pdf.extend_from_slice(b"6 0 obj\n<< /Type /XRef /Root 1 0 R /Size 9 /W [1 2 1] /Filter /FlateDecode /Length 12 >>\nstream\nx\x9c\x01\x02\x03\x04\x05\x06\x07\x08\nendstream\nendobj\nstartxref\n1234\n%%EOF\n");
        pdf
    }

    /// pdfTeX's PDFs (PDF 1.5, not linearized) keep their page tree in compressed object
    /// streams: libtasn1's 36-page manual counted as 1 page.
    #[test]
    fn pages_inside_compressed_object_streams_are_counted() {
        for pages in [1, 17, 36, 250] {
            let pdf = objstm_pdf(pages);
            assert_eq!(super::pdf_pages(&pdf), pages, "{pages}");
            assert_eq!(pdf_page_count(&encode_base64(&pdf)), pages, "{pages}");
        }
    }

    /// What a stream, a string or a comment holds is no dictionary; a forged count is capped by
    /// the file's size.
    #[test]
    fn only_dictionaries_outside_strings_and_streams_count() {
        let pdf = b"%PDF-1.4\n% << /Type /Pages /Count 40 >>\n1 0 obj<</Type/Pages/Count 3/Kids[2 0 R 3 0 R 4 0 R]/T (<< /Type /Pages /Count 50 >>)>>endobj\n\
            5 0 obj<</Length 40>>stream\n<< /Type /Pages /Count 60 >>\nendstream endobj\n";
        assert_eq!(super::pdf_pages(pdf), 3);
        let forged = b"%PDF-1.4\n1 0 obj<</Type/Pages/Count 999999999>>endobj";
        assert!(super::pdf_pages(forged) <= forged.len() as u64 / 10);
    }

    /// Hostile shapes stay linear: none of these 4 MB inputs takes a second (a quadratic scan
    /// would take hours).
    #[test]
    fn pathological_pdfs_are_scanned_in_linear_time() {
        const N: usize = 4 << 20;
        let repeat = |unit: &[u8]| {
            let mut b = b"%PDF-1.5\n".to_vec();
            b.extend(unit.iter().copied().cycle().take(N));
            b
        };
        let started = std::time::Instant::now();
        for unit in [
            &b"<<"[..],
            b"[",
            b"(",
            b"((((\\",
            b"<",
            b">>]",
            b"stream\n",
            b"<</Type/ObjStm>>stream\nx\x9c",
            b"<</Type/ObjStm>>stream\nx\x9c\x01endstream ",
            b"/Type/Pages/Count 7 ",
            b"1 0 obj<</Type/Page",
            b"/",
            b"%",
            b"0000000000",
        ] {
            let _ = super::pdf_pages(&repeat(unit));
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn truncated_headers_never_panic() {
        for n in 0..40 {
            let mut b = png(5, 5);
            b.truncate(n);
            let _ = header_dimensions(&b);
            let mut j = vec![0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 1];
            j.truncate(n.min(8));
            let _ = header_dimensions(&j);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod props {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        #[test]
        fn formulas_stay_within_their_ceilings(w in any::<u32>(), h in any::<u32>()) {
            let a = anthropic_image_tokens(w, h);
            prop_assert!((1..=ANTHROPIC_MAX_IMAGE_TOKENS).contains(&a));
            let o = openai_image_tokens(w, h, false);
            prop_assert!((OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS..=OPENAI_MAX_IMAGE_TOKENS).contains(&o), "{w}x{h}: {o}");
        }

        #[test]
        fn any_header_bytes_are_safe(
            magic in prop::sample::select(vec![
                b"\x89PNG\r\n\x1a\n".to_vec(), b"GIF89a".to_vec(), b"RIFF\0\0\0\0WEBPVP8 ".to_vec(),
                b"RIFF\0\0\0\0WEBPVP8L".to_vec(), b"RIFF\0\0\0\0WEBPVP8X".to_vec(), vec![0xFF, 0xD8], vec![],
            ]),
            rest in prop::collection::vec(any::<u8>(), 0..64),
            text in "[A-Za-z0-9+/=_ -]{0,200}",
        ) {
            let bytes = [magic, rest].concat();
            let _ = header_dimensions(&bytes);
            let block = json!({"type": "image", "source": {"type": "base64", "data": text}});
            prop_assert!(estimate_image(&block, Family::Claude) <= ANTHROPIC_MAX_IMAGE_TOKENS);
            prop_assert!(estimate_image(&block, Family::O200k) <= OPENAI_MAX_IMAGE_TOKENS);
        }

        /// Random bytes after a PDF header, and a real object-stream PDF with bytes flipped,
        /// inserted or cut off, never panic and never count more pages than the bytes could
        /// hold.
        #[test]
        fn random_and_mutated_pdfs_are_safe(
            random in prop::collection::vec(any::<u8>(), 0..2_000),
            pages in 0u64..40,
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..20),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut noise = b"%PDF-1.7\n".to_vec();
            noise.extend_from_slice(&random);
            let bound = |b: &[u8]| (b.len() as u64 + (64 << 20)) / 24;
            prop_assert!(pdf_pages(&noise) <= bound(&noise));
            let mut pdf = tests::objstm_pdf(pages);
            for (at, byte) in &flips {
                let at = at.index(pdf.len());
                pdf[at] = *byte;
            }
            prop_assert!(pdf_pages(&pdf) <= bound(&pdf));
            pdf.truncate(cut.index(pdf.len() + 1));
            prop_assert!(pdf_pages(&pdf) <= bound(&pdf));
        }

        #[test]
        fn any_pdf_bytes_are_safe(rest in "[/NLinearizedTypePage0-9 <>]{0,300}") {
            let pdf = format!("%PDF-1.5 /Linearized {rest}");
            prop_assert!(pdf_pages(pdf.as_bytes()) <= 999_999_999 + pdf.len() as u64);
        }
    }
}
