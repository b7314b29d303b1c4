"""`Client` against the loopback replay server (`ferroloop serve-replay`): streaming and
non-streaming requests, retries (429 with retry-after, 529, 500, connection reset), watchdogs
(stall → APITimeoutError), truncation (StreamTruncatedError with the partial message), error
mapping, and cancellation."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

import ferroloop
from conftest import ReplayServer, fixture_bytes

Replay = Callable[[dict[str, Any]], ReplayServer]
BASIC = {"fixture": "tests/fixtures/anthropic/basic_response.sse"}
TOOL_USE = {"fixture": "tests/fixtures/anthropic/tool_use_response.sse"}
REQUEST: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Hi"}],
}


def expected_message(name: str) -> dict[str, Any]:
    decoder = ferroloop.StreamDecoder("anthropic")
    decoder.feed(fixture_bytes(name))
    return decoder.finish()


def client_for(server: ReplayServer, **options: Any) -> ferroloop.Client:
    options.setdefault("retry_base_delay", 0.01)
    return ferroloop.Client(
        "anthropic", api_key="sk-test", base_url=server.url, from_env=False, **options
    )


def header(request: dict[str, Any], name: str) -> str:
    """A header of a logged request (the log lists `[name, value]` pairs)."""
    return str(next(value for key, value in request["headers"] if key.lower() == name))


async def collect(stream: ferroloop.MessageStream) -> list[ferroloop.StreamEvent]:
    return [event async for event in stream]


@pytest.mark.asyncio
async def test_streams_typed_events_and_the_final_message(replay: Replay) -> None:
    server = replay({"responses": [{"body": BASIC, "chunk_bytes": 7}]})
    async with client_for(server) as client:
        stream = client.stream(**REQUEST)
        events = await collect(stream)
    texts = [e["text"] for e in events if e["type"] == "text_delta"]
    assert "".join(texts) == "Hello there!"
    assert stream.message() == expected_message("anthropic/basic_response")
    assert stream.metrics is not None and stream.metrics["attempts"] == 1
    (request,) = server.requests()
    assert request["path"] == "/v1/messages"
    assert header(request, "x-api-key") == "sk-test"
    body = request["body"]
    assert '"stream":true' in body.replace(" ", "") and '"claude-test"' in body


@pytest.mark.asyncio
async def test_betas_go_in_the_anthropic_beta_header_not_the_body(replay: Replay) -> None:
    body = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    server = replay({"responses": [{"body": BASIC}, {"body": {"json": body}}]})
    async with client_for(server, anthropic_beta=["a-1"]) as client:
        await collect(client.stream(**REQUEST, betas=["b-2", "a-1"]))
        assert await client.create(**REQUEST, betas="c-3") == body
    streamed, created = server.requests()
    assert header(streamed, "anthropic-beta") == "a-1,b-2"
    assert header(created, "anthropic-beta") == "a-1,c-3"
    assert "betas" not in streamed["body"] and "betas" not in created["body"]


@pytest.mark.asyncio
async def test_until_done_returns_the_message_of_a_tool_use_stream(replay: Replay) -> None:
    server = replay({"responses": [{"body": TOOL_USE, "chunk_bytes": 1}]})
    async with client_for(server) as client:
        message = await client.stream(**REQUEST).until_done()
    assert message == expected_message("anthropic/tool_use_response")
    assert any(block["type"] == "tool_use" for block in message["content"])


@pytest.mark.asyncio
async def test_a_retry_names_the_attempt_about_to_be_made_as_the_agent_and_node_do(
    replay: Replay,
) -> None:
    # The client's `retry` event said `attempt: 1` for the first retry, the agent's `retry`
    # event and Node's client `attempt: 2` (the attempt about to be made).
    rate_limited = {
        "status": 429,
        "headers": {"retry-after-ms": "5"},
        "body": {"json": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}},
    }
    server = replay({"responses": [rate_limited, {"body": BASIC}, rate_limited, {"body": BASIC}]})
    async with client_for(server) as client:
        stream = client.stream(**REQUEST)
        streamed = [e for e in await collect(stream) if e["type"] == "retry"]
        agent = ferroloop.Agent(client, model="claude-test")
        ran = [e async for e in agent.run("hi") if e["type"] == "retry"]
    assert [e["attempt"] for e in streamed] == [2]
    assert [e["attempt"] for e in ran] == [2]
    assert stream.metrics is not None
    assert [e["attempt"] for e in stream.metrics["retries"]] == [2]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "failure, status, code",
    [
        (
            {
                "status": 429,
                "headers": {"retry-after-ms": "20"},
                "body": {"json": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}},
            },
            429,
            "rate_limited",
        ),
        (
            {
                "status": 529,
                "body": {"json": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}},
            },
            529,
            "overloaded",
        ),
        ({"status": 500, "body": {"text": "boom"}}, 500, "server"),
        ({"fault": {"kind": "reset_before_headers"}}, None, "connection"),
        # A 200 carrying a transient provider error before any event was delivered: as its
        # first event, or as a JSON body (nothing was generated, so it is retried).
        (
            {
                "body": {
                    "events": [
                        {"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}
                    ]
                }
            },
            None,
            "overloaded",
        ),
        ({"body": {"json": {"type": "error", "error": {"type": "api_error", "message": "Internal"}}}}, None, "server"),
        # The same first event without its `event:` line (some proxies strip them): its data's
        # `type` names it.
        (
            {"body": {"events": [{"data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}]}},
            None,
            "overloaded",
        ),
    ],
    ids=["429-retry-after", "529", "500", "reset", "error-event-first", "200-json-error", "unnamed-error-event-first"],
)
async def test_retries_then_succeeds(replay: Replay, failure: dict[str, Any], status: Any, code: str) -> None:
    server = replay({"responses": [failure, {"body": BASIC}]})
    async with client_for(server) as client:
        stream = client.stream(**REQUEST)
        events = await collect(stream)
    retries = [e for e in events if e["type"] == "retry"]
    assert len(retries) == 1
    assert retries[0]["attempt"] == 2 and retries[0]["status"] == status
    # Why it waited, as the agent's `retry` event says it: the failure's class, and whether it
    # was an overload (a 529, or an `overloaded_error` first event, which has no status).
    assert retries[0]["code"] == code
    assert retries[0]["overloaded"] is (code == "overloaded")
    assert stream.metrics is not None
    assert [(r["code"], r["overloaded"]) for r in stream.metrics["retries"]] == [(code, code == "overloaded")]
    if status == 429:
        assert retries[0]["wait"] == pytest.approx(0.02)
    assert stream.message() == expected_message("anthropic/basic_response")
    assert stream.metrics is not None and stream.metrics["attempts"] == 2
    assert len(server.requests()) == 2


@pytest.mark.asyncio
async def test_rate_limit_error_carries_retry_after_status_and_request_id(replay: Replay) -> None:
    server = replay(
        {
            "responses": [
                {
                    "status": 429,
                    "headers": {"retry-after": "7", "request-id": "req_429"},
                    "body": {"json": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}},
                }
            ]
        }
    )
    async with client_for(server, max_retries=0) as client:
        with pytest.raises(ferroloop.RateLimitError) as caught:
            await collect(client.stream(**REQUEST))
    error = caught.value
    assert isinstance(error, ferroloop.APIError)
    assert error.status == 429 and error.request_id == "req_429"
    assert error.retry_after == 7.0 and error.error_type == "rate_limit_error"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "status, kind, cls",
    [
        (529, "overloaded_error", ferroloop.OverloadedError),
        # RFC 9110's "come back later": a 503's wait, for a caller scheduling the next attempt.
        (503, "api_error", ferroloop.ServerError),
    ],
    ids=["529", "503"],
)
async def test_overloaded_and_server_errors_carry_retry_after_when_the_response_named_one(
    replay: Replay, status: int, kind: str, cls: type[ferroloop.OverloadedError | ferroloop.ServerError]
) -> None:
    # An error status with `retry-after`, not retried: the wait in seconds, as RateLimitError's;
    # the same status without one: None.
    body = {"json": {"type": "error", "error": {"type": kind, "message": "busy"}}}
    server = replay(
        {
            "responses": [
                {"status": status, "headers": {"retry-after": "3", "request-id": "req_busy"}, "body": body},
                {"status": status, "body": body},
            ]
        }
    )
    async with client_for(server, max_retries=0) as client:
        waits = []
        for _ in range(2):
            with pytest.raises(cls) as caught:
                await collect(client.stream(**REQUEST))
            error = caught.value
            # (pytest types a union of classes as their base; the attribute is both classes'.)
            assert isinstance(error, (ferroloop.OverloadedError, ferroloop.ServerError))
            waits.append(error.retry_after)
    assert caught.value.status == status and caught.value.error_type == kind
    assert waits == [3.0, None]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "status, kind, message, cls, code",
    [
        (401, "authentication_error", "invalid x-api-key", ferroloop.AuthenticationError, "authentication"),
        (403, "permission_error", "not allowed", ferroloop.PermissionDeniedError, "permission"),
        (529, "overloaded_error", "Overloaded", ferroloop.OverloadedError, "overloaded"),
        (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", ferroloop.PromptTooLongError, "prompt_too_long"),
        (400, "invalid_request_error", "messages: field required", ferroloop.InvalidRequestError, "invalid_request"),
        (404, "not_found_error", "model: nope", ferroloop.NotFoundError, "not_found"),
        (500, "api_error", "Internal server error", ferroloop.ServerError, "server"),
    ],
)
async def test_http_errors_map_to_exception_classes(
    replay: Replay, status: int, kind: str, message: str, cls: type[ferroloop.APIError], code: str
) -> None:
    body = {"json": {"type": "error", "error": {"type": kind, "message": message}}}
    server = replay({"responses": [{"status": status, "headers": {"request-id": "req_x"}, "body": body}]})
    async with client_for(server, max_retries=0) as client:
        with pytest.raises(cls) as caught:
            await client.create(**REQUEST)
    error = caught.value
    assert type(error) is cls
    assert error.status == status and error.request_id == "req_x"
    # Node's `err.code` for the same response (what tells a 404 from a 500 without a status).
    assert error.code == code
    if isinstance(error, ferroloop.PromptTooLongError):
        assert error.tokens == 210000 and error.limit == 200000


@pytest.mark.asyncio
async def test_openai_insufficient_quota_is_tried_once_and_raises_quota_exceeded(replay: Replay) -> None:
    # No credit left: with the default retries the client used to wait through all of them
    # (~70 s) and raise RateLimitError.
    quota = {
        "status": 429,
        "headers": {"retry-after-ms": "5", "x-request-id": "req_quota"},
        "body": {
            "json": {
                "error": {
                    "message": "You exceeded your current quota, please check your plan and billing details.",
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
            }
        },
    }
    ok = {"body": {"fixture": "tests/fixtures/openai-chat/173417d55340.sse"}}
    server = replay({"responses": [quota, ok]})
    client = ferroloop.Client(
        "openai-chat", api_key="sk-openai", base_url=server.url, from_env=False, retry_base_delay=0.01
    )
    async with client:
        with pytest.raises(ferroloop.QuotaExceededError) as caught:
            await client.stream(model="gpt-test", messages=[]).until_done()
    error = caught.value
    assert isinstance(error, ferroloop.APIError) and not isinstance(error, ferroloop.RateLimitError)
    assert error.status == 429 and error.request_id == "req_quota"
    assert error.error_type == "insufficient_quota"
    assert len(server.requests()) == 1


@pytest.mark.asyncio
async def test_create_returns_the_json_response(replay: Replay) -> None:
    response = expected_message("anthropic/basic_response")
    server = replay({"responses": [{"status": 503, "body": {"text": "busy"}}, {"body": {"json": response}}]})
    async with client_for(server) as client:
        assert await client.create(**REQUEST) == response
    requests = server.requests()
    assert len(requests) == 2 and '"stream":false' in requests[1]["body"].replace(" ", "")


@pytest.mark.asyncio
async def test_the_replay_server_logs_more_requests_than_its_pipe_holds(replay: Replay) -> None:
    # The harness itself: 40 requests of 4 KiB log ~170 KiB, more than an unread stdout pipe
    # holds (64 KiB); the server must not block on its log (a stress run of agents against it
    # hung there, looking like a client hang).
    response = expected_message("anthropic/basic_response")
    server = replay({"responses": [{"body": {"json": response}}], "when_exhausted": "repeat_last"})
    prompt = "x" * 4096
    async with client_for(server) as client:
        answers = await asyncio.wait_for(
            asyncio.gather(
                *(
                    client.create(**{**REQUEST, "messages": [{"role": "user", "content": prompt}]})
                    for _ in range(40)
                )
            ),
            timeout=10,
        )
    assert answers == [response] * 40
    requests = server.requests()
    assert len(requests) == 40 and all(prompt in request["body"] for request in requests)


@pytest.mark.asyncio
async def test_a_stall_before_the_first_event_is_a_timeout(replay: Replay) -> None:
    server = replay({"responses": [{"body": BASIC, "fault": {"kind": "stall_after", "bytes": 0, "ms": 5000}}]})
    async with client_for(server, max_retries=0, first_event_timeout=0.3) as client:
        with pytest.raises(ferroloop.APITimeoutError) as caught:
            await collect(client.stream(**REQUEST))
    assert isinstance(caught.value, TimeoutError)
    assert isinstance(caught.value, ferroloop.APIConnectionError)
    assert caught.value.which == "first event"


@pytest.mark.asyncio
async def test_a_stall_mid_stream_truncates_with_the_partial_message(replay: Replay) -> None:
    cut = fixture_bytes("anthropic/basic_response").index(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" there")
    server = replay({"responses": [{"body": BASIC, "fault": {"kind": "stall_after", "bytes": cut, "ms": 5000}}]})
    async with client_for(server, idle_timeout=0.3, stall_notice=0.1) as client:
        stream = client.stream(**REQUEST)
        seen: list[ferroloop.StreamEvent] = []
        with pytest.raises(ferroloop.StreamTruncatedError) as caught:
            async for event in stream:
                seen.append(event)
    error = caught.value
    assert isinstance(error.__cause__, ferroloop.APITimeoutError)
    assert error.partial_message["content"] == [{"type": "text", "text": "Hello"}]
    assert [e["text"] for e in seen if e["type"] == "text_delta"] == ["Hello"]
    assert any(e["type"] == "stalled" for e in seen)
    assert stream.message() is None
    assert len(server.requests()) == 1  # a truncated stream is not replayed


@pytest.mark.asyncio
async def test_a_stream_without_event_lines_is_whole(replay: Replay) -> None:
    # Anthropic names each event twice, in its `event:` line and in its data's `type`; some
    # proxies strip the lines. The answer is whole all the same (it was reported truncated),
    # with its usage and first-token time, as Node's and the core's tests say.
    unnamed = b"".join(
        line + b"\n"
        for line in fixture_bytes("anthropic/basic_response").splitlines()
        if not line.startswith(b"event:")
    )
    server = replay({"responses": [{"body": {"text": unnamed.decode()}, "chunk_bytes": 7}]})
    async with client_for(server) as client:
        stream = client.stream(**REQUEST)
        events = await collect(stream)
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == "Hello there!"
    assert stream.message() == expected_message("anthropic/basic_response")
    metrics = stream.metrics
    assert metrics is not None and metrics["attempts"] == 1
    assert metrics["time_to_first_token"] is not None
    assert metrics["usage"] is not None and metrics["usage"]["output_tokens"] > 0


@pytest.mark.asyncio
async def test_a_failed_stream_keeps_its_measurements(replay: Replay) -> None:
    # Two refused attempts, then a stream cut after its first bytes: what was attempted and
    # received stays readable, as after a message (C's metrics and Node's say the same).
    cut = fixture_bytes("anthropic/basic_response").index(b"event: content_block_delta")
    server = replay(
        {
            "responses": [
                {"status": 503, "body": {"text": "busy"}},
                {"status": 529, "body": {"text": "overloaded"}},
                {"body": BASIC, "fault": {"kind": "disconnect_after", "bytes": cut}},
            ]
        }
    )
    async with client_for(server) as client:
        stream = client.stream(**REQUEST)
        assert stream.metrics is None
        with pytest.raises(ferroloop.StreamTruncatedError):
            await collect(stream)
    metrics = stream.metrics
    assert metrics is not None
    assert metrics["attempts"] == 3
    assert [(r["attempt"], r["status"]) for r in metrics["retries"]] == [(2, 503), (3, 529)]
    assert metrics["events"] >= 2 and metrics["bytes_received"] >= cut
    assert metrics["total"] is not None and metrics["time_to_first_event"] is not None
    assert metrics["usage"] is not None and metrics["usage"]["input_tokens"] > 0
    assert stream.message() is None


@pytest.mark.asyncio
async def test_a_refused_stream_keeps_its_measurements(replay: Replay) -> None:
    server = replay({"responses": [{"status": 400, "body": {"json": {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}}}]})
    async with client_for(server) as client:
        stream = client.stream(**REQUEST)
        with pytest.raises(ferroloop.InvalidRequestError):
            await collect(stream)
    metrics = stream.metrics
    assert metrics is not None
    assert metrics["attempts"] == 1 and metrics["retries"] == [] and metrics["events"] == 0
    assert metrics["time_to_first_event"] is None and metrics["total"] is not None


@pytest.mark.asyncio
async def test_a_disconnect_mid_stream_truncates_with_the_partial_message(replay: Replay) -> None:
    cut = fixture_bytes("anthropic/tool_use_response").index(b"event: content_block_start", 400)
    server = replay({"responses": [{"body": TOOL_USE, "fault": {"kind": "disconnect_after", "bytes": cut}}]})
    async with client_for(server) as client:
        with pytest.raises(ferroloop.StreamTruncatedError) as caught:
            await collect(client.stream(**REQUEST))
    assert isinstance(caught.value.__cause__, ferroloop.APIConnectionError)
    partial = caught.value.partial_message
    assert partial["id"].startswith("msg_") and partial["stop_reason"] is None


@pytest.mark.asyncio
async def test_an_error_event_mid_stream_is_raised_typed(replay: Replay) -> None:
    events = [
        {"event": "message_start", "data": {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m", "usage": {"input_tokens": 1, "output_tokens": 1}}}},
        {"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}},
    ]
    server = replay({"responses": [{"body": {"events": events}}]})
    async with client_for(server) as client:
        with pytest.raises(ferroloop.FerroloopError) as caught:
            await collect(client.stream(**REQUEST))
    error = caught.value
    overloaded = error if isinstance(error, ferroloop.OverloadedError) else error.__cause__
    assert isinstance(overloaded, ferroloop.OverloadedError)


@pytest.mark.asyncio
async def test_malformed_event_json_is_a_protocol_error(replay: Replay) -> None:
    events = [{"event": "message_start", "data": "{\"type\": \"message_start\", \"message\": {"}]
    server = replay({"responses": [{"body": {"events": events}}]})
    async with client_for(server) as client:
        with pytest.raises(ferroloop.FerroloopError) as caught:
            await collect(client.stream(**REQUEST))
    error = caught.value
    protocol = error if isinstance(error, ferroloop.ProtocolError) else error.__cause__
    assert isinstance(protocol, ferroloop.ProtocolError)


@pytest.mark.asyncio
async def test_openai_chat_streams_through_its_decoder(replay: Replay) -> None:
    name = "openai-chat/173417d55340"
    server = replay({"responses": [{"body": {"fixture": f"tests/fixtures/{name}.sse"}, "chunk_bytes": 5}]})
    decoder = ferroloop.StreamDecoder("openai-chat")
    decoder.feed(fixture_bytes(name))
    expected = decoder.finish()
    client = ferroloop.Client("openai-chat", api_key="sk-openai", base_url=server.url, from_env=False)
    async with client:
        assert await client.stream(model="gpt-test", messages=[]).until_done() == expected
    (request,) = server.requests()
    assert request["path"] == "/chat/completions"
    assert header(request, "authorization") == "Bearer sk-openai"


@pytest.mark.asyncio
async def test_cancelling_the_iterating_task_aborts_the_request(replay: Replay) -> None:
    # A drip of 128-byte pieces 300 ms apart: the first event arrives after about 0.6 s, the
    # whole stream would take about 5 s.
    server = replay({"responses": [{"body": TOOL_USE, "chunk_bytes": 128, "chunk_delay_ms": 300}, {"body": BASIC}]})
    async with client_for(server) as client:
        stream = client.stream(**REQUEST)
        first = asyncio.Event()

        async def consume() -> None:
            async for _ in stream:
                first.set()

        task = asyncio.create_task(consume())
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The stream is over (it never completed), and the client still serves requests.
        assert [e async for e in stream] == []
        assert stream.message() is None
        assert await client.stream(**REQUEST).until_done() == expected_message("anthropic/basic_response")


@pytest.mark.asyncio
async def test_until_done_after_aclose_or_a_failure_says_so_rather_than_blaming_the_provider(replay: Replay) -> None:
    # until_done() on a stream closed by the caller raised ProtocolError ("the stream ended
    # without a message"), which blames the provider; Node's message() rejects with AbortError.
    # After a failure it raised that ProtocolError too instead of the failure (Node: the failure).
    server = replay(
        {
            "responses": [
                {"body": TOOL_USE, "chunk_bytes": 128, "chunk_delay_ms": 300},
                {"body": TOOL_USE, "chunk_bytes": 128, "chunk_delay_ms": 300},
                {"status": 400, "body": {"json": {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}}},
                {"body": BASIC},
            ]
        }
    )
    async with client_for(server, max_retries=0) as client:
        closed = client.stream(**REQUEST)
        await closed.__anext__()
        await closed.aclose()
        await closed.aclose()
        with pytest.raises(ferroloop.InvalidStateError, match="closed before its message completed"):
            await closed.until_done()
        assert [e async for e in closed] == []

        cancelled = client.stream(**REQUEST)
        task = asyncio.create_task(cancelled.until_done())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(ferroloop.InvalidStateError, match="closed before its message completed"):
            await cancelled.until_done()

        failed = client.stream(**REQUEST)
        with pytest.raises(ferroloop.APIError) as first:
            await failed.until_done()
        with pytest.raises(ferroloop.APIError) as again:
            await failed.until_done()
        assert again.value is first.value

        # A stream that completed keeps its message, closed or not.
        done = client.stream(**REQUEST)
        message = await done.until_done()
        await done.aclose()
        assert await done.until_done() == message


@pytest.mark.asyncio
async def test_a_stream_iterated_by_two_tasks_at_once_refuses_the_second(replay: Replay) -> None:
    # Like an async generator: the second task's `anext` fails while the first one waits for
    # the next batch. Sharing the stream would give each task some of the events, neither all.
    server = replay({"responses": [{"body": BASIC, "chunk_bytes": 16, "chunk_delay_ms": 20}]})
    async with client_for(server) as client:
        stream = client.stream(**REQUEST)

        async def drain() -> list[ferroloop.StreamEvent]:
            return [event async for event in stream]

        outcomes: list[Any] = list(await asyncio.gather(drain(), drain(), return_exceptions=True))
        first, second = outcomes
        assert isinstance(second, RuntimeError), second
        assert "already being iterated" in str(second)
        assert isinstance(first, list), first
        texts = [e["text"] for e in first if e["type"] == "text_delta"]
        assert "".join(texts) == "Hello there!"
        assert stream.message() == expected_message("anthropic/basic_response")
        # One task after the other is no concurrent iteration: the stream just has no events left.
        assert await drain() == []
    assert len(server.requests()) == 1


@pytest.mark.asyncio
async def test_a_closed_client_refuses_requests() -> None:
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    async with client:
        pass
    # An InvalidStateError, as its code says (a FerroloopError only, `except InvalidStateError`
    # missed it).
    with pytest.raises(ferroloop.InvalidStateError, match="the client is closed") as caught:
        client.stream(**REQUEST)
    assert caught.value.code == "invalid_state"


@pytest.mark.asyncio
async def test_a_request_configuration_error_has_node_s_invalid_argument_code() -> None:
    # Flags no header can carry: Node throws InvalidArgumentError for the same request.
    client = ferroloop.Client("anthropic", api_key="k", base_url="http://127.0.0.1:9", from_env=False)
    async with client:
        with pytest.raises(ferroloop.FerroloopError) as caught:
            await collect(client.stream(**REQUEST, betas=["bad\nflag"]))
    assert type(caught.value) is ferroloop.FerroloopError
    assert caught.value.code == "invalid_argument"


def test_headers_that_are_not_a_dict_are_a_type_error_naming_them() -> None:
    # A list of pairs raised AttributeError ("'list' object has no attribute 'items'").
    for wrong in [[("x-team", "infra")], "x-team: infra"]:
        with pytest.raises(TypeError, match=r"^headers must be a dict of str to str, not "):
            ferroloop.Client("anthropic", from_env=False, headers=wrong)  # type: ignore[arg-type]
    assert ferroloop.Client("anthropic", from_env=False, headers={}).provider == "anthropic"
    # A value that is no str was refused with pyo3's message ("'int' object cannot be
    # converted to 'PyString'"), which names neither the argument nor the key.
    with pytest.raises(TypeError, match=r"^headers must be a dict of str to str, not one with a str key and a int value"):
        ferroloop.Client("anthropic", from_env=False, headers={"x-n": 1})  # type: ignore[dict-item]


def test_betas_that_are_not_a_list_of_str_are_a_type_error_naming_them() -> None:
    # A str was refused with "Can't extract `str` to `Vec`", a message about Rust types.
    for wrong, held in [("a-1", "str"), (b"a-1", "bytes"), (1, "int")]:
        with pytest.raises(TypeError, match=rf"^anthropic_beta must be a list of str, not {held}$"):
            ferroloop.Client("anthropic", from_env=False, anthropic_beta=wrong)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^anthropic_beta must be a list of str, not one holding a int$"):
        ferroloop.Client("anthropic", from_env=False, anthropic_beta=["a-1", 2])  # type: ignore[list-item]
    # Any iterable of str is taken, as before (a tuple, a generator).
    assert ferroloop.Client("anthropic", from_env=False, anthropic_beta=("a-1",)).provider == "anthropic"  # type: ignore[arg-type]
    assert ferroloop.Client("anthropic", from_env=False, anthropic_beta=(f for f in ["a-1"])).provider == "anthropic"  # type: ignore[arg-type]


def test_provider_none_means_the_default_like_node_null() -> None:
    # `provider=None` was a TypeError, where Node's `provider: null` is the default provider.
    for client in [
        ferroloop.Client(None, from_env=False),
        ferroloop.Client(provider=None, api_key="k", from_env=False),
        ferroloop.Client(from_env=False),
    ]:
        assert client.provider == "anthropic"
        assert client.base_url == "https://api.anthropic.com"
    assert ferroloop.Client(provider="openai-chat", from_env=False).provider == "openai-chat"


def test_bad_configuration_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        ferroloop.Client("nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ferroloop.Client("anthropic", base_url="not a url", from_env=False)
    with pytest.raises(ValueError):
        ferroloop.Client("anthropic", timeout=-1.0, from_env=False)


def test_a_zero_timeout_is_a_value_error_naming_it_like_node() -> None:
    # A 0 s timeout failed every request (timeout, first_byte_timeout) or raced the network
    # (the others); Node's `timeouts: { idleMs: 0 }` is refused the same way.
    for name in ["timeout", "connect_timeout", "first_byte_timeout", "first_event_timeout", "idle_timeout", "stall_notice"]:
        for zero in [0.0, -0.0, 0]:
            options: dict[str, Any] = {name: zero}
            with pytest.raises(ValueError, match=f"^{name} must be above 0 seconds"):
                ferroloop.Client("anthropic", from_env=False, **options)
        shortest: dict[str, Any] = {name: 1e-6}
        ferroloop.Client("anthropic", from_env=False, **shortest)
    # A retry delay of 0 keeps its meaning: retry at once.
    ferroloop.Client("anthropic", from_env=False, retry_base_delay=0, retry_max_delay=0)


@pytest.mark.asyncio
async def test_anthropic_version_sets_the_header_like_node(replay: Replay) -> None:
    # Node's `anthropicVersion`: the `anthropic-version` header (default "2023-06-01").
    server = replay({"responses": [{"body": BASIC}, {"body": BASIC}]})
    async with client_for(server) as default, client_for(server, anthropic_version="2099-01-01") as pinned:
        await default.stream(**REQUEST).until_done()
        await pinned.stream(**REQUEST).until_done()
    first, second = server.requests()
    assert header(first, "anthropic-version") == "2023-06-01"
    assert header(second, "anthropic-version") == "2099-01-01"


@pytest.mark.asyncio
async def test_a_truncation_carries_the_status_its_cause_names_as_node_and_c_do(replay: Replay) -> None:
    # OpenRouter reports its upstream's failure mid-stream with the status as the error's code.
    # Node's truncation error and C's error JSON carry that status; Python's said None.
    chunk = {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": None}]}
    events = [{"data": chunk}, {"data": {"error": {"code": 502, "message": "upstream died"}}}]
    server = replay({"responses": [{"body": {"events": events}}]})
    client = ferroloop.Client(
        "openai-chat", api_key="sk-test", base_url=server.url, from_env=False, max_retries=0
    )
    async with client:
        with pytest.raises(ferroloop.StreamTruncatedError) as caught:
            await collect(client.stream(model="m", messages=[{"role": "user", "content": "Hi"}]))
    assert isinstance(caught.value.__cause__, ferroloop.ServerError)
    assert caught.value.__cause__.status == 502
    assert caught.value.status == 502
