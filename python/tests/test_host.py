"""The package in a real asyncio host: interpreter shutdown with work in flight, exceptions that
must not be swallowed, the stubs against the runtime."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path
from typing import Callable

import pytest

import ferroloop
from conftest import needs_repository

# A daemon thread runs an event loop that keeps the executor busy (plain tools on ferroloop's
# worker threads, async tools on the loop) while the main thread exits: the interpreter's
# finalization must not find a ferroloop thread inside Python (it used to abort or segfault:
# "PyGILState_Release: thread state must be current", the worker killed mid-call).
BUSY_DAEMON = textwrap.dedent(
    """
    import asyncio, sys, threading, time
    import ferroloop

    executor = ferroloop.ToolExecutor()

    @executor.tool
    def plain(input):
        time.sleep(0.001)
        return "x" * 100

    @executor.tool
    async def coroutine(input):
        await asyncio.sleep(0)
        return "y"

    def serve():
        async def forever():
            while True:
                await executor.run(
                    [{"id": str(i), "name": "plain" if i % 2 else "coroutine", "input": {}}
                     for i in range(50)]
                )
        asyncio.run(forever())

    threading.Thread(target=serve, daemon=True).start()
    time.sleep(float(sys.argv[1]))
    print("exiting", flush=True)
    """
)


def test_exit_with_a_busy_executor_on_a_daemon_thread_does_not_crash() -> None:
    for delay in ("0.3", "0.45", "0.6", "0.75", "0.9", "1.05", "0.35", "0.5", "0.65", "0.8"):
        done = subprocess.run(
            [sys.executable, "-c", BUSY_DAEMON, delay],
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, (delay, done.returncode, done.stderr.decode()[-2000:])
        assert done.stdout == b"exiting\n"


def test_a_plain_tool_running_at_exit_is_waited_for_like_to_thread(tmp_path: Path) -> None:
    marker = f"{tmp_path}/finished"
    program = textwrap.dedent(
        f"""
        import asyncio, time
        import ferroloop

        executor = ferroloop.ToolExecutor()

        @executor.tool
        def slow(input):
            time.sleep(0.5)
            open({marker!r}, "w").write("done")
            return "late"

        async def main():
            task = asyncio.ensure_future(executor.run([{{"id": "a", "name": "slow", "input": {{}}}}]))
            await asyncio.sleep(0.1)
            task.cancel()

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    with open(marker) as finished:
        assert finished.read() == "done"


def test_work_started_by_a_later_atexit_handler_is_refused_with_a_clear_error() -> None:
    # Registered before ferroloop is imported, so it runs after ferroloop's own handler.
    program = textwrap.dedent(
        """
        import asyncio, atexit

        def late():
            import ferroloop

            async def main():
                executor = ferroloop.ToolExecutor()

                @executor.tool
                async def echo(input):
                    return "x"

                try:
                    await executor.run([{"id": "a", "name": "echo", "input": {}}])
                except RuntimeError as err:
                    print("refused:", err, flush=True)

            asyncio.run(main())

        atexit.register(late)
        import ferroloop
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"refused: the interpreter is exiting" in done.stdout


def _tool_use(name: str) -> list[dict[str, object]]:
    return [{"id": "a", "name": name, "input": {}}]


@pytest.mark.parametrize("plain", [True, False])
def test_system_exit_inside_a_tool_ends_the_loop_like_an_asyncio_task(plain: bool) -> None:
    # asyncio lets SystemExit and KeyboardInterrupt raised in a task out of the loop; a plain
    # tool's (on a worker thread) used to be swallowed into an is_error result.
    def leave_plain(input: dict[str, object]) -> str:
        sys.exit(3)

    async def leave_async(input: dict[str, object]) -> str:
        sys.exit(3)

    executor = ferroloop.ToolExecutor()
    executor.tool("leave")(leave_plain if plain else leave_async)

    async def main() -> list[ferroloop.ToolResult]:
        return await executor.run(_tool_use("leave"))

    with pytest.raises(SystemExit) as raised:
        asyncio.run(main())
    assert raised.value.code == 3


def test_keyboard_interrupt_inside_a_plain_tool_is_not_swallowed() -> None:
    executor = ferroloop.ToolExecutor()

    @executor.tool
    def interrupted(input: dict[str, object]) -> str:
        raise KeyboardInterrupt

    async def main() -> list[ferroloop.ToolResult]:
        return await executor.run(_tool_use("interrupted"))

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())


def test_other_base_exceptions_inside_a_plain_tool_stay_error_results() -> None:
    class Custom(BaseException):
        pass

    executor = ferroloop.ToolExecutor()

    @executor.tool
    def odd(input: dict[str, object]) -> str:
        raise Custom("odd")

    async def main() -> list[ferroloop.ToolResult]:
        return await executor.run(_tool_use("odd"))

    [result] = asyncio.run(main())
    assert result["is_error"] is True
    assert result["content"] == "Custom: odd"


def test_a_tool_exception_keeps_its_traceback_in_the_ferroloop_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The result tells the model "ValueError: ..."; the developer gets the traceback (and the
    # cause) from logging.getLogger("ferroloop") at DEBUG level.
    executor = ferroloop.ToolExecutor()

    def lookup(key: str) -> str:
        raise KeyError(key)

    @executor.tool
    def plain(input: dict[str, object]) -> str:
        try:
            return lookup("missing-plain")
        except KeyError as err:
            raise ValueError("plain failed") from err

    @executor.tool
    async def coroutine(input: dict[str, object]) -> str:
        return lookup("missing-async")

    async def main() -> list[ferroloop.ToolResult]:
        return await executor.run(
            [{"id": "p", "name": "plain", "input": {}}, {"id": "c", "name": "coroutine", "input": {}}]
        )

    with caplog.at_level("DEBUG", logger="ferroloop"):
        results = asyncio.run(main())
    assert [r["content"] for r in results] == ["ValueError: plain failed", "KeyError: 'missing-async'"]
    logged = "\n".join(caplog.text.splitlines())
    assert "in lookup" in logged and "missing-plain" in logged and "missing-async" in logged
    assert "The above exception was the direct cause" in logged
    assert len([r for r in caplog.records if r.exc_info]) == 2


def test_the_stubs_match_the_extension_module() -> None:
    pytest.importorskip("mypy.stubtest")
    # Constructors are `__new__` at runtime (pyo3), parameters as the stubs spell them.
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "ferroloop._native", "--ignore-missing-stub"],
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout.decode()[-4000:]


def test_one_client_serves_event_loops_in_two_threads_at_once(tmp_path: Path) -> None:
    # A client is a connection pool with no tools: each stream keeps the loop it was started
    # on. It used to refuse ("these tools are in use on an event loop running in another
    # thread") when a second thread's loop streamed while the first one's did.
    from conftest import ReplayServer

    response = {
        "body": {"fixture": "tests/fixtures/anthropic/basic_response.sse"},
        "chunk_bytes": 50,
        "chunk_delay_ms": 5,
    }
    server = ReplayServer({"responses": [response] * 10}, tmp_path)
    try:
        client = ferroloop.Client(
            "anthropic", api_key="sk-test", base_url=server.url, from_env=False
        )
        errors: list[BaseException] = []
        messages: list[dict[str, object]] = []

        def worker() -> None:
            async def main() -> None:
                for _ in range(5):
                    stream = client.stream(
                        model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
                    )
                    messages.append(await stream.until_done())

            try:
                asyncio.run(main())
            except BaseException as err:  # noqa: BLE001 - reported below
                errors.append(err)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert len(messages) == 10
    finally:
        server.stop()


def _progress_of_another_thread_during(work: Callable[[], object]) -> tuple[int, float]:
    """How often another Python thread ran (and how long ``work`` took) while ``work`` ran."""
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.05)
    try:
        before, started = ticks, time.monotonic()
        work()
        return ticks - before, time.monotonic() - started
    finally:
        stop.set()
        spinner.join()


def test_context_tracker_estimates_a_huge_message_with_the_interpreter_released() -> None:
    message = {"role": "user", "content": "hello world " * 2_000_000}  # 24 MB
    tracker = ferroloop.ContextTracker()
    ticks, took = _progress_of_another_thread_during(lambda: tracker.push_message(message))
    # Released: the other thread ticks about once per millisecond of the estimate.
    assert ticks >= took * 1000 / 10, (ticks, took)
    tracker2 = ferroloop.ContextTracker()
    ticks, took = _progress_of_another_thread_during(lambda: tracker2.replace_messages([message]))
    assert ticks >= took * 1000 / 10, (ticks, took)
    assert tracker.tokens() == tracker2.tokens()


def test_objects_started_on_one_event_loop_say_so_when_used_on_another() -> None:
    executor = ferroloop.ToolExecutor()

    @executor.tool
    async def echo(input: dict[str, object]) -> str:
        return "x"

    client = ferroloop.Client(
        "anthropic", api_key="sk-secret", base_url="http://127.0.0.1:9", from_env=False
    )

    async def start() -> tuple[ferroloop.Turn, ferroloop.MessageStream, ferroloop.AgentRun]:
        turn = executor.turn()
        stream = client.stream(model="m", max_tokens=1, messages=[])
        run = ferroloop.Agent(client, model="m").run("hi")
        return turn, stream, run

    turn, stream, run = asyncio.run(start())

    async def use_turn() -> object:
        return await turn.results()

    async def use_stream() -> object:
        return await stream.until_done()

    async def use_run() -> object:
        return await run.finish()

    for use in (use_turn, use_stream, use_run):
        with pytest.raises(RuntimeError, match="started on another event loop"):
            asyncio.run(asyncio.wait_for(use(), 10))


def test_a_plain_function_returning_a_coroutine_is_a_clear_error_without_a_warning() -> None:
    # A decorator that hides `async def` (a plain wrapper returning the coroutine) makes the
    # tool look plain: it runs on a worker thread and returns a coroutine nobody awaits.
    executor = ferroloop.ToolExecutor()

    async def fetch(input: dict[str, object]) -> str:
        return "fetched"

    def hiding(function: Callable[[dict[str, object]], object]) -> Callable[[dict[str, object]], object]:
        def wrapper(input: dict[str, object]) -> object:
            return function(input)

        return wrapper

    executor.tool("fetch")(hiding(fetch))

    async def main() -> list[ferroloop.ToolResult]:
        return await executor.run(_tool_use("fetch"))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        [result] = asyncio.run(main())
        gc.collect()
    assert result["is_error"] is True
    assert "returned a coroutine" in str(result["content"])
    assert "async def" in str(result["content"])


FORKED = textwrap.dedent(
    """
    import asyncio, os, sys
    sys.path.insert(0, sys.argv[1])
    from conftest import ReplayServer
    import pathlib, tempfile
    import ferroloop

    server = ReplayServer(
        {"responses": [{"body": {"fixture": "tests/fixtures/anthropic/basic_response.sse"}}] * 4},
        pathlib.Path(tempfile.mkdtemp()),
    )
    executor = ferroloop.ToolExecutor(default_timeout=0.2)

    @executor.tool
    async def coroutine(input):
        return "c"

    @executor.tool
    def plain(input):
        return "p"

    @executor.tool
    async def slow(input):
        await asyncio.sleep(5)

    def new_client():
        return ferroloop.Client("anthropic", api_key="k", base_url=server.url, from_env=False)

    parent_client = new_client()

    async def work(client):
        uses = [{"id": "1", "name": "coroutine", "input": {}}, {"id": "2", "name": "plain", "input": {}},
                {"id": "3", "name": "slow", "input": {}}]
        results = [r["content"] for r in await executor.run(uses)]
        stream = client.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        message = await stream.until_done()
        return results[:2] + ["timed out" in results[2], message["stop_reason"]]

    print("parent", asyncio.run(work(parent_client)), flush=True)
    pid = os.fork()
    if pid == 0:
        try:
            print("child", asyncio.run(asyncio.wait_for(work(new_client()), 10)), flush=True)
            try:
                asyncio.run(asyncio.wait_for(work(parent_client), 10))
            except Exception as err:
                print("parent client in child:", type(err).__name__, err, flush=True)
        finally:
            sys.stdout.flush()
        # A normal exit (atexit handlers run): must not wait for threads of the parent.
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    print("child status", status, flush=True)
    server.stop()
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@needs_repository
def test_a_forked_child_gets_a_working_runtime_and_a_clear_error_for_the_parents_client() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", FORKED, str(Path(__file__).parent)],
        capture_output=True,
        timeout=120,
    )
    out = done.stdout.decode()
    assert done.returncode == 0, (out, done.stderr.decode()[-2000:])
    assert "parent ['c', 'p', True, 'end_turn']" in out
    assert "child ['c', 'p', True, 'end_turn']" in out, out
    # An InvalidStateError (its code is invalid_state), as the closed client's.
    assert "parent client in child: InvalidStateError" in out and "os.fork" in out, out
    assert "child status 0" in out
