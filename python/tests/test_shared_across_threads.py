"""An object used from two threads at once (one thread in a ``feed`` that released the
interpreter, another calling it) raises ``InvalidStateError`` saying so, not pyo3's bare
``RuntimeError: Already mutably borrowed``; a refused ``feed`` consumed nothing."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

import pytest

import ferroloop

#: Large enough that a feed releases the interpreter (the threshold is 64 KiB).
BIG = 4 * 1024 * 1024


def contend(busy: Callable[[], Any], probe: Callable[[], Any], *, deadline: float = 60.0) -> tuple[int, int, list[BaseException]]:
    """Runs `busy` over and over on one thread while another runs `probe`, until a call of
    either is refused (or `deadline` seconds pass): (busy calls that returned, probe calls that
    returned, the errors raised)."""
    errors: list[BaseException] = []
    successes = 0
    calls = 0
    done = threading.Event()
    refused = threading.Event()

    def prober() -> None:
        nonlocal successes
        while not done.is_set():
            try:
                probe()
                successes += 1
            except BaseException as error:  # noqa: BLE001 - every error is the test's
                errors.append(error)
                refused.set()
                return

    thread = threading.Thread(target=prober)
    thread.start()
    end = time.monotonic() + deadline
    try:
        while not refused.is_set() and time.monotonic() < end:
            try:
                busy()
                calls += 1
            except BaseException as error:  # noqa: BLE001 - every error is the test's
                # The probe's own call (one that releases the interpreter) got in first: the
                # refusal the test looks for, the other way round.
                errors.append(error)
                break
    finally:
        done.set()
        thread.join()
    return calls, successes, errors


def assert_in_use(errors: list[BaseException], cls: str) -> None:
    assert errors, f"no call on the {cls} overlapped another thread's"
    for error in errors:
        assert isinstance(error, ferroloop.InvalidStateError), repr(error)
        assert error.code == "invalid_state"
        assert f"this {cls} is in use by another thread" in str(error)
        assert "not shared across threads" in str(error)


def test_sse_parser_refuses_a_second_thread_and_a_refused_feed_consumes_nothing() -> None:
    parser = ferroloop.SseParser()
    big = b"data: " + b"x" * BIG + b"\n\n"
    small = b"data: small\n\n"
    busy_events: list[Any] = []
    probe_events: list[Any] = []
    calls, successes, errors = contend(
        lambda: busy_events.extend(parser.feed(big)),
        lambda: probe_events.extend(parser.feed(small)),
    )
    assert_in_use(errors, "SseParser")
    # Every byte counted came from a feed that returned: the refused one added nothing.
    assert parser.bytes_fed == calls * len(big) + successes * len(small)
    assert len(busy_events) == calls and len(probe_events) == successes
    # And left no partial state: the next feed is parsed from a clean start.
    assert [event.data for event in parser.feed(small)] == ["small"]
    for read in (lambda: parser.last_event_id, lambda: parser.retry, lambda: repr(parser)):
        calls, _, errors = contend(lambda: parser.feed(big), read)
        assert_in_use(errors, "SseParser")


def openai_delta(text: str) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}
    return ("data: " + json.dumps(chunk) + "\n\n").encode()


def test_stream_decoder_refuses_a_second_thread_and_a_refused_feed_consumes_nothing() -> None:
    decoder = ferroloop.StreamDecoder("openai-chat")
    big = openai_delta("z" * BIG)
    calls, _, errors = contend(lambda: decoder.feed(big), decoder.message)
    assert_in_use(errors, "StreamDecoder")
    calls, successes, errors = contend(lambda: decoder.feed(big), lambda: decoder.feed(openai_delta("b")))
    assert_in_use(errors, "StreamDecoder")
    message = decoder.message()
    assert message is not None
    content = message["choices"][0]["message"]["content"]
    # The refused feed's delta is not in the message; the ones that returned are, once each.
    assert content.count("b") == successes
    assert set(content) <= {"z", "b"}


def test_context_tracker_refuses_a_second_thread() -> None:
    tracker = ferroloop.ContextTracker()
    messages = [{"role": "user", "content": "hello " * (BIG // 8)}] * 4
    for probe in (tracker.tokens, lambda: tracker.push_message({"role": "user", "content": "hi"}), lambda: len(tracker)):
        _, _, errors = contend(lambda: tracker.replace_messages(messages), probe)
        assert_in_use(errors, "ContextTracker")
    # The tracker still works, with the messages the last replacement left.
    tracker.replace_messages(messages)
    assert len(tracker) == 4 and tracker.tokens()["tokens"] > 0


def test_text_estimator_refuses_a_second_thread_and_a_refused_feed_adds_nothing() -> None:
    estimator = ferroloop.TextEstimator()
    piece = b"hello world\n" * (BIG // 12)
    small = b"hi there\n"
    calls, successes, errors = contend(lambda: estimator.feed(piece), lambda: estimator.feed(small))
    assert_in_use(errors, "TextEstimator")
    # What was estimated is what the feeds that returned gave (lines: their order is moot).
    assert estimator.estimate() == ferroloop.estimate_tokens(piece * calls + small * successes)
    _, _, errors = contend(lambda: estimator.feed(piece), estimator.estimate)
    assert_in_use(errors, "TextEstimator")
