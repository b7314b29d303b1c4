"""The event types: what ``Agent.run`` (``AgentEvent``), ``Turn`` (``TurnEvent``),
``StreamDecoder.feed`` (``DecodeEvent``) and ``Client.stream`` (``StreamEvent``) yield, as
closed unions of ``TypedDict`` members (the Python form of Node's ``index.d.ts`` unions).

Each member has a ``"type"`` key whose ``Literal`` value tells the members apart, so a type
checker narrows on it: after ``if event["type"] == "text_delta":``, ``event["text"]`` is a
``str``. The two ``context`` members of ``AgentEvent`` share a ``type`` and are told apart by
``"action"``. Every key is always present (values may be ``None`` where the type says
``Optional``). Keys are snake_case as on the wire, durations in seconds (floats).

At runtime the events are plain ``dict`` objects: these types only describe them (a
``TypedDict`` cannot be used with ``isinstance``). Provider and caller data (messages, usage
objects, tool inputs, progress data, a ``tool_result``'s content blocks) stay ``Any`` /
``dict[str, Any]``; a ``result`` event's ``result`` is a ``ToolResult``.
Status-like strings from a closed set are ``Literal`` sets, each the full set the core's Rust
enums serialise to (``CallStatus``, ``StopReason``, ``ModelCall``, a ``context`` ``action`` and
``trigger``, a ``model_fallback`` ``reason``, ``cache_break``'s ``changed``); open sets (a
provider's ``stop_reason``, a retry's ``code``, a stop's ``error_code``) are ``str``.

This module imports nothing else of ferroloop, so the stubs of the native module can use it.
"""

# No `from __future__ import annotations`: the members' `__annotations__` hold the types
# themselves, which the tests compare with real events (on every Python from 3.9).
from typing import Any, Literal, Optional, TypedDict, Union

__all__ = [
    "CallStatus",
    "StopReason",
    "ModelCall",
    "CacheComponent",
    "ToolResult",
    # AgentEvent
    "AgentEvent",
    "TurnStartEvent",
    "AgentTextDeltaEvent",
    "AgentThinkingDeltaEvent",
    "ToolStartedEvent",
    "ToolProgressEvent",
    "ToolFinishedEvent",
    "AgentRetryEvent",
    "ModelFallbackEvent",
    "MaxTokensRaisedEvent",
    "MicrocompactEvent",
    "CompactionEvent",
    "CacheBreakEvent",
    "UsageEvent",
    "TurnEndEvent",
    "AgentStopEvent",
    # TurnEvent
    "TurnEvent",
    "CallStartedEvent",
    "CallProgressEvent",
    "CallFinishedEvent",
    "CallDetachedEvent",
    "CallResultEvent",
    # DecodeEvent
    "DecodeEvent",
    "MessageStartEvent",
    "BlockStartEvent",
    "TextDeltaEvent",
    "RefusalDeltaEvent",
    "ThinkingDeltaEvent",
    "SignatureDeltaEvent",
    "CitationsDeltaEvent",
    "InputJsonDeltaEvent",
    "UnknownDeltaEvent",
    "BlockStopEvent",
    "ToolUseReadyEvent",
    "ToolUseInvalidEvent",
    "ToolUseTruncatedEvent",
    "MessageDeltaEvent",
    "MessageStopEvent",
    "PingEvent",
    "UnknownEvent",
    # StreamEvent
    "StreamEvent",
    "StreamRetryEvent",
    "StalledEvent",
]

# --- Shared literal sets ---------------------------------------------------------------------

#: How a tool call ended (the executor's ``CallStatus`` names): a ``Turn``'s ``finished`` event's
#: and an agent's ``tool_finished`` event's ``status``.
CallStatus = Literal[
    "succeeded",
    "failed",
    "fatal",
    "panicked",
    "timed_out",
    "cancelled",
    "skipped",
    "denied",
    "rejected",
]

#: Why an agent run stopped: its ``stop`` event's ``reason``.
StopReason = Literal[
    "end_turn",
    "stop_sequence",
    "refusal",
    "max_tokens",
    "max_turns",
    "budget",
    "aborted",
    "prompt_too_long",
    "error",
]

#: Which model call an agent's ``usage``, ``retry`` or ``model_fallback`` event is about: a
#: turn's (``"turn"``) or the built-in summariser's (``"compaction"``).
ModelCall = Literal["turn", "compaction"]

#: A part of the prompt a ``cache_break`` event names as changed.
CacheComponent = Literal["system", "tools", "messages"]

# --- ToolResult (ToolExecutor.run, Turn.results(), a turn's result events) -------------------


class ToolResult(TypedDict):
    """A ``tool_result`` content block, in the provider's wire shape (Node's ``ToolResult``):
    one per call, ``tool_use_id`` the ``id`` of the ``tool_use`` it answers, ``content`` the
    tool's text or its content blocks (text, image, ..., as the tool returned them), ``is_error``
    whether the call failed (raised, timed out, was cancelled, had an invalid input, ...)."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: Union[str, list[dict[str, Any]]]
    is_error: bool


# --- AgentEvent (Agent.run / AgentRun) -------------------------------------------------------


class TurnStartEvent(TypedDict):
    """A model call starts (a turn asked again repeats its number)."""

    type: Literal["turn_start"]
    turn: int
    estimated_input_tokens: int


class AgentTextDeltaEvent(TypedDict):
    """Text streamed by the model."""

    type: Literal["text_delta"]
    text: str


class AgentThinkingDeltaEvent(TypedDict):
    """Thinking streamed by the model."""

    type: Literal["thinking_delta"]
    thinking: str


class ToolStartedEvent(TypedDict):
    """A tool call started running; ``input`` is the model's input for it. A call that never
    starts (``rejected``, ``denied`` or ``skipped``) has only its ``tool_finished``."""

    type: Literal["tool_started"]
    tool_use_id: str
    name: str
    input: Any


class ToolProgressEvent(TypedDict):
    """A tool reported progress: ``data`` is what it passed to ``ctx.progress``."""

    type: Literal["tool_progress"]
    tool_use_id: str
    data: Any


class ToolFinishedEvent(TypedDict):
    """A tool call ended, whether it started or not (one per call handed to the tools):
    ``status`` says how, ``duration`` how long it ran (seconds)."""

    type: Literal["tool_finished"]
    tool_use_id: str
    name: str
    is_error: bool
    status: CallStatus
    duration: float


class AgentRetryEvent(TypedDict):
    """The model call is retried by the client: ``attempt`` is the one about to be made,
    ``status`` the HTTP status (``None`` without one), ``code`` the failure's class, ``wait``
    the wait before it (seconds)."""

    type: Literal["retry"]
    call: ModelCall
    attempt: int
    status: Optional[int]
    code: str
    overloaded: bool
    wait: float


# `from` is a Python keyword: the functional syntax.
ModelFallbackEvent = TypedDict(
    "ModelFallbackEvent",
    {
        "type": Literal["model_fallback"],
        "call": ModelCall,
        "from": str,
        "to": str,
        "reason": Literal["overloaded", "repeated_529"],
        "error": str,
    },
)
ModelFallbackEvent.__doc__ = """The run switched to the fallback model (``from`` → ``to``):
``reason`` ``"overloaded"`` (the call failed after the client's retries) or ``"repeated_529"``
(too many consecutive overloads); ``error`` what the provider said, or how many overloads."""

MaxTokensRaisedEvent = TypedDict(
    "MaxTokensRaisedEvent",
    {
        "type": Literal["max_tokens_raised"],
        "turn": int,
        "from": int,
        "to": int,
    },
)
MaxTokensRaisedEvent.__doc__ = """A response cut by ``max_tokens`` is discarded and the turn
asked again with a higher output limit (``from`` → ``to``)."""


class MicrocompactEvent(TypedDict):
    """Context management, ``action`` ``"microcompact"``: ``cleared`` old tool results were
    cleared; ``tokens_before`` the estimate before."""

    type: Literal["context"]
    action: Literal["microcompact"]
    cleared: int
    tokens_before: int


class CompactionEvent(TypedDict):
    """Context management, ``action`` ``"compaction"``: the history was replaced by a summary,
    ``trigger`` ``"auto"`` (the threshold) or ``"reactive"`` (the provider refused the prompt as
    too long)."""

    type: Literal["context"]
    action: Literal["compaction"]
    messages_before: int
    messages_after: int
    trigger: Literal["auto", "reactive"]


class CacheBreakEvent(TypedDict):
    """The prompt cache was read much less than on the previous turn's call; ``changed`` names
    the parts of the prompt whose bytes changed."""

    type: Literal["cache_break"]
    previous: int
    current: int
    changed: list[CacheComponent]


class UsageEvent(TypedDict):
    """One per billed model call: ``usage`` as the provider reported it (``None`` when it
    reported none), ``time_to_first_token`` in seconds (``None`` when not measured)."""

    type: Literal["usage"]
    turn: int
    call: ModelCall
    usage: Optional[dict[str, Any]]
    estimated_input_tokens: int
    time_to_first_token: Optional[float]


class TurnEndEvent(TypedDict):
    """A model call ended: ``stop_reason`` is the provider's, ``None`` for a call that failed or
    was cancelled."""

    type: Literal["turn_end"]
    turn: int
    stop_reason: Optional[str]


class AgentStopEvent(TypedDict):
    """The last event of a run: why it stopped, the conversation (every ``tool_use``
    answered) and the run's totals. ``error_code`` is set exactly when ``error`` is (a stable
    name; a name not listed in ``AgentRun``'s docs may come from a later version).
    ``status``, ``request_id`` and ``retry_after`` (seconds) are what the client knew of the
    failed model call the run stopped on (reason ``error`` with a model's code, or
    ``prompt_too_long`` after the provider refused the prompt), each ``None`` when not known
    and on every other stop; ``retry_after`` is set for a rate limit's 429, an overload's 529 or
    a server error's 5xx (a 503's, say) that named a wait."""

    type: Literal["stop"]
    reason: StopReason
    error: Optional[str]
    error_code: Optional[str]
    status: Optional[int]
    request_id: Optional[str]
    retry_after: Optional[float]
    messages: list[dict[str, Any]]
    turns: int
    tool_calls: int
    input_tokens: int
    output_tokens: int


#: An event of an agent run (``async for event in agent.run(...)``); the last is ``stop``.
AgentEvent = Union[
    TurnStartEvent,
    AgentTextDeltaEvent,
    AgentThinkingDeltaEvent,
    ToolStartedEvent,
    ToolProgressEvent,
    ToolFinishedEvent,
    AgentRetryEvent,
    ModelFallbackEvent,
    MaxTokensRaisedEvent,
    MicrocompactEvent,
    CompactionEvent,
    CacheBreakEvent,
    UsageEvent,
    TurnEndEvent,
    AgentStopEvent,
]

# --- TurnEvent (ToolExecutor.turn()) ---------------------------------------------------------


class CallStartedEvent(TypedDict):
    """A call was admitted and its tool started; ``queued`` is how long it waited (seconds)."""

    type: Literal["started"]
    index: int
    tool_use_id: str
    tool: str
    queued: float


class CallProgressEvent(TypedDict):
    """A tool reported progress: ``data`` is what it passed to ``ctx.progress``."""

    type: Literal["progress"]
    index: int
    tool_use_id: str
    data: Any


class CallFinishedEvent(TypedDict):
    """A call ended (every call gets one): ``status`` says how, ``duration`` how long it ran
    (seconds; zero when it never started)."""

    type: Literal["finished"]
    index: int
    tool_use_id: str
    tool: str
    status: CallStatus
    duration: float


class CallDetachedEvent(TypedDict):
    """A cancelled or timed-out call outlived its cleanup grace (its result is produced
    anyway)."""

    type: Literal["detached"]
    index: int
    tool_use_id: str
    tool: str


class CallResultEvent(TypedDict):
    """The ``tool_result`` of the call at ``index``, in submission order."""

    type: Literal["result"]
    index: int
    result: ToolResult


#: An event of a streaming turn (``async for event in turn``).
TurnEvent = Union[CallStartedEvent, CallProgressEvent, CallFinishedEvent, CallDetachedEvent, CallResultEvent]

# --- DecodeEvent (StreamDecoder.feed) --------------------------------------------------------


class MessageStartEvent(TypedDict):
    """The stream opened; ``message`` is the initial snapshot."""

    type: Literal["message_start"]
    message: dict[str, Any]


class BlockStartEvent(TypedDict):
    """A content block (or output item) started, as announced (tool inputs empty)."""

    type: Literal["block_start"]
    index: int
    block: dict[str, Any]


class TextDeltaEvent(TypedDict):
    """Text appended to a text block."""

    type: Literal["text_delta"]
    index: int
    text: str


class RefusalDeltaEvent(TypedDict):
    """Refusal text appended (OpenAI)."""

    type: Literal["refusal_delta"]
    index: int
    refusal: str


class ThinkingDeltaEvent(TypedDict):
    """Thinking text appended."""

    type: Literal["thinking_delta"]
    index: int
    thinking: str


class SignatureDeltaEvent(TypedDict):
    """A thinking block's signature (replaces the previous one)."""

    type: Literal["signature_delta"]
    index: int
    signature: str


class CitationsDeltaEvent(TypedDict):
    """A citation attached to a text block."""

    type: Literal["citations_delta"]
    index: int
    citation: dict[str, Any]


class InputJsonDeltaEvent(TypedDict):
    """A fragment of a tool call's JSON input, as sent."""

    type: Literal["input_json_delta"]
    index: int
    partial_json: str


class UnknownDeltaEvent(TypedDict):
    """A delta with no typed event of its own (Anthropic's ``compaction_delta``, a new type),
    as sent."""

    type: Literal["unknown_delta"]
    index: int
    delta: dict[str, Any]


class BlockStopEvent(TypedDict):
    """A content block (or output item) ended."""

    type: Literal["block_stop"]
    index: int


class ToolUseReadyEvent(TypedDict):
    """A tool call is complete and its input parsed: it may start now. ``input`` is ``{}`` when
    the model sent none, and a string for an OpenAI Responses custom tool call."""

    type: Literal["tool_use_ready"]
    index: int
    id: str
    name: str
    input: Any


class ToolUseInvalidEvent(TypedDict):
    """A tool call ended but its input is not valid JSON: ``error`` is the parser's complaint."""

    type: Literal["tool_use_invalid"]
    index: int
    id: str
    name: str
    partial_json: str
    error: str


class ToolUseTruncatedEvent(TypedDict):
    """The output limit (or a streaming refusal) cut a tool call's input off: it must not run.
    An OpenAI Responses custom tool call (free text) is reported so whenever the response ended
    incomplete, for any reason, or the call is marked incomplete."""

    type: Literal["tool_use_truncated"]
    index: int
    id: str
    name: str
    partial_json: str


class MessageDeltaEvent(TypedDict):
    """Message-level changes: ``delta`` is Anthropic's ``delta`` object (``stop_reason``, ...)
    or OpenAI's ``{"finish_reason": ...}``; ``usage`` the cumulative usage as sent, or
    ``None``."""

    type: Literal["message_delta"]
    delta: dict[str, Any]
    usage: Optional[dict[str, Any]]


class MessageStopEvent(TypedDict):
    """The stream reached its end marker."""

    type: Literal["message_stop"]


class PingEvent(TypedDict):
    """A keep-alive."""

    type: Literal["ping"]


class UnknownEvent(TypedDict):
    """An event of a type the decoder does not know, passed through: ``event_type`` is the SSE
    event type, ``data`` the data parsed as JSON, or the text."""

    type: Literal["unknown"]
    event_type: str
    data: Any


#: A typed event of a provider stream (``StreamDecoder.feed``); ``index`` is the content block
#: index (Anthropic), the choice or tool call index (OpenAI Chat) or the output item index
#: (OpenAI Responses).
DecodeEvent = Union[
    MessageStartEvent,
    BlockStartEvent,
    TextDeltaEvent,
    RefusalDeltaEvent,
    ThinkingDeltaEvent,
    SignatureDeltaEvent,
    CitationsDeltaEvent,
    InputJsonDeltaEvent,
    UnknownDeltaEvent,
    BlockStopEvent,
    ToolUseReadyEvent,
    ToolUseInvalidEvent,
    ToolUseTruncatedEvent,
    MessageDeltaEvent,
    MessageStopEvent,
    PingEvent,
    UnknownEvent,
]

# --- StreamEvent (Client.stream / MessageStream) ---------------------------------------------


class StreamRetryEvent(TypedDict):
    """The client retries the request: ``attempt`` is the one about to be made (2 for the first
    retry), ``status`` the HTTP status (``None`` without one), ``code`` the failure's class,
    ``wait`` the wait before it (seconds), ``reason`` the failure's text."""

    type: Literal["retry"]
    attempt: int
    status: Optional[int]
    code: str
    overloaded: bool
    wait: float
    reason: str


class StalledEvent(TypedDict):
    """The stream went quiet for ``elapsed`` seconds (reported once, after ``stall_notice``)."""

    type: Literal["stalled"]
    elapsed: float


#: What a ``MessageStream`` yields: the decoder's events, retries and a stall notice.
StreamEvent = Union[DecodeEvent, StreamRetryEvent, StalledEvent]
