"""An oversized tool result is spilled to a file outside the workspace; the agent's built-in
`read` may open that file (the preview tells the model where it is), and nothing else
outside the workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

import ferroloop
from conftest import ReplayServer, anthropic_events

Replay = Callable[[dict[str, Any]], ReplayServer]


def turn(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {"body": {"events": anthropic_events(content, stop_reason=stop_reason)}, "chunk_bytes": 97}


def tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    last = json.loads(request["body"])["messages"][-1]
    return [block for block in last["content"] if block["type"] == "tool_result"]


def fnv1a_64(text: str) -> int:
    """The fingerprint in a spill file's name (the core's `text_fingerprint`)."""
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


@pytest.mark.asyncio
async def test_read_opens_the_spill_file_of_an_oversized_result_but_not_its_neighbours(
    replay: Replay, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    spill_dir = tmp_path / "spill"
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the model\n", encoding="utf-8")
    big_output = "".join(f"line {i} of the big result\n" for i in range(500))
    # `<id>-<FNV-1a 64 of the text>.txt`: the scripted model reads the file the preview names.
    spill_file = spill_dir / f"toolu_1-{fnv1a_64(big_output):016x}.txt"
    server = replay(
        {
            "responses": [
                turn([tool_use("toolu_1", "big", {})], "tool_use"),
                turn(
                    [
                        tool_use("toolu_2", "read", {"file_path": str(spill_file), "limit": 3}),
                        tool_use("toolu_3", "read", {"file_path": str(outside)}),
                    ],
                    "tool_use",
                ),
                turn([{"type": "text", "text": "Read it."}], "end_turn"),
            ]
        }
    )
    executor = ferroloop.ToolExecutor(max_result_chars=200, spill_dir=str(spill_dir))

    @executor.tool(concurrency_safe=True)
    def big(input: dict[str, Any]) -> str:
        return big_output

    client = ferroloop.Client(
        "anthropic", api_key="sk-test", base_url=server.url, from_env=False, retry_base_delay=0.01
    )
    async with client:
        agent = ferroloop.Agent(
            client, model="claude-test", tools=[executor, "read"], workspace=workspace, max_turns=5
        )
        events = [event async for event in agent.run("Summarise the big result.")]

    assert events[-1]["type"] == "stop" and events[-1]["reason"] == "end_turn", events[-1]
    requests = server.requests()
    preview = json.dumps(tool_results(requests[1])[0]["content"])
    assert str(spill_file) in preview and spill_file.is_file()
    spilled, neighbour = tool_results(requests[2])
    assert not spilled.get("is_error", False), spilled
    assert "line 0 of the big result" in json.dumps(spilled["content"])
    assert "line 3 of the big result" not in json.dumps(spilled["content"])
    assert neighbour.get("is_error") is True, neighbour
    assert "not for the model" not in json.dumps(neighbour["content"])
