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
    let dim = |key: &str| {
        v.get(key)
            .and_then(Value::as_u64)
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

/// Counts the pages of a base64 PDF (`/Type /Page` dictionaries, not `/Pages`). When the page
/// objects are all inside compressed object streams, a linearized PDF still states its page
/// count (`/Linearized ... /N pages`) in the uncompressed first object; otherwise returns 0.
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

/// Counts the visible page objects of a decoded PDF (see [`pdf_page_count`]).
pub(crate) fn pdf_pages(pdf: &[u8]) -> u64 {
    let finder = memchr::memmem::Finder::new(b"/Type");
    let mut pages = 0;
    for at in finder.find_iter(pdf) {
        let rest = &pdf[at + 5..];
        let skip = rest.iter().take_while(|c| c.is_ascii_whitespace()).count();
        let rest = &rest[skip..];
        if rest.starts_with(b"/Page") && !rest.get(5).is_some_and(|c| c.is_ascii_alphanumeric()) {
            pages += 1;
        }
    }
    if pages == 0 {
        pages = linearized_page_count(pdf).unwrap_or(0);
    }
    pages
}

/// The `/N` entry of a linearization dictionary (which is never in an object stream).
fn linearized_page_count(pdf: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(pdf, b"/Linearized")?;
    // The dictionary is short: its end bounds the search, so `/N` of another object is not read.
    let dict = &pdf[at..pdf.len().min(at + 1024)];
    let dict = &dict[..memchr::memmem::find(dict, b">>").unwrap_or(dict.len())];
    let n = memchr::memmem::find_iter(dict, b"/N").find_map(|n| {
        let rest = &dict[n + 2..];
        let skip = rest.iter().take_while(|c| c.is_ascii_whitespace()).count();
        (skip > 0 && rest.get(skip).is_some_and(u8::is_ascii_digit)).then_some(&rest[skip..])
    })?;
    let digits = n.iter().take_while(|c| c.is_ascii_digit()).count();
    std::str::from_utf8(&n[..digits.min(9)]).ok()?.parse().ok()
}

/// Standard base64 with padding, for tests that build data URLs and image blocks.
#[cfg(test)]
pub(crate) fn encode_base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
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
        let pdf = b"%PDF-1.5\n1 0 obj\n<< /Linearized 1 /L 72000 /H [ 600 140 ] /O 4 /E 9000 /N 12 /T 71000 >>\nendobj\n5 0 obj<</Type/ObjStm/N 40/First 300/Filter/FlateDecode>>stream\nx\x9c\x01\x02endstream";
        assert_eq!(pdf_page_count(&encode_base64(pdf)), 12);
        // Visible page objects win; a `/N` outside the linearization dictionary is not read.
        let plain = b"%PDF-1.4\n1 0 obj<</Type/ObjStm/N 40>>\n2 0 obj<</Type /Page>>";
        assert_eq!(pdf_page_count(&encode_base64(plain)), 1);
        let other = b"%PDF-1.5\n1 0 obj<</Linearized 1/L 5>>\n2 0 obj<</Type/ObjStm/N 40>>";
        assert_eq!(pdf_page_count(&encode_base64(other)), 0);
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

        #[test]
        fn any_pdf_bytes_are_safe(rest in "[/NLinearizedTypePage0-9 <>]{0,300}") {
            let pdf = format!("%PDF-1.5 /Linearized {rest}");
            prop_assert!(pdf_pages(pdf.as_bytes()) <= 999_999_999 + pdf.len() as u64);
        }
    }
}
