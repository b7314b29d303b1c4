"""`Agent` against the loopback replay server: a multi-turn conversation whose model calls
parallel Python tools and a built-in tool, with a retry on the way; tool failures reaching
the model as `is_error` results; cancelling a run cancels its running Python tools."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest

import ferroloop
from conftest import ReplayServer, anthropic_events, executor_with_slow_cleanups, openai_chat_events

Replay = Callable[[dict[str, Any]], ReplayServer]


def tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def turn(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {"body": {"events": anthropic_events(content, stop_reason=stop_reason)}, "chunk_bytes": 97}


def client_for(server: ReplayServer) -> ferroloop.Client:
    return ferroloop.Client(
        "anthropic", api_key="sk-test", base_url=server.url, from_env=False, retry_base_delay=0.01
    )


def last_stop(events: list[ferroloop.AgentEvent]) -> ferroloop.AgentStopEvent:
    """The run's last event, which is its ``stop`` (narrowed for the type checker)."""
    stop = events[-1]
    assert stop["type"] == "stop", stop
    return stop


def usages(events: list[ferroloop.AgentEvent]) -> list[tuple[ferroloop.ModelCall, int, dict[str, Any]]]:
    """``(call, turn, usage)`` of each ``usage`` event, every one of which reported its usage."""
    out = []
    for event in events:
        if event["type"] == "usage":
            assert event["usage"] is not None, event
            out.append((event["call"], event["turn"], event["usage"]))
    return out


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    body = json.loads(request["body"])
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [block for block in last["content"] if block["type"] == "tool_result"]


@pytest.mark.asyncio
async def test_a_conversation_with_parallel_python_tools_and_a_builtin(
    replay: Replay, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n", encoding="utf-8")
    server = replay(
        {
            "responses": [
                {
                    "status": 429,
                    "headers": {"retry-after-ms": "10"},
                    "body": {"json": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}},
                },
                turn(
                    [
                        {"type": "text", "text": "Let me look that up in parallel."},
                        tool_use("toolu_1", "lookup", {"key": "a"}),
                        tool_use("toolu_2", "lookup", {"key": "b"}),
                        tool_use("toolu_3", "add", {"x": 2, "y": 3}),
                        tool_use("toolu_4", "read", {"file_path": "notes.txt"}),
                    ],
                    "tool_use",
                ),
                turn([tool_use("toolu_5", "lookup", {"key": "c"})], "tool_use"),
                turn([{"type": "text", "text": "Done: a, b, 5 and 42."}], "end_turn"),
            ]
        }
    )
    executor = ferroloop.ToolExecutor()
    running = 0
    peak = 0
    both_running = asyncio.Event()

    @executor.tool(concurrency_safe=True, schema={"type": "object", "properties": {"key": {"type": "string"}}})
    async def lookup(input: dict[str, Any]) -> str:
        """Looks a key up."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            both_running.set()
        if input["key"] != "c":
            # Both lookups of the first turn must be running at once to get past this.
            await asyncio.wait_for(both_running.wait(), timeout=10)
        running -= 1
        return f"value of {input['key']}"

    @executor.tool(concurrency_safe=True)
    def add(input: dict[str, Any]) -> str:
        return str(input["x"] + input["y"])

    async with client_for(server) as client:
        agent = ferroloop.Agent(
            client,
            model="claude-test",
            system="Be brief.",
            tools=[executor, "read"],
            workspace=tmp_path,
            max_turns=5,
        )
        assert sorted(agent.tool_names) == ["add", "lookup", "read"]
        definitions = {d["name"]: d for d in agent.tool_definitions()}
        assert definitions["lookup"]["description"] == "Looks a key up."
        events = [event async for event in agent.run("What do a, b, 2+3 and my notes say?")]

    kinds = [event["type"] for event in events]
    assert kinds[0] == "turn_start" and kinds[-1] == "stop"
    stop = last_stop(events)
    assert stop["reason"] == "end_turn" and stop["turns"] == 3 and stop["tool_calls"] == 5
    assert stop["error"] is None
    assert peak == 2
    retries = [e for e in events if e["type"] == "retry"]
    assert len(retries) == 1 and retries[0]["status"] == 429
    started = [e["tool_use_id"] for e in events if e["type"] == "tool_started"]
    finished = {e["tool_use_id"]: e for e in events if e["type"] == "tool_finished"}
    assert sorted(started) == ["toolu_1", "toolu_2", "toolu_3", "toolu_4", "toolu_5"]
    assert all(not e["is_error"] and e["duration"] >= 0 for e in finished.values())
    text = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert text == "Let me look that up in parallel.Done: a, b, 5 and 42."
    assert [e["turn"] for e in events if e["type"] == "usage"] == [1, 2, 3]

    requests = server.requests()
    assert len(requests) == 4
    first = json.loads(requests[1]["body"])
    assert first["model"] == "claude-test" and first["stream"] is True
    assert [t["name"] for t in first["tools"]] == ["add", "lookup", "read"]
    results = tool_results(requests[2])
    assert [r["tool_use_id"] for r in results] == ["toolu_1", "toolu_2", "toolu_3", "toolu_4"]
    assert [r.get("is_error", False) for r in results] == [False] * 4
    contents = [json.dumps(r["content"]) for r in results]
    assert "value of a" in contents[0] and "value of b" in contents[1]
    assert "5" in contents[2] and "the answer is 42" in contents[3]
    assert "value of c" in json.dumps(tool_results(requests[3]))
    # The final history is valid for the API: every tool_use answered, the answer last.
    assert stop["messages"][-1]["role"] == "assistant"
    assert len(stop["messages"]) == 6


@pytest.mark.asyncio
async def test_failing_python_tools_reach_the_model_as_error_results(replay: Replay) -> None:
    server = replay(
        {
            "responses": [
                turn(
                    [
                        tool_use("toolu_raise", "explode", {}),
                        tool_use("toolu_hang", "hang", {}),
                        tool_use("toolu_type", "wrong_type", {}),
                        tool_use("toolu_unknown", "no_such_tool", {}),
                    ],
                    "tool_use",
                ),
                turn([{"type": "text", "text": "I see the errors."}], "end_turn"),
            ]
        }
    )
    executor = ferroloop.ToolExecutor(cleanup_grace=1.0)
    hang_cancelled = asyncio.Event()

    @executor.tool(concurrency_safe=True)
    async def explode(input: dict[str, Any]) -> str:
        raise RuntimeError("kaboom")

    @executor.tool(concurrency_safe=True, timeout=0.2)
    async def hang(input: dict[str, Any]) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            hang_cancelled.set()
            raise
        return "never"

    @executor.tool(concurrency_safe=True)
    def wrong_type(input: dict[str, Any]) -> Any:
        return object()

    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="m", tools=executor)
        stop = await agent.run("go").finish()
    assert stop["reason"] == "end_turn"
    assert hang_cancelled.is_set()
    results = {r["tool_use_id"]: r for r in tool_results(server.requests()[1])}
    assert all(r["is_error"] for r in results.values())
    assert "kaboom" in json.dumps(results["toolu_raise"]["content"])
    assert "timed out" in json.dumps(results["toolu_hang"]["content"]).lower()
    assert "json" in json.dumps(results["toolu_type"]["content"]).lower()
    assert "no_such_tool" in json.dumps(results["toolu_unknown"]["content"])


def executor_with_a_slow_tool() -> tuple[ferroloop.ToolExecutor, asyncio.Event, asyncio.Event]:
    """An executor whose tool `slow` never answers; the events say it started and was cancelled."""
    executor = ferroloop.ToolExecutor()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @executor.tool
    async def slow(input: dict[str, Any]) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    return executor, started, cancelled


@pytest.mark.asyncio
async def test_cancelling_the_iteration_cancels_running_python_tools(replay: Replay) -> None:
    server = replay({"responses": [turn([tool_use("toolu_slow", "slow", {})], "tool_use")]})
    executor, started, cancelled = executor_with_a_slow_tool()

    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="m", tools=executor)
        run = agent.run("go")
        task = reading_to_the_end(run)
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(cancelled.wait(), timeout=10)
    assert [e async for e in run] == []
    assert len(server.requests()) == 1


def both_slow_tools() -> dict[str, Any]:
    """A replay script whose one response calls both tools of `executor_with_slow_cleanups`."""
    return {"responses": [turn([tool_use("toolu_a", "slow", {}), tool_use("toolu_p", "plain", {})], "tool_use")]}


def reading_to_the_end(run: ferroloop.AgentRun) -> "asyncio.Task[None]":
    """A task reading `run` to its end, dropping the events."""

    async def consume() -> None:
        async for _ in run:
            pass

    return asyncio.create_task(consume())


@contextlib.asynccontextmanager
async def both_slow_tools_running(
    replay: Replay,
) -> AsyncIterator[tuple[ferroloop.AgentRun, "asyncio.Task[None]", list[str]]]:
    """An agent run over `both_slow_tools()`, its reading task, and the steps the tools' cleanups
    record, once both tools have started (the client is closed on leaving)."""
    server = replay(both_slow_tools())
    steps: list[str] = []
    executor, both = executor_with_slow_cleanups(steps)
    async with client_for(server) as client:
        run = ferroloop.Agent(client, model="m", tools=executor).run("go")
        task = reading_to_the_end(run)
        await asyncio.wait_for(both.wait(), timeout=10)
        yield run, task, steps


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["task.cancel()", "aclose()"])
async def test_a_cancelled_or_closed_run_returns_after_its_tools_stopped(replay: Replay, how: str) -> None:
    # The iterating task's CancelledError (and aclose()) came at once, while the tools were
    # still running: code after `await task` ran alongside tools of the run it had cancelled.
    async with both_slow_tools_running(replay) as (run, task, steps):
        if how == "task.cancel()":
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            steps.append("returned")
        else:
            await run.aclose()
            steps.append("returned")
            await task
    assert sorted(steps[:2]) == ["async tool stopped", "plain tool stopped"], steps
    assert steps[2:] == ["returned"], steps
    assert [e async for e in run] == []


@pytest.mark.asyncio
async def test_cancelling_a_cancelled_run_again_stops_waiting_for_its_tools(replay: Replay) -> None:
    async with both_slow_tools_running(replay) as (run, task, steps):
        task.cancel()
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert steps == []
        await asyncio.sleep(0.6)
    assert sorted(steps) == ["async tool stopped", "plain tool stopped"]


@pytest.mark.asyncio
async def test_a_task_cancelled_while_aclose_waits_for_the_tools_is_cancelled(replay: Replay) -> None:
    # aclose() waits for the tools; a cancellation of the task waiting in it is that task's own
    # and must reach it, not be taken as the end of the wait (aclose() returned normally).
    server = replay(both_slow_tools())
    steps: list[str] = []
    executor, both = executor_with_slow_cleanups(steps)
    async with client_for(server) as client:
        run = ferroloop.Agent(client, model="m", tools=executor).run("go")
        started = 0
        async for event in run:
            started += event["type"] == "tool_started"
            if started == 2:
                break
        await asyncio.wait_for(both.wait(), timeout=10)

        async def close() -> None:
            await run.aclose()
            steps.append("aclose returned")

        closer = asyncio.create_task(close())
        await asyncio.sleep(0.05)
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer
        assert steps == [], steps
        await asyncio.sleep(0.6)
    assert sorted(steps) == ["async tool stopped", "plain tool stopped"]


@pytest.mark.asyncio
async def test_cancel_stops_the_run_with_reason_aborted(replay: Replay) -> None:
    server = replay({"responses": [turn([tool_use("toolu_slow", "slow", {})], "tool_use")]})
    executor = ferroloop.ToolExecutor()

    @executor.tool
    async def slow(input: dict[str, Any]) -> str:
        await asyncio.Event().wait()
        return "never"

    async with client_for(server) as client:
        run = ferroloop.Agent(client, model="m", tools=executor).run("go")
        async for event in run:
            if event["type"] == "tool_started":
                run.cancel()
        stop = run.stop
    assert stop is not None and stop["reason"] == "aborted"
    # The history stays valid: the tool_use is answered.
    last = stop["messages"][-1]
    assert last["role"] == "user" and last["content"][0]["tool_use_id"] == "toolu_slow"


def test_a_client_that_is_not_a_ferroloop_client_is_a_type_error_like_node() -> None:
    # It was an AttributeError ("'AsyncAnthropic' object has no attribute '_native'"), where
    # Node throws InvalidArgumentError("Agent: the first argument must be a Client").
    for wrong in [object(), None, "anthropic"]:
        with pytest.raises(TypeError, match=r"^client must be a ferroloop\.Client, not "):
            ferroloop.Agent(wrong, model="m")  # type: ignore[arg-type]


def test_unknown_builtin_tool_is_a_value_error() -> None:
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    with pytest.raises(ValueError, match="unknown built-in tool"):
        ferroloop.Agent(client, model="m", tools=["teleport"])


def openai_turn(content: list[dict[str, Any]], finish_reason: str) -> dict[str, Any]:
    return {"body": {"events": openai_chat_events(content, finish_reason=finish_reason)}, "chunk_bytes": 89}


@pytest.mark.asyncio
async def test_an_openai_chat_conversation_with_parallel_python_tools(replay: Replay) -> None:
    # The same agent loop over OpenAI Chat Completions: the client translates the requests
    # (tools as functions, tool results as `tool` messages) and the streamed chunks back.
    server = replay(
        {
            "responses": [
                openai_turn(
                    [
                        {"type": "text", "text": "Looking both up."},
                        tool_use("call_1", "lookup", {"key": "a"}),
                        tool_use("call_2", "lookup", {"key": "b"}),
                    ],
                    "tool_calls",
                ),
                openai_turn([{"type": "text", "text": "a and b found."}], "stop"),
            ]
        }
    )
    executor = ferroloop.ToolExecutor()
    both_running = asyncio.Event()
    running = 0

    @executor.tool(concurrency_safe=True, schema={"type": "object", "properties": {"key": {"type": "string"}}})
    async def lookup(input: dict[str, Any]) -> str:
        """Looks a key up."""
        nonlocal running
        running += 1
        if running == 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), timeout=10)
        return f"value of {input['key']}"

    client = ferroloop.Client(
        "openai-chat", api_key="sk-test", base_url=server.url, from_env=False, retry_base_delay=0.01
    )
    async with client:
        agent = ferroloop.Agent(client, model="gpt-test", system="Be brief.", tools=executor)
        events = [event async for event in agent.run("What are a and b?")]

    stop = last_stop(events)
    assert stop["type"] == "stop" and stop["reason"] == "end_turn", stop
    assert stop["turns"] == 2 and stop["tool_calls"] == 2 and stop["error"] is None
    text = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert text == "Looking both up.a and b found."
    finished = [e for e in events if e["type"] == "tool_finished"]
    assert sorted(e["tool_use_id"] for e in finished) == ["call_1", "call_2"]
    assert not any(e["is_error"] for e in finished)

    requests = server.requests()
    assert len(requests) == 2
    assert all(r["path"].endswith("/chat/completions") for r in requests)
    first = json.loads(requests[0]["body"])
    assert first["model"] == "gpt-test" and first["stream"] is True
    assert first["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [t["type"] for t in first["tools"]] == ["function"]
    assert first["tools"][0]["function"]["name"] == "lookup"
    second = json.loads(requests[1]["body"])
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    answers = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["call_1", "call_2"]
    assert "value of a" in json.dumps(answers[0]) and "value of b" in json.dumps(answers[1])


@pytest.mark.asyncio
async def test_an_openai_chat_agent_against_the_replay_model(
    agent_model: Callable[[str], ReplayServer], tmp_path: Path
) -> None:
    # `serve-replay --agent-model --agent-model-provider openai`: the scripted exploration of a
    # directory, streamed as Chat Completions chunks, with the built-in tools running for real.
    (tmp_path / "README.md").write_text("# Demo project\n\nTODO: write more\n", encoding="utf-8")
    (tmp_path / "main.py").write_text("def main():\n    pass\n", encoding="utf-8")
    server = agent_model("openai")
    client = ferroloop.Client("openai-chat", api_key="sk-test", base_url=server.url, from_env=False)
    async with client:
        agent = ferroloop.Agent(
            client, model="gpt-test", tools=["glob", "grep", "read"], workspace=tmp_path, max_turns=6
        )
        stop = await agent.run("Explore this directory.").finish()

    assert stop["reason"] == "end_turn" and stop["error"] is None, stop
    assert stop["turns"] == 3 and stop["tool_calls"] == 5
    answer = stop["messages"][-1]
    assert answer["role"] == "assistant"
    text = json.dumps(answer["content"])
    assert "Here is what I found" in text and "# Demo project" in text
    requests = server.requests()
    assert len(requests) == 3 and all(r["path"].endswith("/chat/completions") for r in requests)
    last = json.loads(requests[-1]["body"])
    assert sum(1 for m in last["messages"] if m["role"] == "tool") == 5


@pytest.mark.asyncio
async def test_an_invalid_conversation_stops_the_run_before_any_request(replay: Replay) -> None:
    server = replay({"responses": []})
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="claude-test")
        cases: list[tuple[list[Any], str]] = [
            ([5], "message 0 is not an object"),
            (
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "prefill"}],
                "the last message must be a user message",
            ),
            (
                [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}],
                "answers no tool_use",
            ),
        ]
        for messages, expected in cases:
            events = [event async for event in agent.run(messages=messages)]
            assert len(events) == 1
            stop = last_stop(events)
            assert stop["reason"] == "error" and stop["turns"] == 0
            assert stop["error"] is not None, stop
            assert stop["error"].startswith("invalid conversation: ") and expected in stop["error"], stop
    assert server.requests() == []


@pytest.mark.asyncio
async def test_an_empty_prompt_or_text_block_stops_the_run_before_any_request(replay: Replay) -> None:
    server = replay({"responses": []})
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="claude-test")
        runs = [
            (agent.run(""), "message 0: the content is empty"),
            (agent.run([]), "message 0: the content is empty"),
            (agent.run([{"type": "text", "text": ""}]), "message 0: text block 0 is empty"),
        ]
        for run, expected in runs:
            events = [event async for event in run]
            assert [event["type"] for event in events] == ["stop"]
            stop = last_stop(events)
            assert stop["reason"] == "error" and expected in (stop["error"] or ""), stop
    assert server.requests() == []


def server_search(id: str, query: str) -> list[dict[str, Any]]:
    return [
        {"type": "server_tool_use", "id": id, "name": "web_search", "input": {"query": query}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": id,
            "content": [{"type": "web_search_result", "url": "https://example.com", "title": "Example"}],
        },
    ]


@pytest.mark.asyncio
async def test_a_paused_server_tool_turn_is_continued_and_a_refusal_is_its_own_reason(
    replay: Replay,
) -> None:
    server = replay(
        {
            "responses": [
                turn([{"type": "text", "text": "Searching."}, *server_search("srvtoolu_1", "sse")], "pause_turn"),
                turn([tool_use("toolu_1", "lookup", {"key": "a"})], "tool_use"),
                turn([{"type": "text", "text": "Done."}], "end_turn"),
                turn([{"type": "text", "text": "No."}], "refusal"),
            ]
        }
    )
    executor = ferroloop.ToolExecutor()

    @executor.tool(name="lookup")
    async def lookup(input: dict[str, Any]) -> str:
        return f"value of {input['key']}"

    web_search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="claude-test", tools=executor, extra={"tools": [web_search]})
        assert [t["name"] for t in agent.tool_definitions()] == ["lookup", "web_search"]
        stop = await agent.run("look it up").finish()
        assert stop["reason"] == "end_turn" and stop["turns"] == 3, stop
        messages = stop["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
        assert [b["type"] for b in messages[1]["content"]] == [
            "text",
            "server_tool_use",
            "web_search_tool_result",
            "tool_use",
        ]
        assert messages[2]["content"][0]["tool_use_id"] == "toolu_1"
        refused = await agent.run("something else").finish()
        assert refused["reason"] == "refusal"
    requests = [json.loads(r["body"]) for r in server.requests()]
    # Last of the tools, so it carries the tools' cache breakpoint.
    assert requests[0]["tools"][-1] == {**web_search, "cache_control": {"type": "ephemeral"}}
    continued = requests[1]["messages"]
    assert continued[-1]["role"] == "assistant"
    assert continued[-1]["content"][1]["id"] == "srvtoolu_1"


def compaction_script() -> dict[str, Any]:
    """Two tool turns, the second reporting a context deep in the warning zone (so the loop
    microcompacts before the third request), then the answer."""
    return {
        "responses": [
            turn([tool_use("toolu_a1", "echo", {"n": 1}), tool_use("toolu_a2", "echo", {"n": 2})], "tool_use"),
            {
                "body": {
                    "events": anthropic_events(
                        [tool_use("toolu_b1", "echo", {"n": 3})], stop_reason="tool_use", input_tokens=150_000
                    )
                },
                "chunk_bytes": 97,
            },
            turn([{"type": "text", "text": "done"}], "end_turn"),
        ]
    }


@pytest.mark.asyncio
async def test_keep_recent_tool_results_is_the_microcompact_setting_like_node(replay: Replay) -> None:
    # Node's `keepRecentToolResults`: how many old tool results microcompact keeps (default 5).
    executor = ferroloop.ToolExecutor()

    @executor.tool(concurrency_safe=True)
    def echo(input: dict[str, Any]) -> str:
        return f"echo {input['n']}"

    async def run(**options: Any) -> tuple[list[ferroloop.AgentEvent], list[dict[str, Any]]]:
        server = replay(compaction_script())
        async with client_for(server) as client:
            agent = ferroloop.Agent(client, model="m", tools=executor, **options)
            events = [event async for event in agent.run("go")]
        assert last_stop(events)["reason"] == "end_turn"
        return events, [
            block
            for message in json.loads(server.requests()[2]["body"])["messages"]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]

    events, _ = await run()
    assert [e for e in events if e["type"] == "context"] == []

    events, blocks = await run(keep_recent_tool_results=0)
    contexts = [e for e in events if e["type"] == "context"]
    assert len(contexts) == 1 and contexts[0]["action"] == "microcompact" and contexts[0]["cleared"] == 2
    by_id = {block["tool_use_id"]: json.dumps(block["content"]) for block in blocks}
    assert "cleared" in by_id["toolu_a1"] and "cleared" in by_id["toolu_a2"]
    # The last turn's result, not read by the model yet, is kept whatever the setting says.
    assert "echo 3" in by_id["toolu_b1"]


@pytest.mark.asyncio
async def test_an_overload_announced_mid_stream_asks_the_turn_again_without_a_fallback(replay: Replay) -> None:
    # An `overloaded_error` event after the response started cannot be retried by the client
    # (something was delivered): without a fallback model the loop discards the partial turn
    # and asks the same model the same turn again, under its number (the core's rule; before,
    # the run stopped with `overloaded`).
    partial = anthropic_events([{"type": "text", "text": "Partial answer."}], stop_reason="end_turn", input_tokens=100)
    partial = partial[: next(i for i, e in enumerate(partial) if e["event"] == "content_block_stop")]
    partial.append({"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}})
    server = replay(
        {
            "responses": [
                {"body": {"events": partial}, "chunk_bytes": 97},
                turn([{"type": "text", "text": "Second try."}], "end_turn"),
            ]
        }
    )
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="m")
        events = [event async for event in agent.run("go")]
    stop = last_stop(events)
    assert (stop["reason"], stop["turns"]) == ("end_turn", 1), stop
    assert [e["turn"] for e in events if e["type"] == "turn_start"] == [1, 1]
    assert "Partial" not in json.dumps(stop["messages"])
    assert stop["messages"][-1]["content"][0]["text"] == "Second try."
    # The broken call was billed for its input: it has its `usage` event, as the second has.
    assert [usage["input_tokens"] for _, _, usage in usages(events)] == [100, 10]
    assert [json.loads(r["body"])["model"] for r in server.requests()] == ["m", "m"]


@pytest.mark.asyncio
async def test_a_compaction_call_has_a_usage_event_of_its_own_like_node(replay: Replay) -> None:
    # The first turn reports a context near the window, so the loop compacts before the second:
    # the summary call's usage is a `usage` event with `call` "compaction" (the turns' say
    # "turn"), numbered with the turn it is made for and before the compaction's `context`
    # event, and the events add up to the stop event's totals. The summary call is answered
    # first with an `overloaded_error` event (no status): the client retries it, and the
    # `retry` event says it is the compaction call's (`call`) and why (`code`, `overloaded`).
    executor = ferroloop.ToolExecutor()

    @executor.tool(concurrency_safe=True)
    def echo(input: dict[str, Any]) -> str:
        return f"echo {input['n']}"

    def response(content: list[dict[str, Any]], stop_reason: str, input_tokens: int, output_tokens: int) -> dict[str, Any]:
        events = anthropic_events(
            content, stop_reason=stop_reason, input_tokens=input_tokens, output_tokens=output_tokens
        )
        return {"body": {"events": events}, "chunk_bytes": 97}

    server = replay(
        {
            "responses": [
                response([tool_use("toolu_1", "echo", {"n": 1})], "tool_use", 190_000, 20),
                {
                    "body": {
                        "events": [
                            {"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}
                        ]
                    }
                },
                response([{"type": "text", "text": "The user asked for an echo."}], "end_turn", 6_000, 300),
                response([{"type": "text", "text": "done"}], "end_turn", 1_200, 30),
            ]
        }
    )
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="m", tools=executor)
        events = [event async for event in agent.run("go")]
    stop = last_stop(events)
    assert stop["reason"] == "end_turn", stop
    calls = [(call, number, usage["input_tokens"]) for call, number, usage in usages(events)]
    assert calls == [("turn", 1, 190_000), ("compaction", 2, 6_000), ("turn", 2, 1_200)]
    kinds = [e["type"] for e in events if e["type"] in ("usage", "context", "retry")]
    assert kinds[1:4] == ["retry", "usage", "context"]
    retry = next(e for e in events if e["type"] == "retry")
    assert (retry["call"], retry["attempt"], retry["status"], retry["code"], retry["overloaded"]) == (
        "compaction",
        2,
        None,
        "overloaded",
        True,
    )
    assert [e for e in events if e["type"] == "context"][0]["action"] == "compaction"
    summary = next(e for e in events if e["type"] == "usage" and e["call"] == "compaction")
    assert summary["estimated_input_tokens"] > 0
    assert summary["time_to_first_token"] is None or summary["time_to_first_token"] >= 0
    reported = [usage for _, _, usage in usages(events)]
    assert sum(u["input_tokens"] + u.get("cache_creation_input_tokens", 0) + u.get("cache_read_input_tokens", 0) for u in reported) == stop["input_tokens"] == 197_200
    assert sum(u["output_tokens"] for u in reported) == stop["output_tokens"] == 350


@pytest.mark.asyncio
async def test_an_overloaded_compaction_call_falls_back_like_a_turn_s_like_node(replay: Replay) -> None:
    # The summary call is answered with an overload (an `overloaded_error` event first in a
    # 200): with `fallback_after_529_retries=1` it switches to the fallback model at once, as a
    # turn's call would, with a `model_fallback` event before the compaction's `context`
    # event; the summary and the rest of the run are the fallback's.
    executor = ferroloop.ToolExecutor()

    @executor.tool(concurrency_safe=True)
    def echo(input: dict[str, Any]) -> str:
        return f"echo {input['n']}"

    def response(content: list[dict[str, Any]], stop_reason: str, input_tokens: int, output_tokens: int) -> dict[str, Any]:
        events = anthropic_events(
            content, stop_reason=stop_reason, input_tokens=input_tokens, output_tokens=output_tokens
        )
        return {"body": {"events": events}, "chunk_bytes": 97}

    server = replay(
        {
            "responses": [
                response([tool_use("toolu_1", "echo", {"n": 1})], "tool_use", 190_000, 20),
                {
                    "body": {
                        "events": [
                            {"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}
                        ]
                    }
                },
                response([{"type": "text", "text": "The user asked for an echo."}], "end_turn", 6_000, 300),
                response([{"type": "text", "text": "done"}], "end_turn", 1_200, 30),
            ]
        }
    )
    async with client_for(server) as client:
        agent = ferroloop.Agent(
            client, model="primary", tools=executor, fallback_model="fallback", fallback_after_529_retries=1
        )
        events = [event async for event in agent.run("go")]
    stop = last_stop(events)
    assert stop["reason"] == "end_turn", stop
    kinds = [e["type"] for e in events if e["type"] in ("usage", "context", "retry", "model_fallback")]
    assert kinds == ["usage", "model_fallback", "usage", "context", "usage"]
    fallback = next(e for e in events if e["type"] == "model_fallback")
    assert (fallback["call"], fallback["from"], fallback["to"], fallback["reason"]) == (
        "compaction",
        "primary",
        "fallback",
        "repeated_529",
    )
    models = [json.loads(r["body"])["model"] for r in server.requests()]
    assert models == ["primary", "primary", "fallback", "fallback"]


@pytest.mark.asyncio
async def test_tokenizer_picks_the_estimates_family_like_node(replay: Replay) -> None:
    # Node's `tokenizer` option: the family the loop's estimates use.
    prompt = "東京都の天気を教えてください。" * 40

    async def estimate(**options: Any) -> int:
        server = replay({"responses": [turn([{"type": "text", "text": "ok"}], "end_turn")]})
        async with client_for(server) as client:
            events = [e async for e in ferroloop.Agent(client, model="m", **options).run(prompt)]
        return int(next(e for e in events if e["type"] == "turn_start")["estimated_input_tokens"])

    claude, o200k = await estimate(), await estimate(tokenizer="o200k")
    assert claude == await estimate(tokenizer="claude")
    assert o200k != claude
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    with pytest.raises(ValueError, match="nope"):
        ferroloop.Agent(client, model="m", tokenizer="nope")
    with pytest.raises(ValueError, match="keep_recent_tool_results"):
        ferroloop.Agent(client, model="m", keep_recent_tool_results=-1)


@pytest.mark.asyncio
async def test_a_prompt_with_messages_continues_the_conversation_like_node(replay: Replay) -> None:
    # Node's `run(prompt, { messages })` appends the prompt to the history as a user message;
    # Python raised ValueError ("give either a prompt or messages").
    server = replay({"responses": [turn([{"type": "text", "text": "fine"}], "end_turn")]})
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
    ]
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="claude-test")
        stop = await agent.run("second question", messages=history).finish()
    assert stop["reason"] == "end_turn", stop
    assert len(history) == 2
    sent = json.loads(server.requests()[0]["body"])["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "second question" in json.dumps(sent[2]["content"])
    assert [m["role"] for m in stop["messages"]] == ["user", "assistant", "user", "assistant"]


@pytest.mark.asyncio
async def test_a_prompt_that_is_not_text_or_blocks_is_a_type_error_like_node() -> None:
    # `run(42)` started a run whose only event was a stop with `invalid_history` ("message 0:
    # the content must be a string or an array of content blocks"); Node throws
    # InvalidArgumentError("run: the prompt must be a string or an array of content blocks").
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    agent = ferroloop.Agent(client, model="m")
    history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}]
    for prompt in [42, {"type": "text", "text": "a dict, not a list"}, ("a", "tuple")]:
        with pytest.raises(TypeError, match=r"^prompt must be a str or a list of content blocks, not "):
            agent.run(prompt)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^prompt must be a str or a list of content blocks, not "):
            agent.run(prompt, messages=history)  # type: ignore[arg-type]


def test_a_configuration_the_run_would_refuse_is_refused_when_the_agent_is_made_like_node_and_c() -> None:
    # The core's `AgentConfig::check`, before only at a run's start (a stop with
    # `invalid_configuration`): a blank model, an empty fallback model or an output limit not
    # above the thinking budget are a ValueError with the core's message, as in Node and C.
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 4096}}
    refused: list[tuple[dict[str, Any], str]] = [
        ({"model": ""}, "the model name is empty"),
        ({"model": "  \n"}, "the model name is empty"),
        ({"model": "m", "fallback_model": ""}, "the fallback model name is empty"),
        ({"model": "m", "fallback_model": " "}, "the fallback model name is empty"),
        ({"model": "m", "max_tokens": 4096, "extra": thinking}, r"max_tokens \(4096\) must be greater"),
        ({"model": "m", "max_tokens": 1024, "extra": thinking}, r"max_tokens \(1024\) must be greater"),
        ({"model": "m", "max_tokens": 0}, "max_tokens is 0"),
    ]
    for options, message in refused:
        with pytest.raises(ValueError, match=rf"^invalid agent configuration: {message}"):
            ferroloop.Agent(client, **options)
    assert ferroloop.Agent(client, model="m", max_tokens=4097, extra=thinking).tool_names == []
    assert ferroloop.Agent(client, model="m", fallback_model="f").tool_names == []


def test_tools_every_run_would_refuse_are_a_value_error_when_the_agent_is_made() -> None:
    # A lambda registers as "<lambda>", a name the providers refuse: the agent was made, and
    # every run then stopped with invalid_tool_definition before its first request.
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    for name in ["<lambda>", "read file", "a" * 65]:
        executor = ferroloop.ToolExecutor()
        executor.tool(name)(lambda inp: "ok")
        with pytest.raises(ValueError, match=rf"^invalid agent configuration: tool {re.escape(json.dumps(name))}: a tool name"):
            ferroloop.Agent(client, model="m", tools=executor)
    with pytest.raises(ValueError, match=r"^invalid agent configuration: .*tool_choice"):
        ferroloop.Agent(client, model="m", tools=["read"], extra={"tool_choice": {"type": "tool", "name": "write"}})
    executor = ferroloop.ToolExecutor()
    executor.tool("read_file-2")(lambda inp: "ok")
    assert ferroloop.Agent(client, model="m", tools=executor).tool_names == ["read_file-2"]


@pytest.mark.asyncio
async def test_a_limit_of_zero_makes_no_request_like_node_and_the_cli(replay: Replay) -> None:
    # `max_turns=0` stops at once with `max_turns` (as `ferroloop run --max-turns 0`); a token
    # budget of 0 is spent before the first call: before, that call was made all the same.
    server = replay({"responses": [turn([{"type": "text", "text": "hi"}], "end_turn")]})
    async with client_for(server) as client:
        turns = await ferroloop.Agent(client, model="m", max_turns=0).run("go").finish()
        budget = await ferroloop.Agent(client, model="m", token_budget=0).run("go").finish()
    assert (turns["reason"], turns["turns"], turns["error_code"]) == ("max_turns", 0, None)
    assert (budget["reason"], budget["turns"], budget["error_code"]) == ("budget", 0, "token_budget")
    assert server.requests() == []


async def wait_until(flag: asyncio.Event, what: str) -> None:
    try:
        await asyncio.wait_for(flag.wait(), timeout=10)
    except asyncio.TimeoutError:
        raise AssertionError(what) from None


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["aclose", "drop"])
async def test_leaving_the_loop_then_closing_or_dropping_the_run_cancels_it(replay: Replay, how: str) -> None:
    # `break` calls nothing on a plain async iterator: the run goes on until it is closed
    # (aclose(), `async with`) or dropped, and then its model request and tools stop.
    server = replay({"responses": [turn([tool_use("toolu_slow", "slow", {})], "tool_use")]})
    executor, started, cancelled = executor_with_a_slow_tool()

    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="m", tools=executor)
        run = agent.run("go")
        async for event in run:
            if event["type"] == "tool_started":
                break
        await wait_until(started, "the tool never started")
        if how == "aclose":
            await run.aclose()
            assert [e async for e in run] == []
        else:
            del run
            gc.collect()
        await wait_until(cancelled, f"the tool kept running after the run was left ({how})")
    assert len(server.requests()) == 1


@pytest.mark.asyncio
async def test_finish_after_aclose_says_the_run_was_closed(replay: Replay) -> None:
    # finish() on a run the caller closed raised RuntimeError("the run ended without a stop
    # event"), as if the loop had broken its contract.
    server = replay({"responses": [turn([tool_use("toolu_slow", "slow", {})], "tool_use")]})
    executor, started, cancelled = executor_with_a_slow_tool()
    async with client_for(server) as client:
        run = ferroloop.Agent(client, model="m", tools=executor).run("go")
        async for event in run:
            if event["type"] == "tool_started":
                break
        await run.aclose()
        with pytest.raises(ferroloop.InvalidStateError, match="closed before its stop event"):
            await run.finish()
        await wait_until(cancelled, "the tool kept running after aclose()")


def overloaded() -> dict[str, Any]:
    return {
        "status": 529,
        "headers": {"retry-after-ms": "10"},
        "body": {"json": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}},
    }


@pytest.mark.asyncio
async def test_fallback_model_takes_over_after_repeated_529s_like_node(replay: Replay) -> None:
    # The core's model fallback (Node's `fallbackModel`, `fallbackAfter529Retries`). An
    # `overloaded_error` as the first event of a 200 (retried by the client, without a status)
    # counts as a 529, and its `retry` event says it was an overload (`code`, `overloaded`).
    overloaded_event_first = {
        "body": {
            "events": [
                {"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}
            ]
        }
    }
    # The fallback's `error` says which overloads it counted.
    for first, status, error in [
        (overloaded(), 529, "2 consecutive HTTP 529 responses"),
        (overloaded_event_first, None, "2 consecutive overloaded responses (1 HTTP 529, 1 overloaded error without one)"),
    ]:
        server = replay(
            {
                "responses": [
                    first,
                    overloaded(),
                    turn([{"type": "text", "text": "From the fallback."}], "end_turn"),
                ]
            }
        )
        async with client_for(server) as client:
            agent = ferroloop.Agent(
                client, model="claude-primary", fallback_model="claude-fallback", fallback_after_529_retries=2
            )
            events = [event async for event in agent.run("hi")]
        assert last_stop(events)["reason"] == "end_turn", events[-1]
        fallbacks = [e for e in events if e["type"] == "model_fallback"]
        assert len(fallbacks) == 1, events
        assert fallbacks[0]["call"] == "turn"
        assert fallbacks[0]["from"] == "claude-primary" and fallbacks[0]["to"] == "claude-fallback"
        assert fallbacks[0]["reason"] == "repeated_529" and fallbacks[0]["error"] == error
        retries = [(e["status"], e["code"], e["overloaded"]) for e in events if e["type"] == "retry"]
        assert retries == [(status, "overloaded", True)], events
        models = [json.loads(r["body"])["model"] for r in server.requests()]
        assert models == ["claude-primary", "claude-primary", "claude-fallback"]

    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    with pytest.raises(ValueError, match="fallback_after_529_retries"):
        ferroloop.Agent(client, model="m", fallback_model="f", fallback_after_529_retries=-1)


@pytest.mark.asyncio
async def test_a_switch_to_the_fallback_model_is_no_cache_break_like_node(replay: Replay) -> None:
    # The prompt cache is the model's: the fallback's first call reads none of the primary's,
    # which was reported as a `cache_break` (40000 -> 0, nothing in the prompt changed).
    executor = ferroloop.ToolExecutor()

    @executor.tool(concurrency_safe=True)
    def echo(input: dict[str, Any]) -> str:
        return f"echo {input['n']}"

    first = anthropic_events([tool_use("toolu_1", "echo", {"n": 1})], stop_reason="tool_use")
    first[0]["data"]["message"]["usage"]["cache_read_input_tokens"] = 40_000
    server = replay(
        {
            "responses": [
                {"body": {"events": first}},
                overloaded(),
                turn([{"type": "text", "text": "From the fallback."}], "end_turn"),
            ]
        }
    )
    async with client_for(server) as client:
        agent = ferroloop.Agent(
            client,
            model="claude-primary",
            tools=executor,
            fallback_model="claude-fallback",
            fallback_after_529_retries=1,
        )
        events = [event async for event in agent.run("go")]
    assert last_stop(events)["reason"] == "end_turn", events[-1]
    assert [e["type"] for e in events if e["type"] in ("model_fallback", "cache_break")] == ["model_fallback"]


@pytest.mark.asyncio
async def test_a_turn_refused_as_too_long_is_asked_again_as_the_same_turn_like_node(replay: Replay) -> None:
    # The loop compacts after the refusal and asks the same turn again: its `turn_start`
    # repeats the number and it counts once toward `max_turns` (with 1, the run stopped with
    # `max_turns` before asking it again).
    too_long = {
        "status": 400,
        "body": {
            "json": {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
            }
        },
    }
    server = replay(
        {
            "responses": [
                too_long,
                turn([{"type": "text", "text": "The user wants a haiku."}], "end_turn"),
                turn([{"type": "text", "text": "Autumn moon"}], "end_turn"),
            ]
        }
    )
    history = [
        {"role": "user", "content": "a long conversation"},
        {"role": "assistant", "content": "went on and on"},
        {"role": "user", "content": "write a haiku"},
    ]
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="m", max_turns=1)
        events = [event async for event in agent.run(messages=history)]
    stop = last_stop(events)
    assert (stop["reason"], stop["turns"]) == ("end_turn", 1), stop
    assert [e["turn"] for e in events if e["type"] == "turn_start"] == [1, 1]
    contexts = [e for e in events if e["type"] == "context"]
    assert [e["action"] for e in contexts] == ["compaction"], contexts
    assert [e["trigger"] for e in contexts if e["action"] == "compaction"] == ["reactive"]


@pytest.mark.asyncio
async def test_stop_tool_calls_counts_the_tool_finished_events_like_node(replay: Replay) -> None:
    # A safe call starts as soon as it is sealed; the response is then cut by `max_tokens` and
    # asked again with a raised limit, which discards the call. It had its `tool_finished`
    # event, and the stop's `tool_calls` counts it (it counted only the kept turns' calls).
    executor = ferroloop.ToolExecutor()

    @executor.tool(concurrency_safe=True)
    def echo(input: dict[str, Any]) -> str:
        return f"echo {input['n']}"

    server = replay(
        {
            "responses": [
                turn([tool_use("toolu_cut", "echo", {"n": 1})], "max_tokens"),
                turn([tool_use("toolu_kept", "echo", {"n": 2})], "tool_use"),
                turn([{"type": "text", "text": "done"}], "end_turn"),
            ]
        }
    )
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="claude-sonnet-4-5", tools=executor)
        events = [event async for event in agent.run("go")]
    stop = last_stop(events)
    assert stop["reason"] == "end_turn", stop
    finished = [e["tool_use_id"] for e in events if e["type"] == "tool_finished"]
    assert finished == ["toolu_cut", "toolu_kept"], events
    assert stop["tool_calls"] == len(finished) == 2


@pytest.mark.asyncio
async def test_a_turn_cut_by_max_tokens_is_asked_again_with_a_raised_limit_like_node(replay: Replay) -> None:
    # The core's output-limit escalation (Node's `escalatedMaxTokens`): on by default for a
    # model the table knows, set by `escalated_max_tokens`, off with 0.
    def serve() -> ReplayServer:
        return replay(
            {
                "responses": [
                    turn([{"type": "text", "text": "Cut"}], "max_tokens"),
                    turn([{"type": "text", "text": "Whole."}], "end_turn"),
                ]
            }
        )

    for option, raised in [(None, 64000), (20000, 20000), (0, None)]:
        server = serve()
        async with client_for(server) as client:
            agent = ferroloop.Agent(client, model="claude-sonnet-4-5", escalated_max_tokens=option)
            events = [event async for event in agent.run("write a lot")]
        assert last_stop(events)["reason"] == "end_turn", events[-1]
        bodies = [json.loads(r["body"]) for r in server.requests()]
        assert [b["max_tokens"] for b in bodies] == [8192, raised or 8192], option
        raises = [e for e in events if e["type"] == "max_tokens_raised"]
        if raised is None:
            assert raises == [], option
            assert "Resume directly" in json.dumps(bodies[1]["messages"])
        else:
            assert raises == [{"type": "max_tokens_raised", "turn": 1, "from": 8192, "to": raised}]
            assert bodies[0]["messages"] == bodies[1]["messages"]

    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    with pytest.raises(ValueError, match="escalated_max_tokens"):
        ferroloop.Agent(client, model="m", escalated_max_tokens=-1)


@pytest.mark.asyncio
async def test_a_failed_run_s_stop_event_carries_a_stable_error_code(replay: Replay) -> None:
    # A 401 and OpenAI's billing 429 read alike in English; the code tells them apart.
    server = replay(
        {
            "responses": [
                {
                    "status": 401,
                    "body": {"json": {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}},
                },
                {
                    "status": 429,
                    "body": {"json": {"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": "insufficient_quota"}}},
                },
            ]
        }
    )
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="claude-test")
        refused = await agent.run("hi").finish()
        billed = await agent.run("hi").finish()
        invalid = await agent.run(messages=[{"role": "assistant", "content": "prefill"}]).finish()
        assert refused["reason"] == "error" and refused["error_code"] == "authentication", refused
        assert billed["reason"] == "error" and billed["error_code"] == "quota_exceeded", billed
        assert invalid["reason"] == "error" and invalid["error_code"] == "invalid_history", invalid
    assert len(server.requests()) == 2


@pytest.mark.asyncio
async def test_a_rate_limited_run_s_stop_event_carries_the_status_request_id_and_retry_after(
    replay: Replay,
) -> None:
    # A 429 until the client's retries run out: the stop says when to try again (seconds) and
    # which request to quote; a run that ends well has none of it (None, as Node's null).
    limited = {
        "status": 429,
        "headers": {"retry-after-ms": "20", "request-id": "req_limited"},
        "body": {"json": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}},
    }
    server = replay({"responses": [limited], "when_exhausted": "repeat_last"})
    async with client_for(server) as client:
        stop = await ferroloop.Agent(client, model="claude-test").run("hi").finish()
    assert stop["reason"] == "error" and stop["error_code"] == "rate_limited", stop
    assert (stop["status"], stop["request_id"], stop["retry_after"]) == (429, "req_limited", 0.02), stop

    server = replay({"responses": [turn([{"type": "text", "text": "Hi."}], "end_turn")]})
    async with client_for(server) as client:
        stop = await ferroloop.Agent(client, model="claude-test").run("hi").finish()
    assert stop["reason"] == "end_turn", stop
    assert (stop["status"], stop["request_id"], stop["retry_after"]) == (None, None, None), stop


@pytest.mark.asyncio
async def test_a_run_iterated_by_two_tasks_at_once_refuses_the_second_like_an_async_generator(
    replay: Replay,
) -> None:
    # Before, each task got some of the events (both waited for the next batch, and each
    # batch went to one of them): neither saw the whole run, and nothing said so.
    server = replay(
        {
            "responses": [
                turn([tool_use("toolu_1", "lookup", {"key": "a"})], "tool_use"),
                turn([{"type": "text", "text": "Done."}], "end_turn"),
            ]
        }
    )
    executor = ferroloop.ToolExecutor()

    @executor.tool(concurrency_safe=True, schema={"type": "object"})
    async def lookup(input: dict[str, Any]) -> str:
        """Looks a key up."""
        return "found"

    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="claude-test", tools=executor)
        run = agent.run("look it up")

        async def drain() -> list[ferroloop.AgentEvent]:
            return [event async for event in run]

        outcomes: list[Any] = list(await asyncio.gather(drain(), drain(), return_exceptions=True))
    first, second = outcomes
    assert isinstance(second, RuntimeError), second
    assert "already being iterated" in str(second)
    assert isinstance(first, list), first
    types = [event["type"] for event in first]
    assert types[0] == "turn_start" and types[-1] == "stop", types
    assert types.count("turn_start") == 2 and types.count("tool_finished") == 1, types
    assert first[-1]["reason"] == "end_turn"
    # One task after the other is no concurrent iteration: the run just has no events left.
    assert await drain() == []


@pytest.mark.asyncio
async def test_a_cut_that_cannot_make_progress_stops_with_its_code_like_node(replay: Replay) -> None:
    # Nothing of the response is kept, at the raised limit too: the next request would be the
    # one just cut, so the run stops instead of paying for it again.
    cut = turn([], "max_tokens")
    server = replay({"responses": [cut, cut, cut, cut, cut]})
    async with client_for(server) as client:
        agent = ferroloop.Agent(client, model="claude-sonnet-4-5")
        stop = await agent.run("write a big file").finish()
    assert stop["reason"] == "max_tokens", stop
    assert stop["error_code"] == "max_tokens_no_progress", stop
    assert [json.loads(r["body"])["max_tokens"] for r in server.requests()] == [8192, 64000]
