"""The result types: what ``MessageStream.metrics`` (``RequestMetrics``),
``Agent.tool_definitions()`` (``ToolDefinition``), ``ContextTracker.tokens()`` (``TokenCount``)
and ``estimate_request`` (``RequestEstimate``) return, as ``TypedDict``s (the Python form of
Node's ``index.d.ts`` interfaces; keys snake_case, durations in seconds). ``ToolResult`` is in
``_events`` (a turn's ``result`` event holds one).

At runtime these are plain ``dict`` objects: the types only describe them. Every key is always
present (values may be ``None`` where the type says ``Optional``), except an agent tool's
``description``, there exactly when the tool has one. Provider and caller data (usage objects,
JSON schemas, a provider tool's definition) stay ``dict[str, Any]``.
"""

# No `from __future__ import annotations`: the types' `__annotations__` hold the types
# themselves, which the tests compare with real values (on every Python from 3.9).
from typing import Any, Literal, Optional, TypedDict, Union, final

from ._events import StreamRetryEvent

__all__ = [
    "RequestMetrics",
    "AgentToolDefinition",
    "ToolDefinition",
    "TokenCount",
    "RequestEstimate",
]


class RequestMetrics(TypedDict):
    """A completed request's measurements (``MessageStream.metrics``; Node's
    ``RequestMetrics``, whose ``retries`` is their count): ``request_id`` the provider's (``None``
    when it sent none); ``attempts`` made (1 without retries); ``retries`` the ``retry`` events
    the stream yielded; ``http_version`` of the last attempt (``"HTTP/1.1"``, ``"HTTP/2.0"``);
    ``time_to_headers``, ``time_to_first_event``, ``time_to_first_token``, ``total`` in seconds
    from the start of the request (``None`` when not reached); ``bytes_received`` (all attempts
    together); ``events`` received; ``usage`` the provider's final usage object, or ``None``."""

    request_id: Optional[str]
    attempts: int
    retries: list[StreamRetryEvent]
    http_version: Optional[str]
    time_to_headers: Optional[float]
    time_to_first_event: Optional[float]
    time_to_first_token: Optional[float]
    total: Optional[float]
    bytes_received: int
    events: int
    usage: Optional[dict[str, Any]]


class _AgentToolDefinitionKeys(TypedDict):
    # The keys every agent tool's definition has (`description` is added when there is one).
    name: str
    input_schema: dict[str, Any]


# `final`: no subtype adds keys, so a type checker narrows `"type" in definition` to the
# provider's tools (mypy's rule for `in` on a final TypedDict).
@final
class AgentToolDefinition(_AgentToolDefinitionKeys, total=False):
    """One of an agent's own tools (its Python and built-in tools) as sent to the model:
    ``name``, ``input_schema`` (the tool's JSON schema; ``{"type": "object"}`` without one) and,
    when the tool has one, ``description``. No ``type`` key."""

    description: str


#: A tool definition as an ``Agent`` sends it to the model (``Agent.tool_definitions()``): one of
#: its own tools (an ``AgentToolDefinition``: no ``"type"`` key) or, after them, a tool of
#: ``extra["tools"]`` (one the provider runs itself, such as Anthropic's
#: ``{"type": "web_search_20250305", "name": "web_search"}``) as given. ``"type" in definition``
#: tells them apart, as Node's ``d.type === undefined``.
ToolDefinition = Union[AgentToolDefinition, dict[str, Any]]


class TokenCount(TypedDict):
    """A conversation's token count (``ContextTracker.tokens()``): ``method`` ``"exact"`` (the
    provider's usage covers every message), ``"usage+estimate"`` (usage for the messages it
    covers, estimates after them) or ``"estimate"`` (no usage recorded)."""

    tokens: int
    method: Literal["exact", "usage+estimate", "estimate"]


class RequestEstimate(TypedDict):
    """A request body's estimated tokens by part (``estimate_request``): ``system`` (an OpenAI
    Responses body's ``instructions``), ``tools`` (with the tool-use preamble), ``messages``
    (a Responses body's ``input`` items; with per-message overheads), ``overhead`` (per
    request) and ``total``, their sum."""

    system: int
    tools: int
    messages: int
    overhead: int
    total: int
