"""`ToolExecutor` through Python: every executor semantic re-checked with Python tools."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import ferroloop
from conftest import executor_with_slow_cleanups


def use(i: int | str, name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": input}


class Tracker:
    """Counts concurrently running calls and records start/finish order."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.log: list[str] = []

    def enter(self, label: str) -> None:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.log.append(f"start {label}")

    def leave(self, label: str) -> None:
        self.running -= 1
        self.log.append(f"end {label}")


@pytest.mark.asyncio
async def test_results_in_request_order_not_completion_order() -> None:
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def sleep(inp: dict[str, Any]) -> str:
        await asyncio.sleep(inp["s"])
        return f"slept {inp['s']}"

    results = await ex.run([use(0, "sleep", s=0.06), use(1, "sleep", s=0.0), use(2, "sleep", s=0.03)])
    assert [r["tool_use_id"] for r in results] == ["toolu_0", "toolu_1", "toolu_2"]
    assert [r["content"] for r in results] == ["slept 0.06", "slept 0.0", "slept 0.03"]
    assert all(r["type"] == "tool_result" and r["is_error"] is False for r in results)


@pytest.mark.asyncio
async def test_safe_calls_run_in_parallel_up_to_the_cap() -> None:
    ex = ferroloop.ToolExecutor(max_concurrency=3)
    track = Tracker()

    @ex.tool(concurrency_safe=True)
    async def work(inp: dict[str, Any]) -> str:
        track.enter(str(inp["n"]))
        await asyncio.sleep(0.02)
        track.leave(str(inp["n"]))
        return "ok"

    results = await ex.run([use(i, "work", n=i) for i in range(9)])
    assert len(results) == 9
    assert track.peak == 3


@pytest.mark.asyncio
async def test_unsafe_call_runs_alone_and_is_a_barrier() -> None:
    ex = ferroloop.ToolExecutor()
    track = Tracker()

    @ex.tool(concurrency_safe=True)
    async def read(inp: dict[str, Any]) -> str:
        track.enter(inp["n"])
        await asyncio.sleep(0.02)
        track.leave(inp["n"])
        return "r"

    @ex.tool  # default: not concurrency-safe
    async def write(inp: dict[str, Any]) -> str:
        track.enter(inp["n"])
        assert track.running == 1, "an unsafe call must run alone"
        await asyncio.sleep(0.02)
        track.leave(inp["n"])
        return "w"

    await ex.run([use(0, "read", n="r0"), use(1, "read", n="r1"), use(2, "write", n="w"), use(3, "read", n="r3")])
    log = track.log
    # Both reads finish before the write starts; the read after the write starts after it ends.
    assert log.index("start w") > max(log.index("end r0"), log.index("end r1"))
    assert log.index("start r3") > log.index("end w")


@pytest.mark.asyncio
async def test_concurrency_safe_may_depend_on_the_input() -> None:
    ex = ferroloop.ToolExecutor()
    track = Tracker()

    @ex.tool(concurrency_safe=lambda inp: not inp.get("write", False))
    async def fs(inp: dict[str, Any]) -> str:
        track.enter(str(inp["n"]))
        if inp.get("write"):
            assert track.running == 1
        await asyncio.sleep(0.02)
        track.leave(str(inp["n"]))
        return "ok"

    await ex.run([use(0, "fs", n=0), use(1, "fs", n=1), use(2, "fs", n=2, write=True)])
    assert track.peak == 2


@pytest.mark.asyncio
async def test_timeout_cancels_the_python_task_and_answers_with_an_error() -> None:
    ex = ferroloop.ToolExecutor(cleanup_grace=1.0)
    cancelled = asyncio.Event()

    @ex.tool(timeout=0.05)
    async def hang(inp: dict[str, Any]) -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    started = time.monotonic()
    (result,) = await ex.run([use(0, "hang")])
    assert time.monotonic() - started < 5
    assert result["is_error"] is True
    assert "time" in str(result["content"]).lower()
    await asyncio.wait_for(cancelled.wait(), 5)


@pytest.mark.asyncio
async def test_cancelling_the_awaiting_task_cancels_running_python_tools() -> None:
    ex = ferroloop.ToolExecutor()
    entered: list[str] = []
    both_running = asyncio.Event()
    seen: list[str] = []
    both = asyncio.Event()

    @ex.tool(concurrency_safe=True)
    async def hang(inp: dict[str, Any]) -> str:
        entered.append(inp["n"])
        if len(entered) == 2:
            both_running.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append(inp["n"])
            if len(seen) == 2:
                both.set()
            raise
        return "unreachable"

    task = asyncio.ensure_future(ex.run([use(0, "hang", n="a"), use(1, "hang", n="b")]))
    # Cancel once both tools run (a task cancelled before its first step never runs its body).
    await asyncio.wait_for(both_running.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(both.wait(), 5)
    assert sorted(seen) == ["a", "b"]


@pytest.mark.asyncio
async def test_a_cancelled_run_raises_once_its_tools_have_stopped() -> None:
    # run() raised CancelledError at once and the tools' cleanup ran on after it, where Node's
    # run({ signal }) rejects once the tools have settled.
    steps: list[str] = []
    ex, both = executor_with_slow_cleanups(steps)
    task = asyncio.ensure_future(ex.run([use(0, "slow"), use(1, "plain")]))
    await asyncio.wait_for(both.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    steps.append("raised")
    assert sorted(steps[:2]) == ["async tool stopped", "plain tool stopped"], steps
    assert steps[2:] == ["raised"], steps


@pytest.mark.asyncio
async def test_cancelling_a_cancelled_run_again_stops_waiting_for_its_tools() -> None:
    steps: list[str] = []
    ex, both = executor_with_slow_cleanups(steps)
    task = asyncio.ensure_future(ex.run([use(0, "slow"), use(1, "plain")]))
    await asyncio.wait_for(both.wait(), 5)
    task.cancel()
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert steps == [], "the second cancellation waited for the tools"
    await asyncio.sleep(0.6)
    assert sorted(steps) == ["async tool stopped", "plain tool stopped"]


@pytest.mark.asyncio
async def test_plain_functions_run_on_worker_threads_off_the_loop() -> None:
    ex = ferroloop.ToolExecutor()
    loop_thread = threading.get_ident()
    threads: list[int] = []
    barrier = threading.Barrier(2, timeout=5)
    ticks = 0

    @ex.tool(concurrency_safe=True)
    def blocking(inp: dict[str, Any]) -> str:
        threads.append(threading.get_ident())
        barrier.wait()  # both calls run at the same time or this raises
        time.sleep(0.05)  # blocks this worker thread, not the loop
        return f"done {inp['n']}"

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.ensure_future(tick())
    results = await ex.run([use(0, "blocking", n=0), use(1, "blocking", n=1)])
    ticker.cancel()
    assert [r["content"] for r in results] == ["done 0", "done 1"]
    assert loop_thread not in threads and len(set(threads)) == 2
    assert ticks >= 3, "the event loop kept running while the plain tools blocked"


@pytest.mark.asyncio
async def test_exceptions_inside_tools_become_is_error_results() -> None:
    ex = ferroloop.ToolExecutor()

    @ex.tool
    async def boom(inp: dict[str, Any]) -> str:
        raise ValueError("no such file: x.txt")

    @ex.tool
    def sync_boom(inp: dict[str, Any]) -> str:
        raise KeyError("missing")

    @ex.tool
    async def fine(inp: dict[str, Any]) -> str:
        return "fine"

    results = await ex.run([use(0, "boom"), use(1, "sync_boom"), use(2, "fine"), use(3, "unknown_tool")])
    assert results[0]["is_error"] and "ValueError: no such file: x.txt" in results[0]["content"]
    assert results[1]["is_error"] and "KeyError" in results[1]["content"]
    assert results[2] == {"type": "tool_result", "tool_use_id": "toolu_2", "content": "fine", "is_error": False}
    assert results[3]["is_error"] and "unknown_tool" in results[3]["content"]


@pytest.mark.asyncio
async def test_a_tool_raising_cancelled_error_itself_is_an_error_naming_it() -> None:
    # Not the run's cancellation: the tool's own CancelledError. The other failures the model
    # reads name the tool ("Tool 't' timed out ...", "Tool 't' was cancelled: ..."); this one
    # said only "the tool was cancelled".
    ex = ferroloop.ToolExecutor()

    @ex.tool
    async def gives_up(inp: dict[str, Any]) -> str:
        raise asyncio.CancelledError

    results = await ex.run([use(0, "gives_up")])
    assert results[0]["is_error"] is True
    assert str(results[0]["content"]).startswith("Tool 'gives_up' was cancelled: "), results[0]


@pytest.mark.asyncio
async def test_return_shapes() -> None:
    ex = ferroloop.ToolExecutor()

    @ex.tool
    async def shapes(inp: dict[str, Any]) -> Any:
        return inp["value"]

    values: list[Any] = [
        "text",
        [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        {"type": "text", "text": "one block"},
        {"content": "reported failure", "is_error": True},
        None,
        42,
    ]
    results = await ex.run([use(i, "shapes", value=v) for i, v in enumerate(values)])
    assert results[0]["content"] == "text"
    assert results[1]["content"] == values[1]
    assert results[2]["content"] == [{"type": "text", "text": "one block"}]
    assert results[3]["content"] == "reported failure" and results[3]["is_error"] is True
    assert results[4]["content"] == ""
    assert results[5]["content"] == "42"


@pytest.mark.asyncio
async def test_context_progress_and_ids() -> None:
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def report(inp: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        ctx.progress({"step": 1})
        assert not ctx.cancelled
        return f"{ctx.tool_use_id}@{ctx.index}"

    turn = ex.turn()
    turn.submit(use("x", "report"))
    turn.submit(use("y", "report"))
    turn.seal()
    events = [event async for event in turn]
    progress = [e for e in events if e["type"] == "progress"]
    assert sorted(e["tool_use_id"] for e in progress) == ["toolu_x", "toolu_y"]
    assert all(e["data"] == {"step": 1} for e in progress)
    results = [e["result"] for e in events if e["type"] == "result"]
    assert [r["content"] for r in results] == ["toolu_x@0", "toolu_y@1"]
    finished = [e for e in events if e["type"] == "finished"]
    assert {e["status"] for e in finished} == {"succeeded"}


@pytest.mark.asyncio
async def test_streaming_turn_starts_calls_before_the_seal() -> None:
    ex = ferroloop.ToolExecutor()
    started = asyncio.Event()

    @ex.tool(concurrency_safe=True)
    async def early(inp: dict[str, Any]) -> str:
        started.set()
        return "early"

    turn = ex.turn()
    turn.submit(use(0, "early"))
    # Not sealed, not iterated: the call must start anyway.
    await asyncio.wait_for(started.wait(), 5)
    turn.submit(use(1, "early"))
    results = await turn.results()
    assert [r["content"] for r in results] == ["early", "early"]
    with pytest.raises(ferroloop.ToolError):
        turn.submit(use(2, "early"))


@pytest.mark.asyncio
async def test_submit_takes_several_tool_uses_at_once_as_node_s() -> None:
    # Node's `turn.submit(a, b)`: several calls, in order, all or none.
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def echo(inp: dict[str, Any]) -> str:
        return f"echo {inp['n']}"

    turn = ex.turn()
    turn.submit(use(0, "echo", n=0), use(1, "echo", n=1))
    # A bad second entry: neither is submitted.
    with pytest.raises(TypeError):
        turn.submit(use(2, "echo", n=2), "not a tool use")  # type: ignore[arg-type]
    turn.submit(use(3, "echo", n=3))
    results = await turn.results()
    assert [r["tool_use_id"] for r in results] == ["toolu_0", "toolu_1", "toolu_3"]
    assert [r["content"] for r in results] == ["echo 0", "echo 1", "echo 3"]
    with pytest.raises(ferroloop.TurnSealedError):
        turn.submit(use(4, "echo", n=4), use(5, "echo", n=5))
    assert len(await turn.results()) == 3


@pytest.mark.asyncio
async def test_cancelled_turn_still_answers_every_call() -> None:
    ex = ferroloop.ToolExecutor(cleanup_grace=1.0)
    started = asyncio.Event()
    saw_cancel = asyncio.Event()

    @ex.tool
    async def hang(inp: dict[str, Any]) -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            saw_cancel.set()
            raise
        return "unreachable"

    turn = ex.turn()
    for i in range(3):
        turn.submit(use(i, "hang"))
    await asyncio.wait_for(started.wait(), 5)
    turn.cancel()
    turn.seal()
    results = await asyncio.wait_for(turn.results(), 10)
    assert [r["tool_use_id"] for r in results] == ["toolu_0", "toolu_1", "toolu_2"]
    assert all(r["is_error"] for r in results)
    await asyncio.wait_for(saw_cancel.wait(), 5)


@pytest.mark.asyncio
async def test_failing_shell_like_tool_cancels_its_siblings() -> None:
    ex = ferroloop.ToolExecutor(cleanup_grace=1.0)
    sibling_cancelled = asyncio.Event()

    @ex.tool(concurrency_safe=True, cancels_siblings_on_error=True)
    async def shell(inp: dict[str, Any]) -> str:
        if inp["fail"]:
            await asyncio.sleep(0.02)
            raise RuntimeError("exit 1")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            sibling_cancelled.set()
            raise
        return "unreachable"

    results = await asyncio.wait_for(ex.run([use(0, "shell", fail=False), use(1, "shell", fail=True)]), 10)
    assert all(r["is_error"] for r in results)
    await asyncio.wait_for(sibling_cancelled.wait(), 5)


@pytest.mark.asyncio
async def test_schema_validation_rejects_invalid_input() -> None:
    ex = ferroloop.ToolExecutor()
    calls = 0

    @ex.tool(schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    async def read(inp: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        return str(inp["path"])

    results = await ex.run([use(0, "read", path="a"), use(1, "read", path=3), use(2, "read")])
    assert results[0]["content"] == "a" and not results[0]["is_error"]
    assert results[1]["is_error"] and results[2]["is_error"]
    assert calls == 1


@pytest.mark.asyncio
async def test_schema_bounds_are_enforced() -> None:
    # What pydantic emits for `Field(ge=1, le=100)` and `Field(max_length=3)`: the bounds were
    # accepted and not checked, so the tool ran with 0.
    ex = ferroloop.ToolExecutor()
    calls = 0
    schema = {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "code": {"type": "string", "maxLength": 3},
        },
    }

    @ex.tool(schema=schema)
    async def lookup(inp: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        return "ok"

    results = await ex.run([use(0, "lookup", limit=1, code="abc"), use(1, "lookup", limit=0, code="abcd")])
    assert results[0]["content"] == "ok" and not results[0]["is_error"]
    assert results[1]["is_error"]
    assert results[1]["content"] == (
        "Invalid input for tool 'lookup': input.limit: must be at least 1, got 0; "
        "input.code: must have at most 3 characters, got 4"
    )
    assert calls == 1
    with pytest.raises(ferroloop.ToolError, match="multipleOf"):
        ex.tool(name="bad", schema={"multipleOf": 0})(lookup)


@pytest.mark.asyncio
async def test_schemas_as_pydantic_and_zod_write_them_are_enforced() -> None:
    # `$ref`, `anyOf` with null, `oneOf` and `pattern` were accepted and not checked: a wrong
    # Optional[Point] or a code off its pattern ran the tool.
    ex = ferroloop.ToolExecutor()
    calls = 0
    place_schema = {  # pydantic v2: Place(label: str, at: Optional[Point] = None)
        "$defs": {
            "Point": {
                "properties": {"x": {"title": "X", "type": "integer"}, "y": {"title": "Y", "type": "integer"}},
                "required": ["x", "y"],
                "title": "Point",
                "type": "object",
            }
        },
        "properties": {
            "label": {"title": "Label", "type": "string"},
            "at": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "default": None},
        },
        "required": ["label"],
        "title": "Place",
        "type": "object",
    }
    ticket_schema = {  # zod-to-json-schema
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"},
            "kind": {"oneOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "integer"}]},
            "again": {"$ref": "#/properties/code"},
        },
        "required": ["code"],
        "additionalProperties": False,
    }

    @ex.tool(schema=place_schema)
    async def place(inp: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        return "ok"

    @ex.tool(schema=ticket_schema)
    async def ticket(inp: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        return "ok"

    results = await ex.run(
        [
            use(0, "place", label="home", at={"x": 1, "y": 2}),
            use(1, "place", label="home", at=None),
            use(2, "place", label="home", at={"x": 1}),
            use(3, "place", label="home", at="here"),
            use(4, "ticket", code="ABC-12", kind=3, again="XYZ-1"),
            use(5, "ticket", code="abc", kind="c", again="x"),
        ]
    )
    assert [r["content"] for r in results[:2]] == ["ok", "ok"] and results[4]["content"] == "ok"
    assert results[2]["content"] == (
        "Invalid input for tool 'place': input.at: matches no alternative of `anyOf`; "
        'the closest is alternative 0; input.at: missing required property "y"'
    )
    assert results[3]["content"] == (
        "Invalid input for tool 'place': input.at: matches no alternative of `anyOf`: "
        "expected null or object, got string"
    )
    assert results[5]["content"] == (
        "Invalid input for tool 'ticket': input.code: must match the pattern \"^[A-Z]{3}-\\\\d+$\"; "
        "input.kind: matches no alternative of `oneOf`; the closest is alternative 0; "
        'input.kind: must be one of ["a","b"]; input.again: must match the pattern "^[A-Z]{3}-\\\\d+$"'
    )
    assert calls == 3
    # A reference that resolves to nothing, or only to itself, is refused when the tool registers.
    with pytest.raises(ferroloop.ToolError, match=r"`\$ref` \"#/\$defs/Missing\" does not resolve"):
        ex.tool(name="broken", schema={"properties": {"a": {"$ref": "#/$defs/Missing"}}})(place)
    with pytest.raises(ferroloop.ToolError, match="cycle"):
        ex.tool(name="loop", schema={"$ref": "#"})(place)


@pytest.mark.asyncio
async def test_tuple_schemas_register_and_numbers_match_enums_by_value() -> None:
    ex = ferroloop.ToolExecutor()

    # What pydantic v1 emits for `Tuple[int, str]`, and an enum of integers.
    schema = {
        "type": "object",
        "properties": {
            "point": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]},
            "level": {"enum": [1, 2, 3]},
        },
    }

    @ex.tool(schema=schema)
    async def place(inp: dict[str, Any]) -> str:
        return f"{inp['point']} {inp['level']}"

    results = await ex.run(
        [use(0, "place", point=[1, "a"], level=2.0), use(1, "place", point=["a", 1], level=1)]
    )
    assert results[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_0",
        "content": "[1, 'a'] 2.0",
        "is_error": False,
    }
    assert results[1]["is_error"]
    assert results[1]["content"] == (
        "Invalid input for tool 'place': input.point[0]: expected integer, got string; "
        "input.point[1]: expected string, got number"
    )


@pytest.mark.asyncio
async def test_a_timeout_message_is_not_spilled_by_a_small_result_limit(tmp_path: Path) -> None:
    ex = ferroloop.ToolExecutor(spill_dir=tmp_path)

    @ex.tool(timeout=0.05, max_result_chars=10)
    async def slow(inp: dict[str, Any]) -> str:
        await asyncio.sleep(10)
        return "never"

    (result,) = await ex.run([use(0, "slow")])
    assert result["is_error"]
    assert result["content"] == "Tool 'slow' timed out after 50ms"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.asyncio
async def test_large_results_are_spilled_to_a_file(tmp_path: Path) -> None:
    ex = ferroloop.ToolExecutor(spill_dir=tmp_path)

    @ex.tool(max_result_chars=1000)
    async def big(inp: dict[str, Any]) -> str:
        return "line\n" * 10_000

    (result,) = await ex.run([use(0, "big")])
    content = result["content"]
    assert isinstance(content, str) and len(content) < 10_000
    spilled = list(tmp_path.iterdir())
    assert len(spilled) == 1 and spilled[0].read_text() == "line\n" * 10_000
    assert str(spilled[0]) in content


@pytest.mark.asyncio
async def test_the_turn_budget_is_configurable(tmp_path: Path) -> None:
    """Three 3,000-character results: over an 8,500-character turn budget one is spilled (the
    first of the equally large); with the budget disabled, or the default, all come back whole."""

    async def run(**options: Any) -> list[ferroloop.ToolResult]:
        ex = ferroloop.ToolExecutor(spill_dir=tmp_path, **options)

        @ex.tool(concurrency_safe=True)
        async def text(inp: dict[str, Any]) -> str:
            return str(inp["c"]) * 3_000

        return await ex.run(
            [{"type": "tool_use", "id": f"t{i}", "name": "text", "input": {"c": c}} for i, c in enumerate("abc")]
        )

    limited = await run(turn_budget_chars=8_500)
    spilled = limited[0]["content"]
    assert isinstance(spilled, str) and spilled.startswith("<tool-output-truncated>")
    assert [r["content"] for r in limited[1:]] == ["b" * 3_000, "c" * 3_000]
    assert [p.read_text() for p in tmp_path.iterdir()] == ["a" * 3_000]
    whole = await run(turn_budget_chars=None)
    assert [r["content"] for r in whole] == [c * 3_000 for c in "abc"]
    # `math.inf` disables it too, as Node's `turnBudgetChars: Infinity`.
    unlimited = await run(turn_budget_chars=math.inf)
    assert [r["content"] for r in unlimited] == [c * 3_000 for c in "abc"]
    with pytest.raises(ValueError, match="turn_budget_chars"):
        ferroloop.ToolExecutor(turn_budget_chars=8_500.5)
    default = await run()
    assert [r["content"] for r in default] == [c * 3_000 for c in "abc"]
    assert _native_default() == 200_000


@pytest.mark.asyncio
async def test_an_infinite_result_limit_never_spills_like_nodes_infinity(tmp_path: Path) -> None:
    # Node takes `maxResultChars: Infinity` (a tool) and `defaultMaxResultChars: Infinity` (the
    # executor); Python had no way to lift a limit (None is the default).
    ex = ferroloop.ToolExecutor(spill_dir=tmp_path, max_result_chars=10, turn_budget_chars=None)

    @ex.tool(max_result_chars=math.inf)
    async def whole(inp: dict[str, Any]) -> str:
        return "x" * 60_000

    @ex.tool
    async def limited(inp: dict[str, Any]) -> str:
        return "y" * 100

    results = await ex.run([use(0, "whole"), use(1, "limited")])
    assert results[0]["content"] == "x" * 60_000
    assert results[1]["content"] != "y" * 100

    lifted = ferroloop.ToolExecutor(spill_dir=tmp_path, max_result_chars=math.inf, turn_budget_chars=None)

    @lifted.tool
    async def big(inp: dict[str, Any]) -> str:
        return "z" * 60_000

    assert (await lifted.run([use(0, "big")]))[0]["content"] == "z" * 60_000
    for bad in (1.5, -1, -math.inf, math.nan):
        with pytest.raises(ValueError):
            ex.tool(name=f"bad{bad}", max_result_chars=bad)(big)
        with pytest.raises(ValueError):
            ferroloop.ToolExecutor(max_result_chars=bad)


def _native_default() -> int:
    from ferroloop import _native

    return _native.DEFAULT_TURN_BUDGET_CHARS


def test_registration_errors() -> None:
    ex = ferroloop.ToolExecutor()

    @ex.tool
    async def one(inp: dict[str, Any]) -> str:
        return ""

    with pytest.raises(ValueError, match="already registered"):
        ex.tool(name="one")(one)
    with pytest.raises(TypeError):
        ex.tool(name="two", concurrency_safe="yes")(one)  # type: ignore[call-overload]
    with pytest.raises(ferroloop.ToolError, match="schema") as bad_schema:
        ex.tool(name="three", schema={"type": 12})(one)
    # Node's InvalidArgumentError for the same declaration.
    assert bad_schema.value.code == "invalid_argument"
    with pytest.raises(ValueError, match="^max_concurrency must be at least 1$"):
        ferroloop.ToolExecutor(max_concurrency=0)
    assert ex.tool_names == ["one"]


def test_an_empty_spill_dir_is_refused_like_node_and_c(tmp_path: Path) -> None:
    # C refused `"spill_dir": ""` while Python took it (and had no directory to spill into);
    # the core's ExecutorConfig.check now refuses it for every binding.
    with pytest.raises(ValueError, match="^spill_dir must not be empty"):
        ferroloop.ToolExecutor(spill_dir="")
    # "." is a directory (the current one), as any relative path.
    ferroloop.ToolExecutor(spill_dir=".")
    ferroloop.ToolExecutor(spill_dir=tmp_path)


def test_an_empty_tool_name_is_refused_like_node() -> None:
    # The core's registry refuses it, for Node's `tool({ name: '' }, fn)` and C's tools too;
    # Python once registered the tool and offered it to the model (which the provider rejects).
    ex = ferroloop.ToolExecutor()

    def nameless(inp: dict[str, Any]) -> str:
        return ""

    with pytest.raises(ValueError, match="^a tool name must not be empty$"):
        ex.tool("")(nameless)
    assert ex.tool_names == []


def test_a_tool_name_that_is_no_str_is_a_type_error_like_node() -> None:
    # `tool(name=5)` fell back to the function's name without a word; Node refuses
    # `tool({ name: 5 }, fn)` (InvalidArgumentError).
    ex = ferroloop.ToolExecutor()

    def named(inp: dict[str, Any]) -> str:
        return ""

    for name in [5, b"bytes", ["list"]]:
        with pytest.raises(TypeError, match="^tool name must be a str, got "):
            ex.tool(name=name)(named)  # type: ignore[call-overload]
    assert ex.tool_names == []


@pytest.mark.asyncio
async def test_malformed_tool_uses_are_rejected_before_running() -> None:
    ex = ferroloop.ToolExecutor()
    with pytest.raises(TypeError):
        await ex.run(["not a dict"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="name"):
        await ex.run([{"id": "x", "input": {}}])


@pytest.mark.asyncio
async def test_a_tool_use_without_an_input_runs_its_tool_with_an_empty_object() -> None:
    # The core's rule (ferroloop::exec::ToolUse), as Node and C apply it: a model's call to a
    # tool without parameters may carry no input at all. An explicit None stays an input, and
    # an invalid one (not an object).
    ex = ferroloop.ToolExecutor()
    seen: list[tuple[str, Any]] = []

    @ex.tool()
    def plain(inp: Any) -> str:
        seen.append(("plain", inp))
        return "ran"

    @ex.tool(schema={"type": "object", "properties": {"path": {"type": "string"}}})
    def typed(inp: Any) -> str:
        seen.append(("typed", inp))
        return "ran"

    @ex.tool(concurrency_safe=lambda inp: "path" not in inp)
    def picky(inp: Any) -> str:
        seen.append(("picky", inp))
        return "ran"

    bare = [{"type": "tool_use", "id": f"b{i}", "name": name} for i, name in enumerate(["plain", "typed", "picky"])]
    results = await ex.run(bare)
    assert [(r["tool_use_id"], r["is_error"], r["content"]) for r in results] == [
        ("b0", False, "ran"),
        ("b1", False, "ran"),
        ("b2", False, "ran"),
    ]
    assert seen == [("plain", {}), ("typed", {}), ("picky", {})]

    turn = ex.turn()
    turn.submit({"id": "t0", "name": "plain"})
    turn.submit({"id": "t1", "name": "typed", "input": None})
    turn.seal()
    results = await turn.results()
    assert results[0]["content"] == "ran" and not results[0]["is_error"]
    assert results[1]["is_error"]


@pytest.mark.asyncio
async def test_ten_thousand_calls() -> None:
    ex = ferroloop.ToolExecutor(max_concurrency=10_000)

    @ex.tool(concurrency_safe=True)
    async def noop(inp: dict[str, Any]) -> str:
        return "ok"

    results = await ex.run([use(i, "noop") for i in range(10_000)])
    assert len(results) == 10_000
    assert results[-1]["tool_use_id"] == "toolu_9999"
    assert all(r["content"] == "ok" for r in results)


@pytest.mark.asyncio
async def test_streaming_turn_with_per_input_safety_and_progress_does_not_deadlock() -> None:
    # The spawned turn's driver thread calls the Python safety predicate while the loop thread
    # submits and reports progress: neither may wait for the other.
    ex = ferroloop.ToolExecutor(max_concurrency=4)

    @ex.tool(concurrency_safe=lambda inp: inp["n"] % 3 != 0)
    async def step(inp: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        for _ in range(3):
            ctx.progress({"n": inp["n"]})
            await asyncio.sleep(0)
        return str(inp["n"])

    turn = ex.turn()
    for i in range(30):
        turn.submit(use(i, "step", n=i))
        await asyncio.sleep(0)
    turn.seal()
    results = []
    async for event in turn:
        if event["type"] == "result":
            results.append(event["result"]["content"])
    assert results == [str(i) for i in range(30)]


@pytest.mark.asyncio
async def test_calls_finishing_at_once_and_later_mix_in_one_batch() -> None:
    # Calls that finish in their first step are answered by the batch's sweep; the others by
    # their done-callback: both kinds, interleaved, keep request order and their own values.
    ex = ferroloop.ToolExecutor(max_concurrency=1000)

    @ex.tool(concurrency_safe=True)
    async def maybe_wait(inp: dict[str, Any]) -> str:
        for _ in range(inp["steps"]):
            await asyncio.sleep(0)
        return f"{inp['n']} after {inp['steps']}"

    uses = [use(n, "maybe_wait", n=n, steps=n % 3) for n in range(300)]
    results = await ex.run(uses)
    assert [r["content"] for r in results] == [f"{n} after {n % 3}" for n in range(300)]
    assert not any(r["is_error"] for r in results)


@pytest.mark.asyncio
async def test_each_async_tool_runs_in_its_own_task_and_context() -> None:
    # No shortcut around the task: every call sees its own current task (so asyncio.timeout and
    # TaskGroup work in a tool's first step) and a context variable set by one call stays there.
    import contextvars

    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")
    ex = ferroloop.ToolExecutor(max_concurrency=100)
    caller = asyncio.current_task()
    tasks: list[asyncio.Task[Any] | None] = []

    @ex.tool(concurrency_safe=True)
    async def probe(inp: dict[str, Any]) -> str:
        before = seen.get()
        seen.set(str(inp["n"]))
        tasks.append(asyncio.current_task())
        if sys.version_info >= (3, 11):  # needs the current task in the tool's first step
            async with asyncio.timeout(5):
                await asyncio.sleep(0)
        return f"{before} {seen.get()}"

    results = await ex.run([use(n, "probe", n=n) for n in range(20)])
    assert [r["content"] for r in results] == [f"unset {n}" for n in range(20)]
    assert len({id(t) for t in tasks}) == 20 and caller not in tasks and None not in tasks
    assert seen.get() == "unset"


@pytest.mark.asyncio
async def test_inputs_and_results_convert_as_json() -> None:
    ex = ferroloop.ToolExecutor()
    received: list[Any] = []

    @ex.tool(concurrency_safe=True)
    async def echo(inp: dict[str, Any]) -> dict[str, Any]:
        received.append(inp)
        return {"content": [{"type": "text", "text": "x", "extra": inp["value"]}]}

    class Text(str):
        pass

    values: list[Any] = [
        None, True, False, 0, -7, 2**63 - 1, 2**64 - 1, 1.5, "naïve 🚀", Text("sub"),
        [1, [2, [3]]], (1, "two"), {"nested": {"k": [None, {"x": 1.0}]}},
    ]
    expected: list[Any] = [
        None, True, False, 0, -7, 2**63 - 1, 2**64 - 1, 1.5, "naïve 🚀", "sub",
        [1, [2, [3]]], [1, "two"], {"nested": {"k": [None, {"x": 1.0}]}},
    ]
    results = await ex.run([use(i, "echo", value=v) for i, v in enumerate(values)])
    assert [r["is_error"] for r in results] == [False] * len(values)
    contents = [r["content"] for r in results]
    assert [c[0]["extra"] for c in contents if isinstance(c, list)] == expected
    assert [inp["value"] for inp in received] == expected
    assert all(type(inp["value"]) is type(e) for inp, e in zip(received, expected))


@pytest.mark.asyncio
async def test_unconvertible_or_too_deep_values_are_errors_not_crashes() -> None:
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def give(inp: dict[str, Any]) -> Any:
        if inp["what"] == "deep":
            value: Any = "leaf"
            for _ in range(100_000):
                value = [value]
            return value
        if inp["what"] == "int-keys":
            return {"content": "ok", "meta": {1: "one"}}
        return {"content": object()}

    results = await ex.run([use(0, "give", what="deep"), use(1, "give", what="object"),
                            use(2, "give", what="int-keys")])
    assert results[0]["is_error"] and "nested more than" in results[0]["content"]
    assert results[1]["is_error"] and "cannot be converted to JSON" in results[1]["content"]
    # Non-str keys go through the general converter, as before (JSON has only string keys).
    assert results[2]["is_error"] and "cannot be converted to JSON" in results[2]["content"]

    deep: Any = {}
    for _ in range(100_000):
        deep = {"d": deep}
    # An input that deep is its own call's error (it failed the whole run), naming the limit.
    [result] = await ex.run([use(3, "give", what=deep)])
    assert result["is_error"] and "the input cannot be sent as JSON" in result["content"]
    assert "nested more than" in result["content"]


@pytest.mark.asyncio
async def test_context_names_the_tool_like_node() -> None:
    # Node's `ctx.name`: one function registered under two names can tell which was called.
    ex = ferroloop.ToolExecutor()

    def which(inp: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        return ctx.name

    ex.tool("first")(which)
    ex.tool("second")(which)
    results = await ex.run([use("a", "first"), use("b", "second")])
    assert [r["content"] for r in results] == ["first", "second"]


@pytest.mark.asyncio
async def test_a_plain_tool_that_overruns_its_timeout_gets_the_timeout_result() -> None:
    # A plain function runs on a worker thread: the timer fires on time even though the
    # function cannot be interrupted, and its late answer is not taken as a success (as for a
    # synchronous JavaScript tool that blocks the event loop).
    ex = ferroloop.ToolExecutor(cleanup_grace=1.0)

    @ex.tool(timeout=0.05)
    def busy(inp: dict[str, Any]) -> str:
        time.sleep(0.3)
        return "done too late"

    @ex.tool(timeout=5)
    def quick(inp: dict[str, Any]) -> str:
        time.sleep(0.01)
        return "done in time"

    late, in_time = await ex.run([use(0, "busy"), use(1, "quick")])
    assert late == {
        "type": "tool_result",
        "tool_use_id": "toolu_0",
        "content": "Tool 'busy' timed out after 50ms",
        "is_error": True,
    }
    assert in_time["content"] == "done in time" and in_time["is_error"] is False


def hanging_tools(ex: ferroloop.ToolExecutor) -> tuple[asyncio.Event, list[str], list[str]]:
    """Registers ``hang`` (an async tool waiting forever); returns the event set when one
    starts, the calls that started, and the calls whose task saw ``CancelledError``."""
    started = asyncio.Event()
    entered: list[str] = []
    cancelled: list[str] = []

    @ex.tool(concurrency_safe=True)
    async def hang(inp: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        entered.append(ctx.tool_use_id)
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(ctx.tool_use_id)
            raise
        return "unreachable"

    return started, entered, cancelled


@pytest.mark.asyncio
async def test_aclose_after_leaving_the_loop_cancels_the_turn_and_answers_every_call() -> None:
    ex = ferroloop.ToolExecutor(cleanup_grace=1.0)
    _, entered, cancelled = hanging_tools(ex)
    turn = ex.turn()
    turn.submit(use(0, "hang"))
    turn.submit(use(1, "hang"))
    started = 0
    async for event in turn:
        if event["type"] == "started":
            started += 1
            if started == 2:
                break
    for _ in range(500):  # until both tool tasks are inside their body
        if len(entered) == 2:
            break
        await asyncio.sleep(0.01)
    await turn.aclose()
    # The iteration is over (as an async generator's after aclose()) ...
    assert [event async for event in turn] == []
    # ... and every call still gets exactly one result.
    results = await asyncio.wait_for(turn.results(), 10)
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [("toolu_0", True), ("toolu_1", True)]
    assert sorted(cancelled) == ["toolu_0", "toolu_1"]
    with pytest.raises(ferroloop.ToolError):
        turn.submit(use(2, "hang"))
    await turn.aclose()  # idempotent


@pytest.mark.asyncio
async def test_leaving_an_async_with_turn_cancels_its_unfinished_calls() -> None:
    ex = ferroloop.ToolExecutor(cleanup_grace=1.0)
    started, _, cancelled = hanging_tools(ex)
    async with ex.turn() as turn:
        turn.submit(use(0, "hang"))
        await asyncio.wait_for(started.wait(), 5)
    results = await asyncio.wait_for(turn.results(), 10)
    assert results[0]["is_error"] is True
    assert cancelled == ["toolu_0"]

    @ex.tool
    def fine(inp: dict[str, Any]) -> str:
        return "fine"

    # A turn already answered is left as it is.
    async with ex.turn() as done:
        done.submit(use(1, "fine"))
        assert [r["content"] for r in await done.results()] == ["fine"]


@pytest.mark.asyncio
async def test_an_abandoned_turn_cancels_its_tool_tasks() -> None:
    ex = ferroloop.ToolExecutor(cleanup_grace=1.0)
    started, _, cancelled = hanging_tools(ex)
    turn = ex.turn()
    turn.submit(use(0, "hang"))
    await asyncio.wait_for(started.wait(), 5)
    # Never sealed, never drained: dropping it must not leave the tool task running forever.
    del turn
    gc.collect()
    for _ in range(500):
        if cancelled:
            break
        await asyncio.sleep(0.01)
    assert cancelled == ["toolu_0"]


@pytest.mark.asyncio
async def test_an_answer_delivered_before_the_turn_is_cancelled_stands() -> None:
    # The tool answers in its first step and queues the cancellation on the loop: the answer
    # reaches the executor first, the cancellation right after it, before or after the executor
    # polls the call again. The order decides: the tool's answer stands.
    ex = ferroloop.ToolExecutor()
    turns: list[Any] = []

    @ex.tool
    async def quick(inp: dict[str, Any]) -> str:
        asyncio.get_running_loop().call_soon(turns[0].cancel)
        return "done"

    for _ in range(20):
        turns[:] = [ex.turn()]
        turns[0].submit(use(0, "quick"))
        turns[0].seal()
        [result] = await asyncio.wait_for(turns[0].results(), 10)
        assert result == {
            "type": "tool_result",
            "tool_use_id": "toolu_0",
            "content": "done",
            "is_error": False,
        }


@pytest.mark.asyncio
async def test_a_plain_function_answer_delivered_before_the_turn_is_cancelled_stands() -> None:
    # The plain function answers on its worker thread while the turn's task is held in the
    # concurrency question about the next call (asked on that task); the question waits until
    # the answer was given, then cancels the turn: the executor observes the cancellation before
    # it polls the answered call again. The order decides: the answer stands. (Before the
    # plain functions' answers went through the core's answer channel, no order was reported
    # and the call was answered cancelled.)
    ex = ferroloop.ToolExecutor()
    turns: list[Any] = []
    asking = threading.Event()
    returning = threading.Event()

    @ex.tool(concurrency_safe=True)
    def quick(inp: dict[str, Any]) -> str:
        asking.wait(10)
        returning.set()
        return "done"

    def ask(inp: dict[str, Any]) -> bool:
        asking.set()
        returning.wait(10)
        time.sleep(0.2)  # the worker thread has returned the answer by now
        turns[0].cancel()
        return True

    @ex.tool(concurrency_safe=ask)
    def other(inp: dict[str, Any]) -> str:
        return "other"

    for _ in range(3):
        asking.clear()
        returning.clear()
        turns[:] = [ex.turn()]
        turns[0].submit(use(0, "quick"))
        # Submitted once the first call runs (waits for the question), so that the question is
        # asked while its answer is on the way.
        await asyncio.sleep(0.05)
        turns[0].submit(use(1, "other"))
        turns[0].seal()
        results = await asyncio.wait_for(turns[0].results(), 10)
        assert results[0] == {
            "type": "tool_result",
            "tool_use_id": "toolu_0",
            "content": "done",
            "is_error": False,
        }
        assert results[1]["is_error"] is True


@pytest.mark.asyncio
async def test_a_plain_function_that_saw_the_cancellation_is_reported_cancelled() -> None:
    ex = ferroloop.ToolExecutor(cleanup_grace=5.0)
    started = threading.Event()
    saw_cancel = threading.Event()

    @ex.tool
    def polite(inp: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        started.set()
        deadline = time.monotonic() + 10
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        if ctx.cancelled:
            saw_cancel.set()
        return "stopped"

    turn = ex.turn()
    turn.submit(use(0, "polite"))
    turn.seal()
    await asyncio.to_thread(started.wait, 5)
    turn.cancel()
    [result] = await asyncio.wait_for(turn.results(), 10)
    assert saw_cancel.is_set()
    assert result["is_error"] is True
    assert "cancelled" in result["content"]


@pytest.mark.asyncio
async def test_a_tool_that_returns_after_it_saw_the_cancellation_is_reported_cancelled() -> None:
    ex = ferroloop.ToolExecutor(cleanup_grace=5.0)
    started = asyncio.Event()
    saw_cancel = asyncio.Event()

    @ex.tool
    async def polite(inp: dict[str, Any]) -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            saw_cancel.set()
        return "stopped"

    turn = ex.turn()
    turn.submit(use(0, "polite"))
    turn.seal()
    await asyncio.wait_for(started.wait(), 5)
    turn.cancel()
    [result] = await asyncio.wait_for(turn.results(), 10)
    assert saw_cancel.is_set()
    assert result["is_error"] is True
    assert "cancelled" in result["content"]


@pytest.mark.asyncio
async def test_a_followed_turns_results_have_the_turn_budget_applied_as_in_node(tmp_path: Path) -> None:
    # The results of a streaming turn whose events were followed are the ones to send back: the
    # turn budget applies to them, as to run()'s (Node's turn.results() gave them unbudgeted).
    ex = ferroloop.ToolExecutor(spill_dir=tmp_path, turn_budget_chars=8_500)

    @ex.tool(concurrency_safe=True)
    async def text(inp: dict[str, Any]) -> str:
        return str(inp["c"]) * 3_000

    turn = ex.turn()
    for i, c in enumerate("abc"):
        turn.submit({"type": "tool_use", "id": f"t{i}", "name": "text", "input": {"c": c}})
    turn.seal()
    streamed = [event["result"] for event in [e async for e in turn] if event["type"] == "result"]
    assert [r["content"] for r in streamed] == [c * 3_000 for c in "abc"]
    results = await turn.results()
    spilled = results[0]["content"]
    assert isinstance(spilled, str) and spilled.startswith("<tool-output-truncated>")
    assert [r["content"] for r in results[1:]] == ["b" * 3_000, "c" * 3_000]


@pytest.mark.asyncio
async def test_partials_of_async_and_plain_functions_run_as_such() -> None:
    # A partial's own `__call__` is a plain method: a partial of an `async def` was taken for a
    # plain function, and every call failed ("the tool's plain function returned a coroutine").
    ex = ferroloop.ToolExecutor()

    async def greet_async(greeting: str, inp: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        return f"{greeting}, {inp['who']}"

    def greet_plain(greeting: str, inp: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        return f"{greeting}, {inp['who']} ({ctx.name})"

    ex.tool("hello_async")(functools.partial(greet_async, "Hello"))
    ex.tool("hello_plain")(functools.partial(greet_plain, "Hi"))
    results = await ex.run([use(0, "hello_async", who="Ada"), use(1, "hello_plain", who="Bob")])
    assert [(r["content"], r["is_error"]) for r in results] == [
        ("Hello, Ada", False),
        ("Hi, Bob (hello_plain)", False),
    ]
    # Without a name there is none to take: a clear TypeError, not an AttributeError.
    with pytest.raises(TypeError, match=r"tool\(name=\.\.\.\)"):
        ex.tool(functools.partial(greet_async, "Hey"))


@pytest.mark.asyncio
async def test_a_list_of_plain_values_is_sent_as_its_json_text() -> None:
    # Not content blocks: sent as they were, Anthropic answered the tool_result with a 400.
    ex = ferroloop.ToolExecutor()

    @ex.tool
    async def files(inp: dict[str, Any]) -> Any:
        return inp["items"]

    results = await ex.run([use(0, "files", items=["a.txt", "b.txt"]),
                            use(1, "files", items=[{"type": "text", "text": "block"}])])
    assert results[0]["content"] == '["a.txt","b.txt"]' and not results[0]["is_error"]
    assert results[1]["content"] == [{"type": "text", "text": "block"}]


@pytest.mark.asyncio
async def test_results_leaves_the_events_to_a_task_iterating_the_turn() -> None:
    # A UI task follows the turn while the main task awaits results(): results() used to drain
    # the events itself, and the UI task saw two `started` events of the twelve.
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def work(inp: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        for i in range(3):
            await asyncio.sleep(0.02)
            ctx.progress(i)
        return f"done {inp['n']}"

    async with ex.turn() as turn:
        seen: list[ferroloop.TurnEvent] = []

        async def follow() -> None:
            async for event in turn:
                seen.append(event)

        follower = asyncio.create_task(follow())
        for n in range(3):
            turn.submit(use(n, "work", n=n))
        await asyncio.sleep(0.01)
        results = await turn.results()
        await asyncio.wait_for(follower, 10)
    assert [r["content"] for r in results] == ["done 0", "done 1", "done 2"]
    counts = {kind: sum(1 for e in seen if e["type"] == kind) for kind in ("started", "progress", "finished", "result")}
    assert counts == {"started": 3, "progress": 9, "finished": 3, "result": 3}
    assert [e["index"] for e in seen if e["type"] == "result"] == [0, 1, 2]


@pytest.mark.asyncio
async def test_a_second_task_iterating_a_turn_at_once_is_refused() -> None:
    # As AgentRun and MessageStream (and async generators): each task would get some events.
    ex = ferroloop.ToolExecutor()

    @ex.tool
    async def wait(inp: dict[str, Any]) -> str:
        await asyncio.sleep(0.05)
        return "ok"

    async with ex.turn() as turn:
        turn.submit(use(0, "wait"))
        first = asyncio.ensure_future(turn.__anext__())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="already being iterated by another task"):
            await turn.__anext__()
        assert (await first)["type"] == "started"
        turn.seal()
        assert [e["type"] async for e in turn] == ["finished", "result"]


@pytest.mark.asyncio
async def test_is_error_is_read_as_python_reads_a_condition() -> None:
    # `"is_error": 1` or `"yes"` was taken as False (only a JSON true counted), so a failure
    # reached the model as a success; Node reads any truthy value.
    ex = ferroloop.ToolExecutor()

    @ex.tool
    async def answer(inp: dict[str, Any]) -> Any:
        return {"content": "text", "is_error": inp["flag"]}

    flags: list[Any] = [True, 1, "yes", [0], False, 0, "", None, [], {}]
    results = await ex.run([use(i, "answer", flag=flag) for i, flag in enumerate(flags)])
    assert [r["is_error"] for r in results] == [bool(flag) for flag in flags]


@pytest.mark.asyncio
async def test_a_result_whose_content_is_none_is_empty_text_as_a_none_result_is() -> None:
    # `{"content": None}` was sent as the text "null" where `None` itself is empty text, and
    # Node sends `{ content: null }` as "" too.
    ex = ferroloop.ToolExecutor()

    @ex.tool
    async def answer(inp: dict[str, Any]) -> Any:
        return {"content": None, "is_error": inp["flag"]}

    results = await ex.run([use(0, "answer", flag=False), use(1, "answer", flag=True)])
    assert [(r["content"], r["is_error"]) for r in results] == [("", False), ("", True)]


@pytest.mark.asyncio
async def test_an_input_that_cannot_be_sent_is_its_call_s_error_and_the_others_run() -> None:
    # One such input failed the whole run with a ValueError naming neither the call nor the
    # field, and no call ran; Node answers such a call in its place and runs the others.
    import datetime

    ex = ferroloop.ToolExecutor()
    ran: list[str] = []

    @ex.tool(name="t")
    async def t(inp: dict[str, Any]) -> str:
        ran.append(inp["k"])
        return "ok"

    uses = [
        {"id": "a", "name": "t", "input": {"k": "a"}},
        {"id": "b", "name": "t", "input": {"k": datetime.date(2020, 1, 1)}},
        {"id": "c", "name": "t", "input": {"k": 2**70}},
        {"id": "d", "name": "t", "input": {"k": "d"}},
        {"id": "e", "name": "nope", "input": {"k": object()}},
    ]
    results = await ex.run(uses)
    assert [r["tool_use_id"] for r in results] == ["a", "b", "c", "d", "e"]
    assert [r.get("is_error", False) for r in results] == [False, True, True, False, True]
    for result in results[1:3]:
        assert str(result["content"]).startswith("Invalid input for tool 't': the input cannot be sent as JSON: ")
    assert str(results[4]["content"]).startswith("Unknown tool 'nope'")
    assert sorted(ran) == ["a", "d"]
    # A streaming turn answers it the same way.
    turn = ex.turn()
    turn.submit(uses[0], uses[1])
    turn.seal()
    streamed = [event async for event in turn]
    finished = [e for e in streamed if e["type"] == "finished"]
    assert [(e["tool_use_id"], e["status"]) for e in finished if e["tool_use_id"] == "b"] == [("b", "rejected")]
    # One tool_use dict instead of a list is refused by name (its keys were read as tool uses).
    with pytest.raises(TypeError, match="tool_uses must be a list of tool_use dicts, not one dict"):
        await ex.run(uses[0])  # type: ignore[arg-type]


def nested_lists(containers: int) -> Any:
    """`containers` lists, one in the other, around a str."""
    value: Any = "leaf"
    for _ in range(containers):
        value = [value]
    return value


@pytest.mark.asyncio
async def test_values_nest_as_deep_as_node_and_c_read_them_and_no_deeper() -> None:
    # Python's limit was 512 levels where Node and C read JSON with serde_json's (127 arrays
    # or objects; the 128th is refused): a tool result Python sent was refused in Node.
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def give(inp: dict[str, Any]) -> Any:
        return nested_lists(inp["n"])

    ok, deep = await ex.run([use(0, "give", n=127), use(1, "give", n=128)])
    assert not ok["is_error"], ok
    assert deep["is_error"] and "nested more than 127 levels" in deep["content"], deep
    # A tool input given from Python (its dict is one level): the same limit.
    [result] = await ex.run([use(2, "give", n=1, deep=nested_lists(126))])
    assert not result["is_error"], result
    [result] = await ex.run([use(3, "give", n=1, deep=nested_lists(127))])
    assert result["is_error"] and "nested more than 127 levels" in result["content"], result


def test_a_cancelled_tool_task_collected_unfinished_is_not_logged_as_destroyed_pending() -> None:
    # A tool that ignores its cancellation and then awaits something nothing can complete is
    # garbage once ferroloop has cancelled it and let go of it: its call is answered (with the
    # timeout or cancellation, then an error naming the cause), and the loop holds tasks only
    # weakly, so it is collected unfinished. asyncio logged "Task was destroyed but it is
    # pending!" for it at ERROR level (on every such call, in debug mode with a traceback):
    # noise about a task ferroloop owned and had already given up on.
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    async def stuck(inp: dict[str, Any]) -> str:
        while True:
            try:
                await asyncio.get_running_loop().create_future()
            except asyncio.CancelledError:
                continue

    async def main() -> list[ferroloop.ToolResult]:
        ex = ferroloop.ToolExecutor(cleanup_grace=0.001)
        ex.tool("stuck", timeout=0.005)(stuck)
        ex.tool("stuck_forever")(stuck)
        results = await ex.run([use(0, "stuck")])
        turn = ex.turn()
        turn.submit(use(1, "stuck_forever"))
        await asyncio.sleep(0.01)
        turn.cancel()
        results += await asyncio.wait_for(turn.results(), timeout=30)
        for _ in range(20):
            await asyncio.sleep(0.01)
            gc.collect()
        return results

    handler = Keep()
    logger = logging.getLogger("asyncio")
    gc.collect()  # garbage of earlier tests is not this test's
    logger.addHandler(handler)
    try:
        results = asyncio.run(main(), debug=True)
        gc.collect()
    finally:
        logger.removeHandler(handler)
    assert [r["is_error"] for r in results] == [True, True]
    destroyed = [r.getMessage() for r in records if "destroyed" in r.getMessage()]
    assert [message for message in destroyed if "stuck()" in message] == []


@pytest.mark.asyncio
async def test_a_plain_tool_that_never_returns_is_answered_when_its_turn_is_cancelled() -> None:
    # A plain function cannot be interrupted: its worker thread stays with it. The call is
    # still answered (cancelled) once the cleanup grace is over, and the turn completes.
    ex = ferroloop.ToolExecutor(cleanup_grace=0.01)
    started = threading.Event()
    release = threading.Event()

    @ex.tool
    def blocked(inp: dict[str, Any]) -> str:
        started.set()
        release.wait(60)
        return "too late"

    try:
        turn = ex.turn()
        turn.submit(use(0, "blocked"))
        assert await asyncio.to_thread(started.wait, 30)
        turn.cancel()
        [result] = await asyncio.wait_for(turn.results(), timeout=30)
        assert result["is_error"] is True
        assert "cancel" in str(result["content"]).lower(), result
        assert not release.is_set()  # the function is still running
    finally:
        release.set()



def test_asyncio_run_returning_with_a_turn_and_a_run_abandoned_leaves_no_pending_task() -> None:
    # A regression guard (it held before): `asyncio.run(main())` returning while a turn and a
    # run still have tool tasks running cancels them with the others, and awaits them: no
    # "Task was destroyed but it is pending!" and no never-awaited coroutine (a warning is an
    # error here).
    records: list[logging.LogRecord] = []
    started: list[str] = []
    cancelled: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    async def slow(inp: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        started.append(ctx.tool_use_id)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(ctx.tool_use_id)
            raise
        return "never"

    async def main() -> None:
        ex = ferroloop.ToolExecutor()
        ex.tool("slow", concurrency_safe=True)(slow)
        turn = ex.turn()
        turn.submit(use(0, "slow"), use(1, "slow"))
        running = asyncio.ensure_future(ex.run([use(2, "slow")]))
        for _ in range(3000):
            await asyncio.sleep(0.01)
            if len(started) == 3:
                break
        del turn, running

    handler = Keep()
    logger = logging.getLogger("asyncio")
    gc.collect()
    logger.addHandler(handler)
    try:
        asyncio.run(main(), debug=True)
        gc.collect()
    finally:
        logger.removeHandler(handler)
    assert sorted(started) == ["toolu_0", "toolu_1", "toolu_2"]
    assert sorted(cancelled) == ["toolu_0", "toolu_1", "toolu_2"]
    assert [r.getMessage() for r in records if "destroyed" in r.getMessage()] == []
