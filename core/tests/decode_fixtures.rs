//! Recorded provider streams decoded at several chunkings must give the checked-in messages.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ferroloop::decode::{DecodeEvent, Provider, StreamDecoder};
use proptest::prelude::*;
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The recorded fixtures plus the hand-written streams of `tests/decode/streams` that have an
/// expected message (the failing ones are checked by the CLI tests).
fn fixtures(provider: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for dir in [
        repo_root().join("tests/fixtures").join(provider),
        repo_root().join("tests/decode/streams").join(provider),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.map(|e| e.unwrap().path()) {
            if path.extension().is_none_or(|x| x != "sse") {
                continue;
            }
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let has_expected = repo_root()
                .join("tests/decode/expected")
                .join(provider)
                .join(format!("{name}.json"))
                .exists();
            if has_expected {
                out.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no streams for {provider}");
    out
}

fn expected(provider: &str, name: &str) -> Value {
    let path = repo_root()
        .join("tests/decode/expected")
        .join(provider)
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Decodes `input` fed at the given split points; returns the final message and all events.
fn decode_split(provider: Provider, input: &[u8], cuts: &[usize]) -> (Value, Vec<Value>) {
    let mut decoder = StreamDecoder::for_provider(provider);
    let mut events: Vec<DecodeEvent> = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(start, input.len());
        decoder
            .feed_into(Bytes::copy_from_slice(&input[start..cut]), &mut events)
            .unwrap();
        start = cut;
    }
    let message = decoder.finish().unwrap();
    (message, events.iter().map(DecodeEvent::to_json).collect())
}

fn decode_chunked(provider: Provider, input: &[u8], chunk: usize) -> (Value, Vec<Value>) {
    let cuts: Vec<usize> = (1..)
        .map(|i| i * chunk)
        .take_while(|&c| c < input.len())
        .collect();
    decode_split(provider, input, &cuts)
}

fn check_provider(dir: &str, provider: Provider) {
    for (name, input) in fixtures(dir) {
        let want = expected(dir, &name);
        let (whole, whole_events) = decode_chunked(provider, &input, input.len());
        assert_eq!(whole, want, "{dir}/{name} (whole)");
        for chunk in [1, 7, 64] {
            let (message, events) = decode_chunked(provider, &input, chunk);
            assert_eq!(message, want, "{dir}/{name} at chunk {chunk}");
            assert_eq!(events, whole_events, "{dir}/{name} events at chunk {chunk}");
        }
    }
}

#[test]
fn anthropic_fixtures_match_expected_at_every_chunking() {
    check_provider("anthropic", Provider::Anthropic);
}

#[test]
fn openai_chat_fixtures_match_expected_at_every_chunking() {
    check_provider("openai-chat", Provider::OpenAiChat);
}

#[test]
fn openai_responses_streams_match_expected_at_every_chunking() {
    check_provider("openai-responses", Provider::OpenAiResponses);
}

#[test]
fn codex_stream_seals_the_custom_tool_call_with_its_text_and_streams_thinking() {
    let input = std::fs::read(
        repo_root().join("tests/decode/streams/openai-responses/codex_custom_tool_output_null.sse"),
    )
    .unwrap();
    let (_, events) = decode_chunked(Provider::OpenAiResponses, &input, 9);
    let sealed: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("tool_use_"))
        })
        .collect();
    assert_eq!(sealed.len(), 1, "{sealed:?}");
    assert_eq!(sealed[0]["type"], "tool_use_ready");
    assert_eq!(sealed[0]["id"], "call_patch");
    assert!(
        sealed[0]["input"]
            .as_str()
            .is_some_and(|i| i.starts_with("*** Begin Patch\n") && i.ends_with("*** End Patch"))
    );
    let thinking: String = events
        .iter()
        .filter(|e| e["type"] == "thinking_delta")
        .filter_map(|e| e["thinking"].as_str())
        .collect();
    assert_eq!(thinking, "Need to patch the file.");
}

#[test]
fn anthropic_fixture_events_seal_the_tool_call() {
    let input =
        std::fs::read(repo_root().join("tests/fixtures/anthropic/tool_use_response.sse")).unwrap();
    let (_, events) = decode_chunked(Provider::Anthropic, &input, 5);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let ready = kinds.iter().position(|k| *k == "tool_use_ready").unwrap();
    // Sealed right after its block stop, before message_delta / message_stop.
    assert_eq!(kinds[ready - 1], "block_stop");
    assert!(ready < kinds.iter().position(|k| *k == "message_delta").unwrap());
    assert_eq!(
        events[ready]["input"],
        serde_json::json!({"location": "Paris"})
    );
    assert_eq!(events[ready]["id"], "toolu_01NRLabsLyVHZPKxbKvkfSMn");
}

#[test]
fn anthropic_incomplete_fixture_reports_truncated_tool_input() {
    let input = std::fs::read(
        repo_root().join("tests/fixtures/anthropic/incomplete_partial_json_response.sse"),
    )
    .unwrap();
    let (_, events) = decode_chunked(Provider::Anthropic, &input, 3);
    let truncated: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_use_truncated")
        .collect();
    assert_eq!(truncated.len(), 1);
    assert_eq!(truncated[0]["name"], "make_file");
    assert!(
        truncated[0]["partial_json"]
            .as_str()
            .unwrap()
            .ends_with("\"Filing taxes")
    );
    assert!(!events.iter().any(|e| e["type"] == "tool_use_ready"));
}

#[test]
fn openai_chat_length_fixture_is_complete_with_finish_reason_length() {
    let input =
        std::fs::read(repo_root().join("tests/fixtures/openai-chat/4cc50a6135d2.sse")).unwrap();
    let (message, _) = decode_chunked(Provider::OpenAiChat, &input, 1);
    assert_eq!(message["choices"][0]["finish_reason"], "length");
}

fn all_fixture_inputs() -> Vec<(Provider, Vec<u8>)> {
    let mut out: Vec<(Provider, Vec<u8>)> = Vec::new();
    for (_, input) in fixtures("anthropic") {
        out.push((Provider::Anthropic, input));
    }
    for (_, input) in fixtures("openai-chat") {
        out.push((Provider::OpenAiChat, input));
    }
    for (_, input) in fixtures("openai-responses") {
        out.push((Provider::OpenAiResponses, input));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Any split of any stream gives the same message and the same events as the whole.
    #[test]
    fn decoding_is_chunk_invariant(which in 0usize..64, cuts in proptest::collection::vec(0usize..4096, 0..40)) {
        let inputs = all_fixture_inputs();
        let (provider, input) = &inputs[which % inputs.len()];
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (input.len() + 1)).collect();
        cuts.sort_unstable();
        let whole = decode_split(*provider, input, &[]);
        let split = decode_split(*provider, input, &cuts);
        prop_assert_eq!(split, whole);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Corrupted streams (bytes flipped, cut, spliced) never panic any decoder; the snapshot is
    /// always JSON (null or an object), and a successful finish means the end marker was seen.
    #[test]
    fn corrupted_streams_never_panic(
        which in 0usize..64,
        provider_pick in 0usize..3,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let inputs = all_fixture_inputs();
        let (_, original) = &inputs[which % inputs.len()];
        let mut input = original.clone();
        for (at, byte) in edits {
            let i = at.index(input.len());
            input[i] = byte;
        }
        input.truncate(cut.index(input.len() + 1).max(input.len() / 2));
        let provider = [Provider::Anthropic, Provider::OpenAiChat, Provider::OpenAiResponses][provider_pick];
        let mut decoder = StreamDecoder::for_provider(provider);
        let mut events = Vec::new();
        for piece in input.chunks(13) {
            let _ = decoder.feed_into(Bytes::copy_from_slice(piece), &mut events);
        }
        let snapshot = decoder.message();
        prop_assert!(snapshot.is_null() || snapshot.is_object());
        let complete = decoder.is_complete();
        match decoder.finish() {
            Ok(message) => {
                // Without its end marker only a Chat stream whose choices all finished is
                // whole (some servers leave `[DONE]` out).
                let finished = message["choices"].as_array().is_some_and(|choices| {
                    !choices.is_empty()
                        && choices.iter().all(|c| c["finish_reason"].as_str().is_some_and(|r| !r.is_empty()))
                });
                prop_assert!(complete || (provider == Provider::OpenAiChat && finished));
                prop_assert!(message.is_object());
            }
            Err(error) => prop_assert!(!error.to_string().is_empty()),
        }
    }
}

/// Every stream of `provider` (recorded and hand-written, failing ones included).
fn all_streams(provider: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in ["tests/fixtures", "tests/decode/streams"] {
        let Ok(entries) = std::fs::read_dir(repo_root().join(dir).join(provider)) else {
            continue;
        };
        for path in entries.map(|e| e.unwrap().path()) {
            if path.extension().is_some_and(|x| x == "sse") {
                let name = path.file_stem().unwrap().to_string_lossy().into_owned();
                out.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// `message_json` and `finish_json` give exactly the text of `message()` and `finish()` (the
/// decoders that serialize their typed message directly must not drift from the `Value` form),
/// after every chunk of every stream, with tool inputs still open or sealed, and at the end,
/// errors included.
#[test]
fn message_json_is_the_text_of_message() {
    let mut streams = 0;
    for provider in [
        Provider::Anthropic,
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
    ] {
        for (name, input) in all_streams(provider.name()) {
            streams += 1;
            for chunk in [1, 7, 64] {
                let mut by_value = StreamDecoder::for_provider(provider);
                let mut by_text = StreamDecoder::for_provider(provider);
                let mut events = Vec::new();
                for piece in input.chunks(chunk) {
                    let fed = by_value.feed_into(Bytes::copy_from_slice(piece), &mut events);
                    let fed_text = by_text.feed_into(Bytes::copy_from_slice(piece), &mut events);
                    assert_eq!(fed.is_ok(), fed_text.is_ok(), "{name}");
                    assert_eq!(
                        by_text.message_json(),
                        by_value.message().to_string(),
                        "{name} at chunk {chunk}"
                    );
                }
                match (by_value.finish(), by_text.finish_json()) {
                    (Ok(message), Ok(text)) => assert_eq!(text, message.to_string(), "{name}"),
                    (Err(a), Err(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}"),
                    (a, b) => panic!("{name}: finish {a:?} but finish_json {b:?}"),
                }
            }
        }
    }
    assert!(streams >= 12, "only {streams} streams found");
}

/// Each call's outcome (`Ok`, or the error's debug text) with the events it added, for
/// `input` cut at `cuts`, fed borrowed or as owned copies; the decoding goes on after an error
/// (the events after a failing one stay queued for the next call), and ends with `finish`.
fn feed_outcomes(
    provider: Provider,
    input: &[u8],
    cuts: &[usize],
    borrowed: bool,
) -> (Vec<(String, Vec<Value>)>, String) {
    let mut decoder = StreamDecoder::for_provider(provider);
    let mut calls = Vec::new();
    let mut start = 0;
    // A scratch buffer overwritten after each borrowed feed: a view left into it would show.
    let mut scratch = Vec::new();
    for &cut in cuts.iter().chain([input.len(), input.len()].iter()) {
        let cut = cut.clamp(start, input.len());
        let mut events = Vec::new();
        let fed = if borrowed {
            scratch.clear();
            scratch.extend_from_slice(&input[start..cut]);
            let fed = decoder.feed_borrowed_into(&scratch, &mut events);
            scratch.fill(b'#');
            fed
        } else {
            decoder.feed_into(Bytes::copy_from_slice(&input[start..cut]), &mut events)
        };
        let outcome = fed.map_or_else(|e| format!("{e:?}"), |()| "ok".to_owned());
        calls.push((outcome, events.iter().map(DecodeEvent::to_json).collect()));
        start = cut;
    }
    let end = decoder
        .finish()
        .map_or_else(|e| format!("{e:?}"), |m| m.to_string());
    (calls, end)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Borrowed feeds decode every stream (failing ones included) exactly as owned feeds do,
    /// call by call, at any chunking.
    #[test]
    fn borrowed_feeds_decode_like_owned_feeds(
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        for provider in [Provider::Anthropic, Provider::OpenAiChat, Provider::OpenAiResponses] {
            let mut streams = all_streams(provider.name());
            if provider == Provider::Anthropic {
                // Malformed events in the middle: the decoding fails there and goes on.
                let (_, basic) = streams.iter().find(|(n, _)| n == "basic_response").unwrap();
                let text = String::from_utf8(basic.clone()).unwrap();
                let bad = "event: content_block_delta\ndata: {not json\n\n";
                let mut parts: Vec<&str> = text.split_inclusive("\n\n").collect();
                parts.insert(4, bad);
                parts.insert(2, bad);
                streams.push(("basic_response with bad events".into(), parts.concat().into_bytes()));
            }
            for (name, input) in streams {
                let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
                points.sort_unstable();
                let owned = feed_outcomes(provider, &input, &points, false);
                let borrowed = feed_outcomes(provider, &input, &points, true);
                prop_assert_eq!(borrowed, owned, "{}", name);
            }
        }
    }
}
