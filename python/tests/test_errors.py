"""The exception hierarchy and the panic boundary."""

from __future__ import annotations

import re
from pathlib import Path

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
        ferroloop.NotFoundError,
        ferroloop.InvalidRequestError,
        ferroloop.ServerError,
    ]
    for cls in api_errors:
        assert issubclass(cls, ferroloop.APIError)
    # A 403 is still an AuthenticationError, as it was before it had a class of its own.
    assert issubclass(ferroloop.PermissionDeniedError, ferroloop.AuthenticationError)
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


# The stable code of each class: Node's `err.code` for the class it maps to (C's `fl_status`).
CODE_OF_CLASS: dict[type[ferroloop.FerroloopError], str] = {
    ferroloop.FerroloopError: "internal",
    ferroloop.APIError: "provider_error",
    ferroloop.AuthenticationError: "authentication",
    ferroloop.PermissionDeniedError: "permission",
    ferroloop.NotFoundError: "not_found",
    ferroloop.InvalidRequestError: "invalid_request",
    ferroloop.ServerError: "server",
    ferroloop.RateLimitError: "rate_limited",
    ferroloop.QuotaExceededError: "quota_exceeded",
    ferroloop.OverloadedError: "overloaded",
    ferroloop.PromptTooLongError: "prompt_too_long",
    ferroloop.APIConnectionError: "connection",
    ferroloop.APITimeoutError: "timeout",
    ferroloop.StreamTruncatedError: "stream_truncated",
    ferroloop.ProtocolError: "protocol",
    ferroloop.ToolError: "internal",
    ferroloop.InvalidStateError: "invalid_state",
    ferroloop.TurnSealedError: "invalid_state",
    ferroloop.ExactCountingUnavailableError: "unsupported",
    ferroloop.InternalError: "internal",
}


def node_error_codes() -> set[str]:
    """The codes of Node's `FerroloopErrorCode` union (node/lib/index.d.ts)."""
    dts = (Path(__file__).resolve().parents[2] / "node" / "lib" / "index.d.ts").read_text(encoding="utf-8")
    union = re.search(r"export type FerroloopErrorCode =(.*?)\n\n", dts, re.S)
    assert union is not None, "FerroloopErrorCode not found in node/lib/index.d.ts"
    return set(re.findall(r"'([a-z_]+)'", union.group(1)))


def test_every_error_class_has_the_stable_code_node_gives_it() -> None:
    # A port of Node's `switch (err.code)` reads `err.code` in Python too.
    exported = {
        getattr(ferroloop, name)
        for name in ferroloop.__all__
        if isinstance(getattr(ferroloop, name), type) and issubclass(getattr(ferroloop, name), ferroloop.FerroloopError)
    }
    assert exported == set(CODE_OF_CLASS)
    codes = node_error_codes()
    for cls, code in CODE_OF_CLASS.items():
        assert cls.code == code, cls.__name__
        assert code in codes, (cls.__name__, code)
    assert ferroloop.RateLimitError("slow").code == "rate_limited"
    # An instance may carry another code of its family.
    assert ferroloop.APIError("gone", status=404, code="not_found").code == "not_found"
    assert ferroloop.APIError("x").code == "provider_error"
    assert ferroloop.ToolError("bad", code="invalid_argument").code == "invalid_argument"
    assert ferroloop.TurnSealedError("sealed").code == "invalid_state"


def test_every_error_has_message_status_and_request_id_as_node_s_base_class() -> None:
    # Node's FerroloopError has `message`, `status` and `requestId` on every error (null when
    # unknown); `except FerroloopError as err: log(err.status)` raised AttributeError here for
    # any error but an APIError.
    for name in ferroloop.__all__:
        cls = getattr(ferroloop, name)
        if not (isinstance(cls, type) and issubclass(cls, ferroloop.FerroloopError)):
            continue
        err = cls("what happened")
        assert err.message == "what happened", name
        assert err.status is None and err.request_id is None, name
    assert ferroloop.FerroloopError().message == ""
    assert ferroloop.APIError("x", status=404, request_id="req_1").status == 404


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
