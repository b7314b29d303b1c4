"""The exception hierarchy of ferroloop (raised by the Rust extension and by the package)."""

from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable

from ._events import DecodeEvent, ToolResult


class FerroloopError(Exception):
    """Base class of every error ferroloop raises.

    ``code`` is the stable, machine-readable code of the failure: the one Node's errors carry
    as ``err.code`` and C's ``fl_status`` names (``"rate_limited"``, ``"not_found"``,
    ``"stream_truncated"``, ...; ``README.md`` lists them). Each class has its code as a class
    attribute (a constructor's ``code=`` may set another), so a port of ``switch (err.code)``
    reads ``err.code`` here too. Misuse raises Python's own ``ValueError`` / ``TypeError`` (Node's
    ``invalid_argument``) and cancellation ``asyncio.CancelledError`` (Node's ``aborted``).
    Every error has ``message``, ``status`` and ``request_id`` (``None`` when unknown), as
    Node's ``FerroloopError`` has ``message``, ``status`` and ``requestId``."""

    code: str = "internal"
    #: The HTTP status of a provider's answer (``APIError``), else ``None`` (Node's ``status``).
    status: Optional[int] = None
    #: The provider's request id when known, else ``None`` (Node's ``requestId``).
    request_id: Optional[str] = None

    def __init__(self, *args: object, code: Optional[str] = None) -> None:
        super().__init__(*args)
        #: The message (the first argument), as Node's ``err.message``.
        self.message = str(args[0]) if args else ""
        if code is not None:
            self.code = code


class APIError(FerroloopError):
    """The provider answered with an error (an HTTP error status or a mid-stream error event).

    ``status`` is the HTTP status (``None`` for a mid-stream error event), ``request_id`` the
    provider's request id when known, ``error_type`` the provider's error type string (for
    example ``"overloaded_error"``) and ``body`` the error event's decoded payload when a
    ``StreamDecoder`` raised it (``None`` for a ``Client`` request's error: the client keeps no
    error body).
    A plain ``APIError`` is an error of no known class (Node's ``ProviderError``, code
    ``"provider_error"``); the subclasses name the others, as Node's classes do.
    """

    code = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        request_id: Optional[str] = None,
        error_type: Optional[str] = None,
        body: Any = None,
        code: Optional[str] = None,
    ) -> None:
        super().__init__(message, code=code)
        self.message = message
        self.status = status
        self.request_id = request_id
        self.error_type = error_type
        self.body = body


class AuthenticationError(APIError):
    """The credentials were missing or rejected (HTTP 401; a 403 is the subclass
    ``PermissionDeniedError``)."""

    code = "authentication"


class PermissionDeniedError(AuthenticationError):
    """The credentials may not do this (HTTP 403, a ``permission_error``): Node's
    ``PermissionError`` (a name Python's built-in ``PermissionError`` has). Also an
    ``AuthenticationError``, which a 403 raised before this class existed."""

    code = "permission"


class NotFoundError(APIError):
    """No such endpoint or model (HTTP 404, a ``not_found_error``)."""

    code = "not_found"


class InvalidRequestError(APIError):
    """The provider rejected the request (another 4xx, an ``invalid_request_error``); a prompt
    too long for the window is ``PromptTooLongError``."""

    code = "invalid_request"


class _RetryAfterError(APIError):
    """An ``APIError`` that carries ``retry_after``: the wait in seconds its HTTP response's
    ``retry-after`` asked for (``None`` when it named none, and for an error event inside a
    stream). The base of ``RateLimitError``, ``OverloadedError`` and ``ServerError``."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(_RetryAfterError):
    """The provider failed (a 5xx, an ``api_error`` or ``server_error`` event) and the retries,
    if any, ran out. ``retry_after`` is the wait the last response's ``retry-after`` asked for,
    in seconds (a 503's, say: when to try again), as ``RateLimitError``'s (``None`` when it named
    none, and for an event)."""

    code = "server"


class RateLimitError(_RetryAfterError):
    """The request was rate limited (HTTP 429). ``retry_after`` is the wait the server asked
    for, in seconds (``None`` when it named none)."""

    code = "rate_limited"


class QuotaExceededError(APIError):
    """The account has no credit left: OpenAI's ``insufficient_quota`` (HTTP 429). Never
    retried, since every retry gets the same answer; deliberately not a ``RateLimitError``, so
    that code waiting out rate limits does not wait on billing."""

    code = "quota_exceeded"


class OverloadedError(_RetryAfterError):
    """The provider is overloaded (HTTP 529, or an ``overloaded_error`` event). ``retry_after``
    is the wait a 529's ``retry-after`` asked for, in seconds, as ``RateLimitError``'s (``None``
    when it named none, and for an event)."""

    code = "overloaded"


class PromptTooLongError(APIError):
    """The request does not fit the model's context window. ``tokens`` and ``limit`` are the
    prompt's size and the model's limit when the provider's message said."""

    code = "prompt_too_long"

    def __init__(
        self,
        message: str,
        *,
        tokens: Optional[int] = None,
        limit: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.tokens = tokens
        self.limit = limit


class APIConnectionError(FerroloopError):
    """The connection to the provider failed or broke before a response completed.
    ``request_id`` is the provider's request id when the response headers had arrived."""

    code = "connection"

    def __init__(self, message: str, *, request_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id


class APITimeoutError(APIConnectionError, TimeoutError):
    """The request or the stream timed out (also a built-in ``TimeoutError``). ``which`` names
    the watchdog (``"connect"``, ``"first byte"``, ``"first event"``, ``"idle"``, ``"total"``)
    and ``elapsed`` the seconds that had passed."""

    code = "timeout"

    def __init__(
        self,
        message: str,
        *,
        which: Optional[str] = None,
        elapsed: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.which = which
        self.elapsed = elapsed


class StreamTruncatedError(FerroloopError):
    """The stream ended before the message completed.

    ``partial_message`` holds the message accumulated so far (provider shape, a ``dict``), so a
    caller can keep what did arrive. From the client, ``__cause__`` is the failure that broke
    the stream (an ``APITimeoutError`` after a stall, an ``APIConnectionError`` after a
    disconnect; its ``code`` is Node's ``reason``), ``request_id`` the provider's request id and
    ``status`` the HTTP status that cause names, when it names one (an in-stream error with a
    status as its code, OpenRouter's ``{"error": {"code": 502}}``), as Node's ``status`` is.
    """

    code = "stream_truncated"

    def __init__(
        self,
        message: str,
        *,
        partial_message: Any = None,
        request_id: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.partial_message = partial_message
        self.request_id = request_id
        self.status = status


class ProtocolError(FerroloopError):
    """The provider sent something that breaks its own protocol (malformed event JSON, events
    out of order, an event larger than the client's ``max_event_bytes`` cap). ``request_id`` is
    the provider's request id when known; ``limit`` is the cap in bytes when an oversized event
    ended the stream, else ``None``."""

    code = "protocol"

    def __init__(
        self, message: str, *, request_id: Optional[str] = None, limit: Optional[int] = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        self.limit = limit


class ToolError(FerroloopError):
    """A tool definition is invalid, a turn is misused, or a tool failed fatally (raised to the
    host, not sent to the model). ``results`` holds the turn's ``tool_result`` dicts (one per
    call, in request order) when a fatal tool error ended a turn, else ``None``. Only a Rust
    tool (the core's ``ToolError::Fatal``) fails fatally: a Python tool's exception is an error
    result the model reads (``is_error``), never this error. ``code`` is ``"invalid_argument"``
    for an invalid definition (Node's ``InvalidArgumentError``), else ``"internal"``."""

    results: Optional[list[ToolResult]]

    def __init__(
        self,
        message: str,
        *,
        results: Optional[list[ToolResult]] = None,
        code: Optional[str] = None,
    ) -> None:
        super().__init__(message, code=code)
        self.message = message
        self.results = results


class InvalidStateError(FerroloopError):
    """A call the object's state refuses: bytes fed to a ``StreamDecoder`` after ``finish()``
    (a new stream needs a new decoder), a ``tool_use`` submitted to a sealed turn
    (``TurnSealedError``), a call on a ``SseParser``, ``StreamDecoder``, ``ContextTracker`` or
    ``TextEstimator`` while another thread is in one of its calls (those objects are not shared
    across threads; the refused call did nothing: a refused ``feed`` consumed nothing). Node's ``InvalidStateError`` (``code: 'invalid_state'``), C's
    ``FL_STATUS_INVALID_STATE``."""

    code = "invalid_state"


class TurnSealedError(InvalidStateError, ToolError):
    """A ``tool_use`` was submitted to a sealed turn (it was not added). Also a ``ToolError``,
    which this misuse raised before ``InvalidStateError`` existed."""

    code = "invalid_state"


class ExactCountingUnavailableError(FerroloopError):
    """``count_tokens`` was called on a build without exact counting (the extension was built
    without the cargo feature ``exact``); ``estimate_tokens`` works in every build. Node's
    ``UnsupportedError``."""

    code = "unsupported"


class InternalError(FerroloopError):
    """A bug inside ferroloop (a Rust panic), surfaced as an exception instead of a crash."""

    code = "internal"


@runtime_checkable
class DecodeErrorDetail(Protocol):
    """What an error ``StreamDecoder.feed`` raises carries besides its class's attributes
    (Node's ``DecodeErrorDetail``): ``events``, the typed events the failing chunk completed
    before the error. Such an error is an ``APIError`` (a provider's error event: the subclass
    of its class), a ``ProtocolError`` or an ``InvalidStateError`` (bytes fed after
    ``finish()``); the same classes raised elsewhere (by a ``Client``, by ``finish()``) carry no
    ``events``, so this is a protocol, not a base class: ``isinstance(err, DecodeErrorDetail)``
    tells (and narrows ``err`` for a type checker). Node's ``partial`` is the decoder's
    ``message()`` here (``finish()``'s ``StreamTruncatedError`` has it as ``partial_message``),
    its ``errorType`` and ``raw`` an ``APIError``'s ``error_type`` and ``body``."""

    events: list[DecodeEvent]


__all__ = [
    "FerroloopError",
    "APIError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "InvalidRequestError",
    "ServerError",
    "QuotaExceededError",
    "RateLimitError",
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
    "DecodeErrorDetail",
]
