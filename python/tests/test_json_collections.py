"""Collections and other values without a JSON form, wherever a value is written as JSON (a
request, ``extra``, messages, a tool's schema, input, result or progress, what is counted):
converted faithfully (a ``set`` or ``tuple`` as a list, as Node's Set is now) or refused naming
what (Node sent a Set or a Map as ``{}``). A dict key that is no ``str`` said only "'int' object
is not an instance of 'str'", a ``bytearray`` "is not an instance of 'bytes'" (as if ``bytes``
were taken), and a ``memoryview`` became a list of its byte values."""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from typing import Any, Callable

import pytest

import ferroloop

KEY_ERROR = r"a dict key must be a str \(JSON object keys are text\), got the (int|tuple|float|NoneType) "
BYTES_ERROR = r"a (bytes|bytearray|memoryview) value has no JSON form"


@dataclasses.dataclass
class Point:
    x: int
    tags: set[str]


@dataclasses.dataclass
class Tagged:
    meta: dict[Any, str]


# Values refused, each with what its error says.
REFUSED: list[tuple[str, Any, str]] = [
    ("int key", {1: "a"}, KEY_ERROR + "1"),
    ("tuple key", {(1, 2): "a"}, KEY_ERROR + r"\(1, 2\)"),
    ("float key", {1.5: "a"}, KEY_ERROR + "1.5"),
    ("None key", {None: "a"}, KEY_ERROR + "None"),
    ("int key in an OrderedDict", collections.OrderedDict([(1, "a")]), KEY_ERROR + "1"),
    ("float key in an OrderedDict", collections.OrderedDict([(1e300, "a")]), KEY_ERROR + r"1e\+300"),
    ("int key inside a dataclass", Tagged({2: "b"}), KEY_ERROR + "2"),
    ("bytes", b"ab", BYTES_ERROR),
    ("bytearray", bytearray(b"ab"), BYTES_ERROR),
    ("memoryview", memoryview(b"ab"), BYTES_ERROR),
]

# Values converted, each with its JSON form.
CONVERTED: list[tuple[str, Any, Any]] = [
    ("set", {3}, [3]),
    ("frozenset", frozenset({"a"}), ["a"]),
    ("tuple", (1, "a"), [1, "a"]),
    ("dataclass with a set", Point(1, {"t"}), {"x": 1, "tags": ["t"]}),
    ("deque", collections.deque([1, 2]), [1, 2]),
]


def client() -> ferroloop.Client:
    # Nothing is sent: a refused body fails before any connection.
    return ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False, max_retries=0)


def writers() -> list[tuple[str, Callable[[Any], object]]]:
    """Each entry point that writes a value as JSON, refusing what has no JSON form (a
    ``ValueError``)."""
    tracker = ferroloop.ContextTracker()
    return [
        ("estimate_tokens", lambda v: ferroloop.estimate_tokens({"role": "user", "content": "hi", "x": v})),
        ("estimate_request", lambda v: ferroloop.estimate_request({"messages": [], "x": v})),
        ("push_message", lambda v: tracker.push_message({"role": "user", "content": "hi", "x": v})),
        ("replace_messages", lambda v: tracker.replace_messages([{"role": "user", "content": "hi", "x": v}])),
        ("record_usage", lambda v: tracker.record_usage({"input_tokens": 5, "x": v})),
        ("tool schema", lambda v: ferroloop.ToolExecutor().tool(name="t", schema={"type": "object", "x": v})(lambda _: "ok")),
    ]


@pytest.mark.parametrize("label,value,error", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_value_without_a_json_form_is_refused_naming_it(label: str, value: Any, error: str) -> None:
    for name, write in writers():
        with pytest.raises(ValueError, match=error):
            write(value)


@pytest.mark.asyncio
@pytest.mark.parametrize("label,value,error", REFUSED, ids=[r[0] for r in REFUSED])
async def test_requests_extra_and_messages_refuse_it_naming_it(label: str, value: Any, error: str) -> None:
    async with client() as c:
        body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "metadata": {"x": value}}
        with pytest.raises(ValueError, match=error):
            c.stream(**body)
        with pytest.raises(ValueError, match=error):
            await c.create(**body)
        with pytest.raises(ValueError, match=error):
            ferroloop.Agent(c, model="m", extra={"metadata": {"x": value}})
        agent = ferroloop.Agent(c, model="m")
        with pytest.raises(ValueError, match=error):
            agent.run(messages=[{"role": "user", "content": "hi", "x": value}])


@pytest.mark.asyncio
@pytest.mark.parametrize("label,value,error", REFUSED, ids=[r[0] for r in REFUSED])
async def test_a_tools_input_result_and_progress_refuse_it_naming_it(label: str, value: Any, error: str) -> None:
    executor = ferroloop.ToolExecutor()
    progress_errors: list[str] = []

    @executor.tool(name="echo")
    def echo(input: dict[str, Any]) -> str:
        return "ran"

    @executor.tool(name="give")
    def give(input: dict[str, Any]) -> Any:
        return {"x": value}

    @executor.tool(name="report")
    def report(input: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
        try:
            ctx.progress({"x": value})
        except ValueError as err:
            progress_errors.append(str(err))
        return "ok"

    (given,) = await executor.run([{"id": "a", "name": "echo", "input": {"x": value}}])
    assert given["is_error"] is True
    assert given["content"] != "ran"
    assert "the input cannot be sent as JSON" in str(given["content"])
    assert re.search(error, str(given["content"])), given["content"]
    (returned,) = await executor.run([{"id": "b", "name": "give", "input": {}}])
    assert returned["is_error"] is True
    assert re.search(error, str(returned["content"])), returned["content"]
    (reported,) = await executor.run([{"id": "c", "name": "report", "input": {}}])
    assert reported["content"] == "ok"
    assert len(progress_errors) == 1 and re.search(error, progress_errors[0]), progress_errors


@pytest.mark.asyncio
@pytest.mark.parametrize("label,value,expected", CONVERTED, ids=[c[0] for c in CONVERTED])
async def test_a_set_a_tuple_or_a_dataclass_is_converted_faithfully(label: str, value: Any, expected: Any) -> None:
    executor = ferroloop.ToolExecutor()
    seen: list[Any] = []
    progress: list[Any] = []

    @executor.tool(name="echo")
    def echo(input: dict[str, Any], ctx: ferroloop.ToolContext) -> Any:
        seen.append(input["x"])
        ctx.progress({"x": value})
        return {"x": value}

    turn = executor.turn()
    turn.submit({"id": "a", "name": "echo", "input": {"x": value}})
    turn.seal()
    async for event in turn:
        if event["type"] == "progress":
            progress.append(event["data"])
    (result,) = await turn.results()
    assert seen == [expected]
    assert progress == [{"x": expected}]
    assert result["is_error"] is False
    assert json.loads(str(result["content"])) == {"x": expected}
    assert ferroloop.estimate_tokens({"role": "user", "content": "hi", "x": value}) > 0
