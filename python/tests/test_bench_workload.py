"""The Python copy of the bench workload generator produces the Rust generator's exact bytes."""

from __future__ import annotations

import hashlib
import importlib.util

import ferroloop
from conftest import REPO


def test_workload_matches_the_rust_generator() -> None:
    spec = importlib.util.spec_from_file_location("workload", REPO / "benches/python/workload.py")
    assert spec is not None and spec.loader is not None
    workload = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(workload)
    data = workload.anthropic_stream(7, 200_000)
    # sha256 of `cargo run -p ferroloop-bench --example anthropic_workload -- 7 200000`.
    assert hashlib.sha256(data).hexdigest() == "f68fa0f9c42681abc291fbe0996b653809772d7193cae8cbf7974540acf33c17"
    events = ferroloop.SseParser().feed(data)
    assert events[0].event == "message_start" and events[-1].event == "message_stop"
    assert len(events) > 1000
