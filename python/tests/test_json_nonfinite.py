"""A float JSON cannot carry (``nan``, ``inf``, ``-inf``) in anything sent to a provider is a
``ValueError``, as other values without a JSON form are: it was sent as ``null`` without a word
(``temperature=nan`` became "no temperature"). A tool's result keeps its documented rendering
(``nan`` is ``null``), and values that are only counted are still counted."""

from __future__ import annotations

import math
from typing import Any

import pytest

import ferroloop

NON_FINITE = [math.nan, math.inf, -math.inf]
SPELLED = {id(math.nan): "nan", id(math.inf): "inf"}


class Fraction(float):
    """A float subclass: converted through serde (the slow path), which must refuse too."""


def client() -> ferroloop.Client:
    # Nothing is sent: the body is refused before any connection.
    return ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False, max_retries=0)


def bodies(value: float) -> list[dict[str, Any]]:
    """Request bodies holding `value` at the top level, in a message and in a tool schema."""
    user = {"role": "user", "content": "hi"}
    return [
        {"model": "m", "max_tokens": 8, "temperature": value, "messages": [user]},
        {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "w": [value]}]}]},
        {"model": "m", "max_tokens": 8, "messages": [user], "tools": [{"name": "t", "input_schema": {"type": "object", "maximum": value}}]},
        {"model": "m", "max_tokens": 8, "top_p": Fraction(value), "messages": [user]},
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
async def test_a_request_with_a_non_finite_float_is_refused(value: float) -> None:
    async with client() as c:
        for body in bodies(value):
            with pytest.raises(ValueError, match=r"cannot be converted to JSON: the float -?(nan|inf) has no JSON form"):
                c.stream(**body)
            with pytest.raises(ValueError, match=r"cannot be converted to JSON: the float -?(nan|inf) has no JSON form"):
                await c.create(**body)


@pytest.mark.asyncio
async def test_the_error_spells_the_float_as_python_does() -> None:
    async with client() as c:
        for value, spelled in [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf")]:
            with pytest.raises(ValueError, match=f"the float {spelled} has"):
                c.stream(model="m", max_tokens=8, temperature=value, messages=[])


@pytest.mark.asyncio
@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
async def test_agent_extra_messages_and_tool_schemas_refuse_a_non_finite_float(value: float) -> None:
    async with client() as c:
        with pytest.raises(ValueError, match="cannot be converted to JSON: the float"):
            ferroloop.Agent(c, model="m", extra={"temperature": value})
        with pytest.raises(ValueError, match="cannot be converted to JSON: the float"):
            ferroloop.Agent(c, model="m", extra={"metadata": {"scores": [1.0, Fraction(value)]}})
        agent = ferroloop.Agent(c, model="m")
        with pytest.raises(ValueError, match="cannot be converted to JSON: the float"):
            agent.run([{"type": "text", "text": "hi", "score": value}])
        with pytest.raises(ValueError, match="cannot be converted to JSON: the float"):
            agent.run(messages=[{"role": "user", "content": "hi", "score": value}])
        executor = ferroloop.ToolExecutor()
        with pytest.raises(ValueError, match="cannot be converted to JSON: the float"):
            executor.tool(name="t", schema={"type": "object", "properties": {"x": {"maximum": value}}})(lambda _: "ok")


@pytest.mark.asyncio
async def test_finite_floats_are_still_sent() -> None:
    async with client() as c:
        # Refused for the connection (nothing listens), not for the body.
        with pytest.raises(ferroloop.FerroloopError):
            await c.create(model="m", max_tokens=8, temperature=0.5, top_p=Fraction(0.25), messages=[])


@pytest.mark.asyncio
async def test_a_tool_result_with_nan_is_still_its_json_rendering() -> None:
    executor = ferroloop.ToolExecutor()

    @executor.tool(name="score")
    def score(input: dict[str, Any]) -> Any:
        return {"score": math.nan, "limit": Fraction(math.inf)}

    (result,) = await executor.run([{"id": "t1", "name": "score", "input": {}}])
    assert result["is_error"] is False
    assert "null" in str(result["content"])


def test_counting_still_counts_non_finite_floats() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "hello", "w": math.nan}]}
    assert ferroloop.estimate_tokens(message) > 0
    tracker = ferroloop.ContextTracker()
    tracker.push_message(message)
    assert len(tracker) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("value", NON_FINITE + [Fraction(math.nan)], ids=["nan", "inf", "-inf", "subclass"])
async def test_a_tool_returning_a_non_finite_float_alone_sends_null_as_node_does(value: float) -> None:
    # A nan returned by itself became the empty text of `None`, where Node's tool returning NaN
    # sends "null" (JSON.stringify's rendering) and a nan nested in a result is `null` here too.
    executor = ferroloop.ToolExecutor()

    @executor.tool(name="alone")
    def alone(input: dict[str, Any]) -> Any:
        return value

    @executor.tool(name="wrapped")
    def wrapped(input: dict[str, Any]) -> Any:
        return {"content": value}

    @executor.tool(name="nested")
    def nested(input: dict[str, Any]) -> Any:
        return {"score": value, "list": [value]}

    results = await executor.run([
        {"id": "t1", "name": "alone", "input": {}},
        {"id": "t2", "name": "wrapped", "input": {}},
        {"id": "t3", "name": "nested", "input": {}},
    ])
    assert [(r["content"], r["is_error"]) for r in results] == [
        ("null", False),
        ("null", False),
        ('{"score":null,"list":[null]}', False),
    ]
    # None is still the empty result.
    executor.tool(name="none")(lambda _: None)
    (none,) = await executor.run([{"id": "t4", "name": "none", "input": {}}])
    assert none["content"] == ""
