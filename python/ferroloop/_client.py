"""``Client``: the streaming HTTP client of ferroloop (Anthropic Messages, OpenAI Chat
Completions, OpenAI Responses) with retries, backoff and stream watchdogs, running in Rust.

Requests run on ferroloop's own threads (connection, SSE parsing, decoding, retries happen
without the interpreter); the event loop receives batches of finished events.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Mapping, Optional

from . import _native
from ._args import optional_bool, optional_str
from ._batches import AsyncClosing, BatchedEvents
from ._events import StreamEvent
from ._results import RequestMetrics

Provider = Literal["anthropic", "openai-chat", "openai-responses"]


class MessageStream(BatchedEvents[StreamEvent]):
    """A streaming request: ``async for event in stream`` yields typed event dicts
    (``StreamEvent``: narrow on ``event["type"]``; the same shapes as ``StreamDecoder.feed``'s,
    plus ``retry`` (``attempt``, ``status``, ``code``, ``overloaded``, ``wait``, ``reason``)
    before a retry and ``stalled`` (``elapsed``, in seconds) when the stream goes quiet). A retry's fields mean what the agent's ``retry``
    event's do (and
    Node's): ``attempt`` is the attempt about to be made (2 for the first retry); ``status`` the
    HTTP status, ``None`` without one (a connection error, a timeout, an error event first in a
    200); ``code`` the failure's class as the errors name it (``"overloaded"``,
    ``"rate_limited"``, ``"server"``, ``"connection"``, ``"timeout"``, ...), which says why the
    client waits when there is no status; ``overloaded`` is true for a 529 and for an overload
    without one (an ``overloaded_error`` event first in a 200, OpenAI's
    ``server_is_overloaded``); ``wait`` in seconds; ``reason`` the failure's text. After the
    last event, ``message()`` is the final message in the provider's non-streaming shape and
    ``metrics`` the request's measurements (its ``retries`` are these items).

    A failure raises the matching ``FerroloopError`` subclass after the events that preceded
    it; a stream that breaks after events raises ``StreamTruncatedError`` with the partial
    message. Cancelling the task that iterates (or ``aclose()``) aborts the request.
    """

    def __init__(self, native: _native._ClientStream) -> None:
        super().__init__(native)
        self._client_stream = native
        self._message: Optional[dict[str, Any]] = None
        self._metrics: Optional[RequestMetrics] = None

    def _unpack(self, batch: Any) -> list[StreamEvent]:
        events, message, metrics = batch
        if message is not None:
            self._message = message
            self._metrics = metrics
        unpacked: list[StreamEvent] = events
        return unpacked

    def message(self) -> Optional[dict[str, Any]]:
        """The final message once the stream has ended (``None`` before)."""
        return self._message

    @property
    def metrics(self) -> Optional[RequestMetrics]:
        """The request's measurements once the stream has ended, with its message or with the
        error it raised (a failed request's attempts, retries, bytes and timings up to the
        failure; ``None`` before, and after ``aclose()``): ``request_id``, ``attempts``,
        ``retries`` (the ``retry`` events, as the stream yielded them), ``http_version``,
        ``time_to_headers``, ``time_to_first_event``, ``time_to_first_token``, ``total``
        (durations in seconds from the start of the request, ``None`` when not reached),
        ``bytes_received``, ``events`` (how many) and ``usage`` (the provider's final usage, or
        ``None``): a ``RequestMetrics``."""
        if self._metrics is None:
            failed: Optional[RequestMetrics] = self._client_stream.failure_metrics
            return failed
        return self._metrics

    async def until_done(self) -> dict[str, Any]:
        """Consumes the remaining events and returns the final message. Raises the request's
        error (again, when it was already raised to the iteration), or ``InvalidStateError``
        when the stream was closed (``aclose()``, a cancelled iterating task) before its message
        completed."""
        async for _ in self:
            pass
        if self._message is None:
            raise self._early_end("its message completed") or _native_error(
                "the stream ended without a message"
            )
        return self._message


def _native_error(message: str) -> Exception:
    from ._errors import ProtocolError

    return ProtocolError(message)


class Client(AsyncClosing):
    """A client for one provider endpoint: ``"anthropic"`` (Messages), ``"openai-chat"`` (Chat
    Completions) or ``"openai-responses"`` (Responses); ``provider=None`` (the default) means
    ``"anthropic"``, as Node's ``provider: null``.

    ``api_key`` and ``base_url`` default to the provider's environment variables
    (``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``, ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``)
    unless ``from_env=False`` (``None`` is the default, as Node's ``fromEnv: null``). Retries (``max_retries``, default 10) use exponential backoff
    with full jitter from ``retry_base_delay`` (default 0.5 s) up to ``retry_max_delay``
    (default 32 s; a base above it is capped to it), honouring ``retry-after`` up to 60 s (a longer one is not waited for: the
    backoff applies instead); they cover 408/409/429/5xx/529 and connection failures before the
    first event, and a provider error of a transient class (rate limited but not
    ``insufficient_quota``, overloaded, server) that a 200 carries before any event was
    delivered: as its first event (Anthropic's ``error`` event, OpenRouter's
    ``{"error": {"code": 502}}``, a Responses ``error`` or ``response.failed``; its ``retry``
    event has the status such a code names, else ``None``) or as a JSON body (for ``create``
    too). Keep-alive comments do not count as delivered; after an event the error raises
    ``StreamTruncatedError``. With the defaults, an endpoint that keeps failing (a refused connection, say)
    is retried for about 80 s on average (at most 160 s of waits) before the error is raised; no
    retry is made past ``timeout``. Timeouts are in seconds: ``timeout`` (the whole request,
    retries included; default 600), ``connect_timeout`` (30), ``first_byte_timeout`` (600),
    ``first_event_timeout`` (90), ``idle_timeout`` (90, between two events), ``stall_notice``
    (30, reported once as a ``stalled`` event); each must be above 0 (0 would fail or race
    every request, and is a ``ValueError``: there is no "no timeout", a very long one is
    that). ``anthropic_version`` is the
    ``anthropic-version`` header (default ``"2023-06-01"``), ``anthropic_beta`` the
    ``anthropic-beta`` flags.

    Use as ``async with Client(...) as client:``; requests must be made from a coroutine.
    """

    def __init__(
        self,
        provider: Optional[Provider] = None,
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
        headers: Optional[dict[str, str]] = None,
        anthropic_beta: Optional[list[str]] = None,
        from_env: Optional[bool] = True,
        anthropic_version: Optional[str] = None,
    ) -> None:
        for name, value in [
            ("provider", provider),
            ("api_key", api_key),
            ("base_url", base_url),
            ("anthropic_version", anthropic_version),
        ]:
            optional_str(name, value)
        optional_bool("from_env", from_env)
        if headers is not None:
            if not isinstance(headers, Mapping):
                raise TypeError(
                    f"headers must be a dict of str to str, not {type(headers).__name__}"
                )
            for name, value in headers.items():
                if not isinstance(name, str) or not isinstance(value, str):
                    raise TypeError(
                        "headers must be a dict of str to str, not one with a "
                        f"{type(name).__name__} key and a {type(value).__name__} value"
                    )
        if anthropic_beta is not None:
            # A str is itself a sequence of str: without this check "a,b" would be refused by
            # the native layer with a message naming Rust types, not this argument.
            if isinstance(anthropic_beta, (str, bytes)) or not isinstance(anthropic_beta, Iterable):
                raise TypeError(
                    f"anthropic_beta must be a list of str, not {type(anthropic_beta).__name__}"
                )
            anthropic_beta = list(anthropic_beta)
            for flag in anthropic_beta:
                if not isinstance(flag, str):
                    raise TypeError(
                        f"anthropic_beta must be a list of str, not one holding a {type(flag).__name__}"
                    )
        self._native = _native._Client(
            provider,
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            timeout=timeout,
            connect_timeout=connect_timeout,
            first_byte_timeout=first_byte_timeout,
            first_event_timeout=first_event_timeout,
            idle_timeout=idle_timeout,
            stall_notice=stall_notice,
            headers=list(headers.items()) if headers else None,
            anthropic_beta=anthropic_beta,
            from_env=from_env,
            anthropic_version=anthropic_version,
        )

    @property
    def provider(self) -> str:
        """The provider name."""
        return self._native.provider

    @property
    def base_url(self) -> str:
        """The endpoint's base URL."""
        return self._native.base_url

    def stream(self, **request: Any) -> MessageStream:
        """Starts a streaming request; ``request`` is the provider's JSON body (``model``,
        ``messages``, ``max_tokens``, ...; ``stream`` is set for you). Iterate the result.
        For Anthropic, ``betas=[...]`` (as in the SDK) is sent as the ``anthropic-beta``
        header of this request, after the client's own flags, not in the body (anything but a
        str, a list of str or ``None`` is a ``TypeError``). A float JSON cannot carry (``nan``, ``inf``)
        anywhere in the request is a ``ValueError``, as any value without a JSON form."""
        return MessageStream(self._native.stream(request))

    async def create(self, **request: Any) -> dict[str, Any]:
        """A non-streaming request: returns the provider's JSON response (with retries). A
        body that is not JSON, or JSON but not an object, is a ``ProtocolError``. ``betas``
        and non-finite floats are as for :meth:`stream`."""
        return await self._native.create(request)

    def close(self) -> None:
        """Releases the client's hold on its connection pool: later requests of this client,
        and new ``Agent`` s made with it, raise ``FerroloopError``; requests in flight finish.
        An ``Agent`` made before keeps the pool and goes on working (as in C), so leaving
        ``async with Client(...)`` does not stop the agents made inside it."""
        self._native.close()

    async def aclose(self) -> None:
        """``close`` as a coroutine (what ``async with`` calls on leaving)."""
        self.close()

    def __repr__(self) -> str:
        return repr(self._native)
