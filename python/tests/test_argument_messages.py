"""What a refused argument's error says: a float as Python writes it (``1e+300``, ``nan``; it
was written as Rust does, 301 digits for ``1e300``, ``NaN``), a path option of the wrong type
naming the option, and an argument of the wrong type naming the argument (pyo3 puts the name
in a note only, so ``str(error)`` said only "'str' object cannot be interpreted as an
integer")."""

from __future__ import annotations

import math
import pathlib
from typing import Any, Callable

import pytest

import ferroloop


def client(**options: Any) -> ferroloop.Client:
    return ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False, **options)


def tracker_with_correction(value: Any) -> None:
    tracker = ferroloop.ContextTracker()
    tracker.correction = value


FLOAT_OPTIONS: list[tuple[str, Callable[[Any], object]]] = [
    ("timeout", lambda v: client(timeout=v)),
    ("connect_timeout", lambda v: client(connect_timeout=v)),
    ("default_timeout", lambda v: ferroloop.ToolExecutor(default_timeout=v)),
    ("cleanup_grace", lambda v: ferroloop.ToolExecutor(cleanup_grace=v)),
    ("max_result_chars", lambda v: ferroloop.ToolExecutor(max_result_chars=v)),
    ("correction", tracker_with_correction),
]


# Every option with every value, but two pairs that are accepted: -2.5e-300 s rounds to a zero
# cleanup grace, which is allowed, and a positive correction is clamped to the core's range.
ACCEPTED = {("cleanup_grace", -2.5e-300), ("correction", 1e300)}
REFUSED_FLOATS = [
    pytest.param(name, make, value, id=f"{name}-{value!r}")
    for name, make in FLOAT_OPTIONS
    for value in [1e300, -1e300, -1e20, math.nan, -2.5e-300]
    if (name, value) not in ACCEPTED
]


@pytest.mark.parametrize("name,make,value", REFUSED_FLOATS)
def test_a_refused_float_is_written_as_python_writes_it(name: str, make: Callable[[Any], object], value: float) -> None:
    with pytest.raises(ValueError) as raised:
        make(value)
    message = str(raised.value)
    assert repr(value) in message, message
    assert "000000" not in message and "NaN" not in message, message


@pytest.mark.parametrize("name", ["timeout", "connect_timeout", "default_timeout"])
def test_a_timeout_under_a_nanosecond_is_written_as_python_writes_it(name: str) -> None:
    make = dict(FLOAT_OPTIONS)[name]
    with pytest.raises(ValueError, match=r"got 1e-300, which is under a nanosecond"):
        make(1e-300)


def test_a_usage_count_of_nan_is_written_as_python_writes_it() -> None:
    tracker = ferroloop.ContextTracker()
    with pytest.raises(ValueError) as raised:
        tracker.record_usage({"input_tokens": math.nan})
    assert "nan" in str(raised.value) and "NaN" not in str(raised.value)


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, 2**70, -(2**70), -1, 1.5, 5.0, "5", True, [1], {"n": 1}],
    ids=repr,
)
def test_a_refused_usage_count_is_written_as_python_writes_it(value: Any) -> None:
    # The core names the value as JSON: `got "nan"`, `got "1180591620717411303424"` (the
    # binding hands it those as text), `got true`, `got "5"` for the str '5'.
    tracker = ferroloop.ContextTracker()
    with pytest.raises(ValueError) as raised:
        tracker.record_usage({"input_tokens": value, "output_tokens": 1})
    assert str(raised.value) == f"usage field `input_tokens` must be a non-negative integer, got {value!r}"


class StrPath:
    def __fspath__(self) -> str:
        return "/tmp/ferroloop-spill-test"


class BytesPath:
    def __fspath__(self) -> bytes:
        return b"/tmp/ferroloop-spill-test"


def test_spill_dir_takes_a_str_or_a_path_and_names_itself_refusing_others() -> None:
    ferroloop.ToolExecutor(spill_dir="/tmp/ferroloop-spill-test")
    ferroloop.ToolExecutor(spill_dir=pathlib.Path("/tmp/ferroloop-spill-test"))
    ferroloop.ToolExecutor(spill_dir=StrPath())
    for value in [b"/tmp/x", BytesPath(), 5]:
        with pytest.raises(TypeError, match=r"^spill_dir must be a str or a path of str, not (bytes|BytesPath|int)$"):
            ferroloop.ToolExecutor(spill_dir=value)  # type: ignore[arg-type]


def budget() -> ferroloop.ContextBudget:
    return ferroloop.ContextBudget(window=1000, max_output_tokens=100)


def make_agent(**options: Any) -> object:
    return ferroloop.Agent(client(), model="m", **options)


WRONG_TYPES: list[tuple[str, Callable[[], object]]] = [
    ("window", lambda: ferroloop.ContextBudget(window="1000", max_output_tokens=100)),  # type: ignore[arg-type]
    ("max_output_tokens", lambda: ferroloop.ContextBudget(window=1000, max_output_tokens=1.5)),  # type: ignore[arg-type]
    ("warning_buffer", lambda: ferroloop.ContextBudget(window=1000, max_output_tokens=100, warning_buffer="5")),  # type: ignore[arg-type]
    ("autocompact_percent", lambda: ferroloop.ContextBudget(window=1000, max_output_tokens=100, autocompact_percent="5")),  # type: ignore[arg-type]
    ("tokens", lambda: budget().state("3")),  # type: ignore[arg-type]
    ("tokens", lambda: budget().percent_left(None)),  # type: ignore[arg-type]
    ("length", lambda: ferroloop.ContextTracker().truncate("3")),  # type: ignore[arg-type]
    ("covered", lambda: ferroloop.ContextTracker().record_usage({"input_tokens": 1}, covered="3")),  # type: ignore[arg-type]
    ("correction", lambda: tracker_with_correction("1.0")),
    ("max_event_bytes", lambda: ferroloop.SseParser(max_event_bytes="5")),  # type: ignore[arg-type]
    ("timeout", lambda: client(timeout="5")),
    ("max_retries", lambda: client(max_retries="5")),
    ("max_concurrency", lambda: ferroloop.ToolExecutor(max_concurrency="5")),  # type: ignore[arg-type]
    ("default_timeout", lambda: ferroloop.ToolExecutor(default_timeout="5")),  # type: ignore[arg-type]
    ("max_turns", lambda: make_agent(max_turns="3")),
    ("max_tokens", lambda: make_agent(max_tokens="3")),
]


@pytest.mark.parametrize("name,call", WRONG_TYPES, ids=[w[0] for w in WRONG_TYPES])
def test_an_argument_of_the_wrong_type_is_a_type_error_naming_it(name: str, call: Callable[[], object]) -> None:
    with pytest.raises(TypeError) as raised:
        call()
    assert name in str(raised.value), str(raised.value)


def tracker_with_model(value: Any) -> None:
    tracker = ferroloop.ContextTracker()
    tracker.model = value


# pyo3's own conversion of a str argument said "'int' object is not an instance of 'str'"
# (the argument's name only in a note), naming neither the argument nor the type expected.
WRONG_STRS: list[tuple[str, Callable[[], object]]] = [
    ("model", lambda: ferroloop.ContextBudget.for_model(5)),  # type: ignore[arg-type]
    ("model", lambda: tracker_with_model(5)),
    ("model", lambda: ferroloop.ContextTracker().correction_for(5)),  # type: ignore[arg-type]
    ("tokenizer", lambda: ferroloop.ContextTracker(tokenizer=5)),  # type: ignore[arg-type]
    ("tokenizer", lambda: ferroloop.TextEstimator(tokenizer=5)),  # type: ignore[arg-type]
    ("tokenizer", lambda: ferroloop.estimate_tokens("x", tokenizer=5)),  # type: ignore[arg-type]
    ("tokenizer", lambda: ferroloop.estimate_request({"messages": []}, tokenizer=5)),  # type: ignore[arg-type]
    ("tokenizer", lambda: ferroloop.count_tokens("x", 5)),  # type: ignore[arg-type]
    ("provider", lambda: ferroloop.StreamDecoder(5)),  # type: ignore[arg-type]
    ("description", lambda: ferroloop.ToolExecutor().tool(name="t", description=5)(lambda i: "x")),  # type: ignore[call-overload]
]


@pytest.mark.parametrize("name,call", WRONG_STRS, ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG_STRS)])
def test_a_str_argument_of_another_type_names_it_and_the_type_expected(name: str, call: Callable[[], object]) -> None:
    with pytest.raises(TypeError) as raised:
        call()
    # str(), not `match`, which also reads the exception's notes (pyo3 notes "while processing
    # 'tokenizer'" on an error raised converting an argument).
    assert str(raised.value) == f"{name} must be a str, not int"


def test_stream_decoder_events_of_another_type_names_it() -> None:
    with pytest.raises(TypeError, match=r"^events must be a bool, not int$"):
        ferroloop.StreamDecoder(events=5)  # type: ignore[arg-type]


def test_str_arguments_still_take_their_defaults_and_str_values() -> None:
    assert ferroloop.ContextTracker().tokenizer == "claude"
    assert ferroloop.ContextTracker(tokenizer="o200k_base").tokenizer == "o200k"
    default, claude = ferroloop.TextEstimator(), ferroloop.TextEstimator(tokenizer="claude")
    default.feed("hello world")
    claude.feed("hello world")
    assert default.estimate() == claude.estimate() > 0
    assert ferroloop.estimate_tokens("hello") == ferroloop.estimate_tokens("hello", tokenizer="claude")
    assert ferroloop.StreamDecoder().provider == "anthropic"
    assert ferroloop.StreamDecoder(None, events=None).provider == "anthropic"
    assert ferroloop.StreamDecoder("openai-chat", events=False).provider == "openai-chat"
    assert ferroloop.ContextBudget.for_model("claude-sonnet-4-5").window > 0
    with pytest.raises(ValueError, match="unknown tokenizer family"):
        ferroloop.ContextTracker(tokenizer="nope")  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_tool_use_list_with_a_hole_names_the_entry_and_what_it_is() -> None:
    executor = ferroloop.ToolExecutor()

    @executor.tool(name="echo")
    def echo(input: dict[str, Any]) -> str:
        return "ok"

    use = {"id": "a", "name": "echo", "input": {}}
    with pytest.raises(TypeError, match=r"tool_uses\[1\] must be a tool_use dict \(id, name, input\), not None"):
        await executor.run([use, None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"tool_uses\[0\] must be a tool_use dict \(id, name, input\), not list"):
        await executor.run([[use]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r'tool_uses\[1\]: tool_use without "id"'):
        await executor.run([use, {"name": "echo"}])
    async with executor.turn() as turn:
        with pytest.raises(TypeError, match=r"submit\(\)'s tool_use 0 must be a tool_use dict \(id, name, input\), not list \(submit several as submit\(a, b\), not a list\)"):
            turn.submit([use])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"submit\(\)'s tool_use 1 must be a tool_use dict \(id, name, input\), not None"):
            turn.submit(use, None)  # type: ignore[arg-type]


BOOLS_FOR_INTS: list[tuple[str, Callable[[Any], object]]] = [
    ("window", lambda v: ferroloop.ContextBudget(window=v, max_output_tokens=100)),
    ("max_output_tokens", lambda v: ferroloop.ContextBudget(window=1000, max_output_tokens=v)),
    ("warning_buffer", lambda v: ferroloop.ContextBudget(window=1000, max_output_tokens=100, warning_buffer=v)),
    ("tokens", lambda v: budget().state(v)),
    ("tokens", lambda v: budget().percent_left(v)),
    ("length", lambda v: ferroloop.ContextTracker().truncate(v)),
    ("max_event_bytes", lambda v: ferroloop.SseParser(max_event_bytes=v)),
    ("max_retries", lambda v: client(max_retries=v)),
    ("max_concurrency", lambda v: ferroloop.ToolExecutor(max_concurrency=v)),
    ("max_result_chars", lambda v: ferroloop.ToolExecutor(max_result_chars=v)),
    ("max_turns", lambda v: make_agent(max_turns=v)),
    ("max_tokens", lambda v: make_agent(max_tokens=v)),
    ("keep_recent_tool_results", lambda v: make_agent(keep_recent_tool_results=v)),
]


@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("name,call", BOOLS_FOR_INTS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BOOLS_FOR_INTS)])
def test_a_bool_where_an_int_is_expected_is_refused_naming_it(name: str, call: Callable[[Any], object], value: bool) -> None:
    # bool is an int subclass, so `max_retries=True` was taken as 1 (and `False` as 0) where
    # Node refuses `true`: almost always a keyword given the wrong value.
    with pytest.raises(TypeError) as raised:
        call(value)
    assert str(raised.value).startswith(f"{name} must be "), str(raised.value)
    assert str(raised.value).endswith(", not bool"), str(raised.value)
