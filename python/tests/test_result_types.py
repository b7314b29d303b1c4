"""The result types (``ToolResult``, ``RequestMetrics``, ``ToolDefinition``, ``TokenCount``,
``RequestEstimate``: ``TypedDict``s, the Python form of Node's ``index.d.ts`` interfaces) against
real values, and ``DecodeErrorDetail`` (the ``events`` a ``StreamDecoder.feed`` error carries)
against the errors really raised.

Each real value must be exactly its ``TypedDict`` (its keys the declared keys, each value of the
declared type, exactly; see typed_dicts.py), and every ``Literal`` value must occur.

Also: ``mypy --strict`` rejects a field misused (a check that the types are precise: with the
earlier ``dict[str, Any]`` results, mypy accepted anything)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

import ferroloop
from conftest import REPO, SHARED
from test_event_docs import Replay, stream_events
from typed_dicts import conforms, exactly, mypy_misuse


def tool_use(id: str, name: str, input: Any = None) -> dict[str, Any]:
    use: dict[str, Any] = {"type": "tool_use", "id": id, "name": name}
    if input is not None:
        use["input"] = input
    return use


def executor() -> ferroloop.ToolExecutor:
    """Tools returning every kind of result: text, blocks, one block, ``{content, is_error}``,
    nothing, a number, an exception, a result spilled for its size."""
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True, schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    def text(input: dict[str, Any]) -> str:
        """Says the number."""
        return f"n={input.get('n')}"

    @ex.tool(concurrency_safe=True)
    def blocks(input: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]

    @ex.tool(concurrency_safe=True)
    def image(input: dict[str, Any]) -> dict[str, Any]:
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}

    @ex.tool(concurrency_safe=True)
    def flagged(input: dict[str, Any]) -> dict[str, Any]:
        return {"content": "not found", "is_error": True}

    @ex.tool(concurrency_safe=True)
    def nothing(input: dict[str, Any]) -> None:
        return None

    @ex.tool(concurrency_safe=True)
    def number(input: dict[str, Any]) -> int:
        return 5

    @ex.tool(concurrency_safe=True)
    async def fails(input: dict[str, Any]) -> str:
        raise ValueError("no")

    @ex.tool(concurrency_safe=True, max_result_chars=10)
    def large(input: dict[str, Any]) -> str:
        return "x" * 1000

    return ex


USES = [
    tool_use("t1", "text", {"n": 1}),
    tool_use("t2", "blocks", {}),
    tool_use("t3", "image", {}),
    tool_use("t4", "flagged", {}),
    tool_use("t5", "nothing"),
    tool_use("t6", "number", {}),
    tool_use("t7", "fails", {}),
    tool_use("t8", "large", {}),
    tool_use("t9", "missing", {}),
    tool_use("t10", "text", {"n": "not a number"}),
]


def check_results(results: list[Any]) -> None:
    for result in results:
        exactly(result, ferroloop.ToolResult)
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in USES]
    # Both forms of content occur; errors and successes too.
    assert {type(r["content"]) for r in results} == {str, list}
    assert {r["is_error"] for r in results} == {True, False}


@pytest.mark.asyncio
async def test_executor_run_results_are_exactly_tool_results() -> None:
    check_results(await executor().run(USES))


@pytest.mark.asyncio
async def test_a_turns_results_and_result_events_are_exactly_tool_results() -> None:
    async with executor().turn() as turn:
        for use in USES:
            turn.submit(use)
        turn.seal()
        events = [event async for event in turn]
    from_events = [e["result"] for e in events if e["type"] == "result"]
    check_results(from_events)
    check_results(await turn.results())


@pytest.mark.asyncio
async def test_stream_metrics_are_exactly_request_metrics(replay: Replay) -> None:
    _, metrics = await stream_events(replay)
    assert metrics is not None
    exactly(metrics, ferroloop.RequestMetrics)
    assert set(metrics) == set(get_type_hints(ferroloop.RequestMetrics))
    assert len(metrics["retries"]) == 1 and metrics["usage"] is not None


def test_tool_definitions_are_the_agents_own_then_the_providers_as_given() -> None:
    provider_tools: list[dict[str, Any]] = [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
        {"type": "code_execution_20250522", "name": "code_execution"},
    ]
    client = ferroloop.Client("anthropic", api_key="sk-test", base_url="http://127.0.0.1:9", from_env=False)
    agent = ferroloop.Agent(client, model="m", tools=[executor(), "read"], extra={"tools": provider_tools})
    definitions = agent.tool_definitions()
    own, given = definitions[: len(agent.tool_names)], definitions[len(agent.tool_names):]
    assert [d["name"] for d in own] == sorted(agent.tool_names)
    for definition in own:
        assert "type" not in definition
        exactly(definition, ferroloop.AgentToolDefinition)
    # `description` is there exactly when the tool has one.
    assert {"description" in d for d in own} == {True, False}
    assert given == provider_tools
    assert all(conforms(d, dict[str, Any]) for d in given)


def test_token_counts_are_exactly_token_counts_and_every_method_occurs() -> None:
    tracker = ferroloop.ContextTracker()
    tracker.push_message({"role": "user", "content": "Hello there"})
    counts = [tracker.tokens()]  # estimate
    tracker.record_usage({"input_tokens": 12, "output_tokens": 3})
    counts.append(tracker.tokens())  # exact
    tracker.push_message({"role": "assistant", "content": "Hi"})
    counts.append(tracker.tokens())  # usage+estimate
    for count in counts:
        assert set(count) == {"tokens", "method"}
        exactly(count, ferroloop.TokenCount)
    methods = get_args(get_type_hints(ferroloop.TokenCount)["method"])
    assert sorted(c["method"] for c in counts) == sorted(methods)
    # The set is the core's: every name `CountMethod::as_str` gives (a new one fails here).
    core = (REPO / "core/src/tokens/tracker.rs").read_text(encoding="utf-8")
    assert sorted(re.findall(r'CountMethod::\w+ => "([^"]+)"', core)) == sorted(methods)


def test_request_estimates_are_exactly_request_estimates() -> None:
    bodies: list[dict[str, Any]] = [
        {"system": "Be brief.", "tools": [{"name": "f", "input_schema": {"type": "object"}}],
         "messages": [{"role": "user", "content": "hi"}]},
        {"instructions": "Be brief.", "input": [{"role": "user", "content": "hi"}]},
        {},
    ]
    for body in bodies:
        estimate = ferroloop.estimate_request(body)
        assert set(estimate) == set(get_type_hints(ferroloop.RequestEstimate))
        exactly(estimate, ferroloop.RequestEstimate)


def test_errors_fed_to_a_decoder_carry_its_events_and_others_do_not() -> None:
    error_stream = (SHARED / "decode/streams/anthropic/error_overloaded.sse").read_bytes()
    start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                                   "model": "x", "usage": {"input_tokens": 1, "output_tokens": 1}}}
    malformed = f"event: message_start\ndata: {json.dumps(start)}\n\nevent: message_delta\ndata: {{nope\n\n".encode()
    raised: list[Exception] = []
    for data in (error_stream, malformed):
        decoder = ferroloop.StreamDecoder("anthropic")
        with pytest.raises(ferroloop.FerroloopError) as info:
            decoder.feed(data)
        raised.append(info.value)
    finished = ferroloop.StreamDecoder("anthropic")
    finished.feed(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
    with pytest.raises(ferroloop.StreamTruncatedError) as truncated:
        finished.finish()
    with pytest.raises(ferroloop.InvalidStateError) as after_finish:
        finished.feed(b"")
    raised.append(after_finish.value)
    assert [type(e) for e in raised] == [ferroloop.OverloadedError, ferroloop.ProtocolError, ferroloop.InvalidStateError]
    details = [error for error in raised if isinstance(error, ferroloop.DecodeErrorDetail)]
    assert details == raised
    for detail in details:
        assert conforms(detail.events, list[ferroloop.DecodeEvent])
    assert details[0].events and details[1].events
    # `finish` raises without events; an error made elsewhere has none either.
    assert not isinstance(truncated.value, ferroloop.DecodeErrorDetail)
    assert isinstance(truncated.value.partial_message, dict)
    assert not isinstance(ferroloop.OverloadedError("overloaded", status=529), ferroloop.DecodeErrorDetail)


# Each line ending in `# error: CODE` must be reported by mypy with that code, and no other line.
MISUSE = '''
import ferroloop


async def results(executor: ferroloop.ToolExecutor, turn: ferroloop.Turn) -> None:
    for result in await executor.run([]):
        failed: bool = result["is_error"]
        flag: str = result["is_error"]  # error: assignment
        output = result["output"]  # error: typeddict-item
    for result in await turn.results():
        content: int = result["content"]  # error: assignment
    async for event in turn:
        if event["type"] == "result":
            answered: int = event["result"]["tool_use_id"]  # error: assignment


def metrics(stream: ferroloop.MessageStream) -> None:
    measured = stream.metrics
    if measured is not None:
        total: float = measured["total"]  # error: assignment
        retries: int = measured["retries"]  # error: assignment
        for retry in measured["retries"]:
            wait: str = retry["wait"]  # error: assignment


def definitions(agent: ferroloop.Agent) -> None:
    for definition in agent.tool_definitions():
        name: int = definition["name"]  # error: assignment


def tokens(tracker: ferroloop.ContextTracker) -> None:
    count = tracker.tokens()
    method: int = count["method"]  # error: assignment
    estimated = count["method"] == "usage-estimate"  # error: comparison-overlap
    part = ferroloop.estimate_request({})["system_prompt"]  # error: typeddict-item


def tool_error(err: ferroloop.ToolError) -> None:
    if err.results is not None:
        for result in err.results:
            flag: str = result["is_error"]  # error: assignment
    first = err.results[0]  # error: index


def decode(decoder: ferroloop.StreamDecoder) -> None:
    try:
        decoder.feed(b"")
    except ferroloop.APIError as err:
        before = err.events  # error: attr-defined
        if isinstance(err, ferroloop.DecodeErrorDetail):
            for event in err.events:
                if event["type"] == "text_delta":
                    text: int = event["text"]  # error: assignment
'''


def test_mypy_rejects_a_result_field_misused(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    expected, reported, output = mypy_misuse(tmp_path, MISUSE)
    assert reported == expected, output
