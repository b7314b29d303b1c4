"""ferroloop: the hot path of an LLM agent loop, written once in Rust.

- ``SseParser``: a zero-copy WHATWG Server-Sent-Events parser (feed bytes, get events).
- The exception hierarchy rooted at ``FerroloopError``; a Rust panic surfaces as
  ``InternalError``, never a crash.
"""

from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    FerroloopError,
    InternalError,
    OverloadedError,
    PromptTooLongError,
    ProtocolError,
    RateLimitError,
    StreamTruncatedError,
    ToolError,
)
from ._native import SseEvent, SseParser, __version__

__all__ = [
    "__version__",
    "SseEvent",
    "SseParser",
    "FerroloopError",
    "APIError",
    "AuthenticationError",
    "RateLimitError",
    "OverloadedError",
    "PromptTooLongError",
    "APIConnectionError",
    "APITimeoutError",
    "StreamTruncatedError",
    "ProtocolError",
    "ToolError",
    "InternalError",
]
