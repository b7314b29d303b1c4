"""The README's Python example runs as written (from the repository root)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO


def test_readme_python_example_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S)
    assert example is not None
    done = subprocess.run(
        [sys.executable, "-c", example.group(1)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert done.returncode == 0, done.stderr
    assert "'tool_use_id': 'toolu_01NRLabsLyVHZPKxbKvkfSMn'" in done.stdout
    assert "It is sunny in Paris." in done.stdout


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
