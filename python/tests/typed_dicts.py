"""Checks of real values against ferroloop's ``TypedDict`` types (the event unions' members,
``ToolResult``, ``RequestMetrics``, ...), and a ``mypy --strict`` run over a misuse snippet:
shared by test_event_types.py and test_result_types.py.

A value is exactly its ``TypedDict`` when its keys are the declared keys (every required one,
no other) and each value is of the declared type, exactly: an ``int`` is not a ``bool`` here,
a ``float`` not an ``int``, a ``Literal`` set holds the value, a nested ``TypedDict`` is checked
the same way."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal, Mapping, Union, get_args, get_origin, get_type_hints

NoneType = type(None)


def is_typed_dict(annotation: Any) -> bool:
    # `typing.is_typeddict` is 3.10+; a TypedDict class is a dict subclass with required keys.
    return isinstance(annotation, type) and issubclass(annotation, dict) and hasattr(annotation, "__required_keys__")


def members(union: Any) -> list[Any]:
    """The ``TypedDict`` members of a union."""
    found = list(get_args(union))
    assert found and all(is_typed_dict(m) for m in found), union
    return found


def hints(member: Any) -> dict[str, Any]:
    return get_type_hints(member)


def tags(member: Any, key: str) -> tuple[str, ...]:
    """The ``Literal`` values a member allows for ``key`` (its ``type``, a context's ``action``)."""
    annotation = hints(member)[key]
    assert get_origin(annotation) is Literal, (member, key)
    return get_args(annotation)


def exactly(value: object, member: Any) -> bool:
    """Whether ``value`` is a dict with exactly ``member``'s keys (every required one), each of
    its declared type; an assertion names the first difference."""
    assert isinstance(value, dict), (member.__name__, value)
    declared = hints(member)
    required = set(member.__required_keys__)
    assert required <= set(value) <= set(declared), (member.__name__, sorted(value), sorted(declared))
    for key, item in value.items():
        assert conforms(item, declared[key]), (member.__name__, key, item, declared[key])
    return True


def conforms(value: object, annotation: Any) -> bool:
    """Whether ``value`` is of the declared type (the few forms the types use)."""
    if annotation is Any:
        return True
    if is_typed_dict(annotation):
        # Not `exactly`, which asserts: a union's other members may match.
        declared = hints(annotation)
        return (
            isinstance(value, dict)
            and set(annotation.__required_keys__) <= set(value) <= set(declared)
            and all(conforms(item, declared[key]) for key, item in value.items())
        )
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return any(type(value) is type(arg) and value == arg for arg in args)
    if origin is Union:
        return any(conforms(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(conforms(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            conforms(key, args[0]) and conforms(item, args[1]) for key, item in value.items()
        )
    if annotation is NoneType:
        return value is None
    if annotation in (str, int, float, bool):
        # Exactly: a bool is no int here, an int no float.
        return type(value) is annotation
    raise AssertionError(f"no check for {annotation!r}")


def member_of(union: Any, event: Mapping[str, Any]) -> Any:
    """The one member ``event`` is: chosen by ``type``, then (two members sharing it) ``action``."""
    chosen = [m for m in members(union) if event["type"] in tags(m, "type")]
    if len(chosen) > 1:
        chosen = [m for m in chosen if event.get("action") in tags(m, "action")]
    assert len(chosen) == 1, (event, chosen)
    return chosen[0]


def check(union: Any, events: list[Any]) -> set[Any]:
    """Asserts every event is exactly its member of ``union`` (every key present); returns the
    members seen."""
    seen = set()
    for event in events:
        assert isinstance(event, dict), event
        member = member_of(union, event)
        assert set(event) == set(hints(member)), (member.__name__, sorted(event), sorted(hints(member)))
        exactly(event, member)
        seen.add(member)
    return seen


def mypy_misuse(tmp_path: Path, snippet: str) -> tuple[set[tuple[int, str]], set[tuple[int, str]], str]:
    """Runs ``mypy --strict`` on ``snippet``: returns the (line, code) pairs its lines ending in
    ``# error: CODE`` expect, the pairs mypy reported, and mypy's output."""
    source = tmp_path / "misuse.py"
    source.write_text(textwrap.dedent(snippet), encoding="utf-8")
    expected = {
        (number, match[1])
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1)
        if (match := re.search(r"# error: ([\w-]+)$", line))
    }
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
         "--show-error-codes", "--no-error-summary", str(source)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    reported = {
        (int(match[1]), match[2])
        for match in re.finditer(r"^.*misuse\.py:(\d+): error: .*\[([\w-]+)\]$", done.stdout, re.M)
    }
    return expected, reported, done.stdout + done.stderr
