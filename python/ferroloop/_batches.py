"""The async iteration shared by ``MessageStream`` and ``AgentRun``: a native handle hands
over finished events in batches (one crossing per batch, not per event); this buffers them and
yields them one by one, closing the handle when the iteration fails or is cancelled."""

from __future__ import annotations

import asyncio
import collections
from types import TracebackType
from typing import Any, Awaitable, Generic, Iterable, Optional, Protocol, Type, TypeVar

# The type of the events yielded (a subclass's event union: ``AgentEvent``, ``StreamEvent``).
Event = TypeVar("Event")


class NativeBatches(Protocol):
    """A native handle: ``next_batch()`` resolves to the next batch, ``None`` at the end."""

    def next_batch(self) -> Awaitable[Any]: ...

    def close(self) -> None: ...


_Closing = TypeVar("_Closing", bound="AsyncClosing")


class AsyncClosing:
    """``async with`` for an object with an ``aclose`` coroutine: leaving the block closes it,
    whatever the block raised."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _Closing) -> _Closing:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.aclose()


_Self = TypeVar("_Self", bound="BatchedEvents[Any]")


class BatchedEvents(AsyncClosing, Generic[Event]):
    """Yields the events of a ``NativeBatches`` handle one at a time. Subclasses unpack a batch
    (``_unpack``) and look at each event as it is yielded (``_seen``).

    Like an async generator, it refuses a ``__anext__`` while another one is waiting for the
    next batch (two tasks iterating it at once): ``RuntimeError``. Each task would otherwise
    get some of the events, none of them all."""

    def __init__(self, native: NativeBatches) -> None:
        self._native = native
        self._buffer: collections.deque[Event] = collections.deque()
        self._done = False
        # A ``__anext__`` is waiting for the next batch.
        self._waiting = False
        # How the work ended early: the error the iteration raised, or ``_CLOSED`` (``aclose()``,
        # or the iterating task was cancelled). ``None`` while it runs and once it completed.
        self._ended_early: Optional[BaseException] = None

    def _unpack(self, batch: Any) -> Iterable[Event]:
        """The events of one batch (a batch is a list of events unless a subclass says else)."""
        events: Iterable[Event] = batch
        return events

    def _seen(self, event: Event) -> Event:
        """Called with each event as it is yielded; returns it."""
        return event

    def __aiter__(self: _Self) -> _Self:
        return self

    async def __anext__(self) -> Event:
        if self._waiting:
            raise RuntimeError(
                f"anext(): this {type(self).__name__} is already being iterated by another task "
                "(each would get only some of its events)"
            )
        while not self._buffer:
            if self._done:
                raise StopAsyncIteration
            self._waiting = True
            try:
                batch = await self._native.next_batch()
            except BaseException as error:
                # An error, or the iterating task was cancelled: the work is over.
                self._done = True
                self._waiting = False
                cancelled = isinstance(error, asyncio.CancelledError)
                self._ended_early = _CLOSED if cancelled else error
                try:
                    if cancelled:
                        # The cancelled task raises once the work has stopped, as a task
                        # group's cancellation waits for its children.
                        await self._wind_down()
                finally:
                    self._native.close()
                raise
            finally:
                self._waiting = False
            if batch is None:
                self._done = True
                continue
            self._buffer.extend(self._unpack(batch))
        return self._seen(self._buffer.popleft())

    async def aclose(self) -> None:
        """Aborts the underlying work (idempotent) and returns once it has stopped (see
        ``_wind_down``). Events received but not yet yielded are dropped, as an async generator
        yields nothing after its ``aclose()``: a later ``__anext__`` ends the iteration (it went
        on yielding the rest of the last batch)."""
        unfinished = not self._done
        if unfinished:
            self._ended_early = _CLOSED
        self._done = True
        # Looked at, not yielded: what a subclass keeps of them (a run's ``stop`` event) stays.
        while self._buffer:
            self._seen(self._buffer.popleft())
        try:
            if unfinished:
                await self._wind_down()
        finally:
            self._native.close()

    async def _wind_down(self) -> None:
        """Called when the work is abandoned before its end (``aclose()``, the iterating task
        cancelled), before the handle is closed: waits until what the work started has stopped.
        Nothing to wait for here (a request is dropped at once); a run overrides it to wait for
        its tools. Raises only ``CancelledError``, when the waiting task is cancelled again: the
        caller closes the handle whatever happens, and that cancellation is the task's own."""

    def _early_end(self, what: str) -> Optional[BaseException]:
        """What a call that needs the end of the work raises when the work ended early: the
        error the iteration raised, or an ``InvalidStateError`` saying it was closed before
        ``what``. ``None`` when it was not ended early."""
        if self._ended_early is _CLOSED:
            from ._errors import InvalidStateError

            return InvalidStateError(
                f"the {type(self).__name__} was closed before {what} (aclose(), or the task "
                "iterating it was cancelled)"
            )
        return self._ended_early


# The marker of work closed by the caller (an exception so that it fits the same slot).
_CLOSED = asyncio.CancelledError()
