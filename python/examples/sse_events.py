"""Parse a recorded Anthropic stream with ferroloop's SSE parser, in network-sized chunks.

Run from the repository root: ``python python/examples/sse_events.py``.
Type-checked by ``mypy --strict`` in ``scripts/test-python.sh`` (it exercises the stubs).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import ferroloop

FIXTURE = Path(__file__).resolve().parents[2] / "tests/fixtures/anthropic/tool_use_response.sse"


def main() -> None:
    raw = FIXTURE.read_bytes()
    parser = ferroloop.SseParser()
    counts: Counter[str] = Counter()
    text: list[str] = []
    for start in range(0, len(raw), 64):
        events: list[ferroloop.SseEvent] = parser.feed(raw[start : start + 64])
        for event in events:
            counts[event.event] += 1
            payload = json.loads(event.data)
            delta = payload.get("delta", {})
            if delta.get("type") == "text_delta":
                text.append(delta["text"])
    discarded: bool = parser.finish()
    retry: int | None = parser.retry
    try:
        parser.feed("not bytes")  # type: ignore[arg-type]
    except TypeError:
        pass
    except ferroloop.FerroloopError as err:
        raise SystemExit(f"unexpected: {err}") from err
    print(dict(counts))
    print("".join(text))
    print(f"discarded={discarded} retry={retry}")


if __name__ == "__main__":
    main()
