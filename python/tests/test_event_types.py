"""The event types (``ferroloop.AgentEvent``, ``TurnEvent``, ``DecodeEvent``, ``StreamEvent``:
unions of ``TypedDict`` members) against real events, and against the docstrings' field lists.

Each real event must be exactly one member: its ``type`` one of the members' ``Literal``
(``context`` events: the member its ``action`` names), its keys that member's keys, each value
of the declared type (``int`` is not ``bool``, ``float`` is not ``int``; ``Literal`` sets hold
the value). Every member must occur, so the unions are as closed as the events are.

Also: ``mypy --strict`` rejects a field misused after narrowing (a check that the types are
precise; with the earlier ``dict[str, Any]`` events, mypy accepted anything)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ferroloop
from conftest import FIXTURES, fixture_bytes
from test_decode import CASES
from test_event_docs import Replay, agent_events, documented, stream_events, turn_events
from typed_dicts import check, hints, members, mypy_misuse, tags


def test_each_union_tells_its_members_apart_by_type_then_action() -> None:
    for union in (ferroloop.AgentEvent, ferroloop.TurnEvent, ferroloop.DecodeEvent, ferroloop.StreamEvent):
        by_type: dict[str, list[Any]] = {}
        for member in members(union):
            assert hints(member)["type"] is not None
            for tag in tags(member, "type"):
                by_type.setdefault(tag, []).append(member)
        for tag, shared in by_type.items():
            if len(shared) > 1:
                assert tag == "context", tag
                actions = [action for m in shared for action in tags(m, "action")]
                assert sorted(actions) == ["compaction", "microcompact"]
    # The stream's union is the decoder's plus its own two.
    assert set(members(ferroloop.StreamEvent)) == set(members(ferroloop.DecodeEvent)) | {
        ferroloop.StreamRetryEvent,
        ferroloop.StalledEvent,
    }


def fields(union: Any, kind: str) -> set[str]:
    """The keys (``type`` aside) of the members of ``union`` whose type is ``kind``."""
    out: set[str] = set()
    for member in members(union):
        if kind in tags(member, "type"):
            out |= set(hints(member)) - {"type"}
    return out


def test_the_docstrings_list_the_fields_the_types_declare() -> None:
    # The docstrings are prose for readers (`help(AgentRun)`), the types are for the checker:
    # they name the same fields (a `context` event's are both members' together).
    agent = documented(ferroloop.AgentRun.__doc__)
    assert sorted(agent) == sorted({tag for m in members(ferroloop.AgentEvent) for tag in tags(m, "type")})
    for kind, listed in agent.items():
        assert listed == fields(ferroloop.AgentEvent, kind), kind
    turn = documented(ferroloop.Turn.__doc__)
    assert sorted(turn) == sorted({tag for m in members(ferroloop.TurnEvent) for tag in tags(m, "type")})
    for kind, listed in turn.items():
        assert listed == fields(ferroloop.TurnEvent, kind), kind
    stream = documented(ferroloop.MessageStream.__doc__)
    for kind in ("retry", "stalled"):
        assert stream[kind] == fields(ferroloop.StreamEvent, kind), kind


@pytest.mark.asyncio
async def test_agent_events_are_exactly_their_typed_dicts(replay: Replay) -> None:
    seen = check(ferroloop.AgentEvent, await agent_events(replay))
    assert seen == set(members(ferroloop.AgentEvent)), sorted(m.__name__ for m in set(members(ferroloop.AgentEvent)) - seen)


@pytest.mark.asyncio
async def test_turn_events_are_exactly_their_typed_dicts() -> None:
    seen = check(ferroloop.TurnEvent, await turn_events())
    assert seen == set(members(ferroloop.TurnEvent))


def invalid_tool_input_stream() -> bytes:
    """An Anthropic stream whose tool call's input is not JSON (``tool_use_invalid``), the one
    decoder event no shared stream makes."""
    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [],
                                "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    data: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a": tru'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {d['type']}\ndata: {json.dumps(d)}\n\n" for d in data).encode()


def test_decoder_events_are_exactly_their_typed_dicts() -> None:
    streams: list[tuple[str, bytes]] = [(provider, source.read_bytes()) for provider, _, source in CASES]
    streams += [(name.split("/")[0], fixture_bytes(name)) for name in FIXTURES]
    streams.append(("anthropic", invalid_tool_input_stream()))
    seen = set()
    for provider, data in streams:
        for events in (True, False):
            decoder = ferroloop.StreamDecoder(provider, events=events)  # type: ignore[arg-type]
            seen |= check(ferroloop.DecodeEvent, decoder.feed(data))
    assert seen == set(members(ferroloop.DecodeEvent)), sorted(m.__name__ for m in set(members(ferroloop.DecodeEvent)) - seen)


@pytest.mark.asyncio
async def test_stream_events_are_exactly_their_typed_dicts(replay: Replay) -> None:
    events, metrics = await stream_events(replay)
    seen = check(ferroloop.StreamEvent, events)
    assert {ferroloop.StreamRetryEvent, ferroloop.StalledEvent, ferroloop.TextDeltaEvent} <= seen
    # The metrics' retries are the stream's retry events.
    assert metrics is not None
    assert check(ferroloop.StreamEvent, metrics["retries"]) == {ferroloop.StreamRetryEvent}


# Each line ending in `# error: CODE` must be reported by mypy with that code, and no other line.
MISUSE = '''
import ferroloop


async def agent(run: ferroloop.AgentRun) -> None:
    async for event in run:
        if event["type"] == "text_delta":
            text: str = event["text"]
            wrong: int = event["text"]  # error: assignment
            index = event["index"]  # error: typeddict-item
        elif event["type"] == "tool_finished":
            seconds: float = event["duration"]
            late: str = event["duration"]  # error: assignment
        elif event["type"] == "stop":
            error: str = event["error"]  # error: assignment


async def turn(t: ferroloop.Turn) -> None:
    async for event in t:
        if event["type"] == "finished":
            status: str = event["status"]
            number: str = event["index"]  # error: assignment


def decode(decoder: ferroloop.StreamDecoder) -> None:
    for event in decoder.feed(b""):
        if event["type"] == "tool_use_ready":
            name: str = event["name"]
            partial = event["partial_json"]  # error: typeddict-item


async def stream(s: ferroloop.MessageStream) -> None:
    async for event in s:
        if event["type"] == "retry":
            status: int = event["status"]  # error: assignment
'''


def test_mypy_rejects_a_field_misused_after_narrowing(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    expected, reported, output = mypy_misuse(tmp_path, MISUSE)
    assert reported == expected, output
