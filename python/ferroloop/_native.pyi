"""Type stubs of the Rust extension module ``ferroloop._native``."""

from typing import Any, Awaitable, Callable, Literal, Optional, Union, final

from ._events import AgentEvent, DecodeEvent, StreamEvent, ToolResult, TurnEvent
from ._results import RequestEstimate, RequestMetrics, TokenCount, ToolDefinition

# The names the extension module exports (PyO3 fills the runtime `__all__`; stubtest compares).
__all__ = [
    "__version__",
    "_debug_panic",
    "_debug_panic_detached",
    "_debug_panic_async",
    "_debug_gather",
    "_debug_arm_panic",
    "_debug_alive_tasks",
    "SseEvent",
    "SseParser",
    "StreamDecoder",
    "DEFAULT_TURN_BUDGET_CHARS",
    "_Executor",
    "_RunStop",
    "_Turn",
    "ToolContext",
    "_Client",
    "_ClientStream",
    "_Agent",
    "_AgentRun",
    "estimate_tokens",
    "estimate_request",
    "count_tokens",
    "has_exact_counting",
    "ContextBudget",
    "ContextTracker",
    "TextEstimator",
    "_at_exit",
    "_after_fork_in_child",
]

__version__: str
DEFAULT_TURN_BUDGET_CHARS: int

_Chunk = Union[bytes, bytearray, memoryview]

@final
class SseEvent:
    """One dispatched Server-Sent Event."""

    def __new__(cls, data: str, event: str = "message", id: str = "") -> SseEvent: ...
    @property
    def event(self) -> str:
        """The event type (``"message"`` when the stream named none)."""
    @property
    def data(self) -> str:
        """The data lines joined by ``"\\n"``."""
    @property
    def id(self) -> str:
        """The last event id in force when the event was dispatched (``""`` when none)."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class SseParser:
    """A WHATWG event-stream parser: feed byte chunks split anywhere, get completed events.

    Not shared across threads: a call while another thread is in one (a large ``feed`` runs
    with the interpreter released) raises ``InvalidStateError`` and does nothing (a refused
    ``feed`` consumed nothing)."""

    def __new__(cls, *, max_event_bytes: Optional[int] = None) -> SseParser: ...
    def feed(self, chunk: _Chunk) -> list[SseEvent]:
        """Feeds a chunk and returns the events it completed, in order."""
    def finish(self) -> bool:
        """Ends the stream; returns whether an unterminated event was discarded.

        The unterminated event's ``id`` field is discarded with it; ``last_event_id`` and
        ``retry`` are kept for a new stream (a reconnection).
        """
    @property
    def retry(self) -> Optional[int]:
        """The last valid ``retry`` value in milliseconds (``None`` if none)."""
    @property
    def last_event_id(self) -> str:
        """The last event id: what a reconnection sends in ``Last-Event-ID``.

        An ``id`` field takes effect at the blank line that ends its event (also one with no
        data, which yields no event); until then the previous value is returned, and an event
        cut off by ``finish()`` never changes it. An empty ``id`` field resets it to ``""``.
        """
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
    ``tool_use_invalid``, ``tool_use_truncated``); ``events=None`` (the default) means
    ``True``, as Node's ``events: null``. ``provider=None`` (the default) means
    ``"anthropic"``, as Node's ``provider: null``.

    Not shared across threads: a call while another thread is in one (a large ``feed`` runs
    with the interpreter released) raises ``InvalidStateError`` and does nothing (a refused
    ``feed`` consumed nothing).
    """

    def __new__(
        cls,
        provider: Optional[Literal["anthropic", "openai-chat", "openai-responses"]] = None,
        *,
        events: Optional[bool] = None,
    ) -> StreamDecoder: ...
    def feed(self, chunk: _Chunk) -> list[DecodeEvent]:
        """Feeds raw bytes; returns the typed events they completed (dicts with ``"type"``,
        typed ``DecodeEvent``: narrow on ``event["type"]``).

        A provider's error event raises the ``APIError`` subclass of its class (the same class
        in every binding, with Node's ``code``): ``OverloadedError``, ``RateLimitError``,
        ``QuotaExceededError``, ``PromptTooLongError``, ``AuthenticationError``,
        ``PermissionDeniedError``, ``NotFoundError``, ``InvalidRequestError``, ``ServerError``,
        else ``APIError`` (code ``"provider_error"``). An error whose
        ``code`` is an HTTP status (OpenRouter's ``{"error": {"code": 429}}``) is that status's
        class. After ``finish()`` it raises ``InvalidStateError`` (a new stream needs a new
        decoder). Each of these errors, and the ``ProtocolError`` of a malformed stream, carries
        ``events``, the events the chunk completed before it (for a type checker:
        ``isinstance(err, DecodeErrorDetail)``)."""
    def message(self) -> Optional[dict[str, Any]]:
        """A snapshot of the accumulated message (provider response shape)."""
    def finish(self) -> dict[str, Any]:
        """Ends the input; returns the final message or raises ``StreamTruncatedError`` (or the
        stream's provider or protocol error). May be called again: it answers the same (the
        same message, or the same error), as Node's ``finish()`` and C's ``fl_decoder_finish``
        do; only ``feed`` after it raises."""
    @property
    def is_complete(self) -> bool:
        """Whether the stream reached its end marker."""
    @property
    def provider(self) -> str:
        """The provider name."""

_Tokenizer = Literal["claude", "claude-legacy", "o200k", "cl100k", "o200k_base", "cl100k_base"]

def estimate_tokens(obj: Union[str, _Chunk, list[Any], dict[str, Any]], *, tokenizer: _Tokenizer = "claude") -> int:
    """Estimates the tokens of text, a list of messages, a message, a block or a request body.

    A lone surrogate in a ``str`` (which UTF-8 cannot hold) counts as U+FFFD, as in Node, also
    inside a list or dict (and in ``ContextTracker``); so it does in ``TextEstimator.feed`` and
    ``count_tokens``."""

def estimate_request(body: dict[str, Any], *, tokenizer: _Tokenizer = "claude") -> RequestEstimate:
    """Estimates a request body by part: ``system``, ``tools``, ``messages``, ``overhead`` and
    ``total`` (``estimate_tokens(body)`` is the ``total``). An OpenAI Responses body's
    ``instructions`` are its system part and its ``input`` items its messages."""

@final
class ContextBudget:
    """Context thresholds for one model (Claude Code's defaults, configurable).

    ``autocompact_buffer`` must be at least ``blocking_buffer`` (the default of the one not
    given counts): a budget that would block before it compacts raises ``ValueError`` naming
    both, as Node's ``InvalidArgumentError`` and C's ``FL_STATUS_INVALID_ARGUMENT`` do."""

    def __new__(
        cls,
        window: int,
        max_output_tokens: int,
        *,
        output_reserve_cap: Optional[int] = None,
        autocompact_buffer: Optional[int] = None,
        warning_buffer: Optional[int] = None,
        blocking_buffer: Optional[int] = None,
        autocompact_percent: Optional[float] = None,
    ) -> ContextBudget: ...
    @staticmethod
    def for_model(
        model: str,
        *,
        output_reserve_cap: Optional[int] = None,
        autocompact_buffer: Optional[int] = None,
        warning_buffer: Optional[int] = None,
        blocking_buffer: Optional[int] = None,
        autocompact_percent: Optional[float] = None,
    ) -> ContextBudget:
        """The budget of a model (window and max output from the model table: the longest
        matching name prefix, in any letter case and gateway spelling; a ``[1m]`` suffix selects
        a 1,000,000-token window), with the constructor's optional overrides. A model not in
        the table gets a 200,000-token window and 32,000 max output tokens, as in Node and C:
        check ``window`` when the model may be unknown, or use the constructor."""
    @property
    def window(self) -> int:
        """The context window, in tokens."""
    @property
    def max_output_tokens(self) -> int:
        """The request's max output tokens."""
    @property
    def effective_window(self) -> int:
        """The window minus the output reserve, in tokens."""
    @property
    def autocompact_threshold(self) -> int:
        """Compact before the next request at or above this many tokens."""
    @property
    def warning_threshold(self) -> int:
        """Warn at or above this many tokens."""
    @property
    def blocking_threshold(self) -> int:
        """Do not send without compacting at or above this many tokens."""
    def state(self, tokens: int) -> Literal["ok", "warning", "auto_compact", "blocking"]:
        """Where ``tokens`` stands: ``"ok"``, ``"warning"``, ``"auto_compact"`` or ``"blocking"``
        (as in Node and C; earlier builds of the Python package spelled the third
        ``"autocompact"``)."""
    def percent_left(self, tokens: int) -> float:
        """The percentage of the auto-compact threshold still free at ``tokens`` (0 for a count
        beyond 64 bits)."""

@final
class TextEstimator:
    """The token estimate of a text fed in pieces (a file read in blocks, a subprocess's
    output): what ``estimate_tokens`` gives for the whole text, in memory bounded by its longest
    line (a line over 1 MiB is counted in 1 MiB pieces, a token or so apart per piece).

    Not shared across threads: a call while another thread is in one (a large ``feed`` runs
    with the interpreter released) raises ``InvalidStateError`` and does nothing (a refused
    ``feed`` consumed nothing)."""

    def __new__(cls, *, tokenizer: _Tokenizer = "claude") -> TextEstimator: ...
    def feed(self, piece: Union[str, _Chunk]) -> None:
        """Adds the next piece; bytes (UTF-8) may split a multibyte character between pieces."""
    def estimate(self) -> int:
        """The estimate of the text so far (0 for none)."""

@final
class ContextTracker:
    """A conversation's token count, anchored on the provider's reported usage.

    Not shared across threads: a call while another thread is in one (estimating runs with
    the interpreter released) raises ``InvalidStateError`` and changes nothing."""

    def __new__(cls, *, tokenizer: _Tokenizer = "claude") -> ContextTracker: ...
    def set_system(self, system: Union[str, list[Any], None]) -> None:
        """Sets the system prompt (a str, a list of blocks, or ``None`` for none); anything
        else is a ``TypeError`` and the tracker is left unchanged."""
    def set_tools(self, tools: Optional[list[dict[str, Any]]]) -> None:
        """Sets the tool definitions (a list, or ``None`` for none); anything else, such as one
        tool's dict, is a ``TypeError`` and the tracker is left unchanged."""
    def push_message(self, message: dict[str, Any]) -> None:
        """Appends a message (a dict: a message or an OpenAI Responses item; else ``TypeError``)."""
    def replace_messages(self, messages: list[dict[str, Any]]) -> None:
        """Replaces every message (e.g. after compaction); the usage recorded stays if the messages
        it covered open the new list unchanged. A list holding anything but dicts is a
        ``TypeError`` naming the first, and the tracker is left unchanged."""
    def truncate(self, length: int) -> None:
        """Keeps the first ``length`` messages (all of them when ``length`` is more than there
        are, however large); ``ValueError`` when negative."""
    def record_usage(self, usage: dict[str, Any], *, covered: Optional[int] = None) -> None:
        """Records a response's ``usage`` dict (Anthropic or OpenAI shape), covering every
        message so far, or the first ``covered`` (more than the messages tracked counts as all
        of them, as in Node and C). ``ValueError`` for a count that is not a
        non-negative int (``nan`` and ``inf`` included; ``None`` is absent) or no count at all."""
    def tokens(self) -> TokenCount:
        """``{"tokens": int, "method": "exact" | "usage+estimate" | "estimate"}`` (a
        ``TokenCount``)."""
    @property
    def correction(self) -> float:
        """The current model's learned correction factor applied to estimates; settable (e.g.
        restored from an earlier session with the same model; clamped to 0.8..1.6;
        ``ValueError`` unless positive and finite)."""
    @correction.setter
    def correction(self, value: float) -> None: ...
    @property
    def model(self) -> str:
        """The model whose correction factor applies (``""`` until set). Setting it selects the
        model the next requests go to: each model learns its own factor; one selected before
        gets its factor back, a new one starts from the current factor; usage recorded before
        stays, but ``tokens()`` no longer calls it exact."""
    @model.setter
    def model(self, value: str) -> None: ...
    def correction_for(self, model: str) -> Optional[float]:
        """The correction factor ``model`` learned, or ``None`` if it was never selected."""
    @property
    def bytes_estimated(self) -> int:
        """Total bytes fed to the estimator so far (unchanged messages cost nothing again)."""
    @property
    def tokenizer(self) -> str:
        """The tokenizer family of the estimates."""
    def __len__(self) -> int:
        """The number of messages tracked."""

@final
class ToolContext:
    """What a tool function receives as its second argument."""

    @property
    def tool_use_id(self) -> str:
        """The id of the ``tool_use`` being answered."""
    @property
    def name(self) -> str:
        """The tool's name, as the model called it."""
    @property
    def index(self) -> int:
        """The call's position in its turn (from 0)."""
    @property
    def cancelled(self) -> bool:
        """Whether the call was cancelled (timeout, turn cancellation, a sibling's failure).
        Plain functions cannot be interrupted: long ones should check it."""
    def progress(self, data: Any) -> None:
        """Reports progress (any JSON-like value); delivered to the turn's events at once (a
        turn's ``progress`` event, an agent run's ``tool_progress``). ``nan`` and ``±inf`` are
        sent as ``null``; a value with no JSON form (another object, nesting past the limit)
        raises ``ValueError``."""

@final
class _RunStop:
    def cancel(self) -> None: ...

@final
class _Turn:
    def submit(self, tool_use: dict[str, Any], *more: dict[str, Any]) -> None: ...
    def seal(self) -> None: ...
    def cancel(self) -> None: ...
    def discard(self) -> None: ...
    def next_event(self) -> Awaitable[Optional[TurnEvent]]: ...
    def finish(self) -> Awaitable[list[ToolResult]]: ...

@final
class _Executor:
    def __new__(
        cls,
        max_concurrency: int = 10,
        *,
        max_result_chars: Optional[float] = None,
        spill_dir: Optional[str] = None,
        default_timeout: Optional[float] = None,
        cleanup_grace: Optional[float] = None,
        turn_budget_chars: Optional[float],
    ) -> _Executor: ...
    def register(
        self,
        name: str,
        function: Callable[..., Any],
        *,
        is_async: bool,
        takes_context: bool,
        concurrency_safe: Union[bool, Callable[[dict[str, Any]], bool]],
        timeout: Optional[float],
        max_result_chars: Optional[float],
        schema: Optional[dict[str, Any]],
        cancels_siblings_on_error: bool,
        description: Optional[str] = None,
    ) -> None: ...
    @property
    def tool_names(self) -> list[str]: ...
    def run(self, tool_uses: list[dict[str, Any]]) -> tuple[Awaitable[list[ToolResult]], _RunStop]: ...
    def turn(self) -> _Turn: ...

def count_tokens(text: str, tokenizer: Literal["o200k", "cl100k", "o200k_base", "cl100k_base"]) -> int:
    """Counts tokens exactly (builds with the ``exact`` feature; otherwise raises
    ``ExactCountingUnavailableError``). A family without an offline vocabulary (the Claude
    families) is a ``ValueError`` in every build."""

def has_exact_counting() -> bool:
    """Whether this build has ``count_tokens``."""

@final
class _ClientStream:
    def next_batch(
        self,
    ) -> Awaitable[Optional[tuple[list[StreamEvent], Optional[dict[str, Any]], Optional[RequestMetrics]]]]: ...
    @property
    def failure_metrics(self) -> Optional[RequestMetrics]: ...
    def close(self) -> None: ...

@final
class _Client:
    def __new__(
        cls,
        provider: Optional[str] = None,
        *,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        max_retries: Optional[int] = None,
        retry_base_delay: Optional[float] = None,
        retry_max_delay: Optional[float] = None,
        timeout: Optional[float] = None,
        connect_timeout: Optional[float] = None,
        first_byte_timeout: Optional[float] = None,
        first_event_timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        stall_notice: Optional[float] = None,
        headers: Optional[list[tuple[str, str]]] = None,
        anthropic_beta: Optional[list[str]] = None,
        from_env: Optional[bool] = None,
        anthropic_version: Optional[str] = None,
    ) -> _Client: ...
    @property
    def provider(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    def close(self) -> None: ...
    def stream(self, request: dict[str, Any]) -> _ClientStream: ...
    def create(self, request: dict[str, Any]) -> Awaitable[dict[str, Any]]: ...

@final
class _AgentRun:
    def next_batch(self) -> Awaitable[Optional[list[AgentEvent]]]: ...
    def cancel(self) -> None: ...
    def close(self) -> None: ...

@final
class _Agent:
    def __new__(
        cls,
        client: _Client,
        *,
        model: str,
        system: Optional[str] = None,
        executor: Optional[_Executor] = None,
        builtin_tools: Optional[list[str]] = None,
        workspace: Optional[str] = None,
        max_turns: Optional[int] = None,
        max_tokens: Optional[int] = None,
        token_budget: Optional[int] = None,
        max_continuations: Optional[int] = None,
        escalated_max_tokens: Optional[int] = None,
        prompt_caching: Optional[bool] = None,
        extra: Optional[dict[str, Any]] = None,
        keep_recent_tool_results: Optional[int] = None,
        tokenizer: Optional[str] = None,
        fallback_model: Optional[str] = None,
        fallback_after_529_retries: Optional[int] = None,
    ) -> _Agent: ...
    @property
    def tool_names(self) -> list[str]: ...
    def tool_definitions(self) -> list[ToolDefinition]: ...
    def run(
        self, prompt: Union[str, list[dict[str, Any]], None] = None, *, messages: Optional[list[dict[str, Any]]] = None
    ) -> _AgentRun: ...

def _at_exit() -> None:
    """The ``atexit`` handler (registered at import): waits until ferroloop's threads are out of
    Python, then starts no new work."""

def _after_fork_in_child() -> None:
    """Registered with ``os.register_at_fork``: a forked child builds its own runtime."""

def _debug_alive_tasks() -> int: ...
def _debug_arm_panic(entry: Optional[str]) -> None: ...
def _debug_panic(message: str = ...) -> None: ...
def _debug_panic_detached(message: str = ...) -> None: ...
def _debug_panic_async() -> Awaitable[None]: ...
def _debug_gather(
    functions: list[Callable[[Any], Any]], inputs: list[Any], *, blocking: bool = False
) -> Awaitable[list[Any]]: ...
