"""The READMEs' Python examples run as written (from the repository root): the repository
README's Python section and both blocks of python/README.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from typing import Callable

from conftest import REPO, ReplayServer, needs_repository


def run_block(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs a README block with this Python from the repository root, warnings as errors; it
    must exit with 0."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**(os.environ if env is None else env), "PYTHONWARNINGS": "error"},
    )
    assert done.returncode == 0, done.stderr
    return done


@needs_repository
def test_readme_python_example_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S)
    assert example is not None
    done = run_block(example.group(1))
    assert "'tool_use_id': 'toolu_01NRLabsLyVHZPKxbKvkfSMn'" in done.stdout
    assert "It is sunny in Paris." in done.stdout


def python_readme_blocks() -> list[str]:
    """The ```python blocks of python/README.md, in order."""
    readme = (REPO / "python" / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", readme, re.S)


def test_python_readme_has_the_two_blocks_tested_here() -> None:
    blocks = python_readme_blocks()
    assert len(blocks) == 2, "a python/README.md block was added or removed: test it here"
    assert "ferroloop.SseParser()" in blocks[0]
    assert "ferroloop.Client(" in blocks[1] and "ferroloop.Agent(" in blocks[1]


@needs_repository
def test_python_readme_sse_example_prints_the_event() -> None:
    assert run_block(python_readme_blocks()[0]).stdout == "ping {}\n"


def test_python_readme_client_and_agent_example_runs_against_the_replay_server(
    agent_model: Callable[[str], ReplayServer],
) -> None:
    # The block reads ANTHROPIC_API_KEY; the client reads ANTHROPIC_BASE_URL too (from_env).
    server = agent_model("anthropic")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(ANTHROPIC_API_KEY="replay", ANTHROPIC_BASE_URL=server.url)
    lines = run_block(python_readme_blocks()[1], env).stdout.splitlines()
    # The stream: its typed events (dicts), then the final message.
    assert lines[0].startswith("{'type': 'message_start'"), lines[0]
    assert any(line.startswith("{'type': 'text_delta'") for line in lines)
    message = next(line for line in lines if line.startswith("{'id': "))
    assert "'stop_reason': 'tool_use'" in message
    # The agent run: one event type a line, ending with the stop event.
    agent = lines[lines.index(message) + 1 :]
    assert agent[0] == "turn_start"
    assert "tool_finished" in agent
    assert agent[-1] == "stop"
    assert len(server.requests()) >= 2


@needs_repository
def test_example_scripts_run() -> None:
    # Offline: the client example talks to the replay server, not to a real endpoint.
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    for script in sorted((REPO / "python" / "examples").glob("*.py")):
        done = subprocess.run(
            [sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode == 0, f"{script.name}: {done.stderr}"


def test_agent_docstring_names_every_client_provider() -> None:
    # The README's Agent bullet says the client may be any of the three; help(Agent) says so too.
    import ferroloop

    doc = ferroloop.Agent.__doc__ or ""
    for provider in ("anthropic", "openai-chat", "openai-responses"):
        assert f'"{provider}"' in doc, provider
