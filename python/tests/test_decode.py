"""`StreamDecoder` against the shared decoder expectations (`tests/decode/`), at several chunkings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import ferroloop
from conftest import SHARED, chunked, ferroloop_binary, fixture_bytes

CHUNKINGS = [0, 1, 7, 1460]


def expected_cases() -> list[tuple[str, str, Path]]:
    cases = []
    for path in sorted((SHARED / "decode" / "expected").glob("*/*.json")):
        provider, name = path.parent.name, path.stem
        source = SHARED / "fixtures" / provider / f"{name}.sse"
        if not source.exists():
            source = SHARED / "decode" / "streams" / provider / f"{name}.sse"
        cases.append((provider, name, source))
    return cases


CASES = expected_cases()


def decode(provider: str, data: bytes, size: int) -> tuple[list[ferroloop.DecodeEvent], ferroloop.StreamDecoder]:
    decoder = ferroloop.StreamDecoder(provider=provider)  # type: ignore[arg-type]
    events: list[ferroloop.DecodeEvent] = []
    for chunk in chunked(data, size):
        events.extend(decoder.feed(chunk))
    return events, decoder


def test_every_provider_has_cases() -> None:
    assert {provider for provider, _, _ in CASES} == {"anthropic", "openai-chat", "openai-responses"}
    assert len(CASES) >= 10


@pytest.mark.parametrize("size", CHUNKINGS)
@pytest.mark.parametrize("provider,name,source", CASES, ids=[f"{p}/{n}" for p, n, _ in CASES])
def test_final_message_matches_the_shared_expectation(provider: str, name: str, source: Path, size: int) -> None:
    expected = json.loads((SHARED / "decode" / "expected" / provider / f"{name}.json").read_text(encoding="utf-8"))
    events, decoder = decode(provider, source.read_bytes(), size)
    assert all(isinstance(e, dict) and isinstance(e.get("type"), str) for e in events)
    assert decoder.is_complete
    assert decoder.message() == expected
    assert decoder.finish() == expected


def assert_events_match_the_cli(provider: str, source: Path) -> None:
    """The extension builds event dicts directly (python/src/events.rs); the CLI prints the
    core's serde form. Same keys, same order, same values, and the same final message."""
    lines = subprocess.run(
        [str(ferroloop_binary()), "decode", "--provider", provider, str(source), "--events"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    expected = [json.loads(line) for line in lines[:-1]]
    events, decoder = decode(provider, source.read_bytes(), 7)
    assert [json.dumps(e) for e in events] == [json.dumps(e) for e in expected]
    assert json.dumps(decoder.finish()) == json.dumps(json.loads(lines[-1]))


@pytest.mark.parametrize("provider,name,source", CASES, ids=[f"{p}/{n}" for p, n, _ in CASES])
def test_events_are_the_serde_form_of_the_core_events(provider: str, name: str, source: Path) -> None:
    assert_events_match_the_cli(provider, source)


def test_invalid_tool_input_event_is_the_serde_form(tmp_path: Path) -> None:
    # The one event kind no shared stream produces: a tool call whose input is not JSON.
    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n"

    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    stream = "".join([
        event("message_start", {"type": "message_start", "message": message}),
        event("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}}),
        event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "input_json_delta", "partial_json": '{"a": tru'}}),
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                "usage": {"output_tokens": 5}}),
        event("message_stop", {"type": "message_stop"}),
    ])
    source = tmp_path / "invalid_tool_input.sse"
    source.write_text(stream, encoding="utf-8")
    events, _ = decode("anthropic", stream.encode(), 0)
    assert "tool_use_invalid" in [e["type"] for e in events]
    assert_events_match_the_cli("anthropic", source)


def test_anthropic_tool_use_events() -> None:
    events, decoder = decode("anthropic", fixture_bytes("anthropic/tool_use_response"), 64)
    types = [e["type"] for e in events]
    assert types[0] == "message_start" and types[-1] == "message_stop"
    ready = [e for e in events if e["type"] == "tool_use_ready"]
    assert len(ready) == 1
    message = decoder.finish()
    tool_block = next(b for b in message["content"] if b["type"] == "tool_use")
    assert ready[0]["id"] == tool_block["id"] and ready[0]["input"] == tool_block["input"]
    text = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert text == message["content"][0]["text"]


def test_an_emoji_cut_between_two_deltas_is_joined_back() -> None:
    # A JavaScript gateway cutting text inside a surrogate pair sends each half as `\udXXX`
    # (json.dumps writes the same); the TypeScript SDK's concatenation joins them back.
    pieces = ["Hi \ud83d", "\ude00 there", " lone \ud83d", " end"]

    def sse(kind: str, data: object) -> str:
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n"

    usage = {"input_tokens": 1, "output_tokens": 1}
    message = {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "m", "usage": usage}
    stream = sse("message_start", {"type": "message_start", "message": message})
    stream += sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    for text in pieces:
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
        stream += sse("content_block_delta", delta)
    stream += sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    stream += sse("message_stop", {"type": "message_stop"})
    assert "\\ud83d" in stream
    decoder = ferroloop.StreamDecoder("anthropic")
    events = decoder.feed(stream.encode())
    deltas = [e["text"] for e in events if e["type"] == "text_delta"]
    assert deltas == ["Hi ", "\U0001f600 there", " lone ", "\ufffd end"]
    assert decoder.finish()["content"][0]["text"] == "Hi \U0001f600 there lone \ufffd end"


def test_mid_stream_error_is_a_typed_exception_with_the_partial_message() -> None:
    data = (SHARED / "decode/streams/anthropic/error_overloaded.sse").read_bytes()
    decoder = ferroloop.StreamDecoder("anthropic")
    with pytest.raises(ferroloop.OverloadedError) as info:
        decoder.feed(data)
    err = info.value
    assert isinstance(err, ferroloop.APIError)
    assert err.error_type == "overloaded_error" and err.status is None
    assert isinstance(err.body, dict)
    assert isinstance(err, ferroloop.DecodeErrorDetail)
    assert any(e["type"] == "text_delta" for e in err.events)
    partial = decoder.message()
    assert partial is not None and partial["content"]
    with pytest.raises(ferroloop.OverloadedError):
        decoder.finish()


def test_an_insufficient_quota_error_event_is_a_quota_exceeded_error() -> None:
    # OpenAI's billing error, sent as a stream error: not a RateLimitError (no wait helps).
    data = (
        b'data: {"error":{"message":"You exceeded your current quota, please check your plan and '
        b'billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}\n\n'
    )
    decoder = ferroloop.StreamDecoder("openai-chat")
    with pytest.raises(ferroloop.QuotaExceededError) as info:
        decoder.feed(data)
    assert not isinstance(info.value, ferroloop.RateLimitError)
    assert info.value.error_type == "insufficient_quota"


def test_a_feed_after_finish_is_refused_and_leaves_the_message_alone() -> None:
    # It used to decode the bytes as more of the finished stream: "a second `message_start`",
    # a ProtocolError about the provider, and a later finish() raising for the old stream.
    data = fixture_bytes("anthropic/basic_response")
    decoder = ferroloop.StreamDecoder("anthropic")
    decoder.feed(data)
    message = decoder.finish()
    with pytest.raises(ferroloop.FerroloopError, match="finished") as info:
        decoder.feed(data)
    assert not isinstance(info.value, ferroloop.ProtocolError)
    assert decoder.finish() == message, "a second finish answers the same"
    assert decoder.message() == message


# A message_start, then two events that are not JSON and a message_stop, in one chunk.
TWO_BAD_EVENTS = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
    b'"role":"assistant","model":"x","content":[],"stop_reason":null,'
    b'"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
    b"event: content_block_delta\ndata: {first\n\n"
    b"event: content_block_delta\ndata: {second\n\n"
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def test_finish_called_again_answers_the_same_as_in_node_and_c() -> None:
    # The rule of every binding: finish() may be called again and answers the same (the same
    # message, or the same error). The second call used to decode the events queued behind the
    # first failure: the first finish() raised a ProtocolError, the second returned a message.
    decoder = ferroloop.StreamDecoder("anthropic")
    with pytest.raises(ferroloop.ProtocolError, match="column 2"):
        decoder.feed(TWO_BAD_EVENTS)
    answers = []
    for _ in range(3):
        with pytest.raises(ferroloop.ProtocolError) as info:
            decoder.finish()
        answers.append(str(info.value))
    assert len(set(answers)) == 1, answers
    truncated = ferroloop.StreamDecoder("anthropic")
    truncated.feed(TWO_BAD_EVENTS.split(b"event: content_block_delta")[0])
    partials = []
    for _ in range(2):
        with pytest.raises(ferroloop.StreamTruncatedError) as caught:
            truncated.finish()
        partials.append(caught.value.partial_message)
    assert partials[0] == partials[1] and partials[0] is not None


ERROR_EVENTS = json.loads((SHARED / "decode" / "error_events.json").read_text(encoding="utf-8"))["cases"]
# The Python class of each stable code (tests/decode/error_events.json holds Node's codes).
CLASS_OF_CODE = {
    "overloaded": ferroloop.OverloadedError,
    "rate_limited": ferroloop.RateLimitError,
    "quota_exceeded": ferroloop.QuotaExceededError,
    "prompt_too_long": ferroloop.PromptTooLongError,
    "authentication": ferroloop.AuthenticationError,
    "permission": ferroloop.PermissionDeniedError,
    "not_found": ferroloop.NotFoundError,
    "invalid_request": ferroloop.InvalidRequestError,
    "server": ferroloop.ServerError,
}


@pytest.mark.parametrize("case", ERROR_EVENTS, ids=[case["name"] for case in ERROR_EVENTS])
def test_error_events_get_the_class_of_their_code_as_in_node(case: dict[str, str]) -> None:
    # The same event is the same error in every binding: OpenAI's rate limit names itself in
    # `code` (its `type` is "tokens"), a model at capacity is `server_is_overloaded`.
    decoder = ferroloop.StreamDecoder(case["provider"])  # type: ignore[arg-type]
    with pytest.raises(ferroloop.APIError) as info:
        decoder.feed(case["stream"].encode())
    expected = CLASS_OF_CODE.get(case["code"], ferroloop.APIError)
    assert type(info.value) is expected, (case["name"], type(info.value).__name__)
    # And the same `code` as Node's error (a plain APIError's is provider_error).
    assert info.value.code == case["code"], (case["name"], info.value.code)


@pytest.mark.parametrize("size", [0, 1, 13])
def test_truncated_stream_raises_with_the_partial_message(size: int) -> None:
    data = (SHARED / "decode/streams/anthropic/truncated.sse").read_bytes()
    _, decoder = decode("anthropic", data, size)
    assert not decoder.is_complete
    with pytest.raises(ferroloop.StreamTruncatedError) as info:
        decoder.finish()
    partial = info.value.partial_message
    assert isinstance(partial, dict) and partial["role"] == "assistant"


def test_protocol_errors() -> None:
    decoder = ferroloop.StreamDecoder("anthropic")
    with pytest.raises(ferroloop.ProtocolError):
        decoder.feed(b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}\n\n')
    decoder = ferroloop.StreamDecoder("anthropic")
    with pytest.raises(ferroloop.ProtocolError):
        decoder.feed(b"event: message_start\ndata: {not json\n\n")


def test_unknown_provider_and_repr() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        ferroloop.StreamDecoder("cohere")  # type: ignore[arg-type]
    decoder = ferroloop.StreamDecoder("openai-chat")
    assert decoder.provider == "openai-chat"
    assert repr(decoder) == 'StreamDecoder(provider="openai-chat")'
    assert decoder.message() is None


def test_accumulate_only_mode_returns_only_tool_events_and_the_same_message() -> None:
    data = fixture_bytes("anthropic/tool_use_response")
    quiet = ferroloop.StreamDecoder("anthropic", events=False)
    # Only the tool-call events (what an executor needs) are still reported.
    assert [e["type"] for e in quiet.feed(data)] == ["tool_use_ready"]
    _, loud = decode("anthropic", data, 0)
    assert quiet.finish() == loud.finish()


def test_events_none_means_the_default_like_node_null() -> None:
    # `events=None` was a TypeError; None for an optional argument is its default (as Node's
    # `events: null` is absent): every event is returned.
    data = fixture_bytes("anthropic/tool_use_response")
    decoder = ferroloop.StreamDecoder("anthropic", events=None)
    events, loud = decode("anthropic", data, 0)
    assert decoder.feed(data) == events
    assert decoder.finish() == loud.finish()
    with pytest.raises(TypeError):
        ferroloop.StreamDecoder("anthropic", events="no")  # type: ignore[arg-type]


def test_provider_none_means_the_default_like_node_null() -> None:
    # `provider=None` was a TypeError, where Node's `provider: null` is the default provider.
    data = fixture_bytes("anthropic/tool_use_response")
    events, reference = decode("anthropic", data, 0)
    for decoder in [ferroloop.StreamDecoder(None), ferroloop.StreamDecoder(provider=None, events=None)]:
        assert decoder.provider == "anthropic"
        assert decoder.feed(data) == events
        assert decoder.finish() == reference.finish()
    assert ferroloop.StreamDecoder().provider == "anthropic"


@pytest.mark.parametrize("size", [1, 7, 1460, 100_000])
def test_every_bytes_like_chunk_decodes_alike(size: int) -> None:
    # `bytes` is read in place, other buffers are copied: a bytearray rewritten after each feed
    # must not change what the decoder kept of an unfinished event.
    data = fixture_bytes("anthropic/tool_use_response")
    _, reference = decode("anthropic", data, size)
    expected = reference.finish()
    for kind in ("bytes", "bytearray", "memoryview"):
        decoder = ferroloop.StreamDecoder("anthropic")
        events: list[ferroloop.DecodeEvent] = []
        for piece in chunked(data, size):
            buffer = bytearray(piece)
            chunk: bytes | bytearray | memoryview = (
                bytes(buffer) if kind == "bytes" else buffer if kind == "bytearray" else memoryview(buffer)
            )
            events.extend(decoder.feed(chunk))
            buffer[:] = b"\xa5" * len(buffer)
        assert decoder.finish() == expected, kind
        assert [e["type"] for e in events].count("tool_use_ready") == 1, kind


def test_large_chunks_decode_with_the_interpreter_released() -> None:
    # Many copies of a text stream's deltas inside one message: one chunk over 64 KiB.
    raw = fixture_bytes("anthropic/basic_response").decode()
    head, rest = raw.split("event: content_block_delta", 1)
    delta = "event: content_block_delta" + rest.split("event: content_block_stop", 1)[0]
    tail = "event: content_block_stop" + rest.split("event: content_block_stop", 1)[1]
    data = (head + delta * 500 + tail).encode()
    assert len(data) > 64 * 1024
    decoder = ferroloop.StreamDecoder("anthropic")
    events = decoder.feed(data)
    message = decoder.finish()
    single = ferroloop.StreamDecoder("anthropic")
    single.feed(fixture_bytes("anthropic/basic_response"))
    one_text = single.finish()["content"][0]["text"]
    assert message["content"][0]["text"] == one_text * 500
    assert sum(1 for e in events if e["type"] == "text_delta") >= 500
