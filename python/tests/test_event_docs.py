"""The docstrings name each event's fields (``AgentRun``: ``turn_start`` (``turn``,
``estimated_input_tokens``), ...; ``Turn``; ``MessageStream``'s ``retry`` and ``stalled``; its
``metrics``): checked here against the fields of real events, both ways, so that the docs name
no field the events lack and miss none they have."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, Callable, Iterable, Mapping, Optional

import pytest

import ferroloop
from conftest import ReplayServer, anthropic_events

Replay = Callable[[dict[str, Any]], ReplayServer]

# ``event`` (``field``, ``field``, ...: the run of fields right after an event's name.
FIELD_LIST = re.compile(r"``(\w+)``\s+\(((?:``\w+``,\s+)*``\w+``)")


def documented(doc: str | None) -> dict[str, set[str]]:
    """Event type → the fields its docstring lists."""
    assert doc is not None
    out: dict[str, set[str]] = {}
    for match in FIELD_LIST.finditer(doc):
        out.setdefault(match[1], set()).update(re.findall(r"``(\w+)``", match[2]))
    return out


def fields_by_type(events: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Event type → every field its events had (``type`` aside)."""
    out: dict[str, set[str]] = {}
    for event in events:
        out.setdefault(event["type"], set()).update(key for key in event if key != "type")
    return out


def tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def respond(
    content: list[dict[str, Any]], stop_reason: str = "end_turn", *, input_tokens: int = 10, output_tokens: int = 5
) -> dict[str, Any]:
    events = anthropic_events(content, stop_reason=stop_reason, input_tokens=input_tokens, output_tokens=output_tokens)
    return {"body": {"events": events}}


def with_thinking(events: list[dict[str, Any]], thinking: str) -> list[dict[str, Any]]:
    """`events` (an Anthropic message) with a thinking block streamed before its blocks."""
    shifted = []
    for event in events:
        data = event["data"]
        if "index" in data:
            data = {**data, "index": data["index"] + 1}
        shifted.append({**event, "data": data})
    block = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": thinking}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
    ]
    return shifted[:1] + [{"event": data["type"], "data": data} for data in block] + shifted[1:]


OVERLOADED = {
    "status": 529,
    "headers": {"retry-after-ms": "1"},
    "body": {"json": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}},
}
OVERLOADED_EVENT_FIRST = {
    "body": {"events": [{"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}]}
}


def tools() -> ferroloop.ToolExecutor:
    executor = ferroloop.ToolExecutor()

    @executor.tool(concurrency_safe=True)
    def echo(input: dict[str, Any]) -> str:
        return f"echo {input['n']}"

    @executor.tool(concurrency_safe=True)
    def report(input: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        ctx.progress({"step": "half"})
        return "reported"

    return executor


def agent_scripts() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(script, Agent options) of runs that together make every event an agent run sends."""
    cached = anthropic_events([tool_use("toolu_c", "echo", {"n": 1})], stop_reason="tool_use")
    cached[0]["data"]["message"]["usage"]["cache_read_input_tokens"] = 40_000
    thinking = with_thinking(
        anthropic_events([{"type": "text", "text": "Checking."}, tool_use("toolu_1", "report", {})], stop_reason="tool_use"),
        "Let me look.",
    )
    return [
        # A retried 529, thinking, a tool reporting progress.
        ({"responses": [OVERLOADED, {"body": {"events": thinking}}, respond([{"type": "text", "text": "Done."}])]}, {}),
        # Repeated overloads: the fallback model.
        (
            {"responses": [OVERLOADED_EVENT_FIRST, OVERLOADED, respond([{"type": "text", "text": "Fallback."}])]},
            {"fallback_model": "fallback", "fallback_after_529_retries": 2},
        ),
        # A response cut by max_tokens, asked again with a raised limit.
        (
            {"responses": [respond([{"type": "text", "text": "Cut"}], "max_tokens"), respond([{"type": "text", "text": "Whole."}])]},
            {"model": "claude-sonnet-4-5"},
        ),
        # A context near the window: a compaction, its call retried.
        (
            {
                "responses": [
                    respond([tool_use("toolu_1", "echo", {"n": 1})], "tool_use", input_tokens=190_000, output_tokens=20),
                    OVERLOADED_EVENT_FIRST,
                    respond([{"type": "text", "text": "The user asked for an echo."}], input_tokens=6000, output_tokens=300),
                    respond([{"type": "text", "text": "done"}], input_tokens=1200, output_tokens=30),
                ]
            },
            {},
        ),
        # Old tool results cleared: a microcompact.
        (
            {
                "responses": [
                    respond([tool_use("toolu_a1", "echo", {"n": 1}), tool_use("toolu_a2", "echo", {"n": 2})], "tool_use"),
                    respond([tool_use("toolu_b1", "echo", {"n": 3})], "tool_use", input_tokens=150_000),
                    respond([{"type": "text", "text": "done"}]),
                ]
            },
            {"keep_recent_tool_results": 0},
        ),
        # The cache read much less than on the previous call: a cache break.
        ({"responses": [{"body": {"events": cached}}, respond([{"type": "text", "text": "done"}])]}, {}),
    ]


async def agent_events(replay: Replay) -> list[ferroloop.AgentEvent]:
    """The events of the ``agent_scripts`` runs, one run after the other (each ends with its
    ``stop``, reason ``end_turn``)."""
    events: list[ferroloop.AgentEvent] = []
    for script, options in agent_scripts():
        server = replay(script)
        async with ferroloop.Client(
            "anthropic", api_key="sk-test", base_url=server.url, from_env=False, retry_base_delay=0.001
        ) as client:
            agent = ferroloop.Agent(client, **{"model": "m", "tools": tools(), **options})
            run = [event async for event in agent.run("go")]
        stop = run[-1]
        assert stop["type"] == "stop" and stop["reason"] == "end_turn", stop
        events += run
    return events


@pytest.mark.asyncio
async def test_the_agent_run_docs_name_exactly_the_fields_of_its_events(replay: Replay) -> None:
    events = await agent_events(replay)
    real = fields_by_type(events)
    docs = documented(ferroloop.AgentRun.__doc__)
    assert sorted(real) == sorted(docs), "the docs list every event type, and no other"
    for kind, fields in real.items():
        assert docs[kind] == fields, kind
    assert {e["action"] for e in events if e["type"] == "context"} == {"microcompact", "compaction"}


async def turn_events() -> list[ferroloop.TurnEvent]:
    """The events of a turn that makes every kind: a call reporting progress, one detached."""
    executor = ferroloop.ToolExecutor(cleanup_grace=0.05)

    @executor.tool(concurrency_safe=True)
    def report(input: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        ctx.progress({"step": "half"})
        return "reported"

    # A worker thread cannot be stopped: past its timeout and grace, the call is detached.
    @executor.tool(concurrency_safe=True, timeout=0.05)
    def stubborn(input: dict[str, Any]) -> str:
        time.sleep(0.5)
        return "late"

    async with executor.turn() as turn:
        turn.submit(tool_use("a", "report", {}))
        turn.submit(tool_use("b", "stubborn", {}))
        turn.seal()
        events = [event async for event in turn]
    await asyncio.sleep(0.5)  # the detached thread's end
    return events


@pytest.mark.asyncio
async def test_the_turn_docs_name_exactly_the_fields_of_its_events() -> None:
    events = await turn_events()
    real = fields_by_type(events)
    assert sorted(real) == ["detached", "finished", "progress", "result", "started"]
    docs = documented(ferroloop.Turn.__doc__)
    assert sorted(docs) == sorted(real)
    for kind, fields in real.items():
        assert docs[kind] == fields, kind


async def stream_events(replay: Replay) -> tuple[list[ferroloop.StreamEvent], Optional[ferroloop.RequestMetrics]]:
    """The events and metrics of a stream retried once (a 529) that stalls on the way."""
    hello = respond([{"type": "text", "text": "Hello there, world"}])
    server = replay({"responses": [OVERLOADED, {**hello, "fault": {"kind": "stall_after", "bytes": 300, "ms": 300}}]})
    async with ferroloop.Client(
        "anthropic", api_key="sk-test", base_url=server.url, from_env=False, retry_base_delay=0.001, stall_notice=0.05
    ) as client:
        stream = client.stream(model="m", max_tokens=16, messages=[{"role": "user", "content": "Hi"}])
        events = [event async for event in stream]
    return events, stream.metrics


@pytest.mark.asyncio
async def test_the_stream_docs_name_exactly_the_fields_of_retries_stalls_and_metrics(replay: Replay) -> None:
    events, metrics = await stream_events(replay)
    real = {kind: fields for kind, fields in fields_by_type(events).items() if kind in ("retry", "stalled")}
    assert sorted(real) == ["retry", "stalled"]
    docs = documented(ferroloop.MessageStream.__doc__)
    assert {kind: docs[kind] for kind in real} == real
    assert metrics is not None and len(metrics["retries"]) == 1
    doc = ferroloop.MessageStream.metrics.__doc__
    assert doc is not None
    named = set(re.findall(r"``(\w+)``", doc))
    # Besides the keys, the doc names the `retry` events the retries are, `None`, and the type.
    assert named - set(metrics) == {"retry", "None", "RequestMetrics"}
    assert set(metrics) <= named
