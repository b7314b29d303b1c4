"""ferroloop: the hot path of an LLM agent loop, written once in Rust.

- ``SseParser``: a zero-copy WHATWG Server-Sent-Events parser (feed bytes, get events).
- ``StreamDecoder``: provider stream decoding (Anthropic, OpenAI Chat, OpenAI Responses) and
  accumulation into the provider's final message shape.
- ``estimate_tokens``, ``estimate_request`` (by part), ``TextEstimator`` (text fed in pieces),
  ``ContextBudget``, ``ContextTracker``: token estimation per tokenizer family, Claude Code's
  context thresholds, usage-anchored conversation counts.
- ``Client``: the streaming HTTP client (Anthropic, OpenAI Chat, OpenAI Responses) with
  retries, backoff and stream watchdogs.
- ``Agent``: the agent loop (model → tools → results → next turn) with Python tools and the
  native built-in tools.
- ``count_tokens``: exact o200k / cl100k counts (builds with the ``exact`` feature).
- ``ToolExecutor``: Python tools (``async def`` on the event loop, plain functions on worker
  threads) run concurrently by the Rust executor, results in request order.
- The exception hierarchy rooted at ``FerroloopError``; a Rust panic surfaces as
  ``InternalError``, never a crash.
"""

from ._agent import Agent, AgentRun
from ._client import Client, MessageStream
from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    ExactCountingUnavailableError,
    FerroloopError,
    InternalError,
    InvalidStateError,
    OverloadedError,
    PromptTooLongError,
    ProtocolError,
    QuotaExceededError,
    RateLimitError,
    StreamTruncatedError,
    ToolError,
    TurnSealedError,
)
from ._executor import Turn, ToolExecutor
from ._native import (
    ContextBudget,
    ContextTracker,
    SseEvent,
    SseParser,
    StreamDecoder,
    TextEstimator,
    ToolContext,
    __version__,
    count_tokens,
    estimate_request,
    estimate_tokens,
    has_exact_counting,
)

__all__ = [
    "__version__",
    "SseEvent",
    "SseParser",
    "StreamDecoder",
    "estimate_tokens",
    "estimate_request",
    "TextEstimator",
    "count_tokens",
    "has_exact_counting",
    "Client",
    "MessageStream",
    "Agent",
    "AgentRun",
    "ContextBudget",
    "ContextTracker",
    "ToolExecutor",
    "ToolContext",
    "Turn",
    "FerroloopError",
    "APIError",
    "AuthenticationError",
    "RateLimitError",
    "QuotaExceededError",
    "OverloadedError",
    "PromptTooLongError",
    "APIConnectionError",
    "APITimeoutError",
    "StreamTruncatedError",
    "ProtocolError",
    "ToolError",
    "InvalidStateError",
    "TurnSealedError",
    "ExactCountingUnavailableError",
    "InternalError",
]
