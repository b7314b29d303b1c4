"""Decode a recorded Anthropic stream and run its tool calls with ferroloop's executor.

Run from the repository root after ``pip install ./python``: ``python python/examples/agent_tools.py``.
Type-checked by ``mypy --strict`` in ``scripts/test-python.sh``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import ferroloop

STREAM = Path(__file__).resolve().parents[2] / "tests/fixtures/anthropic/tool_use_response.sse"

executor = ferroloop.ToolExecutor(max_concurrency=10)


@executor.tool(concurrency_safe=True)
async def get_weather(input: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
    ctx.progress({"looking_up": input.get("location")})
    await asyncio.sleep(0.01)  # an HTTP call, say
    return f"It is sunny in {input.get('location', 'the city')}."


async def main() -> None:
    decoder = ferroloop.StreamDecoder(provider="anthropic")
    turn = executor.turn()
    raw = STREAM.read_bytes()
    for start in range(0, len(raw), 256):  # as the network delivers it
        for event in decoder.feed(raw[start : start + 256]):
            if event["type"] == "text_delta":
                print(event["text"], end="", flush=True)
            elif event["type"] == "tool_use_ready":  # sealed: start it now
                turn.submit({"id": event["id"], "name": event["name"], "input": event["input"]})
    message: dict[str, Any] = decoder.finish()
    turn.seal()
    print()
    async for update in turn:
        if update["type"] == "result":
            print(update["result"])
    budget = ferroloop.ContextBudget.for_model(message["model"])
    tokens = ferroloop.estimate_tokens([{"role": "assistant", "content": message["content"]}])
    print(f"~{tokens} tokens; compact at {budget.autocompact_threshold}")


if __name__ == "__main__":
    asyncio.run(main())
