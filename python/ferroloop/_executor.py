"""``ToolExecutor``: Python tools run by ferroloop's concurrent executor.

Async tools run as tasks on the caller's event loop; plain functions run on worker threads,
never on the loop. Results come back in request order, one per call, whatever happens.

Each call runs in a copy of the caller's ``contextvars`` context (the context of ``run``, of the
``Turn.submit`` that submitted it, or of ``Agent.run``), as ``asyncio.create_task`` and
``asyncio.to_thread`` do: context variables set by the caller (request ids, loggers, tracing
spans) are seen by the tools, and what a tool sets stays in its own call.

A plain function cannot be interrupted: cancelled, it runs to its end (long ones should poll
``ctx.cancelled``) and keeps its worker thread meanwhile, even one that never returns; its call
is answered anyway (cancelled or timed out) once ``cleanup_grace`` is over, and the turn or run
completes. One still running when the interpreter exits is waited for, like the workers of
``asyncio.to_thread``.

An async tool's task is held by ferroloop until its call is answered, and cancelled when its
turn or run is cancelled, closed or dropped. A task that refuses to stop (catches
``CancelledError`` and goes on) is answered as cancelled or timed out after ``cleanup_grace``
and runs on, detached: ``asyncio.run`` waits for it at its end, as for any task, and if it
awaits something nothing can complete any more it is garbage-collected (its ``finally``
blocks run as its coroutine is closed), without asyncio's "Task was destroyed but it is
pending!" log: ferroloop had cancelled it and its result says so.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import os
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Optional, TypeVar, Union, overload

from . import _native
from ._args import optional_str, optional_str_path
from ._batches import AsyncClosing
from ._events import ToolResult, TurnEvent

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

ConcurrencySafe = Union[bool, Callable[[dict[str, Any]], bool]]


def _takes_context(function: Callable[..., Any]) -> bool:
    """Whether ``function`` accepts a second positional argument (the tool context)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return True
    return len(positional) >= 2


def _is_async(function: Callable[..., Any]) -> bool:
    # Functions, methods and `functools.partial`s of them are answered directly (a partial's
    # `__call__` is its class's plain method); other callables by their `__call__`.
    if inspect.iscoroutinefunction(function):
        return True
    call = getattr(function, "__call__", None)
    if inspect.isfunction(function) or inspect.ismethod(function) or call is None:
        return False
    return inspect.iscoroutinefunction(call)


def _tool_name(function: Callable[..., Any]) -> str:
    """The name a tool registered without one gets: its function's ``__name__``."""
    name = getattr(function, "__name__", None)
    if not isinstance(name, str):
        # A `functools.partial` or a callable object has none (an AttributeError before).
        raise TypeError(f"a {type(function).__name__} has no __name__: register it with tool(name=...)")
    return name


class Turn(AsyncClosing):
    """A streaming turn: ``submit`` calls as the model's stream seals them, ``seal`` at the end,
    and ``async for event in turn`` to follow it. Calls start as soon as they are submitted.

    Events are dicts (typed ``TurnEvent``: narrow on ``event["type"]``) with a ``"type"`` and
    the fields listed after it (``index`` is the call's position in the turn; durations in
    seconds): ``started`` (``index``, ``tool_use_id``, ``tool``, ``queued``), ``progress``
    (``index``, ``tool_use_id``, ``data``), ``finished`` (``index``, ``tool_use_id``, ``tool``,
    ``status``, ``duration``), ``detached`` (``index``, ``tool_use_id``, ``tool``: a cancelled or timed-out call that outlived its cleanup grace;
    its result is produced anyway) as they happen, and ``result`` (``index``, ``result``: one
    per call, in submission order, ``result`` the ``tool_result`` dict, a ``ToolResult``).
    Every submitted call gets exactly one result, even when cancelled.

    Leaving ``async for event in turn`` early (``break``) does not stop the turn: Python calls
    nothing on a plain async iterator. ``await turn.aclose()``, or leaving an
    ``async with executor.turn() as turn:`` block, cancels and seals a turn not yet done (its
    running tool tasks see ``asyncio.CancelledError``; ``results()`` still gives every call
    its one, ``is_error``, result) and ends the iteration. A turn dropped before its end
    cancels its calls too.
    """

    def __init__(self, native: _native._Turn) -> None:
        self._native = native
        # What an awaiting task cancelled just after the native future completed had already
        # taken from the turn: returned by the next call instead of being lost.
        self._unclaimed_events: collections.deque[TurnEvent] = collections.deque()
        self._closed = False
        # A ``__anext__`` is waiting for the next event.
        self._waiting = False

    def submit(self, tool_use: dict[str, Any], *more: dict[str, Any]) -> None:
        """Submits a ``tool_use`` block (``id``, ``name``, ``input``; without ``input`` the tool
        runs with ``{}``, as in Node and C), or several at once (``submit(a, b)``, as Node's
        ``submit(...toolUses)``): in order, all or none (an entry that is no tool use is a
        ``TypeError`` before any is submitted; a call whose ``input`` cannot be converted to
        JSON is submitted and answered with its own error result, never run, as ``run`` answers
        it). Each tool runs in a copy of the current
        ``contextvars`` context (this call's). Raises ``TurnSealedError`` (an
        ``InvalidStateError`` and a ``ToolError``) once the turn is sealed."""
        self._native.submit(tool_use, *more)

    def seal(self) -> None:
        """No more calls will be submitted. Sealing a sealed turn is a no-op, as in Node and C."""
        self._native.seal()

    def cancel(self) -> None:
        """Cancels running and queued calls (each still gets an ``is_error`` result)."""
        self._native.cancel()

    def discard(self) -> None:
        """Discards the turn (cancels and seals it)."""
        self._native.discard()

    async def aclose(self) -> None:
        """Stops following the turn: cancels its running and queued calls and seals it (every
        submitted call still gets its result from ``results()``; ``submit`` raises from now
        on); the iteration ends. Changes nothing in a turn already done. Idempotent."""
        self._closed = True
        self._native.cancel()
        self._native.seal()

    def __aiter__(self) -> AsyncIterator[TurnEvent]:
        return self

    async def __anext__(self) -> TurnEvent:
        if self._waiting:
            # As an async generator, ``AgentRun`` and ``MessageStream``: two tasks iterating
            # the turn at once would each get only some of its events.
            raise RuntimeError(
                "anext(): this Turn is already being iterated by another task "
                "(each would get only some of its events)"
            )
        if self._closed:
            raise StopAsyncIteration
        if self._unclaimed_events:
            return self._unclaimed_events.popleft()
        self._waiting = True
        try:
            event = await _claim(self._native.next_event(), self._unclaimed_events.appendleft)
        finally:
            self._waiting = False
        if event is None:
            raise StopAsyncIteration
        return event

    async def results(self) -> list[ToolResult]:
        """Seals the turn (``submit`` raises from then on) and waits for every ``tool_result``
        (a ``ToolResult``), in submission order: exactly one per submitted call, with the turn
        budget applied (the results to send back; the ``result`` events come before it applies).
        Calling it again (or concurrently, or after a call that was cancelled) returns the same
        results, in a new list each time, as Node's ``turn.results()`` does. A task following
        the turn (``async for``, begun before) still gets every event; a turn nobody follows
        drops them as it goes."""
        # The native turn keeps the collected results: a cancelled call loses nothing.
        return await self._native.finish()


async def _claim(future: Awaitable[T], keep: Callable[[Any], None]) -> T:
    """Awaits a native future; if the awaiting task is cancelled after the future already has
    its value (the wake-up was pending), hands the value to ``keep`` before re-raising, since
    asyncio would otherwise drop it (as ``asyncio.Queue.get`` guards against)."""
    fut = asyncio.ensure_future(future)
    try:
        return await fut
    except asyncio.CancelledError:
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            value = fut.result()
            if value is not None:
                keep(value)
        raise


class ToolExecutor:
    """Runs tool calls concurrently: safe calls in parallel (at most ``max_concurrency``, at
    least 1: 0 is refused), unsafe calls alone, results in request order. The cap and the
    barrier hold within one run or turn: runs of one executor made at the same time admit
    their calls each on its own.

    ``max_result_chars`` is the default result size limit (default 50,000 characters; larger
    results are spilled to a file in ``spill_dir``, default ``<temp dir>/ferroloop-tool-results``,
    an empty one is refused, and replaced by a preview; ``math.inf`` for no limit, as Node's ``Infinity``;
    a result holding a block other than text, such as an image, is delivered whole, in every
    language: only text results are replaced); ``turn_budget_chars`` is the aggregate limit of one turn's
    results (default 200,000 characters; over it, the largest results are spilled, largest
    first; ``None`` or ``math.inf`` disables it, as Node's ``Infinity``); ``default_timeout`` (seconds above 0: 0 is refused; default none) applies to tools
    that declare none; ``cleanup_grace`` (seconds, default 5) is how long a cancelled tool may
    take to stop.
    """

    def __init__(
        self,
        max_concurrency: int = 10,
        *,
        max_result_chars: Optional[float] = None,
        spill_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        default_timeout: Optional[float] = None,
        cleanup_grace: Optional[float] = None,
        turn_budget_chars: Optional[float] = _native.DEFAULT_TURN_BUDGET_CHARS,
    ) -> None:
        spill_path = optional_str_path("spill_dir", spill_dir)
        self._native = _native._Executor(
            max_concurrency,
            max_result_chars=max_result_chars,
            spill_dir=spill_path,
            default_timeout=default_timeout,
            cleanup_grace=cleanup_grace,
            turn_budget_chars=turn_budget_chars,
        )

    @overload
    def tool(self, name: F) -> F: ...

    @overload
    def tool(
        self,
        name: Optional[str] = None,
        *,
        concurrency_safe: ConcurrencySafe = False,
        timeout: Optional[float] = None,
        max_result_chars: Optional[float] = None,
        schema: Optional[dict[str, Any]] = None,
        cancels_siblings_on_error: bool = False,
        description: Optional[str] = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: Union[str, F, None] = None,
        *,
        concurrency_safe: ConcurrencySafe = False,
        timeout: Optional[float] = None,
        max_result_chars: Optional[float] = None,
        schema: Optional[dict[str, Any]] = None,
        cancels_siblings_on_error: bool = False,
        description: Optional[str] = None,
    ) -> Any:
        """Registers a tool (a decorator). The function gets the input dict and, if it takes a
        second parameter, a ``ToolContext`` (``tool_use_id``, ``name``, ``index``,
        ``progress(...)``, ``cancelled``). It may be ``async def`` (run on the event loop) or plain (run on a
        worker thread). It returns a ``str``, a list of content blocks (a list holding anything
        else, such as file names, is sent as its JSON text), or a dict (a content
        block, or ``{"content": ..., "is_error": ...}``); ``None`` is an empty result, a float
        JSON cannot hold (``nan``, ``inf``), alone or nested, is ``null``, as Node's ``NaN``; an exception becomes an ``is_error``
        result whose text is ``"TypeName: message"`` (the traceback, with its cause, is logged to
        ``logging.getLogger("ferroloop")`` at ``DEBUG`` level; ``SystemExit`` and
        ``KeyboardInterrupt`` also end the event loop, from a plain function as from a task). ``concurrency_safe`` is a bool or a callable taking the input. ``timeout`` (seconds above
        0: 0 is refused) overrides the executor's ``default_timeout``. ``max_result_chars``
        overrides the executor's limit for this tool (``math.inf``: none). ``schema`` (a
        JSON schema) validates the input and, with ``description`` (default: the function's
        docstring), is what an ``Agent`` tells the model about the tool. The keywords checked
        are ``type``, ``enum``, ``const``, ``properties``, ``required``,
        ``additionalProperties``, ``patternProperties``, ``propertyNames``,
        ``dependentRequired``, ``dependentSchemas``, ``items``, ``prefixItems``,
        ``additionalItems``, ``contains``, the bounds (``minimum``, ``maximum``,
        ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``, ``minLength``,
        ``maxLength``, ``minItems``, ``maxItems``, ``uniqueItems``, ``minProperties``,
        ``maxProperties``), ``pattern`` (one the Rust regex engine cannot
        run, with look-around or back-references, is not checked and logged as a warning),
        ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else`` and ``$ref``
        within the schema (Pydantic's ``$defs`` and ``Optional`` fields; a ``$ref`` that
        resolves to nothing, or a cycle of ``$ref`` alone, is refused at registration; one
        to another document is not followed); others (``format``, ...) are accepted and not
        checked.
        """

        if name is not None and not isinstance(name, str) and not callable(name):
            # It fell back to the function's name without a word (Node refuses it too).
            raise TypeError(f"tool name must be a str, got {type(name).__name__}")
        optional_str("description", description)

        def register(function: F) -> F:
            self._native.register(
                name if isinstance(name, str) else _tool_name(function),
                function,
                is_async=_is_async(function),
                takes_context=_takes_context(function),
                concurrency_safe=concurrency_safe,
                timeout=timeout,
                max_result_chars=max_result_chars,
                schema=schema,
                cancels_siblings_on_error=cancels_siblings_on_error,
                description=description if description is not None else inspect.getdoc(function),
            )
            return function

        if callable(name):
            return register(name)
        return register

    @property
    def tool_names(self) -> list[str]:
        """The registered tools, in registration order."""
        return self._native.tool_names

    async def run(self, tool_uses: Iterable[dict[str, Any]]) -> list[ToolResult]:
        """Runs ``tool_use`` blocks and returns one ``tool_result`` dict (a ``ToolResult``) per
        call, in request order (a block without ``input`` runs its tool with ``{}``). Each tool runs in a copy of the caller's ``contextvars`` context (a copy per
        call). Cancelling the awaiting task cancels the running tools (their tasks see
        ``asyncio.CancelledError``) and raises ``CancelledError`` once they have stopped (within
        ``cleanup_grace``; cancelling it again stops the wait). A tool that raises gives an error result (``is_error``)
        for the model to read, and the other calls run on unless that tool
        ``cancels_siblings_on_error``. A call whose ``input`` cannot be converted to JSON (a
        ``datetime``, an int past 64 bits) gets its own error result, "Invalid input for tool
        'name': the input cannot be sent as JSON: ...", in its place, and the others run, as in
        Node; a dict that is no ``tool_use`` (no ``id``) is a ``TypeError`` or ``ValueError`` of
        the whole call, and so is one ``tool_use`` dict given instead of a list of them."""
        if isinstance(tool_uses, dict):
            raise TypeError("tool_uses must be a list of tool_use dicts, not one dict (wrap it in a list)")
        results, stop = self._native.run(list(tool_uses))
        running = asyncio.ensure_future(results)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            # The awaiting task was cancelled: the calls are cancelled, and it raises once the
            # tools have stopped (each within cleanup_grace), as a task group waits for its
            # children. Cancelled again meanwhile, it stops waiting (the run is dropped).
            stop.cancel()
            try:
                await running
            except BaseException:
                running.cancel()
            raise

    def turn(self) -> Turn:
        """Starts a streaming turn (call from a coroutine: tools run on its event loop)."""
        return Turn(self._native.turn())
