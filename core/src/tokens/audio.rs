//! Audio input parts (OpenAI's `input_audio`): tokens from the clip's duration, never from the
//! length of its base64 text.
//!
//! The base64 length says how many bytes the clip has, not how long it plays: a minute of
//! 128 kbit/s MP3 is about 1 MB (1.3 MB of base64, some 300,000 tokens if estimated as text),
//! while the model sees about 600 audio tokens. So the bytes are decoded, their count turned
//! into a duration by the declared `format`, and the duration into tokens:
//!
//! - `wav`: the byte rate of the header's `fmt ` chunk, over the `data` chunk's bytes (or all
//!   the bytes after the header when the `data` size is missing or larger than the clip); when
//!   the header cannot be read, [`WAV_DEFAULT_BYTE_RATE`] over every byte.
//! - `mp3`: [`MP3_BYTE_RATE`] (128 kbit/s) over every byte.
//! - any other format, or no data (a file id): the flat [`AUDIO_UNKNOWN_TOKENS`].
//!
//! Then [`AUDIO_TOKENS_PER_SECOND`] tokens per second, rounded up.

use serde_json::Value;

use super::images;

/// Audio tokens per second of input: OpenAI's audio models count about one token per 100 ms of
/// input audio.
pub const AUDIO_TOKENS_PER_SECOND: u64 = 10;

/// The byte rate of a WAV clip whose header cannot be read: 16 kHz, 16-bit, mono PCM (32,000
/// bytes a second, speech's usual recording format; a slower guess than 24 or 48 kHz, so the
/// estimate errs on the high side).
pub const WAV_DEFAULT_BYTE_RATE: u64 = 32_000;

/// The byte rate of an MP3 clip: 128 kbit/s (16,000 bytes a second), the common encoder
/// default. Frame headers are not read: a lower bitrate plays longer than estimated.
pub const MP3_BYTE_RATE: u64 = 16_000;

/// The tokens of an audio part whose duration cannot be known (a format other than `wav` or
/// `mp3`, or no inline data): a flat allowance of two and a half minutes at
/// [`AUDIO_TOKENS_PER_SECOND`].
pub const AUDIO_UNKNOWN_TOKENS: u64 = 1_500;

/// How much of a WAV clip's base64 is decoded to find its header: 3 KiB of bytes, room for
/// the `fmt ` chunk behind a few metadata chunks (a multiple of 4, so no base64 group is cut).
const WAV_HEADER_BASE64_CHARS: usize = 4_096;

/// The tokens of an `input_audio` part: `{"type": "input_audio", "input_audio": {"data": BASE64,
/// "format": "wav" | "mp3"}}` (the fields may also sit on the part itself), excluding the
/// per-block overhead.
pub fn estimate_audio(block: &Value) -> u64 {
    let audio = block
        .get("input_audio")
        .filter(|audio| audio.is_object())
        .unwrap_or(block);
    let format = audio.get("format").and_then(Value::as_str);
    let Some(data) = audio.get("data").and_then(Value::as_str) else {
        return AUDIO_UNKNOWN_TOKENS;
    };
    // A data URL, or bare base64.
    let base64 = data
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(',').map(|(_, b)| b))
        .unwrap_or(data);
    let Some(format) = format else {
        return AUDIO_UNKNOWN_TOKENS;
    };
    // Only the length is needed, and for a WAV its header: a clip of megabytes is not decoded.
    let length = images::decoded_len(base64);
    let (byte_rate, audio_bytes) = if format.eq_ignore_ascii_case("wav") {
        let header = images::decode(base64.get(..WAV_HEADER_BASE64_CHARS).unwrap_or(base64));
        wav_rate_and_length(&header, length).unwrap_or((WAV_DEFAULT_BYTE_RATE, length))
    } else if format.eq_ignore_ascii_case("mp3") {
        (MP3_BYTE_RATE, length)
    } else {
        return AUDIO_UNKNOWN_TOKENS;
    };
    tokens_for(audio_bytes, byte_rate)
}

/// Tokens for `bytes` of audio played at `byte_rate` bytes a second (not 0), rounded up.
fn tokens_for(bytes: u64, byte_rate: u64) -> u64 {
    // tokens = bytes / byte_rate × tokens per second, in integers, rounded up.
    let scaled = u128::from(bytes) * u128::from(AUDIO_TOKENS_PER_SECOND);
    let tokens = scaled.div_ceil(u128::from(byte_rate.max(1)));
    u64::try_from(tokens).unwrap_or(u64::MAX)
}

/// The byte rate of a RIFF/WAVE clip's `fmt ` chunk and the length of its audio (the `data`
/// chunk, bounded by the bytes there are); `None` when the header is not one (not RIFF/WAVE, no
/// `fmt ` chunk before the data, a byte rate of 0). `bytes` is the start of the clip (at least
/// its header), `total` the clip's whole length.
pub(crate) fn wav_rate_and_length(bytes: &[u8], total: u64) -> Option<(u64, u64)> {
    if bytes.get(0..4)? != b"RIFF" || bytes.get(8..12)? != b"WAVE" {
        return None;
    }
    let mut at = 12usize;
    let mut byte_rate = None;
    while let Some(header) = bytes.get(at..at.checked_add(8)?) {
        let id = &header[..4];
        let size = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let body = at + 8;
        match id {
            b"fmt " => {
                let rate = bytes.get(body + 8..body + 12)?;
                let rate = u32::from_le_bytes([rate[0], rate[1], rate[2], rate[3]]);
                byte_rate = Some(u64::from(rate)).filter(|rate| *rate > 0);
            }
            b"data" => {
                let rate = byte_rate?;
                // A streamed WAV writes its sizes last (0 or 0xFFFFFFFF until then), and a clip
                // may be cut: the audio is what the chunk says, at most what there is.
                let there = total.saturating_sub(body as u64);
                let said = u64::from(size);
                let length = if said == 0 { there } else { said.min(there) };
                return Some((rate, length));
            }
            _ => {}
        }
        // Chunks are padded to an even size.
        let padded = usize::try_from(size)
            .ok()?
            .checked_add(usize::from(size % 2 == 1))?;
        at = body.checked_add(padded)?;
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A PCM WAV header for `data_len` bytes at `byte_rate`, with an extra chunk before `data`.
    fn wav(byte_rate: u32, data_len: u32, said: u32) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"RIFF");
        out.extend_from_slice(&(36 + data_len).to_le_bytes());
        out.extend_from_slice(b"WAVE");
        out.extend_from_slice(b"fmt ");
        out.extend_from_slice(&16u32.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes()); // PCM
        out.extend_from_slice(&1u16.to_le_bytes()); // mono
        out.extend_from_slice(&(byte_rate / 2).to_le_bytes()); // sample rate
        out.extend_from_slice(&byte_rate.to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes()); // block align
        out.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
        out.extend_from_slice(b"LIST");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(b"abc\0"); // odd size, padded
        out.extend_from_slice(b"data");
        out.extend_from_slice(&said.to_le_bytes());
        out.resize(out.len() + data_len as usize, 0x55);
        out
    }

    fn part(bytes: &[u8], format: &str) -> Value {
        json!({"type": "input_audio", "input_audio": {
            "data": images::encode_base64(bytes), "format": format}})
    }

    #[test]
    fn a_wav_clip_costs_its_duration_by_the_header_s_byte_rate() {
        // Two seconds at 48,000 bytes a second: 20 tokens, whatever the base64 length.
        let clip = wav(48_000, 96_000, 96_000);
        assert_eq!(estimate_audio(&part(&clip, "wav")), 20);
        // The same bytes at 16,000 bytes a second play six seconds.
        let slow = wav(16_000, 96_000, 96_000);
        assert_eq!(estimate_audio(&part(&slow, "WAV")), 60);
        // A streamed header (size 0 or 0xFFFFFFFF) and a cut clip: the bytes there are.
        assert_eq!(estimate_audio(&part(&wav(48_000, 96_000, 0), "wav")), 20);
        assert_eq!(
            estimate_audio(&part(&wav(48_000, 96_000, u32::MAX), "wav")),
            20
        );
        // An unreadable header: the default byte rate over every byte.
        let raw = vec![0u8; 64_000];
        assert_eq!(estimate_audio(&part(&raw, "wav")), 20);
        // A long clip: the header is read from its start, the length from the whole.
        let long = wav(48_000, 4_800_000, 4_800_000);
        assert_eq!(estimate_audio(&part(&long, "wav")), 1_000);
    }

    #[test]
    fn an_mp3_clip_costs_its_duration_at_128_kbit_per_second() {
        // A minute of 128 kbit/s MP3 is 960,000 bytes (1.28 MB of base64): 600 tokens.
        let clip = vec![0xFFu8; 960_000];
        assert_eq!(estimate_audio(&part(&clip, "mp3")), 600);
        // Rounded up: a single byte is a token.
        assert_eq!(estimate_audio(&part(&[1], "mp3")), 1);
    }

    #[test]
    fn unknown_formats_and_missing_data_are_flat() {
        let clip = vec![0u8; 1_000_000];
        assert_eq!(estimate_audio(&part(&clip, "flac")), AUDIO_UNKNOWN_TOKENS);
        let no_format = json!({"type": "input_audio", "input_audio": {"data": "AAAA"}});
        assert_eq!(estimate_audio(&no_format), AUDIO_UNKNOWN_TOKENS);
        let no_data = json!({"type": "input_audio", "input_audio": {"format": "wav"}});
        assert_eq!(estimate_audio(&no_data), AUDIO_UNKNOWN_TOKENS);
        // The fields on the part itself, as a data URL.
        let flat = json!({"type": "input_audio", "format": "mp3",
            "data": format!("data:audio/mpeg;base64,{}", images::encode_base64(&[0; 16_000]))});
        assert_eq!(estimate_audio(&flat), 10);
    }

    proptest::proptest! {
        /// Any bytes: no panic, and a header read gives a byte rate above 0 and no more audio
        /// than there are bytes.
        #[test]
        fn any_bytes_parse_without_panicking(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            if let Some((rate, length)) = wav_rate_and_length(&bytes, bytes.len() as u64) {
                proptest::prop_assert!(rate > 0);
                proptest::prop_assert!(length <= bytes.len() as u64);
            }
            let mut riff = b"RIFF\0\0\0\0WAVE".to_vec();
            riff.extend_from_slice(&bytes);
            let _ = wav_rate_and_length(&riff, riff.len() as u64);
        }

        /// The length read without decoding is the decoded length, padding, line breaks and
        /// junk after the data included.
        #[test]
        fn decoded_len_is_the_length_decode_gives(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            wrap in 1usize..80,
        ) {
            let text = images::encode_base64(&bytes);
            proptest::prop_assert_eq!(images::decoded_len(&text), bytes.len() as u64);
            let wrapped: String = text
                .as_bytes()
                .chunks(wrap)
                .map(|line| format!("{}\r\n", String::from_utf8_lossy(line)))
                .collect::<String>()
                + "!junk";
            proptest::prop_assert_eq!(images::decoded_len(&wrapped), images::decode(&wrapped).len() as u64);
        }

        /// A well-formed header is read exactly, wherever its audio is cut.
        #[test]
        fn well_formed_headers_give_their_rate_and_length(
            rate in 1u32..400_000,
            len in 0u32..5_000,
            cut in 0u32..5_000,
        ) {
            let mut clip = wav(rate & !1 | 2, len, len);
            let keep = clip.len() - (cut.min(len) as usize);
            clip.truncate(keep);
            let (read_rate, read_len) = wav_rate_and_length(&clip, clip.len() as u64).unwrap();
            proptest::prop_assert_eq!(read_rate, u64::from(rate & !1 | 2));
            proptest::prop_assert_eq!(read_len, u64::from(len - cut.min(len)));
        }
    }
}
