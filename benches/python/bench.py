#!/usr/bin/env python3
"""ferroloop's Python package against the official SDKs, same machine, same run.

    .venv/bin/python benches/python/bench.py [--runs N] [--chunk BYTES]

Needs the package (`pip install ./python`, a release build: debug builds are not representative)
and the peers (`pip install anthropic httpx-sse`). Prints a table of medians and ratios:

- SSE alone on the 6 MB Anthropic-shaped stream: ferroloop.SseParser vs httpx-sse vs the
  `anthropic` SDK's SSEDecoder;
- decode + accumulate the same stream: ferroloop.StreamDecoder vs the `anthropic` SDK's
  SSEDecoder + `accumulate_event` (target: >= 10x);
- token counting on the 4 MiB mixed corpus (`tests/tokens/sample`, as the Rust bench):
  ferroloop.estimate_tokens (o200k) and ferroloop.count_tokens (exact, `exact` builds) vs
  `tiktoken`'s o200k_base, loaded offline from the vocabulary file tiktoken-rs ships (found in
  ~/.cargo/registry, or --o200k FILE);
- executor overhead for 10,000 no-op async tools vs a bare `asyncio.gather` (target: <= 1.5x).

Sections whose ferroloop layer is not built into the installed package are reported as skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import gc
import glob
import os
import hashlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ferroloop  # noqa: E402
from workload import anthropic_stream  # noqa: E402

# sha256 of `cargo run -p ferroloop-bench --example anthropic_workload -- 42 6000000`.
RUST_WORKLOAD_SHA256 = "86b681889847fad96563e414318466ba5b73fe227546db3ead25b714184f8dfe"

Row = tuple[str, str, float, Optional[str]]


def median_seconds(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """Median wall time of `runs` calls (after one warm-up call) and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def chunks_of(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


# ---- SSE alone -------------------------------------------------------------------------------


def sse_ferroloop(chunks: list[bytes]) -> tuple[int, int]:
    parser = ferroloop.SseParser()
    events = data_chars = 0
    for chunk in chunks:
        for event in parser.feed(chunk):
            events += 1
            data_chars += len(event.data)
    parser.finish()
    return events, data_chars


def sse_httpx(chunks: list[bytes]) -> tuple[int, int]:
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    text_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines = SSELineDecoder()
    decoder = SSEDecoder()
    events = data_chars = 0
    for chunk in chunks:
        for line in lines.decode(text_decoder.decode(chunk)):
            sse = decoder.decode(line)
            if sse is not None:
                events += 1
                data_chars += len(sse.data)
    return events, data_chars


def sse_anthropic(chunks: list[bytes]) -> tuple[int, int]:
    from anthropic._streaming import SSEDecoder

    events = data_chars = 0
    for sse in SSEDecoder().iter_bytes(iter(chunks)):
        events += 1
        data_chars += len(sse.data)
    return events, data_chars


# ---- decode + accumulate -----------------------------------------------------------------------


def summary(message: dict[str, Any]) -> tuple[int, int, str]:
    """(blocks, text characters, stop reason): compared across implementations."""
    text = sum(len(b.get("text", "")) for b in message["content"] if b["type"] == "text")
    return len(message["content"]), text, str(message.get("stop_reason"))


def decode_ferroloop(chunks: list[bytes]) -> tuple[int, int, str]:
    decoder = ferroloop.StreamDecoder(provider="anthropic")  # type: ignore[attr-defined]
    for chunk in chunks:
        decoder.feed(chunk)
    decoder.finish()
    return summary(decoder.message())


ANTHROPIC_EVENTS = {
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
}


def decode_anthropic(chunks: list[bytes]) -> tuple[int, int, str]:
    from anthropic._streaming import SSEDecoder
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot: Any = None
    json_bufs: dict[int, bytes] = {}
    for sse in SSEDecoder().iter_bytes(iter(chunks)):
        if sse.event in ANTHROPIC_EVENTS:
            snapshot = accumulate_event(event=sse.json(), current_snapshot=snapshot, json_bufs=json_bufs)
    return summary(snapshot.to_dict())


# ---- tokens ------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def mixed_corpus(target_bytes: int) -> str:
    """`ferroloop_bench::token_corpus::mixed_corpus`: the sample files in name order, joined
    by blank lines, repeated to at least `target_bytes` (UTF-8)."""
    sample = REPO / "tests" / "tokens" / "sample"
    one = "".join(
        path.read_text(encoding="utf-8") + "\n\n"
        for path in sorted(sample.iterdir())
        if path.name != "expected.json"
    )
    size = len(one.encode())
    return one * max(1, -(-target_bytes // size))


def find_o200k(explicit: Optional[str]) -> Optional[str]:
    """The o200k_base vocabulary: --o200k, else the copy in tiktoken-rs's crate source."""
    if explicit:
        return explicit
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = sorted(glob.glob(f"{home}/registry/src/*/tiktoken-rs-*/assets/o200k_base.tiktoken"))
    return found[-1] if found else None


def tiktoken_o200k(path: str) -> Any:
    """tiktoken's o200k_base encoding with its ranks read from `path` (no network): the
    official constructor, with the download replaced by the local file (hash still checked)."""
    import tiktoken
    import tiktoken_ext.openai_public as public

    download = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda _url, expected_hash=None: download(path, expected_hash=expected_hash)
    try:
        return tiktoken.Encoding(**public.o200k_base())
    finally:
        public.load_tiktoken_bpe = download


# ---- executor ----------------------------------------------------------------------------------

TOOLS = 10_000


async def noop_tool(_input: dict[str, Any]) -> str:
    return "ok"


TOOL_USES = [{"type": "tool_use", "id": f"toolu_{i}", "name": "noop", "input": {"i": i}} for i in range(TOOLS)]


def exec_median(make: Callable[[], Callable[[], Awaitable[list[Any]]]], runs: int) -> tuple[float, int]:
    """Median time of the awaited call alone, on one event loop (loop start-up and the
    construction of inputs and executors are outside the timed region)."""

    async def main() -> tuple[float, int]:
        times = []
        count = 0
        for attempt in range(runs + 1):
            call = make()
            gc.collect()
            start = time.perf_counter()
            results = await call()
            elapsed = time.perf_counter() - start
            count = len(results)
            if attempt:  # the first run warms up
                times.append(elapsed)
        return statistics.median(times), count

    return asyncio.run(main())


def exec_gather() -> Callable[[], Awaitable[list[Any]]]:
    async def call() -> list[Any]:
        return await asyncio.gather(*(noop_tool(use["input"]) for use in TOOL_USES))

    return call


def exec_ferroloop() -> Callable[[], Awaitable[list[Any]]]:
    executor = ferroloop.ToolExecutor(max_concurrency=TOOLS)
    executor.tool(name="noop", concurrency_safe=True)(noop_tool)
    return lambda: executor.run(TOOL_USES)


def exec_ferroloop_capped() -> Callable[[], Awaitable[list[Any]]]:
    executor = ferroloop.ToolExecutor()  # the default cap: 10 at a time
    executor.tool(name="noop", concurrency_safe=True)(noop_tool)
    return lambda: executor.run(TOOL_USES)


# ---- report ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=1460, help="network chunk size in bytes")
    parser.add_argument("--o200k", help="o200k_base.tiktoken (default: tiktoken-rs's copy in ~/.cargo)")
    args = parser.parse_args()

    data = anthropic_stream(42, 6_000_000)
    digest = hashlib.sha256(data).hexdigest()
    assert digest == RUST_WORKLOAD_SHA256, "the workload differs from the Rust bench crate's"
    chunks = chunks_of(data, args.chunk)
    mb = len(data) / 1e6
    print(f"workload: Anthropic-shaped stream, {len(data):,} bytes in {len(chunks):,} chunks of {args.chunk} B")
    print(f"python {sys.version.split()[0]}, ferroloop {ferroloop.__version__}, median of {args.runs} runs\n")

    rows: list[Row] = []

    # SSE alone.
    base_t, base_r = median_seconds(lambda: sse_ferroloop(chunks), args.runs)
    rows.append(("sse", "ferroloop.SseParser", base_t, None))
    for name, fn in [("httpx-sse", sse_httpx), ("anthropic SSEDecoder", sse_anthropic)]:
        t, r = median_seconds(lambda fn=fn: fn(chunks), args.runs)
        assert r == base_r, f"{name} disagrees: {r} != {base_r}"
        rows.append(("sse", name, t, f"{t / base_t:.1f}x slower than ferroloop"))

    # Decode + accumulate.
    if hasattr(ferroloop, "StreamDecoder"):
        f_t, f_r = median_seconds(lambda: decode_ferroloop(chunks), args.runs)
        a_t, a_r = median_seconds(lambda: decode_anthropic(chunks), max(1, args.runs // 2))
        assert f_r == a_r, f"final messages disagree: {f_r} != {a_r}"
        rows.append(("decode+accumulate", "ferroloop.StreamDecoder", f_t, None))
        rows.append(("decode+accumulate", "anthropic SSEDecoder+accumulate_event", a_t,
                     f"ferroloop {a_t / f_t:.1f}x faster (target >= 10x)"))
    else:
        rows.append(("decode+accumulate", "skipped: StreamDecoder not built", float("nan"), None))

    # Token counting.
    corpus = mixed_corpus(4 << 20)
    corpus_mb = len(corpus.encode()) / 1e6
    token_rows: list[tuple[str, float, int]] = []
    e_t, e_n = median_seconds(lambda: ferroloop.estimate_tokens(corpus, tokenizer="o200k"), args.runs)
    token_rows.append(("ferroloop.estimate_tokens (o200k)", e_t, e_n))
    if ferroloop.has_exact_counting():
        x_t, x_n = median_seconds(lambda: ferroloop.count_tokens(corpus, "o200k"), max(1, args.runs // 2))
        token_rows.append(("ferroloop.count_tokens (o200k, exact)", x_t, x_n))
    vocab = find_o200k(args.o200k)
    try:
        encoding = tiktoken_o200k(vocab) if vocab else None
    except ImportError:
        encoding = None
    if encoding is not None:
        t_t, t_n = median_seconds(lambda: len(encoding.encode_ordinary(corpus)), max(1, args.runs // 2))
        token_rows.append(("tiktoken o200k_base encode_ordinary", t_t, t_n))
        if ferroloop.has_exact_counting():
            assert x_n == t_n, f"exact counts disagree: ferroloop {x_n} != tiktoken {t_n}"
    for name, seconds, count in token_rows:
        if encoding is not None and name.startswith("ferroloop"):
            note = f"{t_t / seconds:.1f}x faster than tiktoken; {count / t_n:.3f} of its count"
        else:
            note = f"{count:,} tokens"
        rows.append(("tokens 4 MiB", name, seconds, note))
    if encoding is None:
        rows.append(("tokens 4 MiB", "skipped: tiktoken or o200k_base.tiktoken missing", float("nan"), None))

    # Executor overhead.
    g_t, g_n = exec_median(exec_gather, args.runs)
    rows.append(("executor 10k no-op", "asyncio.gather", g_t, None))
    if hasattr(ferroloop, "ToolExecutor"):
        for name, make in [
            ("ferroloop.ToolExecutor.run (cap 10,000)", exec_ferroloop),
            ("ferroloop.ToolExecutor.run (cap 10)", exec_ferroloop_capped),
        ]:
            e_t, e_n = exec_median(make, args.runs)
            assert e_n == g_n
            rows.append(("executor 10k no-op", name, e_t, f"{e_t / g_t:.2f}x asyncio.gather (target <= 1.5x)"))
    else:
        rows.append(("executor 10k no-op", "skipped: ToolExecutor not built", float("nan"), None))

    print(f"{'benchmark':<20} {'implementation':<40} {'median':>10} {'MB/s':>8}  ratio")
    for area, name, seconds, ratio in rows:
        size = corpus_mb if area == "tokens 4 MiB" else mb
        rate = f"{size / seconds:8.1f}" if area != "executor 10k no-op" and seconds == seconds else " " * 8
        shown = f"{seconds * 1e3:8.1f} ms" if seconds == seconds else " " * 11
        print(f"{area:<20} {name:<40} {shown:>10} {rate}  {ratio or ''}")


if __name__ == "__main__":
    main()
