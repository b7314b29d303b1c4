"""Token estimation and context budgeting through Python."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ferroloop
from conftest import SHARED, fixture_bytes

SAMPLE = SHARED / "tokens" / "sample"


def test_estimates_track_exact_counts_on_the_shared_sample() -> None:
    docs = json.loads((SAMPLE / "expected.json").read_text(encoding="utf-8"))
    assert len(docs) >= 50
    for tokenizer in ("o200k", "cl100k", "claude-legacy"):
        ratios = []
        for doc in docs:
            text = (SAMPLE / doc["file"]).read_text(encoding="utf-8")
            ratio = ferroloop.estimate_tokens(text, tokenizer=tokenizer) / doc[tokenizer]
            assert 0.5 <= ratio <= doc["max_ratio"], (tokenizer, doc["file"], ratio)
            ratios.append(ratio)
        mean_abs = sum(abs(r - 1) for r in ratios) / len(ratios)
        assert mean_abs < 0.2, (tokenizer, mean_abs)


def test_cjk_is_not_chars_over_four() -> None:
    text = "日本語のテキストと中文文本。" * 200
    assert ferroloop.estimate_tokens(text, tokenizer="o200k") > len(text) / 4 * 1.5


def test_forms_are_consistent() -> None:
    text = "Hello, world! " * 100
    assert ferroloop.estimate_tokens(text) == ferroloop.estimate_tokens(text.encode())
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]
    per_message = [ferroloop.estimate_tokens(m) for m in messages]
    assert ferroloop.estimate_tokens(messages) == sum(per_message)
    assert per_message[0] > ferroloop.estimate_tokens(text) - 1
    request = {"model": "claude-sonnet-4", "system": "Be brief.", "messages": messages}
    assert ferroloop.estimate_tokens(request) > sum(per_message)
    block = {"type": "text", "text": text}
    assert ferroloop.estimate_tokens(block) >= ferroloop.estimate_tokens(text)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown tokenizer"):
        ferroloop.estimate_tokens("x", tokenizer="gpt2")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ferroloop.estimate_tokens(42)  # type: ignore[arg-type]


def test_bytes_like_text_is_estimated_like_bytes() -> None:
    # Node takes any Uint8Array (a Buffer, a view); Python took only `bytes`: a `bytearray`
    # (the buffer of `readinto`) or a `memoryview` raised TypeError.
    data = ("héllo wörld, 世界 — fn main() { 42 }\n" * 50).encode()
    expected = ferroloop.estimate_tokens(data)
    assert expected == ferroloop.estimate_tokens(data.decode())
    for chunk in (bytearray(data), memoryview(data)):
        assert ferroloop.estimate_tokens(chunk) == expected
        estimator = ferroloop.TextEstimator()
        estimator.feed(chunk)
        assert estimator.estimate() == expected
    with pytest.raises(TypeError):
        ferroloop.TextEstimator().feed(42)  # type: ignore[arg-type]


def test_context_budget_thresholds() -> None:
    budget = ferroloop.ContextBudget(200_000, 32_000)
    assert budget.effective_window == 180_000
    assert budget.autocompact_threshold == 167_000
    assert budget.warning_threshold == 147_000
    assert budget.blocking_threshold == 177_000
    assert budget.state(10_000) == "ok"
    assert budget.state(150_000) == "warning"
    assert budget.state(170_000) == "auto_compact"
    assert budget.state(178_000) == "blocking"
    assert 0 < budget.percent_left(100_000) < 100
    custom = ferroloop.ContextBudget(200_000, 8_000, autocompact_buffer=50_000)
    assert custom.autocompact_threshold == 192_000 - 50_000
    assert ferroloop.ContextBudget.for_model("claude-sonnet-4-20250514").window >= 200_000


def test_context_budget_state_names_match_node_and_c() -> None:
    # The same names as Node's `state()` and the core's `BudgetState::as_str` (C:
    # FL_CONTEXT_AUTO_COMPACT): "auto_compact" with an underscore, not "autocompact".
    budget = ferroloop.ContextBudget(200_000, 32_000)
    states = [budget.state(n) for n in (0, 150_000, 170_000, 178_000)]
    assert states == ["ok", "warning", "auto_compact", "blocking"]
    assert all(type(state) is str for state in states)


def test_a_model_budget_takes_the_same_overrides_as_an_explicit_one_like_node() -> None:
    # Node's `new ContextBudget({ model, autocompactBuffer, ... })` adjusts a model's budget;
    # Python's `for_model(model)` took no overrides.
    model = "claude-sonnet-4-20250514"
    base = ferroloop.ContextBudget.for_model(model)
    tuned = ferroloop.ContextBudget.for_model(
        model, autocompact_buffer=50_000, blocking_buffer=1_000, warning_buffer=5_000
    )
    assert (tuned.window, tuned.max_output_tokens) == (base.window, base.max_output_tokens)
    explicit = ferroloop.ContextBudget(
        base.window,
        base.max_output_tokens,
        autocompact_buffer=50_000,
        blocking_buffer=1_000,
        warning_buffer=5_000,
    )
    assert tuned.autocompact_threshold == explicit.autocompact_threshold == base.effective_window - 50_000
    assert tuned.blocking_threshold == explicit.blocking_threshold
    assert tuned.warning_threshold == explicit.warning_threshold
    by_percent = ferroloop.ContextBudget.for_model(model, autocompact_percent=50)
    assert by_percent.autocompact_threshold == base.effective_window // 2
    with pytest.raises(ValueError):
        ferroloop.ContextBudget.for_model(model, autocompact_percent=0)


def test_the_stub_names_exactly_the_states_the_extension_returns() -> None:
    # The stub's Literal said "autocompact" while Node's BudgetState said "auto_compact": mypy
    # accepted comparisons with a name state() never returned once one side changed.
    import ast
    from pathlib import Path

    stub = ast.parse(Path(ferroloop._native.__file__).with_name("_native.pyi").read_text())
    budget = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "ContextBudget")
    state = next(n for n in budget.body if isinstance(n, ast.FunctionDef) and n.name == "state")
    assert isinstance(state.returns, ast.Subscript)
    declared = [ast.literal_eval(e) for e in ast.walk(state.returns.slice) if isinstance(e, ast.Constant)]
    runtime = ferroloop.ContextBudget(200_000, 32_000)
    assert [runtime.state(n) for n in (0, 150_000, 170_000, 178_000)] == declared


def test_context_tracker_anchors_on_usage() -> None:
    tracker = ferroloop.ContextTracker(tokenizer="claude")
    tracker.set_system("You are terse.")
    tracker.push_message({"role": "user", "content": "Summarise the file. " * 50})
    first = tracker.tokens()
    assert first["method"] == "estimate" and first["tokens"] > 0
    tracker.record_usage({"input_tokens": 1000, "output_tokens": 20, "cache_read_input_tokens": 0})
    exact = tracker.tokens()
    assert exact == {"tokens": 1020, "method": "exact"}
    tracker.push_message({"role": "user", "content": "and more " * 20})
    after = tracker.tokens()
    assert after["method"] == "usage+estimate" and after["tokens"] > 1020
    assert len(tracker) == 2
    tracker.truncate(1)
    assert len(tracker) == 1
    with pytest.raises(ValueError):
        tracker.record_usage({"nothing": 1})
    assert tracker.tokenizer == "claude" and tracker.correction > 0


def test_replacing_the_history_keeps_the_usage_of_an_unchanged_prefix() -> None:
    # A host that hands over its whole history every turn: the count was a pure estimate after
    # every replace_messages, however far it was from the usage.
    history = [{"role": "user", "content": "Summarise the file. " * 50}]
    tracker = ferroloop.ContextTracker()
    tracker.replace_messages(history)
    tracker.record_usage({"input_tokens": 5000, "output_tokens": 0})
    history.append({"role": "assistant", "content": "It is short."})
    tracker.replace_messages(history)
    assert tracker.tokens()["method"] == "usage+estimate" and tracker.tokens()["tokens"] > 5000
    history[0] = {"role": "user", "content": "Summarise the file! " * 50}
    tracker.replace_messages(history)
    assert tracker.tokens()["method"] == "estimate"


def test_a_tracker_refuses_messages_that_are_no_dicts_as_c_does() -> None:
    # C refused them with FL_STATUS_INVALID_ARGUMENT; Python took them (a string was 4 tokens).
    tracker = ferroloop.ContextTracker()
    tracker.push_message({"role": "user", "content": "hello"})
    before = tracker.tokens()
    for message in ("hello", 3, None, ["a"]):
        with pytest.raises(TypeError, match="must be a JSON object"):
            tracker.push_message(message)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message 1 must be a JSON object"):
        tracker.replace_messages([{"role": "user", "content": "a"}, "b"])  # type: ignore[list-item]
    assert tracker.tokens() == before and len(tracker) == 1
    # An OpenAI Responses item is an object: taken.
    tracker.push_message({"type": "function_call_output", "call_id": "c", "output": "done"})
    assert len(tracker) == 2


def test_a_tracker_refuses_a_system_prompt_or_tools_in_no_request_shape_as_c_does() -> None:
    # A tool definition not in a list counted as no tools at all, and a number as a prompt;
    # C refused both with FL_STATUS_INVALID_ARGUMENT.
    tracker = ferroloop.ContextTracker()
    tracker.set_system("You are terse.")
    tracker.set_tools([{"name": "ls", "input_schema": {"type": "object"}}])
    tracker.push_message({"role": "user", "content": "hello"})
    before = tracker.tokens()
    tool = {"name": "read", "description": "reads a file", "input_schema": {"type": "object"}}
    with pytest.raises(TypeError, match="tool definitions must be an array or null, got an object"):
        tracker.set_tools(tool)  # type: ignore[arg-type]
    for system in ({"type": "text", "text": "one block"}, 3, True):
        with pytest.raises(TypeError, match="system prompt must be a string, an array of blocks or null"):
            tracker.set_system(system)  # type: ignore[arg-type]
    assert tracker.tokens() == before
    tracker.set_tools(None)
    tracker.set_system([{"type": "text", "text": "You are terse."}])
    tracker.set_system(None)
    assert tracker.tokens()["tokens"] < before["tokens"]


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": -5, "output_tokens": 3},
        {"input_tokens": 1500.0, "output_tokens": 3},
        {"input_tokens": 700, "cache_read_input_tokens": "900"},
        {"prompt_tokens": 100, "completion_tokens": -1},
        # The conversion to JSON made nan and inf None, read as absent: a nan input made the
        # usage "output only" (ignored), a nan cache count an exact-looking count without it.
        {"input_tokens": float("nan"), "output_tokens": 3},
        {"input_tokens": 100, "cache_read_input_tokens": float("nan")},
        {"input_tokens": float("inf")},
        {"prompt_tokens": 100, "completion_tokens": float("-inf")},
    ],
)
def test_record_usage_refuses_a_count_that_is_not_a_non_negative_int(usage: dict[str, object]) -> None:
    # Read as absent, a negative or float input made the usage "output only", which the tracker
    # ignores: the call succeeded and recorded nothing.
    tracker = ferroloop.ContextTracker()
    tracker.push_message({"role": "user", "content": "hello"})
    before = tracker.tokens()
    with pytest.raises(ValueError, match="must be a non-negative integer"):
        tracker.record_usage(usage)
    assert tracker.tokens() == before
    # None is absent, as the SDKs' model_dump() gives it.
    tracker.record_usage({"input_tokens": 900, "cache_creation_input_tokens": None, "output_tokens": 0})
    assert tracker.tokens() == {"tokens": 900, "method": "exact"}


@pytest.mark.skipif(not ferroloop.has_exact_counting(), reason="built without the `exact` feature")
def test_count_tokens_counts_exactly_with_the_offline_vocabularies() -> None:
    assert ferroloop.count_tokens("hello world", "o200k") == 2
    assert ferroloop.count_tokens("hello world", "cl100k") == 2
    assert ferroloop.count_tokens("", "o200k") == 0
    # Special-token text is counted as ordinary text.
    assert ferroloop.count_tokens("<|endoftext|>", "cl100k") == 7
    text = fixture_bytes("anthropic/tool_use_response").decode("utf-8")
    exact = ferroloop.count_tokens(text, "o200k")
    assert 0.5 < ferroloop.estimate_tokens(text, tokenizer="o200k") / exact < 2.0
    with pytest.raises(ValueError, match="no exact offline tokenizer"):
        ferroloop.count_tokens("hi", "claude")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ferroloop.count_tokens(b"bytes", "o200k")  # type: ignore[arg-type]


@pytest.mark.skipif(ferroloop.has_exact_counting(), reason="built with the `exact` feature")
def test_count_tokens_without_the_feature_raises_a_clear_error() -> None:
    with pytest.raises(ferroloop.ExactCountingUnavailableError, match="feature `exact`"):
        ferroloop.count_tokens("hello world", "o200k")
    assert issubclass(ferroloop.ExactCountingUnavailableError, ferroloop.FerroloopError)
    # A family no build can count is the ValueError of a build with the feature (it was
    # ExactCountingUnavailableError here, advising a build that would refuse it too).
    with pytest.raises(ValueError, match="no exact offline tokenizer for claude"):
        ferroloop.count_tokens("hi", "claude")  # type: ignore[arg-type]


def test_context_tracker_correction_can_be_restored_and_work_is_counted_like_node() -> None:
    # Node's `tracker.correction = x` and `bytesEstimated`: a host carries the learned correction
    # over from an earlier session, and can check that re-estimating costs nothing.
    tracker = ferroloop.ContextTracker()
    tracker.push_message({"role": "user", "content": "What is in the repo? " * 40})
    raw = tracker.tokens()["tokens"]
    tracker.correction = 1.5
    assert tracker.correction == 1.5
    assert tracker.tokens()["tokens"] > raw
    for bad in (-1.0, 0.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            tracker.correction = bad
    assert tracker.correction == 1.5

    estimated = tracker.bytes_estimated
    assert estimated > 0
    tracker.replace_messages([{"role": "user", "content": "What is in the repo? " * 40}])
    assert tracker.bytes_estimated == estimated


def test_each_model_learns_its_own_correction_like_node_and_c() -> None:
    # One factor per tracker mixed the usage of every model a conversation went to (a fallback
    # after an overload): the second model's estimates were priced with the first one's usage.
    tracker = ferroloop.ContextTracker()
    assert tracker.model == ""
    tracker.model = "model-a"
    tracker.push_message({"role": "user", "content": "What is in the repo? " * 100})
    raw = tracker.tokens()["tokens"]
    for _ in range(20):
        tracker.record_usage({"input_tokens": raw * 14 // 10})
    a = tracker.correction
    assert 1.35 < a <= 1.4
    assert tracker.tokens() == {"tokens": raw * 14 // 10, "method": "exact"}
    # A new model starts from the current factor; the first model's count is kept, not exact.
    tracker.model = "model-b"
    assert tracker.model == "model-b" and tracker.correction == a
    assert tracker.tokens() == {"tokens": raw * 14 // 10, "method": "usage+estimate"}
    for _ in range(20):
        tracker.record_usage({"input_tokens": raw * 9 // 10})
    assert 0.85 < tracker.correction < 0.95
    assert tracker.correction_for("model-a") == a
    assert tracker.correction_for("model-c") is None
    tracker.model = "model-a"
    assert tracker.correction == a
    with pytest.raises(TypeError):
        tracker.model = 3  # type: ignore[assignment]
    assert tracker.model == "model-a"


def test_estimate_request_gives_the_parts_like_node_and_c() -> None:
    body = {
        "system": "You are terse.",
        "tools": [{"name": "read", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "Summarise the file. " * 20}],
    }
    parts = ferroloop.estimate_request(body)
    assert set(parts) == {"system", "tools", "messages", "overhead", "total"}
    assert all(parts[k] > 0 for k in ("system", "tools", "messages"))
    assert parts["total"] == parts["system"] + parts["tools"] + parts["messages"] + parts["overhead"]
    assert parts["total"] == ferroloop.estimate_tokens(body)
    assert ferroloop.estimate_request(body, tokenizer="o200k")["total"] == ferroloop.estimate_tokens(
        body, tokenizer="o200k"
    )
    with pytest.raises(TypeError):
        ferroloop.estimate_request("not a request")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ferroloop.estimate_request(body, tokenizer="nope")  # type: ignore[arg-type]


def test_text_fed_in_pieces_gets_the_whole_texts_estimate() -> None:
    # str and bytes pieces, a multibyte character split between two bytes pieces, lines cut
    # anywhere: the estimate of the whole text.
    text = "".join(
        f"line {i}: Обычный текст, 日本語のテキスト, {i * 7919:x} and some English words.\n"
        for i in range(2000)
    ) + "no newline at the end ж"
    data = text.encode("utf-8")
    for tokenizer in ("claude", "o200k", "cl100k", "claude-legacy"):
        whole = ferroloop.estimate_tokens(text, tokenizer=tokenizer)
        by_bytes = ferroloop.TextEstimator(tokenizer=tokenizer)
        for start in range(0, len(data), 997):  # 997 cuts through multibyte characters
            by_bytes.feed(data[start : start + 997])
        assert by_bytes.estimate() == whole, tokenizer
        by_str = ferroloop.TextEstimator(tokenizer=tokenizer)
        for start in range(0, len(text), 1234):
            by_str.feed(text[start : start + 1234])
        assert by_str.estimate() == whole, tokenizer
    empty = ferroloop.TextEstimator()
    assert empty.estimate() == 0
    with pytest.raises(TypeError, match="str or bytes"):
        empty.feed(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ferroloop.TextEstimator(tokenizer="gpt2")  # type: ignore[arg-type]


def _request_table() -> list[tuple[str, Any, dict[str, int]]]:
    """tests/tokens/requests/expected.tsv: the parts the core gives each body, per family."""
    folder = SHARED / "tokens" / "requests"
    lines = (folder / "expected.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        fields = dict(zip(header, line.split("\t")))
        parts = {key: int(fields[key]) for key in ("system", "tools", "messages", "overhead", "total")}
        rows.append((fields["file"], fields["tokenizer"], parts))
    return rows


def test_request_estimates_match_the_table_every_language_shares() -> None:
    rows = _request_table()
    assert len(rows) >= 20
    for file, tokenizer, parts in rows:
        body = json.loads((SHARED / "tokens" / "requests" / file).read_text(encoding="utf-8"))
        assert ferroloop.estimate_request(body, tokenizer=tokenizer) == parts, (file, tokenizer)
        assert ferroloop.estimate_tokens(body, tokenizer=tokenizer) == parts["total"], (file, tokenizer)


def test_a_budget_that_would_block_before_it_compacts_is_refused_as_in_node_and_c() -> None:
    # An auto-compact buffer smaller than the blocking buffer puts the auto-compact point above
    # the blocking point: the state went from "warning" straight to "blocking" and never said
    # "auto_compact". It was accepted; the error now names both fields and their values.
    with pytest.raises(ValueError, match=r"autocompact_buffer \(1000\).*blocking_buffer \(3000\)"):
        ferroloop.ContextBudget(200_000, 32_000, autocompact_buffer=1_000, blocking_buffer=3_000)
    # Against a default: the blocking buffer is 3,000 for this window.
    with pytest.raises(ValueError, match="blocking_buffer"):
        ferroloop.ContextBudget(200_000, 32_000, autocompact_buffer=0)
    with pytest.raises(ValueError, match="autocompact_buffer"):
        ferroloop.ContextBudget.for_model("claude-sonnet-4-20250514", blocking_buffer=20_000)
    # A percentage only lowers the auto-compact point: it does not excuse the buffers.
    with pytest.raises(ValueError, match="autocompact_buffer"):
        ferroloop.ContextBudget(200_000, 32_000, autocompact_buffer=0, autocompact_percent=50)
    # Equal buffers are one point, where the more urgent state wins.
    equal = ferroloop.ContextBudget(200_000, 32_000, autocompact_buffer=3_000, blocking_buffer=3_000)
    assert equal.autocompact_threshold == equal.blocking_threshold == 177_000
    # A window smaller than the buffers is accepted: every threshold is 0, every count blocking.
    tiny = ferroloop.ContextBudget(1_000, 100, autocompact_buffer=5_000, blocking_buffer=4_000)
    assert (tiny.autocompact_threshold, tiny.blocking_threshold) == (0, 0)
    assert tiny.state(0) == "blocking"


def test_a_lone_surrogate_in_text_counts_as_a_replacement_character_as_in_node() -> None:
    # A str may hold a lone surrogate (from `surrogateescape` decoding, a JSON "\ud800" escape)
    # that UTF-8 cannot: estimate_tokens, TextEstimator and count_tokens raised
    # UnicodeEncodeError, while Node's estimateTokens / TextEstimator / countTokens count the
    # same JavaScript string with U+FFFD in its place, one per surrogate.
    text, replaced = "a\ud800b\udc00", "a\ufffdb\ufffd"
    assert ferroloop.estimate_tokens(text) == ferroloop.estimate_tokens(replaced)
    pieces = ferroloop.TextEstimator()
    pieces.feed(text)
    assert pieces.estimate() == ferroloop.estimate_tokens(replaced)
    if ferroloop.has_exact_counting():
        assert ferroloop.count_tokens(text, "o200k") == ferroloop.count_tokens(replaced, "o200k")
    # Two surrogates that make a pair are its character, as the same JavaScript literal is.
    assert ferroloop.estimate_tokens("x\ud83d\ude00") == ferroloop.estimate_tokens("x\U0001f600")


def test_ints_beyond_64_bits_are_counted_as_the_other_bindings_count_them() -> None:
    # An int JSON can write but 64 bits cannot hold was a ValueError ("JSON number out of
    # range"); the CLI, C and Node count it as the double JSON parsers read it as. It counts as
    # its nearest float does, so every binding gives the same number.
    def call(value: object) -> dict[str, object]:
        return {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "n", "input": {"n": value}}]}

    big = 123456789012345678901234567890
    assert ferroloop.estimate_tokens(call(big), tokenizer="o200k") == ferroloop.estimate_tokens(
        call(float(big)), tokenizer="o200k"
    )
    body = {"messages": [call(-(2**70)), call(10**400)]}
    assert ferroloop.estimate_request(body)["total"] > 0
    tracker = ferroloop.ContextTracker()
    tracker.push_message(call(big))


def test_floats_count_as_json_stringify_writes_them() -> None:
    # 1.0 is written `1` by JSON.stringify, which Node re-serialises with: every binding counts
    # that text now, so Python, Node, C and the CLI agree.
    as_floats = {"x": 1.0, "y": 2e10, "z": -0.0}
    as_ints: dict[str, float] = {"x": 1, "y": 20000000000, "z": 0}

    def block(value: dict[str, float]) -> dict[str, object]:
        return {"type": "tool_use", "id": "t", "name": "n", "input": value}

    for tokenizer in ("o200k", "claude"):
        assert ferroloop.estimate_tokens(block(as_floats), tokenizer=tokenizer) == ferroloop.estimate_tokens(
            block(as_ints), tokenizer=tokenizer
        )


def test_budget_settings_given_apply_as_given_and_only_defaults_scale() -> None:
    # The default blocking buffer passed explicitly on a small window was a ValueError: the
    # auto-compact buffer had been scaled to 1,293 first.
    given = ferroloop.ContextBudget(8192, 8192, blocking_buffer=3000)
    assert given.state(0) == "ok"
    assert given.warning_threshold < given.autocompact_threshold <= given.blocking_threshold
    # An auto-compact buffer that leaves nothing of the window compacted at zero tokens.
    with pytest.raises(ValueError, match=r"auto-compact threshold is 0.*autocompact_buffer \(13000\)"):
        ferroloop.ContextBudget(8192, 8192, autocompact_buffer=13000)
    with pytest.raises(ValueError, match="autocompact_percent"):
        ferroloop.ContextBudget.for_model("gpt-4", autocompact_percent=0.001)
    assert ferroloop.ContextBudget.for_model("gpt-4-32k").window == 32_768


def test_budget_state_saturates_as_in_node() -> None:
    # A count beyond 64 bits was an OverflowError; Node documents and returns "blocking".
    budget = ferroloop.ContextBudget(200_000, 32_000)
    assert budget.state(2**64) == "blocking"
    assert budget.state(10**40) == "blocking"
    assert budget.percent_left(2**64) == 0.0
    with pytest.raises(ValueError):
        budget.state(-1)
