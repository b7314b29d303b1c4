//! Bounded inflation of deflate data (zlib, gzip or raw) whose end may be missing: what the client reads of a
//! compressed error body (a prefix) and what the image estimator reads of a PDF's object
//! streams (untrusted, possibly truncated).

/// zlib-wrapped deflate data (RFC 1950), inflated: at most `limit` bytes, and the beginning of
/// a stream that is cut short or goes past `limit`. `None` when nothing inflated.
pub(crate) fn zlib_prefix(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    prefix(miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(
        data, limit,
    ))
}

/// Raw deflate data (RFC 1951), inflated as [`zlib_prefix`] inflates zlib data.
// Only the client (a compressed error body) reads raw and gzip data.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) fn raw_prefix(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    prefix(miniz_oxide::inflate::decompress_to_vec_with_limit(
        data, limit,
    ))
}

/// The data of a gzip member (RFC 1952), inflated as [`zlib_prefix`] inflates zlib data: its
/// header (with the optional fields its flags announce) skipped, its trailer ignored.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) fn gzip_prefix(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let [0x1f, 0x8b, 8, flags, _, _, _, _, _, _, ..] = *data else {
        return None;
    };
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let length = u16::from_le_bytes([*data.get(at)?, *data.get(at + 1)?]);
        at += 2 + usize::from(length);
    }
    for field in [FNAME, FCOMMENT] {
        if flags & field != 0 {
            at += memchr::memchr(0, data.get(at..)?)? + 1;
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    raw_prefix(data.get(at..)?, limit)
}

/// What an inflation produced: all of it, or what it wrote before failing.
fn prefix(result: Result<Vec<u8>, miniz_oxide::inflate::DecompressError>) -> Option<Vec<u8>> {
    match result {
        Ok(data) => Some(data),
        Err(error) => {
            // A failed inflation returns its whole zero-filled buffer, not just what it wrote:
            // the text inflated ends at its last non-NUL byte.
            let mut output = error.output;
            let written = output
                .iter()
                .rposition(|&byte| byte != 0)
                .map_or(0, |at| at + 1);
            output.truncate(written);
            (!output.is_empty()).then_some(output)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A whole stream inflates whole; one cut short gives the text inflated so far, without
    /// the zero-filled rest of the buffer; garbage gives nothing.
    #[test]
    fn a_stream_cut_short_gives_its_beginning() {
        let text: String = (0..3000)
            .map(|n| format!("{} ", n * 7919 % 10007))
            .collect();
        let zlib = miniz_oxide::deflate::compress_to_vec_zlib(text.as_bytes(), 6);
        assert_eq!(zlib_prefix(&zlib, 1 << 20).unwrap(), text.as_bytes());
        let cut = zlib_prefix(&zlib[..zlib.len() / 2], 1 << 20).unwrap();
        assert!(!cut.is_empty() && text.as_bytes().starts_with(&cut));
        let limited = zlib_prefix(&zlib, 100).unwrap();
        assert!(limited.len() <= 100 && text.as_bytes().starts_with(&limited));
        let raw = miniz_oxide::deflate::compress_to_vec(text.as_bytes(), 6);
        assert_eq!(raw_prefix(&raw, 1 << 20).unwrap(), text.as_bytes());
        assert_eq!(zlib_prefix(b"not deflate", 1 << 20), None);
    }
}
