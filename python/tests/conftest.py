"""Shared helpers: paths to the cross-language fixtures under the repository's `tests/`."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import pytest

import ferroloop

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / "tests"

# The source distribution ships these tests but not the repository's shared data they read
# (tests/ with its recorded streams and expected outputs, node/lib/index.d.ts, the README, the
# CLI crate, benches/): there, a test (or a whole module) that needs a missing repository file
# is skipped, saying so, instead of failing. Within the repository nothing is skipped.
IN_REPOSITORY = (SHARED / "fixtures").is_dir() and (REPO / "cli").is_dir()
OUTSIDE_REPOSITORY = (
    "needs {} from the ferroloop repository, which the source distribution does not ship: "
    "run the tests from a clone of the repository"
)

# For a test that needs the repository without reading a file of it itself (it runs code that
# does, in a subprocess, or from the repository root, where the source distribution has the
# pure-Python `ferroloop/` without its extension module).
needs_repository = pytest.mark.skipif(
    not IN_REPOSITORY,
    reason=OUTSIDE_REPOSITORY.format("the README, examples and fixtures at the repository root"),
)


def _missing_repository_file(err: BaseException) -> Optional[str]:
    """The repository path a `FileNotFoundError` names, when run outside the repository."""
    if IN_REPOSITORY or not isinstance(err, FileNotFoundError) or err.filename is None:
        return None
    path = Path(str(err.filename))
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return None


class _RepositoryModule(pytest.Module):
    """A test module that reads repository files as it is imported: skipped outside it."""

    def collect(self) -> Any:
        try:
            return super().collect()
        except FileNotFoundError as err:
            missing = _missing_repository_file(err)
            if missing is None:
                raise
            pytest.skip(OUTSIDE_REPOSITORY.format(missing))


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> Optional[pytest.Module]:
    if IN_REPOSITORY or not module_path.name.startswith("test_"):
        return None
    return _RepositoryModule.from_parent(parent, path=module_path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        return (yield)
    except FileNotFoundError as err:
        missing = _missing_repository_file(err)
        if missing is None:
            raise
        pytest.skip(OUTSIDE_REPOSITORY.format(missing))

FIXTURES = [
    "anthropic/basic_response",
    "anthropic/tool_use_response",
    "anthropic/incomplete_partial_json_response",
    "openai-chat/173417d55340",
    "openai-chat/2018feb66ae1",
    "openai-chat/4cc50a6135d2",
    "openai-chat/569c877e6942",
]


def fixture_bytes(name: str) -> bytes:
    """The raw bytes of a recorded stream, e.g. ``fixture_bytes("anthropic/basic_response")``."""
    return (SHARED / "fixtures" / f"{name}.sse").read_bytes()


def expected_sse_items(name: str) -> list[dict[str, Any]]:
    """The event list `ferroloop sse` prints for a fixture (`tests/sse/expected/*.jsonl`)."""
    path = SHARED / "sse" / "expected" / (name.replace("/", "-") + ".jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def conformance_vectors() -> list[tuple[str, bytes, list[dict[str, Any]]]]:
    """`tests/sse/conformance.json`: (name, input bytes, expected items)."""
    raw = json.loads((SHARED / "sse" / "conformance.json").read_text(encoding="utf-8"))
    out = []
    for vector in raw:
        if "input" in vector:
            data = vector["input"].encode("utf-8")
        else:
            data = base64.b64decode(vector["input_base64"])
        out.append((vector["name"], data, vector["expected"]))
    return out


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    """`data` in pieces of `size` bytes (the whole input when `size` is 0)."""
    if size <= 0:
        yield data
        return
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.fixture(params=FIXTURES)
def fixture_name(request: pytest.FixtureRequest) -> str:
    """Each recorded provider stream in turn."""
    return str(request.param)


# --- The loopback replay server (`ferroloop serve-replay`) -----------------------------------


def ferroloop_binary() -> Path:
    """The `ferroloop` CLI: `$FERROLOOP_BIN`, else `target/debug/ferroloop`, built with cargo
    when missing (scripts/test-python.sh builds it before pytest). Outside the repository the
    tests that use it are skipped: their scripts serve the repository's recorded streams."""
    if not IN_REPOSITORY:
        pytest.skip(OUTSIDE_REPOSITORY.format("the replay server (cli/) and the recorded streams it serves"))
    configured = os.environ.get("FERROLOOP_BIN")
    if configured:
        return Path(configured)
    binary = REPO / "target" / "debug" / "ferroloop"
    if not binary.exists():
        subprocess.run(
            ["cargo", "build", "--quiet", "-p", "ferroloop-cli"], cwd=REPO, check=True
        )
    return binary


class ReplayServer:
    """A running `ferroloop serve-replay`: `url` to point a client at, `requests()` the
    requests it received (read once the server has stopped)."""

    def __init__(
        self, script: Optional[dict[str, Any]], directory: Path, args: Sequence[str] = ()
    ) -> None:
        """Serves `script`, or with `script=None` whatever `args` ask for (`--agent-model`)."""
        if script is not None:
            path = directory / "script.json"
            path.write_text(json.dumps(script), encoding="utf-8")
            args = ["--script", str(path), *args]
        self._process = subprocess.Popen(
            [
                str(ferroloop_binary()),
                "serve-replay",
                *args,
                "--base-dir",
                str(REPO),
                "--log-requests",
                "--idle-exit-ms",
                "60000",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._process.stdout is not None
        banner = json.loads(self._process.stdout.readline())
        self.url: str = banner["url"]
        self._requests: Optional[list[dict[str, Any]]] = None
        # The request log is read as it comes: left in the pipe, it would fill it (64 KiB, a
        # few dozen agent requests) and block the server mid-request, which a test would see
        # as a hang of the client.
        self._log_lines: list[bytes] = []
        self._log_reader = threading.Thread(target=self._read_log, daemon=True)
        self._log_reader.start()

    def _read_log(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._log_lines.append(line)

    def stop(self) -> None:
        if self._requests is not None:
            return
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)
        self._log_reader.join(timeout=30)
        assert self._process.stdout is not None
        self._process.stdout.close()
        self._requests = [
            json.loads(line)["request"]
            for line in b"".join(self._log_lines).decode("utf-8").splitlines()
            if line
        ]

    def requests(self) -> list[dict[str, Any]]:
        """Every request received, in order (stops the server)."""
        self.stop()
        assert self._requests is not None
        return self._requests


@pytest.fixture
def replay(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], ReplayServer]]:
    """Starts `ferroloop serve-replay` with a script (stopped at the end of the test)."""
    servers: list[ReplayServer] = []

    def start(script: dict[str, Any]) -> ReplayServer:
        server = ReplayServer(script, tmp_path)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def agent_model(tmp_path: Path) -> Iterator[Callable[[str], ReplayServer]]:
    """Starts `ferroloop serve-replay --agent-model` answering in a provider's format
    (`"anthropic"`, `"openai"` or `"openai-responses"`), stopped at the end of the test."""
    servers: list[ReplayServer] = []

    def start(provider: str) -> ReplayServer:
        server = ReplayServer(
            None, tmp_path, ["--agent-model", "--agent-model-provider", provider]
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def openai_chat_events(
    content: list[dict[str, Any]],
    *,
    finish_reason: str = "stop",
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
) -> list[dict[str, Any]]:
    """A complete OpenAI Chat Completions stream as the `events` body of a replay script: the
    role chunk, text in two deltas, each tool call as a header chunk then argument fragments,
    the finish reason, the usage chunk and `[DONE]`."""

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "data": {
                "id": "chatcmpl-replay",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "replay",
                "choices": choices,
                **extra,
            }
        }

    def delta(fields: dict[str, Any]) -> dict[str, Any]:
        return chunk([{"index": 0, "delta": fields, "finish_reason": None}])

    events = [delta({"role": "assistant", "content": ""})]
    calls = 0
    for block in content:
        if block["type"] == "text":
            text = block["text"]
            half = len(text) // 2
            events += [delta({"content": piece}) for piece in (text[:half], text[half:]) if piece]
        else:
            raw = json.dumps(block["input"])
            header = {
                "index": calls,
                "id": block["id"],
                "type": "function",
                "function": {"name": block["name"], "arguments": ""},
            }
            events.append(delta({"tool_calls": [header]}))
            for piece in (raw[:3], raw[3:]):
                events.append(delta({"tool_calls": [{"index": calls, "function": {"arguments": piece}}]}))
            calls += 1
    events.append(chunk([{"index": 0, "delta": {}, "finish_reason": finish_reason}]))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    events.append(chunk([], usage=usage))
    events.append({"data": "[DONE]"})
    return events


def anthropic_events(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    message_id: str = "msg_replay",
    input_tokens: int = 10,
    output_tokens: int = 5,
) -> list[dict[str, Any]]:
    """A complete Anthropic message as the `events` body of a replay script: text blocks in
    two deltas, tool inputs (client and server tools) as `input_json_delta` fragments, other
    blocks whole in their start event."""
    events: list[dict[str, Any]] = [
        {
            "event": "message_start",
            "data": {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": "replay",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            },
        }
    ]
    for index, block in enumerate(content):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            text = block["text"]
            half = len(text) // 2
            deltas = [
                {"type": "text_delta", "text": piece} for piece in (text[:half], text[half:]) if piece
            ]
        elif block["type"] in ("tool_use", "server_tool_use"):
            start = {"type": block["type"], "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in (raw[:3], raw[3:])
            ]
        else:
            # Other blocks (server tool results, ...) arrive whole in their start event.
            start = block
            deltas = []
        events.append(
            {
                "event": "content_block_start",
                "data": {"type": "content_block_start", "index": index, "content_block": start},
            }
        )
        for delta in deltas:
            events.append(
                {
                    "event": "content_block_delta",
                    "data": {"type": "content_block_delta", "index": index, "delta": delta},
                }
            )
        events.append(
            {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": index}}
        )
    events.append(
        {
            "event": "message_delta",
            "data": {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        }
    )
    events.append({"event": "message_stop", "data": {"type": "message_stop"}})
    return events


def executor_with_slow_cleanups(steps: list[str]) -> tuple[ferroloop.ToolExecutor, asyncio.Event]:
    """An executor whose async tool `slow` and plain tool `plain` take time to stop once
    cancelled; `steps` records when each is done (the event is set once both started)."""
    executor = ferroloop.ToolExecutor(cleanup_grace=5.0)
    started: list[str] = []
    both = asyncio.Event()
    loop = asyncio.get_running_loop()

    def mark_started(name: str) -> None:
        started.append(name)
        if len(started) == 2:
            both.set()

    @executor.tool(concurrency_safe=True)
    async def slow(input: dict[str, Any]) -> str:
        mark_started("slow")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)
            steps.append("async tool stopped")
            raise
        return "never"

    @executor.tool(concurrency_safe=True)
    def plain(input: dict[str, Any], ctx: Any) -> str:
        loop.call_soon_threadsafe(mark_started, "plain")
        while not ctx.cancelled:
            time.sleep(0.005)
        time.sleep(0.2)
        steps.append("plain tool stopped")
        return "stopped"

    return executor, both
