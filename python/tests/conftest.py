"""Shared helpers: paths to the cross-language fixtures under the repository's `tests/`."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / "tests"

FIXTURES = [
    "anthropic/basic_response",
    "anthropic/tool_use_response",
    "anthropic/incomplete_partial_json_response",
    "openai-chat/173417d55340",
    "openai-chat/2018feb66ae1",
    "openai-chat/4cc50a6135d2",
    "openai-chat/569c877e6942",
]


def fixture_bytes(name: str) -> bytes:
    """The raw bytes of a recorded stream, e.g. ``fixture_bytes("anthropic/basic_response")``."""
    return (SHARED / "fixtures" / f"{name}.sse").read_bytes()


def expected_sse_items(name: str) -> list[dict[str, Any]]:
    """The event list `ferroloop sse` prints for a fixture (`tests/sse/expected/*.jsonl`)."""
    path = SHARED / "sse" / "expected" / (name.replace("/", "-") + ".jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def conformance_vectors() -> list[tuple[str, bytes, list[dict[str, Any]]]]:
    """`tests/sse/conformance.json`: (name, input bytes, expected items)."""
    raw = json.loads((SHARED / "sse" / "conformance.json").read_text(encoding="utf-8"))
    out = []
    for vector in raw:
        if "input" in vector:
            data = vector["input"].encode("utf-8")
        else:
            data = base64.b64decode(vector["input_base64"])
        out.append((vector["name"], data, vector["expected"]))
    return out


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    """`data` in pieces of `size` bytes (the whole input when `size` is 0)."""
    if size <= 0:
        yield data
        return
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.fixture(params=FIXTURES)
def fixture_name(request: pytest.FixtureRequest) -> str:
    """Each recorded provider stream in turn."""
    return str(request.param)
