"""The exception hierarchy and the panic boundary."""

from __future__ import annotations

import pytest

import ferroloop
from ferroloop import _native


def test_hierarchy() -> None:
    api_errors: list[type[ferroloop.APIError]] = [
        ferroloop.AuthenticationError,
        ferroloop.RateLimitError,
        ferroloop.QuotaExceededError,
        ferroloop.OverloadedError,
        ferroloop.PromptTooLongError,
    ]
    for cls in api_errors:
        assert issubclass(cls, ferroloop.APIError)
    # No credit left is not a rate limit: code waiting out RateLimitError must not wait on it.
    assert not issubclass(ferroloop.QuotaExceededError, ferroloop.RateLimitError)
    for cls in [
        ferroloop.APIError,
        ferroloop.APIConnectionError,
        ferroloop.StreamTruncatedError,
        ferroloop.ProtocolError,
        ferroloop.ToolError,
        ferroloop.InternalError,
    ]:
        assert issubclass(cls, ferroloop.FerroloopError)
        assert issubclass(cls, Exception)
    assert issubclass(ferroloop.APITimeoutError, TimeoutError)
    assert issubclass(ferroloop.APITimeoutError, ferroloop.APIConnectionError)
    # A misuse of a decoder's or a turn's state; a sealed turn's is still a ToolError, as before.
    assert issubclass(ferroloop.InvalidStateError, ferroloop.FerroloopError)
    assert issubclass(ferroloop.TurnSealedError, ferroloop.InvalidStateError)
    assert issubclass(ferroloop.TurnSealedError, ferroloop.ToolError)


def test_api_error_attributes() -> None:
    err = ferroloop.RateLimitError("slow down", status=429, request_id="req_1", error_type="rate_limit_error")
    assert (err.status, err.request_id, err.error_type, str(err)) == (429, "req_1", "rate_limit_error", "slow down")
    truncated = ferroloop.StreamTruncatedError("cut", partial_message={"content": []})
    assert truncated.partial_message == {"content": []}


def test_a_rust_panic_is_an_internal_error_not_a_crash() -> None:
    with pytest.raises(ferroloop.InternalError, match="boom"):
        _native._debug_panic("boom")
    # `except Exception` catches it (pyo3's own PanicException is a BaseException).
    try:
        _native._debug_panic("again")
    except Exception as err:  # noqa: BLE001
        assert isinstance(err, ferroloop.FerroloopError)
    # The interpreter and the module keep working.
    assert ferroloop.SseParser().feed(b"data: ok\n\n")[0].data == "ok"


def test_a_panic_with_the_interpreter_released_is_an_internal_error() -> None:
    with pytest.raises(ferroloop.InternalError, match="detached"):
        _native._debug_panic_detached("detached")


def test_version() -> None:
    assert ferroloop.__version__.count(".") == 2


def test_native_objects_survive_many_allocations() -> None:
    # Regression: an over-aligned core type stored inline in a Python object was misaligned
    # (Python allocates with 16-byte alignment) and aborted the interpreter.
    keep: list[object] = []
    for i in range(200):
        keep.append(ferroloop.StreamDecoder("anthropic"))
        keep.append(ferroloop.SseParser())
        keep.append(ferroloop.ContextTracker())
        keep.append(ferroloop.ContextBudget(200_000, 8_000))
        keep.append(ferroloop.ToolExecutor())
        keep.append(bytes(i))
    assert len(keep) == 1200
