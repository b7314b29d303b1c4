"""The caller's `contextvars` reach the tools: a tool runs in a copy of the context of the call
that started it (`ToolExecutor.run`, the `Turn.submit` of the call, `Agent.run`), as
`asyncio.create_task` and `asyncio.to_thread` copy the current context. Each call has a copy of
its own: what a tool sets stays in that call."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
import time
from typing import Any, Callable

import pytest

import ferroloop
from conftest import ReplayServer, anthropic_events

Replay = Callable[[dict[str, Any]], ReplayServer]

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


def use(i: int | str, name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": input}


def probing_executor(**options: Any) -> ferroloop.ToolExecutor:
    """`sync_probe` (a worker thread) and `async_probe` (a task): each returns the
    `request_id` it sees, after a short wait so concurrent runs overlap."""
    ex = ferroloop.ToolExecutor(**options)

    @ex.tool(concurrency_safe=True)
    def sync_probe(inp: dict[str, Any]) -> str:
        time.sleep(inp.get("sleep", 0))
        return request_id.get()

    @ex.tool(concurrency_safe=True)
    async def async_probe(inp: dict[str, Any]) -> str:
        await asyncio.sleep(inp.get("sleep", 0))
        return request_id.get()

    return ex


@pytest.mark.asyncio
async def test_run_tools_see_the_callers_context() -> None:
    ex = probing_executor()
    request_id.set("req-1")
    results = await ex.run([use(1, "sync_probe"), use(2, "async_probe")])
    assert [r["content"] for r in results] == ["req-1", "req-1"]
    assert not any(r["is_error"] for r in results)


@pytest.mark.asyncio
async def test_calls_queued_behind_an_exclusive_call_see_the_callers_context() -> None:
    # Calls started later (after an exclusive call, past the concurrency cap) are started from
    # the executor's own wake-ups, not from the caller's stack.
    ex = probing_executor(max_concurrency=1)

    @ex.tool()
    async def exclusive(inp: dict[str, Any]) -> str:
        await asyncio.sleep(0.01)
        return request_id.get()

    request_id.set("req-queued")
    uses = [use(1, "exclusive"), use(2, "sync_probe"), use(3, "async_probe"), use(4, "exclusive")]
    uses += [use(n, "async_probe" if n % 2 else "sync_probe") for n in range(5, 12)]
    results = await ex.run(uses)
    assert [r["content"] for r in results] == ["req-queued"] * len(uses)


@pytest.mark.asyncio
async def test_concurrent_runs_on_one_executor_each_see_their_own_context() -> None:
    ex = probing_executor(max_concurrency=50)

    async def one_run(value: str) -> list[object]:
        request_id.set(value)
        uses = [use(f"{value}_{n}", "sync_probe" if n % 2 else "async_probe", sleep=0.02) for n in range(6)]
        results = await ex.run(uses)
        return [r["content"] for r in results]

    values = [f"req-{n}" for n in range(4)]
    seen = await asyncio.gather(*(asyncio.create_task(one_run(v)) for v in values))
    for value, contents in zip(values, seen):
        assert contents == [value] * 6


@pytest.mark.asyncio
async def test_what_a_tool_sets_stays_in_its_call() -> None:
    ex = ferroloop.ToolExecutor(max_concurrency=10)
    barrier = threading.Barrier(3, timeout=10)

    @ex.tool(concurrency_safe=True)
    def sync_setter(inp: dict[str, Any]) -> str:
        before = request_id.get()
        request_id.set(f"set by {inp['n']}")
        barrier.wait()  # the siblings run at the same time, on other threads
        return f"{before} -> {request_id.get()}"

    @ex.tool(concurrency_safe=True)
    async def async_setter(inp: dict[str, Any]) -> str:
        before = request_id.get()
        request_id.set(f"set by {inp['n']}")
        await asyncio.sleep(0.01)
        return f"{before} -> {request_id.get()}"

    request_id.set("caller")
    uses = [use(n, "sync_setter", n=n) for n in range(3)] + [use(n, "async_setter", n=n) for n in range(3, 6)]
    results = await ex.run(uses)
    assert [r["content"] for r in results] == [f"caller -> set by {n}" for n in range(6)]
    assert request_id.get() == "caller"
    # And again: the first run's calls changed nothing the second sees.
    uses = [use(n, "sync_setter", n=n) for n in (7, 8, 9)] + [use(10, "async_setter", n=10)]
    results = await ex.run(uses)
    assert [r["content"] for r in results] == [f"caller -> set by {n}" for n in (7, 8, 9, 10)]


@pytest.mark.asyncio
async def test_a_turns_calls_see_the_context_of_their_submit() -> None:
    ex = probing_executor()
    request_id.set("turn-a")
    turn = ex.turn()
    turn.submit(use(1, "sync_probe", sleep=0.01))
    turn.submit(use(2, "async_probe", sleep=0.01))
    request_id.set("turn-b")
    turn.submit(use(3, "sync_probe"))
    turn.submit(use(4, "async_probe"))
    # A submit from another task (a stream reader, say) gives its calls that task's context.
    async def reader() -> None:
        request_id.set("reader")
        turn.submit(use(5, "async_probe"))
        turn.submit(use(6, "sync_probe"))

    await asyncio.create_task(reader())
    results = await turn.results()
    assert [r["content"] for r in results] == ["turn-a", "turn-a", "turn-b", "turn-b", "reader", "reader"]


@pytest.mark.asyncio
async def test_concurrent_turns_each_see_their_own_context() -> None:
    ex = probing_executor(max_concurrency=50)

    async def one_turn(value: str) -> list[object]:
        request_id.set(value)
        turn = ex.turn()
        for n in range(4):
            turn.submit(use(f"{value}_{n}", "sync_probe" if n % 2 else "async_probe", sleep=0.02))
            await asyncio.sleep(0)
        return [r["content"] for r in await turn.results()]

    values = ["t1", "t2", "t3"]
    seen = await asyncio.gather(*(one_turn(v) for v in values))
    for value, contents in zip(values, seen):
        assert contents == [value] * 4


def tool_turn(ids: list[str]) -> dict[str, Any]:
    blocks = []
    for n, id in enumerate(ids):
        name = "sync_probe" if n % 2 else "async_probe"
        blocks.append({"type": "tool_use", "id": id, "name": name, "input": {"sleep": 0.05}})
    return {"body": {"events": anthropic_events(blocks, stop_reason="tool_use")}, "chunk_bytes": 97}


def end_turn() -> dict[str, Any]:
    return {"body": {"events": anthropic_events([{"type": "text", "text": "done"}], stop_reason="end_turn")}}


def tool_results(server: ReplayServer) -> dict[str, str]:
    body = json.loads(server.requests()[1]["body"])
    return {b["tool_use_id"]: b["content"] for b in body["messages"][-1]["content"] if b["type"] == "tool_result"}


@pytest.mark.asyncio
async def test_an_agents_tools_see_the_context_of_its_run(replay: Replay) -> None:
    server = replay({"responses": [tool_turn(["toolu_a", "toolu_b"]), end_turn()]})
    executor = probing_executor()
    client = ferroloop.Client("anthropic", api_key="sk-test", base_url=server.url, from_env=False)
    async with client:
        agent = ferroloop.Agent(client, model="m", tools=executor)
        request_id.set("agent-run")
        stop = await agent.run("go").finish()
    assert stop["reason"] == "end_turn"
    assert tool_results(server) == {"toolu_a": "agent-run", "toolu_b": "agent-run"}


@pytest.mark.asyncio
async def test_concurrent_agent_runs_sharing_tools_each_see_their_own_context(replay: Replay) -> None:
    executor = probing_executor(max_concurrency=20)
    servers = [replay({"responses": [tool_turn([f"toolu_{n}a", f"toolu_{n}b"]), end_turn()]}) for n in range(3)]

    async def one_run(n: int) -> None:
        request_id.set(f"agent-{n}")
        async with ferroloop.Client("anthropic", api_key="sk-test", base_url=servers[n].url, from_env=False) as client:
            agent = ferroloop.Agent(client, model="m", tools=executor)
            stop = await agent.run("go").finish()
            assert stop["reason"] == "end_turn"

    await asyncio.gather(*(one_run(n) for n in range(3)))
    for n, server in enumerate(servers):
        assert tool_results(server) == {f"toolu_{n}a": f"agent-{n}", f"toolu_{n}b": f"agent-{n}"}
