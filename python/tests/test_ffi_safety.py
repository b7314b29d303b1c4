"""FFI safety: a Rust panic at each binding entry point surfaces as `ferroloop.InternalError`
(never a crash, never pyo3's `PanicException`), and Python tools that raise, hang or return
values that are not JSON each produce an `is_error` result.

Panics are armed with the test hook `_native._debug_arm_panic(entry)`: the next call of the
entry point named `entry` (as named in its `shield(py, "…", …)` call in python/src) panics
inside the entry point's body. The test checks that the table below names every shielded
entry point of the sources, so a new entry point without a case fails here.
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any, Awaitable, Callable, Union

import pytest

import ferroloop
from conftest import REPO
from ferroloop import _native

Call = Callable[[], Union[Any, Awaitable[Any]]]
#: entry point → a coroutine function that prepares the objects and returns the call to make
#: with the panic armed.
Setup = Callable[[], Awaitable[Call]]

UNREACHABLE = "http://127.0.0.1:9"  # nothing listens on the discard port


def client() -> ferroloop.Client:
    return ferroloop.Client("anthropic", api_key="k", base_url=UNREACHABLE, from_env=False, max_retries=0)


async def executor_with_tool() -> ferroloop.ToolExecutor:
    executor = ferroloop.ToolExecutor()

    @executor.tool
    async def echo(input: dict[str, Any]) -> str:
        return "ok"

    return executor


async def turn() -> ferroloop.Turn:
    return (await executor_with_tool()).turn()


USE = {"id": "toolu_1", "name": "echo", "input": {}}


async def s_sse_init() -> Call:
    return lambda: ferroloop.SseParser()


async def s_sse_feed() -> Call:
    return lambda: ferroloop.SseParser().feed(b"data: x\n\n")


async def s_sse_finish() -> Call:
    parser = ferroloop.SseParser()
    return parser.finish


async def s_decoder_init() -> Call:
    return lambda: ferroloop.StreamDecoder("anthropic")


async def s_decoder(method: str) -> Call:
    decoder = ferroloop.StreamDecoder("anthropic")
    if method == "feed":
        return lambda: decoder.feed(b"event: ping\ndata: {\"type\":\"ping\"}\n\n")
    if method == "is_complete":
        return lambda: decoder.is_complete
    return getattr(decoder, method)  # type: ignore[no-any-return]


async def s_estimate() -> Call:
    return lambda: ferroloop.estimate_tokens("hello")


async def s_estimate_request() -> Call:
    return lambda: ferroloop.estimate_request({"messages": [{"role": "user", "content": "hi"}]})


async def s_count() -> Call:
    return lambda: ferroloop.count_tokens("hello", "o200k")


async def s_budget_init() -> Call:
    return lambda: ferroloop.ContextBudget(200_000, 8_000)


async def s_budget_for_model() -> Call:
    return lambda: ferroloop.ContextBudget.for_model("claude-sonnet-4-20250514")


async def s_tracker(method: str) -> Call:
    tracker = ferroloop.ContextTracker()
    calls: dict[str, Call] = {
        "__init__": lambda: ferroloop.ContextTracker(),
        "set_system": lambda: tracker.set_system("be brief"),
        "set_tools": lambda: tracker.set_tools([]),
        "push_message": lambda: tracker.push_message({"role": "user", "content": "hi"}),
        "replace_messages": lambda: tracker.replace_messages([]),
        "truncate": lambda: tracker.truncate(0),
        "record_usage": lambda: tracker.record_usage({"input_tokens": 1, "output_tokens": 1}),
        "tokens": tracker.tokens,
        "correction": lambda: setattr(tracker, "correction", 1.2),
        "model": lambda: setattr(tracker, "model", "m"),
    }
    return calls[method]


async def s_text_estimator(method: str) -> Call:
    estimator = ferroloop.TextEstimator()
    calls: dict[str, Call] = {
        "__init__": lambda: ferroloop.TextEstimator(),
        "feed": lambda: estimator.feed("some text\n"),
        "estimate": estimator.estimate,
    }
    return calls[method]


async def s_executor(method: str) -> Call:
    executor = await executor_with_tool()
    calls: dict[str, Call] = {
        "__init__": lambda: ferroloop.ToolExecutor(),
        "register": lambda: executor.tool(name="other")(lambda input: "x"),
        "run": lambda: executor.run([USE]),
        "turn": executor.turn,
    }
    return calls[method]


async def s_turn(method: str) -> Call:
    t = await turn()
    calls: dict[str, Call] = {
        "submit": lambda: t.submit(USE),
        "seal": t.seal,
        "cancel": t.cancel,
        "discard": t.discard,
        "next_event": t._native.next_event,
        "finish": t.results,
    }
    return calls[method]


async def s_client(method: str) -> Call:
    c = client()
    calls: dict[str, Call] = {
        "__init__": client,
        "close": c.close,
        "stream": lambda: c.stream(model="m", messages=[]),
        "create": lambda: c.create(model="m", messages=[]),
    }
    return calls[method]


async def s_client_stream(method: str) -> Call:
    stream = client().stream(model="m", messages=[])
    native = stream._client_stream
    calls: dict[str, Call] = {
        "next_batch": native.next_batch,
        "close": native.close,
        "failure_metrics": lambda: native.failure_metrics,
    }
    return calls[method]


async def s_agent(method: str) -> Call:
    c = client()
    agent = ferroloop.Agent(c, model="m", tools=await executor_with_tool())
    calls: dict[str, Call] = {
        "__init__": lambda: ferroloop.Agent(c, model="m"),
        "tool_definitions": agent.tool_definitions,
        "run": lambda: agent.run("hi"),
    }
    return calls[method]


async def s_agent_run(method: str) -> Call:
    run = ferroloop.Agent(client(), model="m").run("hi")
    calls: dict[str, Call] = {
        "next_batch": run._native.next_batch,
        "cancel": run.cancel,
        "close": run._native.close,
    }
    return calls[method]


def bind(setup: Callable[[str], Awaitable[Call]], method: str) -> Setup:
    return lambda: setup(method)


ENTRY_POINTS: dict[str, Setup] = {
    "SseParser.__init__": s_sse_init,
    "SseParser.feed": s_sse_feed,
    "SseParser.finish": s_sse_finish,
    "StreamDecoder.__init__": s_decoder_init,
    **{f"StreamDecoder.{m}": bind(s_decoder, m) for m in ["feed", "message", "is_complete", "finish"]},
    "estimate_tokens": s_estimate,
    "estimate_request": s_estimate_request,
    "count_tokens": s_count,
    "ContextBudget.__init__": s_budget_init,
    "ContextBudget.for_model": s_budget_for_model,
    **{
        f"ContextTracker.{m}": bind(s_tracker, m)
        for m in ["__init__", "set_system", "set_tools", "push_message", "replace_messages", "truncate", "record_usage", "tokens", "correction", "model"]
    },
    **{f"TextEstimator.{m}": bind(s_text_estimator, m) for m in ["__init__", "feed", "estimate"]},
    **{f"ToolExecutor.{m}": bind(s_executor, m) for m in ["__init__", "register", "run", "turn"]},
    **{f"Turn.{m}": bind(s_turn, m) for m in ["submit", "seal", "cancel", "discard", "next_event", "finish"]},
    **{f"Client.{m}": bind(s_client, m) for m in ["__init__", "close", "stream", "create"]},
    **{f"ClientStream.{m}": bind(s_client_stream, m) for m in ["next_batch", "close", "failure_metrics"]},
    **{f"Agent.{m}": bind(s_agent, m) for m in ["__init__", "tool_definitions", "run"]},
    **{f"AgentRun.{m}": bind(s_agent_run, m) for m in ["next_batch", "cancel", "close"]},
}
#: Covered by `test_a_panic_in_tool_progress_is_an_error_result` (it runs inside a tool).
INSIDE_TOOLS = {"ToolContext.progress"}


def shielded_entry_points() -> set[str]:
    """Every `shield(py, "NAME", ...)` in the extension's sources, test hooks excepted."""
    names: set[str] = set()
    for source in (REPO / "python" / "src").glob("*.rs"):
        names.update(re.findall(r'shield\(\s*py,\s*"([^"]+)"', source.read_text(encoding="utf-8")))
    return {name for name in names if not name.startswith("_debug")}


def test_every_shielded_entry_point_has_a_panic_case() -> None:
    assert shielded_entry_points() == set(ENTRY_POINTS) | INSIDE_TOOLS


@pytest.mark.asyncio
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
async def test_a_panic_at_each_entry_point_is_an_internal_error(entry: str) -> None:
    call = await ENTRY_POINTS[entry]()
    _native._debug_arm_panic(entry)
    try:
        with pytest.raises(ferroloop.InternalError, match=f"armed test panic at {re.escape(entry)}"):
            result = call()
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                await result
    finally:
        _native._debug_arm_panic(None)
    # The extension keeps working after the panic.
    assert ferroloop.SseParser().feed(b"data: ok\n\n")[0].data == "ok"


@pytest.mark.asyncio
async def test_a_panic_in_tool_progress_is_an_error_result() -> None:
    executor = ferroloop.ToolExecutor()

    @executor.tool
    def reports(input: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        _native._debug_arm_panic("ToolContext.progress")
        ctx.progress({"step": 1})
        return "unreachable"

    (result,) = await executor.run([{"id": "t1", "name": "reports", "input": {}}])
    assert result["is_error"] is True
    assert "InternalError" in result["content"]


class NotJson:
    pass


@pytest.mark.asyncio
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    "value, is_error",
    [
        (NotJson(), True),
        ({"nested": object()}, True),
        ({"key": NotJson()}, True),
        # Values with a JSON rendering are results, not errors: a set is a list, NaN is null.
        ({1, 2}, False),
        (float("nan"), False),
    ],
    ids=["object", "nested-object", "nested-class", "set", "nan"],
)
async def test_a_tool_returning_a_wrong_type_gives_an_error_result(
    asynchronous: bool, value: Any, is_error: bool
) -> None:
    executor = ferroloop.ToolExecutor()

    async def bad_async(input: dict[str, Any]) -> Any:
        return value

    def bad_sync(input: dict[str, Any]) -> Any:
        return value

    executor.tool(name="bad")(bad_async if asynchronous else bad_sync)

    (result,) = await executor.run([{"id": "t1", "name": "bad", "input": {}}])
    assert result["tool_use_id"] == "t1" and result["type"] == "tool_result"
    assert result["is_error"] is is_error
    if is_error:
        assert "cannot be converted to JSON" in str(result["content"])


@pytest.mark.asyncio
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_tools_that_raise_or_hang_give_error_results(asynchronous: bool) -> None:
    executor = ferroloop.ToolExecutor(cleanup_grace=0.5)
    stop = asyncio.Event()
    release = threading.Event()

    async def raises_async(input: dict[str, Any]) -> str:
        raise KeyError("missing")

    async def hangs_async(input: dict[str, Any]) -> str:
        await stop.wait()
        return "never"

    def raises_sync(input: dict[str, Any]) -> str:
        raise KeyError("missing")

    def hangs_sync(input: dict[str, Any]) -> str:
        release.wait(10)
        return "late"

    raises: Callable[..., Any] = raises_async if asynchronous else raises_sync
    hangs: Callable[..., Any] = hangs_async if asynchronous else hangs_sync
    executor.tool(name="raises", concurrency_safe=True)(raises)
    executor.tool(name="hangs", concurrency_safe=True, timeout=0.2)(hangs)

    try:
        results = await executor.run(
            [{"id": "r", "name": "raises", "input": {}}, {"id": "h", "name": "hangs", "input": {}}]
        )
    finally:
        release.set()
    assert [r["tool_use_id"] for r in results] == ["r", "h"]
    assert all(r["is_error"] for r in results)
    assert "KeyError" in str(results[0]["content"])
    assert "timed out" in str(results[1]["content"]).lower()


