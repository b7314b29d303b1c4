"""Long use without growth: what a long-running server leaves behind after many executors,
runs and turns. Each test counts something (live objects through weakref after gc.collect(),
the runtime's live tasks, open file descriptors) rather than measuring memory."""

from __future__ import annotations

import asyncio
import gc
import os
import time
import weakref
from typing import Any, Awaitable, Callable

import pytest

import ferroloop
from conftest import ReplayServer, anthropic_events
from ferroloop import _native


def tool_use(id: str, name: str, input: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input or {}}


class Session:
    """A host object that owns an executor whose tools are its own bound methods: the executor
    refers to the methods, the methods to the session, the session to the executor."""

    def __init__(self) -> None:
        self.executor = ferroloop.ToolExecutor()
        self.executor.tool("search", concurrency_safe=self.is_safe)(self.search)
        self.calls = 0

    def is_safe(self, input: dict[str, Any]) -> bool:
        return True

    async def search(self, input: dict[str, Any]) -> str:
        self.calls += 1
        return "found"


def test_an_executor_whose_tools_refer_back_to_it_is_collected() -> None:
    # The native executor held its tool functions (and per-input safety predicates) without
    # telling the garbage collector: a cycle through them was never collected, so every
    # session object of a server (and everything it held) stayed in memory for good.
    sessions = [weakref.ref(Session()) for _ in range(10)]

    def closure_executor() -> weakref.ref[ferroloop.ToolExecutor]:
        executor = ferroloop.ToolExecutor()

        @executor.tool
        async def describe(input: dict[str, Any]) -> str:
            return repr(executor)

        return weakref.ref(executor)

    executors = [closure_executor() for _ in range(10)]
    gc.collect()
    assert sum(ref() is not None for ref in sessions) == 0
    assert sum(ref() is not None for ref in executors) == 0


def test_an_agent_whose_tools_refer_back_to_it_is_collected() -> None:
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)

    class AgentSession(Session):
        def __init__(self) -> None:
            super().__init__()
            self.agent = ferroloop.Agent(client, model="m", tools=[self.executor, "read"])

    sessions = [weakref.ref(AgentSession()) for _ in range(10)]
    gc.collect()
    assert sum(ref() is not None for ref in sessions) == 0


def test_a_running_turn_keeps_its_tools_working_after_the_executor_is_dropped() -> None:
    # The collector may only break a cycle through the tools when nothing else uses them: a
    # turn still running when its executor (and the session) became garbage keeps working.
    async def main() -> list[ferroloop.ToolResult]:
        started = asyncio.Event()
        release = asyncio.Event()

        async def slow(input: dict[str, Any]) -> str:
            started.set()
            await release.wait()
            return "found"

        session = Session()
        session.executor.tool("slow")(slow)
        turn = session.executor.turn()
        turn.submit(tool_use("a", "slow"))
        await started.wait()
        ref = weakref.ref(session)
        del session
        gc.collect()
        # A call submitted now (its function not in use by any call until it starts).
        turn.submit(tool_use("b", "search"))
        turn.seal()
        release.set()
        results = await turn.results()
        del turn
        gc.collect()
        assert ref() is None, "the session was collected once the turn was over"
        return results

    results = asyncio.run(main())
    assert [(r["content"], r["is_error"]) for r in results] == [("found", False)] * 2


def test_thousands_of_runs_leave_no_tasks_objects_or_descriptors_behind() -> None:
    class Marker:
        pass

    live: weakref.WeakSet[Marker] = weakref.WeakSet()
    executor = ferroloop.ToolExecutor(max_concurrency=10)

    @executor.tool(concurrency_safe=True)
    async def ok(input: dict[str, Any]) -> str:
        live.add(marker := Marker())
        del marker
        return "ok"

    @executor.tool(concurrency_safe=True)
    async def boom(input: dict[str, Any]) -> str:
        live.add(marker := Marker())
        raise ValueError(f"failed with {marker!r}")

    @executor.tool(concurrency_safe=True, timeout=0.005)
    async def hang(input: dict[str, Any]) -> str:
        live.add(marker := Marker())
        await asyncio.sleep(60)
        return repr(marker)

    @executor.tool(concurrency_safe=True)
    def plain(input: dict[str, Any]) -> str:
        live.add(marker := Marker())
        return repr(marker)

    uses = [tool_use(f"t{k}", name) for k, name in enumerate(["ok", "boom", "hang", "plain"])]

    async def rounds(n: int) -> None:
        for _ in range(n):
            await executor.run(uses)
            task = asyncio.ensure_future(executor.run(uses))
            await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            turn = executor.turn()
            for use in uses:
                turn.submit(use)
            turn.seal()
            async for _ in turn:
                break  # abandoned
            del turn

    async def main() -> tuple[int, int, int]:
        await rounds(20)  # warm up (pools, connections, caches)
        await asyncio.sleep(0.05)
        gc.collect()
        fds = len(os.listdir("/proc/self/fd"))
        await rounds(200)
        for _ in range(100):
            await asyncio.sleep(0.01)
            gc.collect()
            if _native._debug_alive_tasks() == 0 and not live:
                break
        return fds, len(os.listdir("/proc/self/fd")), _native._debug_alive_tasks()

    fds_before, fds_after, tasks = asyncio.run(main())
    gc.collect()
    assert tasks == 0, f"{tasks} runtime tasks outlived their runs"
    assert len(live) == 0, f"{len(live)} objects made by tools are still alive"
    assert fds_after <= fds_before


def test_a_call_whose_task_ignores_its_cancellation_and_is_collected_leaves_no_task() -> None:
    # Past its cleanup grace, a call whose task ignores its cancellation waits for its answer on
    # a runtime task of its own (for its cleanup). A task awaiting a future nobody else refers
    # to can never finish: the loop holds tasks weakly, so it is collected, and its call was
    # never answered: each such call (timed out, in a cancelled run, in a dropped turn) kept
    # that runtime task, its reply channel and the bridge to its loop for the process's life.
    class Marker:
        pass

    live: weakref.WeakSet[Marker] = weakref.WeakSet()
    started = 0

    async def stuck(input: dict[str, Any]) -> str:
        nonlocal started
        started += 1
        live.add(marker := Marker())
        while True:
            try:
                await asyncio.get_running_loop().create_future()
            except asyncio.CancelledError:
                continue
        return repr(marker)

    n = 20
    uses = [tool_use(f"t{k}", "stuck") for k in range(n)]

    async def settle(before: int) -> tuple[int, int]:
        for _ in range(200):
            await asyncio.sleep(0.01)
            gc.collect()
            if _native._debug_alive_tasks() <= before and not live:
                break
        return _native._debug_alive_tasks(), len(live)

    async def main() -> tuple[int, tuple[int, int], list[ferroloop.ToolResult]]:
        before = _native._debug_alive_tasks()
        executor = ferroloop.ToolExecutor(max_concurrency=n, cleanup_grace=0.001)
        executor.tool("stuck", concurrency_safe=True, timeout=0.005)(stuck)
        executor.tool("stuck_forever", concurrency_safe=True)(stuck)
        results = await executor.run(uses)
        # A cancelled run.
        task = asyncio.ensure_future(executor.run([dict(use, name="stuck_forever") for use in uses]))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if started == 2 * n:
                break
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        # Dropped turns, unsealed.
        for k in range(n):
            executor.turn().submit(tool_use(f"d{k}", "stuck"))
            await asyncio.sleep(0)
        return before, await settle(before), results

    before, (tasks, alive), results = asyncio.run(main())
    assert all(r["is_error"] and "timed out" in str(r["content"]) for r in results), results
    assert (tasks, alive) == (before, 0), f"{tasks - before} runtime tasks still wait for an answer"

    # Collected within its grace, the call's result stays its timeout: the run ends then,
    # not after the grace.
    async def within_grace() -> list[ferroloop.ToolResult]:
        executor = ferroloop.ToolExecutor(cleanup_grace=600)
        executor.tool("stuck", concurrency_safe=True, timeout=0.005)(stuck)
        run = asyncio.ensure_future(executor.run(uses[:2]))
        for _ in range(200):
            await asyncio.sleep(0.01)
            gc.collect()
            if run.done():
                break
        assert run.done(), "the run still waits for tasks that were collected"
        return run.result()

    results = asyncio.run(within_grace())
    assert [(r["is_error"], "timed out" in str(r["content"])) for r in results] == [(True, True)] * 2


class ToolTasks:
    """An executor whose tool `slow` never answers, and what its calls leave alive, seen
    through weak references: their tasks and an object each coroutine refers to."""

    def __init__(self) -> None:
        self.tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        self.markers: weakref.WeakSet[object] = weakref.WeakSet()
        self.started = 0

    def executor(self, timeout: float | None = None) -> ferroloop.ToolExecutor:
        executor = ferroloop.ToolExecutor()

        @executor.tool(concurrency_safe=True, timeout=timeout)
        async def slow(input: dict[str, Any]) -> str:
            class Marker:
                pass

            task = asyncio.current_task()
            assert task is not None
            self.tasks.add(task)
            self.markers.add(marker := Marker())
            self.started += 1
            await asyncio.sleep(3600)
            return repr(marker)

        return executor

    async def wait_started(self) -> None:
        for _ in range(2000):
            if self.started:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the tool never started")


def settle(alive: Callable[[], bool], runtime_tasks_before: int) -> tuple[bool, int]:
    """Collects until `alive()` is false and the runtime has no more tasks than before (or a
    generous while passed); returns both. A reference released on one of the runtime's threads
    is dropped at the next call into the extension (pyo3 defers it until it holds the
    interpreter): each round makes one before looking."""
    for _ in range(1000):
        tasks = _native._debug_alive_tasks()
        gc.collect()
        if not alive() and tasks <= runtime_tasks_before:
            break
        time.sleep(0.01)
    tasks = _native._debug_alive_tasks()
    gc.collect()
    return alive(), tasks


def closed_with_pending_tool_tasks(
    start: Callable[[ToolTasks], Awaitable[object]],
    caplog: pytest.LogCaptureFixture,
    before_close: Callable[[asyncio.AbstractEventLoop, Any], None] = lambda loop, held: None,
) -> None:
    """Runs `start` on a loop driven by hand (which returns once the tool runs, leaving what it
    started), closes the loop while the tool's task is pending, drops everything: nothing of
    the call may stay (the task, its coroutine's objects, the loop held by the bridge, the
    runtime's tasks), and the tool task's collection is not logged as destroyed while pending
    (ferroloop gave up on it)."""
    before = _native._debug_alive_tasks()
    tools = ToolTasks()
    loop = asyncio.new_event_loop()
    try:
        held = loop.run_until_complete(start(tools))
        assert len(tools.tasks) == 1 and not next(iter(tools.tasks)).done()
        before_close(loop, held)
    finally:
        loop.close()
    loop_ref = weakref.ref(loop)
    del loop, held

    alive, runtime_tasks = settle(lambda: bool(tools.tasks or tools.markers or loop_ref()), before)
    assert not tools.tasks, f"the tool's task is still alive: {list(tools.tasks)}"
    assert not tools.markers, "what the tool's coroutine refers to is still alive"
    assert loop_ref() is None, "the closed event loop is still alive (held by its bridge)"
    assert not alive and runtime_tasks <= before, f"{runtime_tasks - before} runtime tasks remain"
    # (A task of the caller's left pending, as the one awaiting a run, is logged: asyncio's rule.)
    assert not [
        r.getMessage()
        for r in caplog.records
        if "destroyed but it is pending" in r.getMessage() and ".slow()" in r.getMessage()
    ]


@pytest.mark.parametrize("cancelled", [False, True], ids=["running", "cancelled before the close"])
def test_a_loop_closed_while_a_turn_s_tool_runs_keeps_nothing_of_the_call(
    caplog: pytest.LogCaptureFixture, cancelled: bool
) -> None:
    # `asyncio.run` cancels and awaits the tasks left over; a loop driven by hand and closed
    # leaves them pending, and asyncio holds them no more. The bridge held the task, and the
    # call's reply channel (waiting in the bridge for the task's end) held the turn's state,
    # the executor's tools and so the bridge: the task, its coroutine and the loop stayed for
    # the process's life, even with the executor and the turn dropped.
    async def start(tools: ToolTasks) -> object:
        executor = tools.executor()
        turn = executor.turn()
        turn.submit(tool_use("a", "slow"))
        await tools.wait_started()
        return executor, turn

    def cancel(loop: asyncio.AbstractEventLoop, held: tuple[ferroloop.ToolExecutor, ferroloop.Turn]) -> None:
        # The task's cancellation is queued for the stopped loop, and dropped by its close
        # (with the flag saying a wake-up is queued still set: later work never woke the loop
        # nor learned it was closed).
        held[1].cancel()
        ready: Any = getattr(loop, "_ready")
        for _ in range(2000):
            if ready:
                return
            time.sleep(0.01)
        raise AssertionError("the task's cancellation was never queued for the loop")

    closed_with_pending_tool_tasks(start, caplog, cancel if cancelled else lambda loop, held: None)


def test_a_loop_closed_while_a_run_awaited_by_a_pending_task_times_its_tool_out_keeps_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A run awaited by a task left pending: its tool times out after the loop closed (or just
    # before, its answer waiting for a loop that never runs again). The Rust future behind the
    # run's asyncio future waited for a poll on the closed loop, holding that future, whose
    # done-callback holds the future's driver: dropped with the loop's last jobs now.
    async def start(tools: ToolTasks) -> object:
        executor = tools.executor(timeout=0.2)
        run = asyncio.ensure_future(executor.run([tool_use("a", "slow")]))
        await tools.wait_started()
        return executor, run

    closed_with_pending_tool_tasks(start, caplog)


def test_a_loop_closed_while_an_agent_s_python_tool_runs_keeps_nothing_of_the_call(
    replay: Callable[[dict[str, Any]], ReplayServer], caplog: pytest.LogCaptureFixture
) -> None:
    events = anthropic_events([tool_use("toolu_slow", "slow")], stop_reason="tool_use")
    server = replay({"responses": [{"body": {"events": events}}]})

    async def start(tools: ToolTasks) -> object:
        client = ferroloop.Client("anthropic", api_key="sk-test", base_url=server.url, from_env=False)
        agent = ferroloop.Agent(client, model="m", tools=tools.executor())
        run = agent.run("go")
        async for event in run:
            if event["type"] == "tool_started":
                break
        await tools.wait_started()
        return client, agent, run

    closed_with_pending_tool_tasks(start, caplog)


def test_a_loop_closed_with_an_idle_executor_keeps_nothing() -> None:
    before = _native._debug_alive_tasks()
    executor = ferroloop.ToolExecutor()

    @executor.tool
    async def quick(input: dict[str, Any]) -> str:
        return "ok"

    loop = asyncio.new_event_loop()
    try:
        results = loop.run_until_complete(executor.run([tool_use("a", "quick")]))
    finally:
        loop.close()
    assert [r["content"] for r in results] == ["ok"]
    loop_ref = weakref.ref(loop)
    del loop
    # The executor serves no loop now: it keeps working on another.
    assert [r["content"] for r in asyncio.run(executor.run([tool_use("b", "quick")]))] == ["ok"]
    del executor, quick
    alive, runtime_tasks = settle(lambda: loop_ref() is not None, before)
    assert not alive, "the closed event loop is still alive (held by its bridge)"
    assert runtime_tasks <= before
