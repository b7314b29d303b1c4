"""`Client.create` returns a dict (its annotation): a 200 whose JSON body is not an object
(`[1, 2]`, `"text"`, `3`, `null`) is a `ProtocolError`, as a body that is not JSON is; it was
returned as a list, a str, ..."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import ferroloop
from conftest import ReplayServer

Replay = Callable[[dict[str, Any]], ReplayServer]
REQUEST = {"model": "claude-test", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}


@pytest.mark.asyncio
@pytest.mark.parametrize("body", [[1, 2], "text", 3, None, True], ids=["list", "str", "int", "null", "bool"])
async def test_a_body_that_is_not_an_object_is_a_protocol_error(replay: Replay, body: Any) -> None:
    server = replay({"responses": [{"body": {"json": body}}]})
    async with ferroloop.Client("anthropic", api_key="k", base_url=server.url, from_env=False, max_retries=0) as client:
        with pytest.raises(ferroloop.ProtocolError, match="not a JSON object"):
            await client.create(**REQUEST)


@pytest.mark.asyncio
async def test_an_object_body_is_returned(replay: Replay) -> None:
    body = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    server = replay({"responses": [{"body": {"json": body}}]})
    async with ferroloop.Client("anthropic", api_key="k", base_url=server.url, from_env=False, max_retries=0) as client:
        assert await client.create(**REQUEST) == body
