"""Type stubs of the Rust extension module ``ferroloop._native``."""

from typing import Any, Awaitable, Callable, Literal, Optional, Union, final

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

@final
class StreamDecoder:
    """Decodes a provider's raw SSE stream into typed events and accumulates the message.

    With ``events=False``, ``feed`` returns only the tool-call events (``tool_use_ready``,
    ``tool_use_invalid``, ``tool_use_truncated``).
    """

    def __init__(
        self,
        provider: Literal["anthropic", "openai-chat", "openai-responses"] = "anthropic",
        *,
        events: bool = True,
    ) -> None: ...
    def feed(self, chunk: _Chunk) -> list[dict[str, Any]]:
        """Feeds raw bytes; returns the typed events they completed (dicts with ``"type"``)."""
    def message(self) -> Optional[dict[str, Any]]:
        """A snapshot of the accumulated message (provider response shape)."""
    def finish(self) -> dict[str, Any]:
        """Ends the input; returns the final message or raises ``StreamTruncatedError``."""
    @property
    def is_complete(self) -> bool:
        """Whether the stream reached its end marker."""
    @property
    def provider(self) -> str:
        """The provider name."""

def _debug_panic(message: str = ...) -> None: ...
def _debug_panic_detached(message: str = ...) -> None: ...
def _debug_panic_async() -> Awaitable[None]: ...
def _debug_gather(
    functions: list[Callable[[Any], Any]], inputs: list[Any], *, blocking: bool = False
) -> Awaitable[list[Any]]: ...
