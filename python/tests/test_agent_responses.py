"""The agent over the OpenAI Responses API: `serve-replay --agent-model --agent-model-provider
openai-responses` streams the scripted conversation of `ferroloop run` as `response.*` events; the
core translates the requests (the whole history as input items, nothing stored) and the events.
The built-in tools run for real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

import ferroloop

from conftest import ReplayServer


@pytest.mark.asyncio
async def test_an_agent_over_the_responses_api_against_the_replay_model(
    agent_model: Callable[[str], ReplayServer], tmp_path: Path
) -> None:
    (tmp_path / "README.md").write_text("# Demo project\n\nTODO: write more\n", encoding="utf-8")
    (tmp_path / "main.py").write_text("def main():\n    pass\n", encoding="utf-8")
    server = agent_model("openai-responses")
    client = ferroloop.Client("openai-responses", api_key="sk-test", base_url=server.url, from_env=False)
    async with client:
        agent = ferroloop.Agent(
            client, model="gpt-5", tools=["glob", "grep", "read"], workspace=tmp_path, max_turns=6
        )
        stop = await agent.run("Explore this directory.").finish()

    assert stop["reason"] == "end_turn" and stop["error"] is None, stop
    assert stop["turns"] == 3 and stop["tool_calls"] == 5
    text = json.dumps(stop["messages"][-1]["content"])
    assert "Here is what I found" in text and "# Demo project" in text
    requests = server.requests()
    assert len(requests) == 3 and all(r["path"].endswith("/responses") for r in requests)
    last = json.loads(requests[-1]["body"])
    assert last["store"] is False and last["include"] == ["reasoning.encrypted_content"]
    assert sum(1 for item in last["input"] if item["type"] == "function_call_output") == 5
