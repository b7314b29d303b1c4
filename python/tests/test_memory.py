"""Memory stays flat while streaming: decoding 1 GiB of synthetic stream (generated, never
held whole) keeps the process's peak RSS under a fixed bound; parsing 32 MiB of events and
decoding thousands of messages do not grow it."""

from __future__ import annotations

import json
import resource
from typing import Iterator

import ferroloop
from conftest import fixture_bytes


def max_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_sse_parsing_keeps_memory_flat() -> None:
    one = fixture_bytes("anthropic/tool_use_response")
    chunk = one * (64 * 1024 // len(one) + 1)  # ~64 KiB of whole events
    parser = ferroloop.SseParser()
    for _ in range(64):  # warm up allocator and caches
        parser.feed(chunk)
    before = max_rss_kib()
    events = 0
    for _ in range(512):  # ~32 MiB more
        events += len(parser.feed(chunk))
    growth_mib = (max_rss_kib() - before) / 1024
    assert events > 50_000
    assert growth_mib < 16, f"RSS grew by {growth_mib:.1f} MiB while parsing 32 MiB"


def test_decoding_many_messages_keeps_memory_flat() -> None:
    data = fixture_bytes("anthropic/tool_use_response")
    for _ in range(200):
        decoder = ferroloop.StreamDecoder("anthropic")
        decoder.feed(data)
        decoder.finish()
    before = max_rss_kib()
    for _ in range(2000):
        decoder = ferroloop.StreamDecoder("anthropic")
        decoder.feed(data)
        decoder.finish()
    growth_mib = (max_rss_kib() - before) / 1024
    assert growth_mib < 16, f"RSS grew by {growth_mib:.1f} MiB over 2,000 decoded streams"


GIB = 1 << 30
#: Each synthetic message: 4 MiB of text deltas (accumulated whole by the decoder).
MESSAGE_BYTES = 4 << 20
#: Chunks of 96 KiB + 13 bytes: above the threshold where `feed` releases the interpreter,
#: and never aligned to an event, so events split across chunks all the time.
CHUNK_BYTES = 96 * 1024 + 13


def synthetic_messages(total: int) -> Iterator[Iterator[bytes]]:
    """`total` bytes of Anthropic stream as a sequence of messages, each a generator of chunks
    (nothing is held beyond one chunk and one delta event)."""
    delta = json.dumps(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lorem ipsum " * 80}}
    )
    event = f"event: content_block_delta\ndata: {delta}\n\n".encode()
    head = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        b'"role":"assistant","content":[],"model":"m","usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
    )
    tail = (
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
        b'"usage":{"output_tokens":9}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    per_message = MESSAGE_BYTES // len(event)

    def message() -> Iterator[bytes]:
        pending = bytearray(head)
        for _ in range(per_message):
            pending += event
            while len(pending) >= CHUNK_BYTES:
                yield bytes(pending[:CHUNK_BYTES])
                del pending[:CHUNK_BYTES]
        pending += tail
        yield bytes(pending)

    size = len(head) + per_message * len(event) + len(tail)
    for _ in range(max(1, total // size)):
        yield message()


def test_decoding_a_gibibyte_of_stream_keeps_peak_rss_bounded() -> None:
    bound_mib = 64
    # Warm up: one message (allocator arenas, the decoder's buffers, the interpreter's caches).
    for chunks in synthetic_messages(MESSAGE_BYTES):
        decoder = ferroloop.StreamDecoder("anthropic", events=False)
        for chunk in chunks:
            decoder.feed(chunk)
        decoder.finish()
    before = max_rss_kib()
    fed = 0
    messages = 0
    for chunks in synthetic_messages(GIB):
        decoder = ferroloop.StreamDecoder("anthropic", events=False)
        for chunk in chunks:
            fed += len(chunk)
            decoder.feed(chunk)
        message = decoder.finish()
        assert message["stop_reason"] == "end_turn"
        messages += 1
    assert fed >= GIB - MESSAGE_BYTES and messages >= 250
    growth_mib = (max_rss_kib() - before) / 1024
    assert growth_mib < bound_mib, f"peak RSS grew by {growth_mib:.1f} MiB over {fed >> 20} MiB decoded"
