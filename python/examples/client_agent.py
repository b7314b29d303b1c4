"""Stream a message with ``ferroloop.Client``, then run ``ferroloop.Agent`` with a Python tool
and the built-in ``glob`` tool.

With ``ANTHROPIC_API_KEY`` set this talks to the real API. Otherwise it starts the loopback
replay server (``ferroloop serve-replay``, from ``$FERROLOOP_BIN`` or ``target/debug/ferroloop``)
with a scripted model: a rate-limit retry, a turn with two parallel tool calls, and an answer.
Run from the repository root: ``python python/examples/client_agent.py``. Type-checked by
``mypy --strict`` in ``scripts/test-python.sh``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional

import ferroloop
from result_types import describe_metrics  # this directory's example of the typed results

REPO = Path(__file__).resolve().parents[2]
MODEL = "claude-sonnet-4-5"


def replay_script() -> dict[str, Any]:
    """The scripted model: a 429, then two parallel tool calls, then the answer."""

    def sse(*events: dict[str, Any]) -> dict[str, Any]:
        return {"body": {"events": [{"event": e["type"], "data": e} for e in events]}}

    start = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                   "content": [], "model": MODEL,
                                                   "usage": {"input_tokens": 50, "output_tokens": 1}}}
    stop = {"type": "message_stop"}

    def tool(index: int, id: str, name: str, input: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"type": "content_block_start", "index": index,
             "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}},
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "input_json_delta", "partial_json": json.dumps(input)}},
            {"type": "content_block_stop", "index": index},
        ]

    def text(index: int, words: str) -> list[dict[str, Any]]:
        return [
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": words}},
            {"type": "content_block_stop", "index": index},
        ]

    def delta(reason: str) -> dict[str, Any]:
        return {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 20}}

    return {
        "responses": [
            sse(start, *text(0, "Hello from the replay model."), delta("end_turn"), stop),
            {"status": 429, "headers": {"retry-after-ms": "50"},
             "body": {"json": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}}},
            sse(start, *tool(0, "toolu_1", "weather", {"city": "Paris"}),
                *tool(1, "toolu_2", "glob", {"pattern": "*.md"}), delta("tool_use"), stop),
            sse(start, *text(0, "It is sunny in Paris, and this directory has Markdown files."),
                delta("end_turn"), stop),
        ]
    }


def start_replay_server(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = os.environ.get("FERROLOOP_BIN") or str(REPO / "target" / "debug" / "ferroloop")
    script = directory / "script.json"
    script.write_text(json.dumps(replay_script()), encoding="utf-8")
    server = subprocess.Popen([binary, "serve-replay", "--script", str(script)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdout is not None
    url: str = json.loads(server.stdout.readline())["url"]
    return server, url


executor = ferroloop.ToolExecutor()


@executor.tool(concurrency_safe=True, schema={"type": "object", "properties": {"city": {"type": "string"}},
                                               "required": ["city"]})
async def weather(input: dict[str, Any]) -> str:
    """The current weather in a city."""
    await asyncio.sleep(0.01)  # an HTTP call, say
    return f"It is sunny in {input['city']}."


async def main(base_url: Optional[str]) -> None:
    async with ferroloop.Client("anthropic", base_url=base_url, api_key=None if base_url is None else "replay",
                                max_retries=3) as client:
        # 1. One streamed message: typed events, then the final message.
        stream = client.stream(model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "Say hello."}])
        async for event in stream:
            if event["type"] == "text_delta":
                print(event["text"], end="", flush=True)
        message = stream.message()
        assert message is not None
        print(f"\n[{message['stop_reason']}, {message['usage']['output_tokens']} output tokens]")
        metrics = stream.metrics
        assert metrics is not None
        print(f"[{describe_metrics(metrics)}]")

        # 2. The agent loop: Python tools and built-in tools, events as they happen.
        agent = ferroloop.Agent(client, model=MODEL, system="Be brief.", tools=[executor, "glob"],
                                workspace=REPO, max_turns=5)
        async for update in agent.run("What is the weather in Paris, and which Markdown files are here?"):
            # Narrow on `update["type"]` itself: a copy of it in a variable narrows nothing.
            if update["type"] == "text_delta":
                print(update["text"], end="", flush=True)
            elif update["type"] == "retry":
                print(f"[retry after HTTP {update['status']}, waiting {update['wait']:.2f} s]")
            elif update["type"] == "tool_started":
                print(f"[{update['name']} {json.dumps(update['input'])}]")
            elif update["type"] == "tool_finished":
                print(f"[{update['name']} {update['status']} in {update['duration'] * 1e3:.1f} ms]")
            elif update["type"] == "stop":
                print(f"\n[stop: {update['reason']}, {update['turns']} turns, {update['tool_calls']} tool calls]")

if __name__ == "__main__":
    if os.environ.get("ANTHROPIC_API_KEY"):
        asyncio.run(main(None))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            server, url = start_replay_server(Path(tmp))
            try:
                asyncio.run(main(url))
            finally:
                assert server.stdin is not None
                server.stdin.close()
                server.wait(timeout=30)
