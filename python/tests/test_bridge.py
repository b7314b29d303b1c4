"""The asyncio bridge under the executor: Python functions called concurrently from Rust,
results in order, exceptions as outcomes, cancellation reaching the Python tasks."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import ferroloop
from ferroloop import _native


@pytest.mark.asyncio
async def test_results_come_back_in_request_order() -> None:
    async def slow(inp: dict[str, Any]) -> str:
        await asyncio.sleep(inp["delay"])
        return f"done {inp['n']}"

    delays = [0.05, 0.0, 0.03, 0.01]
    out = await _native._debug_gather([slow] * 4, [{"n": i, "delay": d} for i, d in enumerate(delays)])
    assert out == ["done 0", "done 1", "done 2", "done 3"]


@pytest.mark.asyncio
async def test_calls_run_concurrently_on_the_running_loop() -> None:
    loop = asyncio.get_running_loop()
    running = 0
    peak = 0
    threads: set[int] = set()

    async def tool(inp: dict[str, Any]) -> dict[str, Any]:
        nonlocal running, peak
        assert asyncio.get_running_loop() is loop
        threads.add(threading.get_ident())
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return {"n": inp["n"], "blocks": [1, 2.5, None, True]}

    out = await _native._debug_gather([tool] * 20, [{"n": i} for i in range(20)])
    assert out == [{"n": i, "blocks": [1, 2.5, None, True]} for i in range(20)]
    assert peak == 20
    assert threads == {threading.get_ident()}


@pytest.mark.asyncio
async def test_exceptions_become_error_outcomes() -> None:
    async def ok(_: Any) -> str:
        return "ok"

    async def boom(_: Any) -> str:
        raise ValueError("bad input")

    def not_async(_: Any) -> str:
        raise KeyError("sync failure before any await")

    async def unconvertible(_: Any) -> object:
        return object()

    out = await _native._debug_gather([ok, boom, not_async, unconvertible], [{}, {}, {}, {}])
    assert out[0] == "ok"
    assert out[1] == {"error": "ValueError: bad input"}
    assert out[2] == {"error": "KeyError: 'sync failure before any await'"}
    assert "cannot be converted to JSON" in out[3]["error"]


@pytest.mark.asyncio
async def test_cancelling_the_awaiting_task_cancels_the_python_tasks() -> None:
    started = asyncio.Event()
    cancelled: list[int] = []
    all_cancelled = asyncio.Event()

    async def forever(inp: dict[str, Any]) -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(inp["n"])
            if len(cancelled) == 3:
                all_cancelled.set()
            raise
        return "unreachable"

    task = asyncio.ensure_future(_native._debug_gather([forever] * 3, [{"n": i} for i in range(3)]))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(all_cancelled.wait(), 5)
    assert sorted(cancelled) == [0, 1, 2]


@pytest.mark.asyncio
async def test_timeout_around_the_awaitable_cancels_the_python_tasks() -> None:
    saw_cancel = asyncio.Event()

    async def forever(_: Any) -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            saw_cancel.set()
            raise
        return "unreachable"

    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(_native._debug_gather([forever], [{}]), 0.05)
    await asyncio.wait_for(saw_cancel.wait(), 5)


@pytest.mark.asyncio
async def test_a_task_cancelled_by_itself_is_reported_cancelled() -> None:
    async def self_cancel(_: Any) -> str:
        raise asyncio.CancelledError()

    assert await _native._debug_gather([self_cancel], [{}]) == [{"cancelled": True}]


@pytest.mark.asyncio
async def test_plain_functions_run_on_worker_threads_not_the_loop() -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []
    gate = threading.Barrier(3, timeout=5)

    def blocking(inp: dict[str, Any]) -> str:
        seen.append(threading.get_ident())
        gate.wait()  # all three run at once, or this times out
        return f"sync {inp['n']}"

    heartbeat = 0

    async def beat() -> None:
        nonlocal heartbeat
        while True:
            heartbeat += 1
            await asyncio.sleep(0.001)

    beater = asyncio.ensure_future(beat())
    out = await _native._debug_gather([blocking] * 3, [{"n": i} for i in range(3)], blocking=True)
    beater.cancel()
    assert out == ["sync 0", "sync 1", "sync 2"]
    assert loop_thread not in seen
    assert len(set(seen)) == 3


@pytest.mark.asyncio
async def test_plain_function_errors_become_error_outcomes() -> None:
    def boom(_: Any) -> str:
        raise RuntimeError("sync boom")

    assert await _native._debug_gather([boom], [{}], blocking=True) == [{"error": "RuntimeError: sync boom"}]


@pytest.mark.asyncio
async def test_a_panic_inside_a_future_is_an_internal_error() -> None:
    with pytest.raises(ferroloop.InternalError, match="deliberate panic in a future"):
        await _native._debug_panic_async()


def test_needs_a_running_loop() -> None:
    with pytest.raises(RuntimeError):
        _native._debug_gather([], [])


@pytest.mark.asyncio
async def test_many_calls() -> None:
    async def noop(inp: dict[str, Any]) -> int:
        return int(inp["i"])

    n = 5000
    out = await _native._debug_gather([noop] * n, [{"i": i} for i in range(n)])
    assert out == list(range(n))
