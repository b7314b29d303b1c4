"""Reading ferroloop's typed results: a tool's ``ToolResult``, an agent's ``ToolDefinition``s,
``TokenCount``, ``RequestEstimate``, a stream's ``RequestMetrics`` (``describe_metrics``, which
``client_agent.py`` calls) and the ``events`` of a decoder's error (``DecodeErrorDetail``), every
field assigned to a variable of its exact type, as ``mypy --strict`` checks.

Run from the repository root after ``pip install ./python``: ``python python/examples/result_types.py``
(offline: runs tools, reads an agent's definitions without a request, decodes a recorded error
stream). Type-checked by ``mypy --strict`` in ``scripts/test-python.sh``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal, Optional, Union

import ferroloop

ERROR_STREAM = Path(__file__).resolve().parents[2] / "tests/decode/streams/anthropic/error_overloaded.sse"

executor = ferroloop.ToolExecutor()


@executor.tool(concurrency_safe=True, schema={"type": "object", "properties": {"city": {"type": "string"}}})
def weather(input: dict[str, Any]) -> str:
    """The current weather in a city."""
    return f"It is sunny in {input.get('city', 'the city')}."


@executor.tool(concurrency_safe=True)
def chart(input: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": "a chart:"}, {"type": "image", "source": {"type": "base64",
                                                                               "media_type": "image/png", "data": ""}}]


def describe_result(result: ferroloop.ToolResult) -> str:
    kind: Literal["tool_result"] = result["type"]
    answered: str = result["tool_use_id"]
    is_error: bool = result["is_error"]
    content: Union[str, list[dict[str, Any]]] = result["content"]
    if isinstance(content, str):
        shown = content
    else:
        shown = ", ".join(str(block.get("type")) for block in content) + " blocks"
    return f"{kind} for {answered} (error={is_error}): {shown}"


def describe_definition(definition: ferroloop.ToolDefinition) -> str:
    if "type" in definition:
        # A provider's tool of `extra["tools"]`, as given.
        provider_type: Any = definition["type"]
        return f"provider tool {provider_type}"
    # One of the agent's own tools (an `AgentToolDefinition`), or a provider tool given
    # without a `type`: the keys are read at the agent tool's types.
    name: str = definition["name"]
    schema: dict[str, Any] = definition["input_schema"]
    description: Optional[str] = definition.get("description")
    return f"{name} {sorted(schema)}: {description}"


def describe_count(count: ferroloop.TokenCount) -> str:
    tokens: int = count["tokens"]
    method: Literal["exact", "usage+estimate", "estimate"] = count["method"]
    return f"{tokens} tokens ({method})"


def describe_estimate(estimate: ferroloop.RequestEstimate) -> str:
    parts: list[int] = [estimate["system"], estimate["tools"], estimate["messages"], estimate["overhead"]]
    total: int = estimate["total"]
    return f"{total} tokens = {' + '.join(map(str, parts))}"


def describe_metrics(metrics: ferroloop.RequestMetrics) -> str:
    request_id: Optional[str] = metrics["request_id"]
    attempts: int = metrics["attempts"]
    retries: list[ferroloop.StreamRetryEvent] = metrics["retries"]
    waits: list[float] = [retry["wait"] for retry in retries]
    http_version: Optional[str] = metrics["http_version"]
    to_headers: Optional[float] = metrics["time_to_headers"]
    to_first_event: Optional[float] = metrics["time_to_first_event"]
    to_first_token: Optional[float] = metrics["time_to_first_token"]
    total: Optional[float] = metrics["total"]
    received: int = metrics["bytes_received"]
    events: int = metrics["events"]
    usage: Optional[dict[str, Any]] = metrics["usage"]
    return (
        f"request {request_id}: {attempts} attempts (waits {waits}), {http_version}, headers after "
        f"{to_headers} s, first event {to_first_event} s, first token {to_first_token} s, total "
        f"{total} s, {received} bytes, {events} events, usage {usage}"
    )


def decode_with_detail(data: bytes) -> list[ferroloop.DecodeEvent]:
    """The events of ``data``, also those the chunk completed before an error."""
    try:
        return ferroloop.StreamDecoder("anthropic").feed(data)
    except ferroloop.APIError as err:
        # Only an error of `feed` carries `events`: the protocol says which.
        if isinstance(err, ferroloop.DecodeErrorDetail):
            events: list[ferroloop.DecodeEvent] = err.events
            print(f"{type(err).__name__} ({err.error_type}) after {len(events)} events")
            return events
        raise


async def main() -> None:
    results = await executor.run([
        {"id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        {"id": "toolu_2", "name": "chart", "input": {}},
        {"id": "toolu_3", "name": "missing", "input": {}},
    ])
    for result in results:
        print(describe_result(result))
    async with ferroloop.Client("anthropic", api_key="unused", base_url="http://127.0.0.1:9", from_env=False) as client:
        agent = ferroloop.Agent(client, model="m", tools=[executor, "glob"],
                                extra={"tools": [{"type": "web_search_20250305", "name": "web_search"}]})
        for definition in agent.tool_definitions():
            print(describe_definition(definition))
    tracker = ferroloop.ContextTracker()
    tracker.push_message({"role": "user", "content": "What is the weather in Paris?"})
    print(describe_count(tracker.tokens()))
    print(describe_estimate(ferroloop.estimate_request({"system": "Be brief.", "messages": [
        {"role": "user", "content": "What is the weather in Paris?"}]})))
    text = "".join(e["text"] for e in decode_with_detail(ERROR_STREAM.read_bytes()) if e["type"] == "text_delta")
    print(f"text before the error: {text!r}")


if __name__ == "__main__":
    asyncio.run(main())
