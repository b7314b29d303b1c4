"""Memory stays flat while streaming: parsing 32 MiB of events does not grow the process."""

from __future__ import annotations

import resource

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
