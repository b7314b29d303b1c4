"""Narrowing ferroloop's typed events: each union (``AgentEvent``, ``TurnEvent``,
``DecodeEvent``, ``StreamEvent``) is handled member by member, every field assigned to a
variable of its exact type, and the chain ends in an exhaustiveness check that ``mypy --strict``
verifies (a member left unhandled makes ``_never``'s argument a type other than ``NoReturn``).

Run from the repository root after ``pip install ./python``: ``python python/examples/event_types.py``
(decodes a recorded stream and runs a turn). Type-checked by ``mypy --strict`` in
``scripts/test-python.sh``. No ``match`` statement: the package supports Python 3.9.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal, NoReturn, Optional, Union

import ferroloop

STREAM = Path(__file__).resolve().parents[2] / "tests/fixtures/anthropic/tool_use_response.sse"


def _never(event: NoReturn) -> NoReturn:
    """Reached only by an event no branch handled: mypy rejects the call unless every member
    of the union was narrowed away before it."""
    raise AssertionError(f"unhandled event: {event!r}")


def describe_agent_event(event: ferroloop.AgentEvent) -> str:
    if event["type"] == "turn_start":
        turn: int = event["turn"]
        estimate: int = event["estimated_input_tokens"]
        return f"turn {turn} (~{estimate} input tokens)"
    elif event["type"] == "text_delta":
        text: str = event["text"]
        return text
    elif event["type"] == "thinking_delta":
        thinking: str = event["thinking"]
        return thinking
    elif event["type"] == "tool_started":
        tool_use_id: str = event["tool_use_id"]
        name: str = event["name"]
        tool_input: Any = event["input"]
        return f"{name} {tool_use_id} {tool_input!r}"
    elif event["type"] == "tool_progress":
        progress_id: str = event["tool_use_id"]
        data: Any = event["data"]
        return f"{progress_id}: {data!r}"
    elif event["type"] == "tool_finished":
        finished_id: str = event["tool_use_id"]
        finished_name: str = event["name"]
        is_error: bool = event["is_error"]
        status: ferroloop.CallStatus = event["status"]
        duration: float = event["duration"]
        return f"{finished_name} {finished_id} {status} error={is_error} {duration:.3f} s"
    elif event["type"] == "retry":
        call: ferroloop.ModelCall = event["call"]
        attempt: int = event["attempt"]
        http_status: Optional[int] = event["status"]
        code: str = event["code"]
        overloaded: bool = event["overloaded"]
        wait: float = event["wait"]
        return f"{call} attempt {attempt} after {http_status} {code} overloaded={overloaded} in {wait} s"
    elif event["type"] == "model_fallback":
        fallback_call: ferroloop.ModelCall = event["call"]
        primary: str = event["from"]
        fallback: str = event["to"]
        fallback_reason: str = event["reason"]
        fallback_error: str = event["error"]
        return f"{fallback_call}: {primary} -> {fallback} ({fallback_reason}: {fallback_error})"
    elif event["type"] == "max_tokens_raised":
        raised_turn: int = event["turn"]
        old_limit: int = event["from"]
        new_limit: int = event["to"]
        return f"turn {raised_turn}: max_tokens {old_limit} -> {new_limit}"
    elif event["type"] == "context":
        # Two members share the type: `action` tells them apart.
        if event["action"] == "microcompact":
            cleared: int = event["cleared"]
            tokens_before: int = event["tokens_before"]
            return f"microcompact: {cleared} results cleared ({tokens_before} tokens before)"
        elif event["action"] == "compaction":
            before: int = event["messages_before"]
            after: int = event["messages_after"]
            trigger: str = event["trigger"]
            return f"compaction ({trigger}): {before} -> {after} messages"
        else:
            _never(event)
    elif event["type"] == "cache_break":
        previous: int = event["previous"]
        current: int = event["current"]
        changed: list[ferroloop.CacheComponent] = event["changed"]
        return f"cache read {previous} -> {current}, changed: {', '.join(changed)}"
    elif event["type"] == "usage":
        usage_turn: int = event["turn"]
        usage_call: ferroloop.ModelCall = event["call"]
        usage: Optional[dict[str, Any]] = event["usage"]
        usage_estimate: int = event["estimated_input_tokens"]
        ttft: Optional[float] = event["time_to_first_token"]
        return f"turn {usage_turn} {usage_call}: {usage} (estimated {usage_estimate}, ttft {ttft})"
    elif event["type"] == "turn_end":
        end_turn: int = event["turn"]
        stop_reason: Optional[str] = event["stop_reason"]
        return f"turn {end_turn} ended: {stop_reason}"
    elif event["type"] == "stop":
        return describe_stop(event)
    else:
        _never(event)


def describe_stop(stop: ferroloop.AgentStopEvent) -> str:
    reason: ferroloop.StopReason = stop["reason"]
    error: Optional[str] = stop["error"]
    error_code: Optional[str] = stop["error_code"]
    messages: list[dict[str, Any]] = stop["messages"]
    turns: int = stop["turns"]
    tool_calls: int = stop["tool_calls"]
    tokens: int = stop["input_tokens"] + stop["output_tokens"]
    # What the client knew of the failed call that ended the run (None otherwise).
    status: Optional[int] = stop["status"]
    request_id: Optional[str] = stop["request_id"]
    retry_after: Optional[float] = stop["retry_after"]
    failed = "" if status is None else f" (HTTP {status}, request {request_id}, retry after {retry_after} s)"
    return f"stop: {reason} {error_code} {error}{failed} ({len(messages)} messages, {turns} turns, {tool_calls} calls, {tokens} tokens)"


def describe_turn_event(event: ferroloop.TurnEvent) -> str:
    index: int = event["index"]
    if event["type"] == "started":
        tool_use_id: str = event["tool_use_id"]
        tool: str = event["tool"]
        queued: float = event["queued"]
        return f"#{index} {tool} {tool_use_id} started after {queued:.3f} s"
    elif event["type"] == "progress":
        progress_id: str = event["tool_use_id"]
        data: Any = event["data"]
        return f"#{index} {progress_id} progress {data!r}"
    elif event["type"] == "finished":
        finished_id: str = event["tool_use_id"]
        finished_tool: str = event["tool"]
        status: ferroloop.CallStatus = event["status"]
        duration: float = event["duration"]
        return f"#{index} {finished_tool} {finished_id} {status} in {duration:.3f} s"
    elif event["type"] == "detached":
        detached_id: str = event["tool_use_id"]
        detached_tool: str = event["tool"]
        return f"#{index} {detached_tool} {detached_id} detached"
    elif event["type"] == "result":
        result: ferroloop.ToolResult = event["result"]
        kind: Literal["tool_result"] = result["type"]
        answered: str = result["tool_use_id"]
        content: Union[str, list[dict[str, Any]]] = result["content"]
        failed: bool = result["is_error"]
        return f"#{index} {kind} for {answered} error={failed}: {content!r}"
    else:
        _never(event)


def describe_decode_event(event: ferroloop.DecodeEvent) -> str:
    if event["type"] == "message_start":
        message: dict[str, Any] = event["message"]
        return f"message {message.get('id')}"
    elif event["type"] == "block_start":
        block: dict[str, Any] = event["block"]
        return f"[{event['index']}] {block.get('type')} block"
    elif event["type"] == "text_delta":
        text: str = event["text"]
        return text
    elif event["type"] == "refusal_delta":
        refusal: str = event["refusal"]
        return refusal
    elif event["type"] == "thinking_delta":
        thinking: str = event["thinking"]
        return thinking
    elif event["type"] == "signature_delta":
        signature: str = event["signature"]
        return f"signature {len(signature)} chars"
    elif event["type"] == "citations_delta":
        citation: dict[str, Any] = event["citation"]
        return f"citation {citation.get('type')}"
    elif event["type"] == "input_json_delta":
        partial_json: str = event["partial_json"]
        return partial_json
    elif event["type"] == "unknown_delta":
        delta: dict[str, Any] = event["delta"]
        return f"unknown delta {delta.get('type')}"
    elif event["type"] == "block_stop":
        stopped: int = event["index"]
        return f"[{stopped}] stop"
    elif event["type"] == "tool_use_ready":
        ready_index: int = event["index"]
        call_id: str = event["id"]
        name: str = event["name"]
        call_input: Any = event["input"]
        return f"[{ready_index}] ready: {name} {call_id} {call_input!r}"
    elif event["type"] == "tool_use_invalid":
        invalid_id: str = event["id"]
        invalid_name: str = event["name"]
        invalid_json: str = event["partial_json"]
        complaint: str = event["error"]
        return f"invalid: {invalid_name} {invalid_id} {invalid_json!r} ({complaint})"
    elif event["type"] == "tool_use_truncated":
        cut_id: str = event["id"]
        cut_name: str = event["name"]
        cut_json: str = event["partial_json"]
        return f"truncated: {cut_name} {cut_id} {cut_json!r}"
    elif event["type"] == "message_delta":
        message_delta: dict[str, Any] = event["delta"]
        usage: Optional[dict[str, Any]] = event["usage"]
        return f"delta {message_delta} usage {usage}"
    elif event["type"] == "message_stop":
        return "message stop"
    elif event["type"] == "ping":
        return "ping"
    elif event["type"] == "unknown":
        event_type: str = event["event_type"]
        data: Any = event["data"]
        return f"unknown {event_type}: {data!r}"
    else:
        _never(event)


def describe_stream_event(event: ferroloop.StreamEvent) -> str:
    if event["type"] == "retry":
        attempt: int = event["attempt"]
        status: Optional[int] = event["status"]
        code: str = event["code"]
        overloaded: bool = event["overloaded"]
        wait: float = event["wait"]
        reason: str = event["reason"]
        return f"attempt {attempt} after {status} {code} overloaded={overloaded} in {wait} s: {reason}"
    elif event["type"] == "stalled":
        elapsed: float = event["elapsed"]
        return f"quiet for {elapsed:.1f} s"
    else:
        # What is left is exactly the decoder's union.
        decoded: ferroloop.DecodeEvent = event
        return describe_decode_event(decoded)


executor = ferroloop.ToolExecutor()


@executor.tool(concurrency_safe=True)
def get_weather(input: dict[str, Any], ctx: ferroloop.ToolContext) -> str:
    ctx.progress({"looking_up": input.get("location")})
    return f"It is sunny in {input.get('location', 'the city')}."


async def main() -> None:
    decoder = ferroloop.StreamDecoder(provider="anthropic")
    async with executor.turn() as turn:
        for event in decoder.feed(STREAM.read_bytes()):
            print(describe_stream_event(event))
            if event["type"] == "tool_use_ready":
                turn.submit({"id": event["id"], "name": event["name"], "input": event["input"]})
        turn.seal()
        async for update in turn:
            print(describe_turn_event(update))
    decoder.finish()


if __name__ == "__main__":
    asyncio.run(main())
