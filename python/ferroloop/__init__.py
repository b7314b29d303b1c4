"""ferroloop: the hot path of an LLM agent loop, written once in Rust.

- ``SseParser``: a zero-copy WHATWG Server-Sent-Events parser (feed bytes, get events).
- ``StreamDecoder``: provider stream decoding (Anthropic, OpenAI Chat, OpenAI Responses) and
  accumulation into the provider's final message shape.
- ``estimate_tokens``, ``ContextBudget``, ``ContextTracker``: token estimation per tokenizer
  family, Claude Code's context thresholds, usage-anchored conversation counts.
- ``ToolExecutor``: Python tools (``async def`` on the event loop, plain functions on worker
  threads) run concurrently by the Rust executor, results in request order.
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
from ._executor import Turn, ToolExecutor
from ._native import (
    ContextBudget,
    ContextTracker,
    SseEvent,
    SseParser,
    StreamDecoder,
    ToolContext,
    __version__,
    estimate_tokens,
)

__all__ = [
    "__version__",
    "SseEvent",
    "SseParser",
    "StreamDecoder",
    "estimate_tokens",
    "ContextBudget",
    "ContextTracker",
    "ToolExecutor",
    "ToolContext",
    "Turn",
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
