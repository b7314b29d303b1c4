"""Large inputs are estimated with the interpreter released, whatever their bytes-like type:
`estimate_tokens(bytes)` and `TextEstimator.feed(bytes)` held it for the whole estimate while
`str`, `bytearray` and `memoryview` released it.

The check is that another thread made progress during the call (in its middle half, so that
the switches at its entry and exit do not count), not a timing ratio: it holds on a loaded
machine, where the other thread may run little but does run."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Iterator

import pytest

import ferroloop

TEXT = "héllo wörld 你好 12345 ;;; \n".encode()


@pytest.fixture
def short_switch_interval() -> Iterator[None]:
    # The interpreter-holding thread gives the other one at most this long at each switch.
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(before)


def sized_input(call: Callable[[bytes], Any]) -> bytes:
    """An input on which `call` takes about 0.3 s (at most 128 MiB)."""
    probe = TEXT * (1024 * 1024 // len(TEXT))
    start = time.perf_counter()
    call(probe)
    elapsed = max(time.perf_counter() - start, 1e-4)
    repeat = min(max(int(0.3 / elapsed), 1), 128)
    return probe * repeat


def progress_during(call: Callable[[], Any]) -> tuple[int, float]:
    """How many ticks a watcher thread recorded in the middle half of `call`, and its duration."""
    ticks: list[float] = []
    stop = threading.Event()

    def watcher() -> None:
        last = 0.0
        while not stop.is_set():
            now = time.perf_counter()
            if now - last >= 1e-3:
                ticks.append(now)
                last = now

    thread = threading.Thread(target=watcher)
    thread.start()
    time.sleep(0.05)
    start = time.perf_counter()
    call()
    end = time.perf_counter()
    stop.set()
    thread.join()
    quarter = (end - start) / 4
    return sum(1 for tick in ticks if start + quarter < tick < end - quarter), end - start


def as_type(data: bytes, kind: str) -> Any:
    return {"bytes": data, "bytearray": bytearray(data), "memoryview": memoryview(data), "str": data.decode()}[kind]


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "str"])
def test_estimate_tokens_releases_the_interpreter(kind: str, short_switch_interval: None) -> None:
    data = sized_input(ferroloop.estimate_tokens)
    value = as_type(data, kind)
    ticks, elapsed = progress_during(lambda: ferroloop.estimate_tokens(value))
    assert ticks > 0, f"another thread did not run during a {elapsed:.3f} s estimate of {kind}"


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "str"])
def test_text_estimator_feed_releases_the_interpreter(kind: str, short_switch_interval: None) -> None:
    data = sized_input(lambda piece: ferroloop.TextEstimator().feed(piece))
    value = as_type(data, kind)
    estimator = ferroloop.TextEstimator()
    ticks, elapsed = progress_during(lambda: estimator.feed(value))
    assert ticks > 0, f"another thread did not run during a {elapsed:.3f} s feed of {kind}"
    assert estimator.estimate() == ferroloop.estimate_tokens(data)
