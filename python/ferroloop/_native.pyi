"""Type stubs of the Rust extension module ``ferroloop._native``."""

from typing import Any, Awaitable, Callable, Optional, Union, final

__version__: str

_Chunk = Union[bytes, bytearray, memoryview]

@final
class SseEvent:
    """One dispatched Server-Sent Event."""

    def __init__(self, data: str, event: str = "message", id: str = "") -> None: ...
    @property
    def event(self) -> str:
        """The event type (``"message"`` when the stream named none)."""
    @property
    def data(self) -> str:
        """The data lines joined by ``"\\n"``."""
    @property
    def id(self) -> str:
        """The last event id in force when the event was dispatched (``""`` when none)."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

@final
class SseParser:
    """A WHATWG event-stream parser: feed byte chunks split anywhere, get completed events."""

    def __init__(self, *, max_event_bytes: Optional[int] = None) -> None: ...
    def feed(self, chunk: _Chunk) -> list[SseEvent]:
        """Feeds a chunk and returns the events it completed, in order."""
    def finish(self) -> bool:
        """Ends the stream; returns whether an unterminated event was discarded."""
    @property
    def retry(self) -> Optional[int]:
        """The last valid ``retry`` value in milliseconds (``None`` if none)."""
    @property
    def last_event_id(self) -> str:
        """The last event id."""
    @property
    def dropped_events(self) -> int:
        """Events dropped because they grew past ``max_event_bytes``."""
    @property
    def bytes_fed(self) -> int:
        """Total bytes fed so far."""

def _debug_panic(message: str = ...) -> None: ...
def _debug_panic_detached(message: str = ...) -> None: ...
def _debug_panic_async() -> Awaitable[None]: ...
def _debug_gather(
    functions: list[Callable[[Any], Any]], inputs: list[Any], *, blocking: bool = False
) -> Awaitable[list[Any]]: ...
