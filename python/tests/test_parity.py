"""The Python API against the Node API (node/lib/index.d.ts): classes, their methods and
properties, functions, constructor options, event and result fields, error codes.

A name present in one binding only fails this test unless it is in the mapping below (a name
spelled otherwise) or in ``ONLY_PYTHON`` / ``ONLY_NODE`` (a documented, deliberate difference,
each with its reason). So a method, an option or an event field added to one binding alone is
caught here: add it to the other binding, or list it with why it differs.

Node's names are read from its hand-written declarations (checked against the runtime by
node/test/types.test.js), with a few line-based patterns on their layout (a member is a line
indented two spaces under an ``export declare class`` or ``export interface``; an event is a
``| { type: '...'; ... }`` line of a union). Names are compared after Python's conventions:
camelCase to snake_case, and Node's ``Ms`` suffix dropped (milliseconds there, seconds here).
"""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path
from typing import Any, Callable, Optional

import ferroloop

DTS = (Path(__file__).resolve().parents[2] / "node" / "lib" / "index.d.ts").read_text(encoding="utf-8")

# Python's name of a Node name, where it is not the conventional conversion.
PYTHON_NAME_OF_NODE_CLASS = {"ToolCallContext": "ToolContext"}
RENAMED: dict[str, dict[str, str]] = {
    # Node name → Python name, per Python class / option set / event.
    "ToolExecutor()": {"default_max_result_chars": "max_result_chars"},
    # Node's `timeouts: { totalMs, connectMs, ... }` are keywords of their own here.
    "Client()": {
        "total": "timeout",
        "connect": "connect_timeout",
        "first_byte": "first_byte_timeout",
        "first_event": "first_event_timeout",
        "idle": "idle_timeout",
    },
    # Python's run.cancel() / finish() are Node's abort() / result().
    "AgentRun": {"abort": "cancel", "result": "finish"},
    # Node's `await stream.message()` is Python's `await stream.until_done()`; Node's
    # `completedMessage` (null until the end) is Python's `message()` (None until the end).
    "MessageStream": {"message": "until_done", "completed_message": "message"},
    # What Python's errors call the partial message and a provider error's payload.
    "error": {"partial": "partial_message", "raw": "body"},
}

# Deliberate differences, each language's idiom (README.md, the stubs and index.d.ts describe
# both sides): name → why. Keys: `Class.member`, `Class().option`, `function name`,
# `error.attribute`, as the failures print them.
ONLY_NODE: dict[str, str] = {
    "MessageStream.final_message": "an alias of message() (the Anthropic SDK's name); Python has until_done()",
    "MessageStream.abort": "Python aborts by cancelling the iterating task or aclose()",
    "ContextTracker.length": "Python's len(tracker)",
    "ToolContext.signal": "an AbortSignal; Python's ToolContext.cancelled (and CancelledError for async tools)",
    "Client().timeouts": "Node groups the watchdogs in a `timeouts` object; Python has a keyword each",
    "ContextBudget().model": "Python's ContextBudget.for_model(model, ...)",
    "error.reason": "a truncation's cause's code: Python's StreamTruncatedError.__cause__.code",
    "function to_ferroloop_error": "converts raw native errors to FerroloopError; Python raises them typed",
    "function _debug_panic": "test hook (Python's _native._debug_panic)",
    "function _debug_arm_panics": "test hook (Python's _native._debug_arm_panic)",
}
ONLY_PYTHON: dict[str, str] = {
    "SseEvent": "a class here (Node's SseEvent is a plain object interface, compared as a result type)",
    "Client.close": "releases the connection pool (`async with`); a Node client is garbage-collected",
    "Client.aclose": "the `async with` protocol",
    "MessageStream.aclose": "the async-generator protocol (Node: abort())",
    "AgentRun.aclose": "the async-generator protocol",
    "AgentRun.stop": "the stop event once iterated (Node: await run.result())",
    "Turn.aclose": "the async-generator protocol",
    "ToolContext.cancelled": "a flag a plain-function tool polls (Node's ctx.signal.aborted)",
    "ContextBudget.for_model": "Node's new ContextBudget({ model })",
    "error.message": "Node's Error.message (not redeclared in index.d.ts)",
    "error.results": "ToolError.results: only a Rust tool fails fatally, and Node runs none in an executor",
}


def snake(name: str) -> str:
    """Python's spelling of a Node name: camelCase to snake_case, the ``Ms`` suffix dropped."""
    if name.endswith("Ms") and len(name) > 2:
        name = name[:-2]
    name = re.sub(r"(?<=[a-z])(\d+)", r"_\1", name)
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def blocks(kind: str) -> dict[str, str]:
    """The bodies of the ``export declare class`` or ``export interface`` blocks, by name."""
    pattern = rf"^export {kind} (\w+)[^\n]*\{{\n(.*?)^\}}"
    return {name: body for name, body in re.findall(pattern, DTS, re.M | re.S)}


def members(body: str) -> set[str]:
    """The member names of a class or interface body (two-space indented declarations)."""
    found = re.findall(r"^  (?:readonly |static )?(\w+)\??(?:<[^>\n]*>)?[(:]", body, re.M)
    return {name for name in found if name != "constructor"}


NODE_CLASSES = blocks("declare class")
NODE_INTERFACES = blocks("interface")


def node_error_classes() -> dict[str, str]:
    """Node's error classes and the code each declares."""
    codes = {}
    for name, body in NODE_CLASSES.items():
        code = re.search(r"readonly code: '(\w+)'", body)
        if code is not None:
            codes[name] = code.group(1)
    return codes


def python_classes() -> dict[str, type]:
    """Python's public classes that are not exceptions nor TypedDicts (result and event types)."""
    found = {}
    for name in ferroloop.__all__:
        value = getattr(ferroloop, name)
        if not isinstance(value, type) or issubclass(value, (BaseException, dict)):
            continue
        if getattr(value, "_is_protocol", False):
            continue
        found[name] = value
    return found


def python_members(cls: type) -> set[str]:
    """Public methods and properties a class defines, its ferroloop bases' included."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("ferroloop"):
            names.update(name for name in vars(klass) if not name.startswith("_"))
    return names


def keywords(function: Callable[..., Any], skip: tuple[str, ...] = ()) -> set[str]:
    """The parameter names of a callable (its options), ``self`` and ``skip`` left out."""
    parameters = inspect.signature(function).parameters
    return {name for name in parameters if name not in ("self", *skip)}


USED: set[str] = set()


def listed(key: str, differences: dict[str, str]) -> bool:
    """Whether ``key`` is a listed difference (and notes that the entry is needed)."""
    if key in differences:
        USED.add(key)
        return True
    return False


def compare(what: str, python: set[str], node: set[str], renamed: Optional[dict[str, str]] = None) -> list[str]:
    """The names of ``what`` in one binding only, less the listed differences."""
    renamed = renamed or {}
    node_as_python = {renamed.get(snake(name), snake(name)) for name in node}
    problems = []
    for name in sorted(node_as_python - python):
        original = [n for n in node if renamed.get(snake(n), snake(n)) == name][0]
        if not listed(f"{what}.{snake(original)}", ONLY_NODE):
            problems.append(f"{what}.{name}: in Node ({original}) only")
    for name in sorted(python - node_as_python):
        if not listed(f"{what}.{name}", ONLY_PYTHON):
            problems.append(f"{what}.{name}: in Python only")
    return problems


def the_same_classes_with_the_same_methods_and_properties() -> list[str]:
    python = python_classes()
    errors = node_error_classes()
    node = {
        PYTHON_NAME_OF_NODE_CLASS.get(name, name): body
        for name, body in {**NODE_CLASSES, "ToolCallContext": NODE_INTERFACES["ToolCallContext"]}.items()
        if name not in errors and name != "FerroloopError"
    }
    problems = [f"class {name}: in Node only" for name in sorted(set(node) - set(python))]
    problems += [
        f"class {name}: in Python only" for name in sorted(set(python) - set(node)) if not listed(name, ONLY_PYTHON)
    ]
    for name in sorted(set(python) & set(node)):
        problems += compare(name, python_members(python[name]), members(node[name]), RENAMED.get(name))
    return problems


def the_same_functions() -> list[str]:
    python = {
        name
        for name in ferroloop.__all__
        if inspect.isfunction(getattr(ferroloop, name)) or inspect.isbuiltin(getattr(ferroloop, name))
    }
    node = set(re.findall(r"^export declare function (\w+)", DTS, re.M))
    node_as_python = {snake(name): name for name in node}
    problems = [
        f"function {name}: in Node ({node_as_python[name]}) only"
        for name in sorted(set(node_as_python) - python)
        if not listed(f"function {name}", ONLY_NODE)
    ]
    problems += [
        f"function {name}: in Python only"
        for name in sorted(python - set(node_as_python))
        if not listed(f"function {name}", ONLY_PYTHON)
    ]
    return problems


def the_same_constructor_options() -> list[str]:
    options = NODE_INTERFACES
    cases: list[tuple[str, set[str], set[str]]] = [
        ("SseParser()", keywords(ferroloop.SseParser), members(options["SseParserOptions"])),
        ("StreamDecoder()", keywords(ferroloop.StreamDecoder), members(options["StreamDecoderOptions"])),
        (
            "Client()",
            keywords(ferroloop.Client),
            members(options["ClientOptions"]) | members(options["ClientTimeouts"]),
        ),
        ("ToolExecutor()", keywords(ferroloop.ToolExecutor), members(options["ToolExecutorOptions"])),
        ("ToolExecutor.tool()", keywords(ferroloop.ToolExecutor.tool), members(options["ToolDeclaration"])),
        ("Agent()", keywords(ferroloop.Agent, skip=("client",)), members(options["AgentOptions"])),
        ("ContextBudget()", keywords(ferroloop.ContextBudget), members(options["ContextBudgetOptions"])),
    ]
    problems = []
    for what, python, node in cases:
        problems += compare(what, python, node, RENAMED.get(what))
    return problems


def the_same_error_attributes() -> list[str]:
    # What any error carries besides its class: Python's attributes (of an instance of each
    # class, and DecodeErrorDetail's) against Node's FerroloopError and its detail interfaces.
    python = set(typing.get_type_hints(ferroloop.DecodeErrorDetail))
    for name in ferroloop.__all__:
        cls = getattr(ferroloop, name)
        if isinstance(cls, type) and issubclass(cls, ferroloop.FerroloopError):
            python.update(name for name in vars(cls("x")) if not name.startswith("_"))
            python.add("code")
    node = members(NODE_CLASSES["FerroloopError"])
    node |= members(NODE_INTERFACES["ClientErrorDetail"]) | members(NODE_INTERFACES["DecodeErrorDetail"])
    return compare("error", python, node, RENAMED["error"])


def node_events(union: str) -> dict[str, set[str]]:
    """The fields of each member of a Node event union, by ``type`` (``type/action`` for the
    ``context`` events), members named by reference (``| AgentStopEvent``) resolved."""
    body = re.search(rf"^export type {union} =\n(.*?)\n\n", DTS, re.M | re.S)
    assert body is not None, union
    events: dict[str, set[str]] = {}
    for fields in re.findall(r"^  \| \{ (type: [^\n]*) \}$", body.group(1), re.M):
        names = set(re.findall(r"(?:^|; )(\w+)\??:", fields))
        kind = re.match(r"type: '(\w+)'", fields)
        assert kind is not None, fields
        action = re.search(r"action: '(\w+)'", fields)
        events[kind.group(1) + (f"/{action.group(1)}" if action else "")] = names
    for reference in re.findall(r"^  \| (\w+)$", body.group(1), re.M):
        if reference in NODE_INTERFACES:
            event = members(NODE_INTERFACES[reference])
            kind = re.search(r"^  type: '(\w+)'", NODE_INTERFACES[reference], re.M)
            assert kind is not None, reference
            events[kind.group(1)] = event
        else:
            events.update(node_events(reference))
    return events


def python_events(union: Any) -> dict[str, set[str]]:
    """The fields of each TypedDict of a Python event union, keyed as ``node_events``."""
    events = {}
    for member in typing.get_args(union):
        hints = typing.get_type_hints(member)
        key = typing.get_args(hints["type"])[0]
        if "action" in hints:
            key += "/" + typing.get_args(hints["action"])[0]
        events[key] = set(hints)
    return events


def the_same_events_with_the_same_fields() -> list[str]:
    problems = []
    for union in ["AgentEvent", "TurnEvent", "DecodeEvent", "StreamEvent"]:
        python = python_events(getattr(ferroloop, union))
        node = node_events(union)
        problems += [f"{union} {kind}: in Node only" for kind in sorted(set(node) - set(python))]
        problems += [f"{union} {kind}: in Python only" for kind in sorted(set(python) - set(node))]
        for kind in sorted(set(python) & set(node)):
            problems += compare(f"{union} {kind}", python[kind], node[kind])
    return problems


def the_same_result_fields() -> list[str]:
    # The TypedDicts of results, and SseEvent's properties, against Node's interfaces.
    problems = []
    for name in ["ToolResult", "RequestMetrics", "TokenCount", "RequestEstimate", "AgentStopEvent"]:
        python = set(typing.get_type_hints(getattr(ferroloop, name)))
        problems += compare(name, python, members(NODE_INTERFACES[name]))
    problems += compare("SseEvent", python_members(ferroloop.SseEvent), members(NODE_INTERFACES["SseEvent"]))
    return problems


def test_every_node_error_class_has_a_python_class_of_its_code() -> None:
    # An error class in one binding only (a new code) fails here; test_errors.py checks that
    # each Python class's code is Node's.
    python_codes = {
        cls.code
        for name in ferroloop.__all__
        if isinstance(cls := getattr(ferroloop, name), type) and issubclass(cls, ferroloop.FerroloopError)
    }
    # Node's codes Python raises its own exceptions for (README.md, "Errors").
    python_builtin = {"invalid_argument": "ValueError / TypeError", "aborted": "asyncio.CancelledError"}
    node_codes = set(node_error_classes().values())
    assert node_codes - python_codes == set(python_builtin)
    assert python_codes - node_codes == set()


def test_the_same_classes_with_the_same_methods_and_properties() -> None:
    problems = the_same_classes_with_the_same_methods_and_properties()
    assert problems == [], "\n".join(problems)


def test_the_same_functions() -> None:
    problems = the_same_functions()
    assert problems == [], "\n".join(problems)


def test_the_same_constructor_options() -> None:
    problems = the_same_constructor_options()
    assert problems == [], "\n".join(problems)


def test_the_same_events_with_the_same_fields() -> None:
    problems = the_same_events_with_the_same_fields()
    assert problems == [], "\n".join(problems)


def test_the_same_result_fields() -> None:
    problems = the_same_result_fields()
    assert problems == [], "\n".join(problems)


def test_every_listed_difference_is_still_one() -> None:
    # An entry no comparison needs any more (the gap was closed, a name changed) is removed
    # from the lists, so that they stay true.
    for check in [
        the_same_classes_with_the_same_methods_and_properties,
        the_same_functions,
        the_same_constructor_options,
        the_same_events_with_the_same_fields,
        the_same_result_fields,
        the_same_error_attributes,
    ]:
        check()
    stale = sorted((set(ONLY_NODE) | set(ONLY_PYTHON)) - USED)
    assert stale == [], stale


def test_the_same_error_attributes() -> None:
    problems = the_same_error_attributes()
    assert problems == [], "\n".join(problems)
