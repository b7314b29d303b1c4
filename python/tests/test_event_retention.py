"""What a parsed event keeps alive: only its own bytes. A kept `SseEvent` held a slice of the
copy of the chunk it was read from, so a 4-byte event read with 100 MB of comments kept the
100 MB. And a `memoryview` chunk is copied once (it was copied twice, with the interpreter
held). Measured in a fresh interpreter, with margins of a whole chunk."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import ferroloop

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_kept_event_does_not_keep_its_chunk() -> None:
    out = run(
        """
        import gc, os
        import ferroloop

        def rss_mib():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

        size = 16 * 2**20
        kept = []
        for tail in (b"", b"data: tail\\n\\n"):  # the event alone in the chunk, and with another
            p = ferroloop.SseParser()
            kept += p.feed(b"data: warm\\n\\n: " + b"x" * size + b"\\n" + tail)
        del p
        gc.collect()
        before = rss_mib()
        for i in range(8):
            chunk = b"id: 7\\nevent: e\\ndata: tiny\\n\\n: " + b"x" * size + b"\\n"
            kept += ferroloop.SseParser().feed(chunk)
            del chunk
            gc.collect()
        assert [e.data for e in kept[-8:]] == ["tiny"] * 8
        assert {(e.event, e.id) for e in kept[-8:]} == {("e", "7")}
        print(rss_mib() - before)
        """
    )
    # 8 events kept: each held its 16 MiB chunk (128 MiB); now a few bytes (the allocator may
    # keep a freed chunk or two).
    assert float(out) < 48, f"8 kept events of 4 bytes keep {out} MiB"


def test_large_data_is_still_returned_whole() -> None:
    data = "y" * (4 * 2**20)
    chunk = b"data: a\n\ndata: " + data.encode() + b"\n\ndata: b\n\n"
    assert [e.data for e in ferroloop.SseParser().feed(chunk)] == ["a", data, "b"]
    assert [e.data for e in ferroloop.SseParser().feed(memoryview(chunk))] == ["a", data, "b"]


def test_a_memoryview_chunk_is_copied_once() -> None:
    out = run(
        """
        import resource
        import ferroloop

        size = 64 * 2**20
        # Made in place: a temporary copy would raise the peak before the feed.
        data = bytearray(b"x") * size
        data[:2] = b": "
        data[-1:] = b"\\n"
        view = memoryview(data)
        p = ferroloop.SseParser()
        p.feed(b"data: warm\\n\\n")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        p.feed(view)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print((peak - before) / 1024)
        """
    )
    # One copy: 64 MiB more at the peak; two copies: 128 MiB.
    assert float(out) < 100, f"feeding a 64 MiB memoryview raised the peak by {out} MiB"
