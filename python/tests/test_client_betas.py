"""An Anthropic request's ``betas`` that is not a str or a list of str is a ``TypeError``: the
flags the core cannot read were dropped without a word (``betas=5`` sent no header,
``betas=["ok", 123]`` sent ``ok`` alone). Refused by the core before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest

import ferroloop


def client(provider: str = "anthropic") -> ferroloop.Client:
    return ferroloop.Client(provider, api_key="k", base_url="http://127.0.0.1:9", from_env=False, max_retries=0)  # type: ignore[arg-type]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "betas, message",
    [
        (5, "it is a number"),
        ({"flag": 1}, "it is an object"),
        (["ok-flag", 123], "item 1 is a number"),
        (("ok-flag", None), "item 1 is null"),
    ],
    ids=["int", "dict", "list-with-int", "tuple-with-none"],
)
async def test_betas_of_another_type_are_refused(betas: Any, message: str) -> None:
    expected = f"betas must be a flag or an array of flags \\(strings\\): {message}"
    async with client() as c:
        with pytest.raises(TypeError, match=expected):
            c.stream(model="m", max_tokens=8, messages=[], betas=betas)
        with pytest.raises(TypeError, match=expected):
            await c.create(model="m", max_tokens=8, messages=[], betas=betas)


@pytest.mark.asyncio
@pytest.mark.parametrize("betas", [None, "flag", ["a", "b"], ("a",), []], ids=["none", "str", "list", "tuple", "empty"])
async def test_valid_betas_are_accepted(betas: Any) -> None:
    async with client() as c:
        # Refused for the connection (nothing listens), not for the betas.
        with pytest.raises(ferroloop.FerroloopError):
            await c.create(model="m", max_tokens=8, messages=[], betas=betas)


@pytest.mark.asyncio
async def test_other_providers_send_betas_in_the_body_as_given() -> None:
    async with client("openai-chat") as c:
        with pytest.raises(ferroloop.FerroloopError):
            await c.create(model="m", messages=[], betas=5)
