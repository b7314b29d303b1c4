"""Careless or hostile use of the bindings: every case here once crashed the interpreter, raised
`InternalError` for bad input, or silently gave wrong results. Each must now be a clean Python
exception or a correct result."""

from __future__ import annotations

import asyncio
import collections
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Callable, Optional

import pytest

import ferroloop
from conftest import SHARED


def use(i: int, name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": input}


def run_isolated(code: str) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter: a crash (stack overflow) fails the test, not the suite."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_deep_nesting_through_non_builtin_containers_is_an_error_not_a_crash() -> None:
    # Exact dicts and lists were depth-limited, but anything else (dict subclasses such as
    # OrderedDict, frozensets, mappings, and everything below them) went to pythonize, which
    # recursed without a bound: a segmentation fault (stack overflow).
    result = run_isolated(
        """
        import asyncio, collections, types, ferroloop

        def nested(make, depth=200_000):
            value = "leaf"
            for _ in range(depth):
                value = make(value)
            return value

        cases = {
            "ordered": nested(lambda v: collections.OrderedDict(k=v)),
            "frozenset": nested(lambda v: frozenset([v])),
            "mapping-then-lists": types.MappingProxyType({"k": nested(lambda v: [v])}),
            "dict-subclass": nested(lambda v: type("D", (dict,), {})(k=v)),
        }
        for name, value in cases.items():
            try:
                ferroloop.estimate_tokens({"role": "user", "content": [value]})
            except ValueError as err:
                assert "nested more than" in str(err), (name, err)
            else:
                raise AssertionError(f"{name}: no error")

        async def main():
            ex = ferroloop.ToolExecutor()

            @ex.tool
            async def deep(inp):
                return {"content": [cases["ordered"]]}

            (result,) = await ex.run([{"id": "t", "name": "deep", "input": {}}])
            assert result["is_error"] and "nested more than" in result["content"], result
            print("ok")

        asyncio.run(main())
        """
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


def test_shallow_non_builtin_containers_still_convert() -> None:
    ordered = collections.OrderedDict(role="user", content=[collections.OrderedDict(type="text", text="hi")])
    plain = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert ferroloop.estimate_tokens(ordered) == ferroloop.estimate_tokens(plain)
    with pytest.raises(ValueError, match="cannot be converted to JSON"):
        ferroloop.estimate_tokens({"role": "user", "content": [{"k": object()}]})


def test_absurd_usage_counts_saturate_instead_of_an_internal_error() -> None:
    # Usage comes from a server or a caller; summing it overflowed (an InternalError in debug
    # builds, a wrapped, tiny count in release builds).
    tracker = ferroloop.ContextTracker()
    tracker.push_message({"role": "user", "content": "hi"})
    tracker.record_usage({"input_tokens": 2**64 - 1, "cache_read_input_tokens": 5, "output_tokens": 2**63})
    assert tracker.tokens() == {"tokens": 2**64 - 1, "method": "exact"}
    tracker.push_message({"role": "user", "content": "x" * 1000})
    assert tracker.tokens() == {"tokens": 2**64 - 1, "method": "usage+estimate"}


def test_counts_past_64_bits_mean_all_messages_like_node_and_c() -> None:
    # `covered` and `truncate`'s length beyond 64 bits raised OverflowError, where the docs say
    # more than the messages tracked counts as all of them (as `ContextBudget.state` already
    # read a count beyond 64 bits as the largest).
    def tracker_of_two() -> ferroloop.ContextTracker:
        tracker = ferroloop.ContextTracker()
        tracker.push_message({"role": "user", "content": "hi"})
        tracker.push_message({"role": "assistant", "content": "hello"})
        return tracker

    for huge in [2**64, 2**200]:
        tracker = tracker_of_two()
        tracker.record_usage({"input_tokens": 100, "output_tokens": 1}, covered=huge)
        assert tracker.tokens() == {"tokens": 101, "method": "exact"}
        tracker.truncate(huge)
        assert len(tracker) == 2
    with pytest.raises(ValueError, match=r"^covered must not be negative, got -"):
        tracker_of_two().record_usage({"input_tokens": 1}, covered=-(2**200))
    with pytest.raises(ValueError, match=r"^length must not be negative, got -"):
        tracker_of_two().truncate(-(2**200))
    with pytest.raises(TypeError):
        tracker_of_two().truncate(1.5)  # type: ignore[arg-type]


def test_a_usage_count_past_64_bits_is_refused_naming_the_int_given() -> None:
    # It was named as its nearest float, 1.8446744073709552e+19: neither what was passed nor
    # an integer.
    tracker = ferroloop.ContextTracker()
    with pytest.raises(ValueError, match=r"^usage field `input_tokens` must be a non-negative integer, got 18446744073709551616$"):
        tracker.record_usage({"input_tokens": 2**64, "output_tokens": 1})
    with pytest.raises(ValueError, match=r"got -18446744073709551616$"):
        tracker.record_usage({"input_tokens": -(2**64), "output_tokens": 1})


@pytest.mark.asyncio
async def test_events_of_a_batch_are_not_yielded_after_aclose() -> None:
    # A run handed over in one batch went on yielding the rest of that batch after aclose(),
    # where an async generator yields nothing more; which events were left depended on how the
    # native side had batched them.
    stop = {"type": "stop", "reason": "end_turn", "turns": 1, "messages": []}

    class OneBatch:
        def __init__(self) -> None:
            self.batches: list[list[dict[str, Any]]] = [
                [{"type": "turn_start", "turn": 1}, {"type": "text", "text": "hi"}, stop]
            ]
            self.closed = False

        async def next_batch(self) -> Optional[list[dict[str, Any]]]:
            return self.batches.pop(0) if self.batches else None

        def close(self) -> None:
            self.closed = True

        def cancel(self) -> None:
            pass

    native = OneBatch()
    run = ferroloop.AgentRun(native)  # type: ignore[arg-type]
    assert (await run.__anext__())["type"] == "turn_start"
    await run.aclose()
    assert native.closed
    with pytest.raises(StopAsyncIteration):
        await run.__anext__()
    # What the run kept of the dropped events stays readable: the stop event, so finish()
    # still answers.
    assert run.stop == stop
    assert await run.finish() == stop


def test_one_executor_used_from_two_event_loops_at_once() -> None:
    # The tools find their loop through the executor when called: a second thread's loop used
    # to take over, so the first run's later calls ran on (and were cancelled with) that loop.
    ex = ferroloop.ToolExecutor()

    @ex.tool  # exclusive: the calls run one after another
    async def where(inp: dict[str, Any]) -> str:
        await asyncio.sleep(0.2)
        return str(id(asyncio.get_running_loop()))

    out: dict[str, Any] = {}
    first_started = threading.Event()

    def runner(tag: str, calls: int) -> None:
        async def main() -> list[object]:
            out[f"{tag}_loop"] = str(id(asyncio.get_running_loop()))
            run = asyncio.ensure_future(ex.run([use(i, "where") for i in range(calls)]))
            first_started.set()
            return [r["content"] for r in await asyncio.wait_for(run, 10)]

        try:
            out[tag] = asyncio.run(main())
        except Exception as err:  # noqa: BLE001 - recorded for the assertions
            out[tag] = err

    first = threading.Thread(target=runner, args=("A", 3))
    first.start()
    assert first_started.wait(5)
    time.sleep(0.1)
    second = threading.Thread(target=runner, args=("B", 1))
    second.start()
    first.join()
    second.join()

    # The first run is untouched: every call ran on its own loop.
    assert out["A"] == [out["A_loop"]] * 3
    # The second is refused with a clear error instead of stealing the first run's calls.
    assert isinstance(out["B"], RuntimeError) and "one ToolExecutor" in str(out["B"])

    # Once the first loop has finished, another loop may use the executor.
    async def later() -> list[object]:
        return [r["content"] for r in await ex.run([use(0, "where")])]

    assert asyncio.run(later())[0] != out["A_loop"]


@pytest.mark.asyncio
async def test_cancelling_a_pending_turn_iteration_loses_no_event() -> None:
    # `asyncio.wait_for(anext(turn), ...)` timing out just as an event arrived dropped that
    # event: in the native future's delivery, or in the task whose wake-up was pending.
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def quick(inp: dict[str, Any]) -> str:
        await asyncio.sleep(0.02)
        return "done"

    for attempt in range(30):
        turn = ex.turn()
        turn.submit(use(0, "quick"))
        events = turn.__aiter__()
        seen = [(await events.__anext__())["type"]]
        pending = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0)
        turn.submit(use(1, "quick"))  # its `started` event arrives about now
        await asyncio.sleep(0)
        pending.cancel()
        try:
            seen.append((await pending)["type"])
        except asyncio.CancelledError:
            pass
        turn.seal()
        seen += [event["type"] async for event in turn]
        assert sorted(seen) == ["finished", "finished", "result", "result", "started", "started"], (attempt, seen)


@pytest.mark.asyncio
async def test_a_cancelled_wait_for_results_keeps_the_turn_and_its_results() -> None:
    # Cancelling `results()` (a `wait_for` timeout) dropped the turn: its running calls were
    # aborted and a second `results()` said they "were already collected".
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def slow(inp: dict[str, Any]) -> str:
        await asyncio.sleep(0.3)
        return "late"

    turn = ex.turn()
    turn.submit(use(0, "slow"))
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(turn.results(), 0.05)
    results = await asyncio.wait_for(turn.results(), 5)
    assert results == [{"type": "tool_result", "tool_use_id": "toolu_0", "content": "late", "is_error": False}]
    # Asking again gives the same results (as Node's turn does), not an error.
    assert await turn.results() == results


@pytest.mark.asyncio
async def test_results_called_again_returns_the_same_results() -> None:
    # Once, twice, concurrently, and after iterating the events: always every result, as in
    # Node (it raised "the turn's results were already collected" after the first call).
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def echo(inp: dict[str, Any]) -> str:
        await asyncio.sleep(0.01)
        return str(inp["n"])

    turn = ex.turn()
    turn.submit(use(0, "echo", n=0))
    turn.submit(use(1, "echo", n=1))
    first, second = await asyncio.wait_for(asyncio.gather(turn.results(), turn.results()), 5)
    expected = [
        {"type": "tool_result", "tool_use_id": "toolu_0", "content": "0", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1", "is_error": False},
    ]
    assert first == expected and second == expected
    first.clear()  # each call hands out its own list
    assert await turn.results() == expected
    assert [event async for event in turn] == []  # the events were consumed by results()

    iterated = ex.turn()
    iterated.submit(use(2, "echo", n=2))
    iterated.seal()
    assert [e["type"] async for e in iterated].count("result") == 1
    assert [r["content"] for r in await iterated.results()] == ["2"]
    assert [r["content"] for r in await iterated.results()] == ["2"]


def test_one_parser_or_decoder_fed_from_two_threads_fails_cleanly() -> None:
    # Large chunks are parsed with the interpreter released, so another thread can call the
    # same object meanwhile: that call must be a clean RuntimeError (the object is in use),
    # never a crash or a corrupted parse; the object keeps working afterwards.
    chunk = b"".join(b"data: %d\n\n" % i for i in range(40_000))  # ~400 KiB: released
    for make in (ferroloop.SseParser, lambda: ferroloop.StreamDecoder("openai-chat", events=False)):
        obj: Any = make()
        outcomes: list[str] = []
        lock = threading.Lock()

        def feed(target: Any = obj) -> None:
            for _ in range(10):
                try:
                    target.feed(chunk)
                    outcome = "ok"
                except RuntimeError as err:
                    outcome = f"busy: {err}"
                except ferroloop.FerroloopError as err:  # the decoder: not a valid chat stream
                    outcome = f"ferroloop: {type(err).__name__}"
                with lock:
                    outcomes.append(outcome)

        threads = [threading.Thread(target=feed) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(outcomes) == 40
        assert all(o == "ok" or o.startswith("busy: ") or o.startswith("ferroloop: ") for o in outcomes), outcomes
        if isinstance(obj, ferroloop.SseParser):
            fed = outcomes.count("ok")
            assert obj.bytes_fed == fed * len(chunk)  # every feed that ran was whole
            assert obj.feed(b"data: after\n\n")[0].data == "after"


def test_bad_arguments_name_what_was_wrong() -> None:
    # A percentage out of range was clamped silently (NaN: no override; -5: 1 %; 250: 100 %).
    for percent in [float("nan"), float("inf"), 0.0, -5.0, 250.0]:
        with pytest.raises(ValueError, match="autocompact_percent must be in"):
            ferroloop.ContextBudget(200_000, 8_000, autocompact_percent=percent)
    assert ferroloop.ContextBudget(200_000, 8_000, autocompact_percent=50).autocompact_threshold == 96_000
    # A bad argument is not reported as a bad tool result.
    with pytest.raises(ValueError, match="^the value cannot be converted to JSON") as err:
        ferroloop.estimate_tokens({"role": "user", "content": [object()]})
    assert "return a str" not in str(err.value)
    tracker = ferroloop.ContextTracker()
    with pytest.raises(ValueError, match="^the value cannot be converted to JSON"):
        tracker.push_message({"role": "user", "content": {1, object()}})
    # A lone surrogate in plain text counts as U+FFFD, as the same string does in Node's
    # estimateTokens (it was a UnicodeEncodeError); inside a value it counts the same way, as
    # Node's objects now do (both refused it).
    assert ferroloop.estimate_tokens("\ud800") == ferroloop.estimate_tokens("\ufffd")


def test_negative_counts_are_value_errors_naming_the_argument() -> None:
    # Taken as unsigned types, these raised `OverflowError: can't convert negative int to
    # unsigned`, which does not say which argument was wrong.
    budget = ferroloop.ContextBudget(200_000, 8_000)
    tracker = ferroloop.ContextTracker()
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    executor = ferroloop.ToolExecutor()
    cases: list[tuple[str, Callable[[], object]]] = [
        ("window", lambda: ferroloop.ContextBudget(-1, 8_000)),
        ("max_output_tokens", lambda: ferroloop.ContextBudget(200_000, -8_000)),
        ("output_reserve_cap", lambda: ferroloop.ContextBudget(200_000, 8_000, output_reserve_cap=-1)),
        ("autocompact_buffer", lambda: ferroloop.ContextBudget(200_000, 8_000, autocompact_buffer=-1)),
        ("warning_buffer", lambda: ferroloop.ContextBudget(200_000, 8_000, warning_buffer=-1)),
        ("blocking_buffer", lambda: ferroloop.ContextBudget(200_000, 8_000, blocking_buffer=-1)),
        ("tokens", lambda: budget.state(-1)),
        ("tokens", lambda: budget.percent_left(-1)),
        ("length", lambda: tracker.truncate(-1)),
        ("covered", lambda: tracker.record_usage({"input_tokens": 1}, covered=-1)),
        ("max_event_bytes", lambda: ferroloop.SseParser(max_event_bytes=-1)),
        ("max_retries", lambda: ferroloop.Client("anthropic", api_key="k", max_retries=-1, from_env=False)),
        ("max_concurrency", lambda: ferroloop.ToolExecutor(max_concurrency=-1)),
        ("max_result_chars", lambda: ferroloop.ToolExecutor(max_result_chars=-1)),
        ("turn_budget_chars", lambda: ferroloop.ToolExecutor(turn_budget_chars=-1)),
        ("max_result_chars", lambda: executor.tool(name="t", max_result_chars=-1)(lambda _: "x")),
        ("max_turns", lambda: ferroloop.Agent(client, model="m", max_turns=-1)),
        ("max_tokens", lambda: ferroloop.Agent(client, model="m", max_tokens=-1)),
        ("token_budget", lambda: ferroloop.Agent(client, model="m", token_budget=-1)),
        ("max_continuations", lambda: ferroloop.Agent(client, model="m", max_continuations=-1)),
        ("keep_recent_tool_results", lambda: ferroloop.Agent(client, model="m", keep_recent_tool_results=-1)),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=f"^{name} must not be negative, got -"):
            call()
    # Zero and positive values still pass; a float is still a TypeError naming the argument.
    assert ferroloop.ContextBudget(200_000, 0).max_output_tokens == 0
    assert budget.state(0) == "ok"
    with pytest.raises(TypeError, match="window"):
        ferroloop.ContextBudget(1.5, 8_000)  # type: ignore[arg-type]


def test_a_feed_after_finish_is_an_invalid_state_error() -> None:
    # It was a plain FerroloopError (Node's and C's code is `invalid_state`).
    source = (SHARED / "fixtures" / "anthropic" / "basic_response.sse").read_bytes()
    decoder = ferroloop.StreamDecoder("anthropic")
    decoder.feed(source)
    message = decoder.finish()
    with pytest.raises(ferroloop.InvalidStateError, match="finished"):
        decoder.feed(source)
    assert decoder.finish() == message


@pytest.mark.asyncio
async def test_a_submit_after_seal_is_an_invalid_state_error_and_still_a_tool_error() -> None:
    ex = ferroloop.ToolExecutor()

    @ex.tool(concurrency_safe=True)
    async def echo(inp: dict[str, Any]) -> str:
        return str(inp.get("s"))

    turn = ex.turn()
    turn.submit(use(1, "echo", s="one"))
    turn.seal()
    # Sealing again is a no-op, as in Node and C (fl_turn_seal).
    turn.seal()
    with pytest.raises(ferroloop.InvalidStateError, match="no longer accepts") as caught:
        turn.submit(use(2, "echo", s="two"))
    # Existing `except ToolError` clauses still catch it.
    assert isinstance(caught.value, ferroloop.ToolError)
    assert isinstance(caught.value, ferroloop.TurnSealedError)
    results = await turn.results()
    assert [r["content"] for r in results] == ["one"]


def test_a_lone_surrogate_inside_a_value_counts_as_a_replacement_character() -> None:
    # It was a ValueError ("not valid text"); a plain str and Node's objects count it as U+FFFD.
    for lone, replaced in [("x\ud800", "x\ufffd"), ("\udc00y", "\ufffdy"), ("\ud83d\ude00", "\U0001f600")]:
        messages = [{"role": "user", "content": lone}]
        assert ferroloop.estimate_tokens(messages) == ferroloop.estimate_tokens(
            [{"role": "user", "content": replaced}]
        )
        assert ferroloop.estimate_tokens({"type": "text", "text": lone}) == ferroloop.estimate_tokens(
            {"type": "text", "text": replaced}
        )
        with_lone, with_replaced = ferroloop.ContextTracker(), ferroloop.ContextTracker()
        with_lone.push_message({"role": "user", "content": lone})
        with_replaced.push_message({"role": "user", "content": replaced})
        assert with_lone.tokens() == with_replaced.tokens()


def test_bad_durations_are_value_errors_naming_the_argument() -> None:
    # They were `ValueError: invalid duration: -1.0 seconds`, not saying which argument, where
    # Node's InvalidArgumentError names defaultTimeoutMs, cleanupGraceMs or timeoutMs.
    executor = ferroloop.ToolExecutor()
    for value in [-1.0, float("nan"), float("inf"), 1e300]:
        cases: list[tuple[str, Callable[[], object]]] = [
            ("default_timeout", lambda: ferroloop.ToolExecutor(default_timeout=value)),
            ("cleanup_grace", lambda: ferroloop.ToolExecutor(cleanup_grace=value)),
            ("timeout", lambda: executor.tool(name="t", timeout=value)(lambda _: "x")),
        ]
        for name, call in cases:
            with pytest.raises(ValueError, match=f"^invalid {name}: "):
                call()
    # A zero timeout is refused (it timed every call out at once, where 0 most likely meant
    # "none"), as the client's timeouts, Node's and C's are; a zero grace is no wait, and passes.
    zero: list[tuple[str, Callable[[], object]]] = [
        ("default_timeout", lambda: ferroloop.ToolExecutor(default_timeout=0.0)),
        ("timeout", lambda: executor.tool(name="z", timeout=0)(lambda _: "x")),
    ]
    for name, call in zero:
        with pytest.raises(ValueError, match=f"^{name} must be above 0 seconds"):
            call()
    ferroloop.ToolExecutor(default_timeout=0.001, cleanup_grace=0.0).tool(name="t", timeout=2.5)(lambda _: "x")


def test_counts_past_the_native_type_are_overflow_errors_naming_the_argument() -> None:
    # pyo3 took them as i64 and raised `OverflowError: Python int too large to convert to C
    # long`, not saying which argument, and refused 2**63 .. 2**64 - 1 that the u64 counts (and
    # Node's, below 2^64) hold.
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("window", lambda: ferroloop.ContextBudget(2**64, 8_000)),
        ("warning_buffer", lambda: ferroloop.ContextBudget(200_000, 8_000, warning_buffer=2**64)),
        ("max_event_bytes", lambda: ferroloop.SseParser(max_event_bytes=2**64)),
        ("max_concurrency", lambda: ferroloop.ToolExecutor(max_concurrency=2**64)),
        ("turn_budget_chars", lambda: ferroloop.ToolExecutor(turn_budget_chars=2**64)),
        ("max_result_chars", lambda: ferroloop.ToolExecutor(max_result_chars=2**64)),
        ("max_tokens", lambda: ferroloop.Agent(client, model="m", max_tokens=2**64)),
        ("max_turns", lambda: ferroloop.Agent(client, model="m", max_turns=2**32)),
        ("max_retries", lambda: ferroloop.Client("anthropic", api_key="k", max_retries=2**64, from_env=False)),
    ]
    for name, call in cases:
        with pytest.raises(OverflowError, match=f"^{name} is too large: "):
            call()
    # The largest counts the core holds still pass, as in Node.
    assert ferroloop.ContextBudget(2**64 - 1, 8_000).window == 2**64 - 1
    ferroloop.Agent(client, model="m", max_tokens=2**63)


def test_deep_values_from_plain_tools_convert_on_the_worker_threads_without_a_crash() -> None:
    # A plain (sync) tool runs on the runtime's blocking threads, where its result and its
    # progress reports are converted. Their stack (tokio's default, 2 MiB) overflowed at about
    # 480 levels in a debug build, under the 512-level limit of then: a segmentation fault.
    # (The limit is now 127 levels, Node's and C's: the deepest value allowed and the first
    # refused.)
    result = run_isolated(
        """
        import asyncio, ferroloop

        def nested(depth):
            value = []
            for _ in range(depth):
                value = [value]
            return value

        async def main():
            ex = ferroloop.ToolExecutor()

            @ex.tool
            def give(inp):
                return {"type": "text", "text": "x", "nested": nested(inp["depth"])}

            @ex.tool
            def report(inp, ctx):
                ctx.progress(nested(inp["depth"]))
                return "reported"

            uses = [{"id": f"{name}-{depth}", "name": name, "input": {"depth": depth}}
                    for name, depths in (("give", (125, 126)), ("report", (126, 127))) for depth in depths]
            results = await ex.run(uses)
            give_ok, give_deep, report_ok, report_deep = results
            assert not give_ok["is_error"], give_ok
            assert give_deep["is_error"] and "nested more than" in give_deep["content"], give_deep
            assert report_ok["content"] == "reported", report_ok
            assert report_deep["is_error"] and "nested more than" in report_deep["content"], report_deep
            print("ok")

        asyncio.run(main())
        """
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


def test_none_for_a_bool_option_is_its_default_and_a_sub_nanosecond_timeout_says_so() -> None:
    # None was a TypeError ("'None' is not an instance of 'bool'") where Node's null and an
    # absent C key take the default; a timeout rounding to 0 read "must be above 0, got 1e-10".
    client = ferroloop.Client(api_key="k", base_url="http://127.0.0.1:9", from_env=None)
    ferroloop.Agent(client, model="m", prompt_caching=None)
    with pytest.raises(ValueError, match=r"^timeout must be above 0 seconds, got .*, which is under a nanosecond"):
        ferroloop.Client(api_key="k", timeout=1e-10, from_env=False)


def test_options_of_the_wrong_type_are_refused_by_name() -> None:
    # The native conversion said "'int' object is not an instance of 'str'", naming nothing;
    # Node refuses the same values naming the option.
    cases: list[tuple[str, Callable[[], object]]] = [
        ("provider", lambda: ferroloop.Client(5, from_env=False)),  # type: ignore[arg-type]
        ("api_key", lambda: ferroloop.Client(api_key=5, from_env=False)),  # type: ignore[arg-type]
        ("base_url", lambda: ferroloop.Client(base_url=b"http://x", from_env=False)),  # type: ignore[arg-type]
        ("anthropic_version", lambda: ferroloop.Client(anthropic_version=1, from_env=False)),  # type: ignore[arg-type]
        ("from_env", lambda: ferroloop.Client(from_env="yes")),  # type: ignore[arg-type]
    ]
    client = ferroloop.Client(api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    cases += [
        ("model", lambda: ferroloop.Agent(client, model=5)),  # type: ignore[arg-type]
        ("system", lambda: ferroloop.Agent(client, model="m", system=5)),  # type: ignore[arg-type]
        ("tokenizer", lambda: ferroloop.Agent(client, model="m", tokenizer=5)),  # type: ignore[arg-type]
        ("fallback_model", lambda: ferroloop.Agent(client, model="m", fallback_model=5)),  # type: ignore[arg-type]
        ("prompt_caching", lambda: ferroloop.Agent(client, model="m", prompt_caching=1)),  # type: ignore[arg-type]
        ("tools", lambda: ferroloop.Agent(client, model="m", tools=5)),  # type: ignore[arg-type]
        ("workspace", lambda: ferroloop.Agent(client, model="m", workspace=b"/tmp")),  # type: ignore[arg-type]
    ]
    for name, call in cases:
        with pytest.raises(TypeError, match=f"^{name} must be "):
            call()
