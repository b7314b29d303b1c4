"""`SseParser` against the shared conformance vectors and recorded streams, at several chunkings."""

from __future__ import annotations

import array
import threading
from typing import Any, Iterable

import pytest

import ferroloop
from conftest import chunked, conformance_vectors, expected_sse_items, fixture_bytes

CHUNKINGS = [0, 1, 2, 3, 7, 1460]
VECTORS = conformance_vectors()


def parse(chunks: Iterable[bytes]) -> tuple[list[dict[str, str]], list[int], ferroloop.SseParser]:
    """Events as dicts, and every change of ``retry`` observed after a feed."""
    parser = ferroloop.SseParser()
    events: list[dict[str, str]] = []
    retries: list[int] = []
    for chunk in chunks:
        for event in parser.feed(chunk):
            events.append({"event": event.event, "data": event.data, "id": event.id})
        if parser.retry is not None and (not retries or retries[-1] != parser.retry):
            retries.append(parser.retry)
    parser.finish()
    return events, retries, parser


def split_expected(expected: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    events = [item for item in expected if "retry" not in item]
    retries: list[int] = []
    for item in expected:
        if "retry" in item and (not retries or retries[-1] != item["retry"]):
            retries.append(item["retry"])
    return events, retries


def test_vector_file_is_complete() -> None:
    assert len(VECTORS) >= 60


@pytest.mark.parametrize("size", CHUNKINGS)
@pytest.mark.parametrize("name,data,expected", VECTORS, ids=[v[0] for v in VECTORS])
def test_conformance_vectors(name: str, data: bytes, expected: list[dict[str, Any]], size: int) -> None:
    events, retries, parser = parse(chunked(data, size))
    want_events, want_retries = split_expected(expected)
    assert events == want_events, name
    assert retries == want_retries, name
    assert parser.retry == (want_retries[-1] if want_retries else None)


@pytest.mark.parametrize("name,data,expected", VECTORS, ids=[v[0] for v in VECTORS])
def test_conformance_vectors_every_two_way_split(
    name: str, data: bytes, expected: list[dict[str, Any]]
) -> None:
    want_events, _ = split_expected(expected)
    for split in range(1, len(data)):
        events, _, _ = parse([data[:split], data[split:]])
        assert events == want_events, f"{name}: split at {split}"


def test_retry_interleaving_is_exact_one_byte_at_a_time() -> None:
    # Fed one byte at a time, a feed completes at most one line: the order of retry changes and
    # events is observable and must match the vector.
    data = b"retry: 10\ndata: a\n\nretry: 20\ndata: b\n\n"
    parser = ferroloop.SseParser()
    seen: list[Any] = []
    last = None
    for i in range(len(data)):
        for event in parser.feed(data[i : i + 1]):
            seen.append(event.data)
        if parser.retry != last:
            last = parser.retry
            seen.append(last)
    assert seen == [10, "a", 20, "b"]


@pytest.mark.parametrize("size", CHUNKINGS)
def test_recorded_streams(fixture_name: str, size: int) -> None:
    events, _, _ = parse(chunked(fixture_bytes(fixture_name), size))
    assert events == expected_sse_items(fixture_name)
    assert len(events) > 3


def test_feed_returns_every_event_of_a_chunk_in_one_list() -> None:
    data = fixture_bytes("anthropic/tool_use_response")
    parser = ferroloop.SseParser()
    events = parser.feed(data)
    assert isinstance(events, list)
    assert [e.event for e in events] == [item["event"] for item in expected_sse_items("anthropic/tool_use_response")]
    assert parser.feed(b"") == []
    assert parser.bytes_fed == len(data)


def test_accepts_bytearray_and_memoryview_and_buffers() -> None:
    data = b"event: a\ndata: 1\n\n"
    chunks: list[Any] = [bytearray(data), memoryview(data), array.array("B", data)]
    for chunk in chunks:
        parser = ferroloop.SseParser()
        assert parser.feed(chunk) == [ferroloop.SseEvent("1", event="a")]


def test_str_input_is_a_type_error() -> None:
    parser = ferroloop.SseParser()
    with pytest.raises(TypeError, match="encode"):
        parser.feed("data: x\n\n")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        parser.feed(42)  # type: ignore[arg-type]


def test_event_attributes_repr_eq_hash() -> None:
    parser = ferroloop.SseParser()
    (event,) = parser.feed(b"id: 7\nevent: delta\ndata: x\ndata: y\n\n")
    assert (event.event, event.data, event.id) == ("delta", "x\ny", "7")
    assert parser.last_event_id == "7"
    assert event == ferroloop.SseEvent("x\ny", event="delta", id="7")
    assert event != ferroloop.SseEvent("x\ny", event="delta")
    assert event != "x\ny"
    assert hash(event) == hash(ferroloop.SseEvent("x\ny", event="delta", id="7"))
    assert repr(event) == 'SseEvent(event="delta", data="x\\ny", id="7")'


def test_finish_discards_an_unterminated_event_and_allows_reconnection() -> None:
    parser = ferroloop.SseParser()
    assert parser.feed(b"id: 3\ndata: done\n\ndata: cut") == [ferroloop.SseEvent("done", id="3")]
    assert parser.finish() is True
    assert parser.finish() is False
    # A new stream on the same parser keeps the last event id.
    assert parser.feed(b"data: again\n\n") == [ferroloop.SseEvent("again", id="3")]


def test_max_event_bytes_drops_large_events_and_resumes() -> None:
    with pytest.raises(ValueError):
        ferroloop.SseParser(max_event_bytes=0)
    parser = ferroloop.SseParser(max_event_bytes=64)
    events = parser.feed(b"data: " + b"x" * 1000 + b"\n\ndata: small\n\n")
    assert [e.data for e in events] == ["small"]
    assert parser.dropped_events == 1


def test_large_chunks_parse_the_same_with_the_interpreter_released() -> None:
    # Above the 64 KiB threshold, feed parses with the interpreter released.
    one = fixture_bytes("anthropic/tool_use_response")
    data = one * 200
    assert len(data) > 64 * 1024
    expected = expected_sse_items("anthropic/tool_use_response") * 200
    events, _, _ = parse([data])
    assert events == expected


def test_separate_parsers_in_threads() -> None:
    data = fixture_bytes("openai-chat/569c877e6942") * 100
    expected = expected_sse_items("openai-chat/569c877e6942") * 100
    results: list[list[dict[str, str]]] = []
    lock = threading.Lock()

    def work() -> None:
        events, _, _ = parse(chunked(data, 100_000))
        with lock:
            results.append(events)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    assert all(r == expected for r in results)


def test_utf8_split_inside_a_character() -> None:
    data = "data: 日本語🚀\n\n".encode()
    events, _, _ = parse(chunked(data, 1))
    assert events == [{"event": "message", "data": "日本語🚀", "id": ""}]


def test_last_event_id_is_committed_by_blank_lines() -> None:
    # WHATWG: an `id` field sets the "last event ID buffer"; a blank line (also one with no
    # data) copies it to the "last event ID string", which events carry and `last_event_id`
    # returns; an unterminated event, its `id` included, is discarded at the end of the stream.
    parser = ferroloop.SseParser()
    assert [e.id for e in parser.feed(b"data: a\n\nid: 7\n")] == [""]
    assert parser.last_event_id == ""  # only buffered until its event is dispatched
    assert parser.finish() is True
    assert parser.last_event_id == ""
    assert [e.id for e in parser.feed(b"data: b\n\n")] == [""]

    lone = ferroloop.SseParser()
    assert lone.feed(b"id: 7\n") == []
    assert lone.finish() is True
    assert lone.last_event_id == ""

    blank = ferroloop.SseParser()
    assert blank.feed(b"id: 8\n\n") == []
    assert blank.last_event_id == "8"
    assert blank.finish() is False
    assert [e.id for e in blank.feed(b"data: c\n\n")] == ["8"]
