"""``Agent``: ferroloop's agent loop (model call → stream decode → tools → results → next
turn, with retries, context management and recovery) driven from Python.

The loop runs in Rust; tools come from a Python ``ToolExecutor`` (run on the caller's event
loop or worker threads) and/or the native built-in tools (``read``, ``write``, ``edit``,
``glob``, ``grep``, ``bash``, confined to a workspace directory).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Optional, Sequence, Union

from . import _native
from ._args import optional_bool, optional_str, optional_str_path
from ._batches import BatchedEvents
from ._client import Client
from ._events import AgentEvent, AgentStopEvent
from ._executor import ToolExecutor
from ._results import ToolDefinition

Tools = Union[ToolExecutor, str, Sequence[Union[ToolExecutor, str]], None]


class AgentRun(BatchedEvents[AgentEvent]):
    """A run in progress: ``async for event in run`` yields event dicts (typed ``AgentEvent``:
    narrow on ``event["type"]``) with a ``"type"`` and the fields listed after it (durations in
    seconds):

    - ``turn_start`` (``turn``, ``estimated_input_tokens``): a model call starts (a turn asked
      again repeats its number);
    - ``text_delta`` (``text``), ``thinking_delta`` (``thinking``);
    - ``tool_started`` (``tool_use_id``, ``name``, ``input``), ``tool_progress``
      (``tool_use_id``, ``data``), ``tool_finished`` (``tool_use_id``, ``name``, ``is_error``,
      ``status``, ``duration``): ``status`` says how the call ended (``succeeded``, ``failed``,
      ``timed_out``, ``cancelled``, ...). Every call handed to the tools has one
      ``tool_finished``; one that never started (an unknown tool or input its schema refuses:
      ``rejected``; a hook's refusal: ``denied``; cancelled before it was admitted:
      ``skipped``) has no ``tool_started``;
    - ``usage`` (``turn``, ``call``, ``usage``, ``estimated_input_tokens``,
      ``time_to_first_token``): one per billed model call, ``call`` saying which —
      ``"turn"`` (a turn's call, before its ``turn_end``; also one that broke off, failed or
      was cancelled after the provider reported usage, and one that broke off or was cancelled
      after it delivered something but before reporting any usage, as OpenAI's streams report
      it only at their end: its ``usage`` is ``None``) or
      ``"compaction"`` (a call of the
      built-in summariser, before the compaction's ``context`` event; ``turn`` is the turn it
      is made for, the next ``turn_start``'s). The reported usage of the events adds up to the
      ``stop`` event's ``input_tokens`` (input + cache creation + cache read) and
      ``output_tokens``; a call reported without usage (``usage`` is ``None``: a Chat server
      that does not report it) counts toward ``token_budget`` by its estimate only;
    - ``turn_end`` (``turn``, ``stop_reason``): the model call ended; ``stop_reason`` is the
      provider's, ``None`` for a call that failed or was cancelled;
    - ``retry`` (``call``, ``attempt``, ``status``, ``code``, ``overloaded``, ``wait``): the
      model call is retried by the client. ``call`` is ``"turn"`` or ``"compaction"`` (a call
      of the built-in summariser, whose retries come before the compaction's ``context``
      event); ``attempt`` the one about to be made; ``status`` ``None`` without one; ``code``
      the class of the failure as the client's errors name it (``overloaded``,
      ``rate_limited``, ``server``, ``connection``, ``timeout``, ...), which says why the loop
      waits when there is no status; ``overloaded`` ``True`` for a 529 and for an overload
      without one, such as an ``overloaded_error`` event first in a 200;
    - ``model_fallback`` (``call``, ``from``, ``to``, ``reason``, ``error``): the run switched
      to the fallback model (see ``Agent``'s ``fallback_model``);
    - ``max_tokens_raised`` (``turn``, ``from``, ``to``): the turn is asked again with a higher
      output limit (see ``Agent``'s ``escalated_max_tokens``);
    - ``context`` (``action``, ``cleared``, ``tokens_before``, ``messages_before``,
      ``messages_after``, ``trigger``): context management before a model call, ``action``
      saying which, with its own fields: ``"microcompact"`` (old tool results cleared:
      ``cleared``, how many, and ``tokens_before``) or ``"compaction"`` (the history replaced
      by a summary: ``messages_before``, ``messages_after`` and ``trigger``, ``"auto"`` or
      ``"reactive"`` after the provider refused the prompt as too long);
    - ``cache_break`` (``previous``, ``current``, ``changed``): the prompt cache was read much
      less than on the previous turn's call; ``changed`` names the parts of the prompt whose
      bytes changed (``system``, ``tools``, ``messages``). Not reported after the loop's own
      compaction or microcompact, nor after a switch to the fallback model, whose cache is its
      own;
    - ``stop`` (``reason``, ``error``, ``error_code``, ``status``, ``request_id``,
      ``retry_after``, ``messages``, ``turns``, ``tool_calls``, ``input_tokens``,
      ``output_tokens``), always last: ``reason`` is ``end_turn``,
      ``stop_sequence``, ``refusal``, ``max_tokens``, ``max_turns``, ``budget``, ``aborted``,
      ``prompt_too_long`` or ``error``; ``messages`` the conversation, every ``tool_use``
      answered; ``tool_calls`` the calls handed to the tools (the number of ``tool_finished``
      events, calls started early in a response then discarded included). ``error_code`` is a
      stable name of
      why the run failed, set exactly when ``error`` is (``None`` otherwise): the client error's
      (``authentication``, ``permission``, ``not_found``, ``rate_limited``,
      ``quota_exceeded``, ``invalid_request``, ``server``, ``connection``, ``timeout``,
      ``protocol``), ``overloaded``, ``stream_truncated``,
      ``invalid_history`` (a conversation refused before any request),
      ``invalid_configuration``, ``invalid_tool_definition``, ``internal``, ``hook_failed``,
      ``model_error``; ``prompt_too_long`` for reason ``prompt_too_long``, ``token_budget`` or
      ``cost_budget`` for reason ``budget``; ``max_tokens_no_progress`` for reason
      ``max_tokens`` when a response cut with nothing of it kept would be asked for again with
      the same request (a ``max_tokens`` stop after the continuations ran out has none).
      ``status``, ``request_id`` and ``retry_after`` say what the client knew of the failed
      model call the run stopped on — reason ``error`` with a model's code, or
      ``prompt_too_long`` after the provider refused the prompt (after a switch to the
      fallback model, the fallback's call) — and are ``None`` for every other stop:
      ``status`` the HTTP status (``None`` without one: a lost connection, a timeout, a stream
      cut without an error event); ``request_id`` the provider's request id, to quote to its
      support; ``retry_after`` the wait in seconds the provider asked for (``retry-after``)
      when a rate limit's 429, an overload's 529 or a server error's 5xx such as a 503
      (``error_code`` ``rate_limited``, ``overloaded`` or ``server``) outlasted the client's
      retries, else ``None`` (the client keeps no wait for other statuses): when to schedule a
      new run.

    ``cancel()`` stops the run gracefully (running tools are cancelled; a ``stop`` event with
    reason ``aborted`` still follows). Cancelling the iterating task, or ``aclose()``, aborts
    the run and its running tools at once, and raises ``CancelledError`` (returns) once the
    tools have stopped: a tool task that handles its ``CancelledError`` has finished, a plain
    tool has returned, either within the executor's ``cleanup_grace`` (one that outlives it
    runs on, detached). Cancelling the waiting task again stops the wait. Leaving ``async for`` with ``break`` calls nothing
    (this is a plain async iterator, not a generator): the run goes on until ``aclose()``, the
    end of an ``async with run:`` block, or the run being dropped, which aborts it too. Like an
    async generator, a run refuses a second task's ``__anext__`` while another task waits for the
    next event (``RuntimeError``): two tasks iterating it at once would each get only some events.
    """

    def __init__(self, native: _native._AgentRun) -> None:
        super().__init__(native)
        self._native_run = native
        self._stop: Optional[AgentStopEvent] = None

    def _seen(self, event: AgentEvent) -> AgentEvent:
        if event["type"] == "stop":
            self._stop = event
        return event

    @property
    def stop(self) -> Optional[AgentStopEvent]:
        """The ``stop`` event once the run has ended (``None`` before)."""
        return self._stop

    def cancel(self) -> None:
        """Asks the run to stop (it ends with a ``stop`` event, reason ``aborted``)."""
        self._native_run.cancel()

    async def _wind_down(self) -> None:
        """Cancels the run and reads it to its end, whose ``stop`` event comes once every tool
        call has answered: its Python tools have stopped (or outlived the executor's
        ``cleanup_grace``). The events are dropped. Cancelled again meanwhile, it stops waiting
        and raises that ``CancelledError`` (the caller closes the run, which drops it)."""
        self._native_run.cancel()
        try:
            while await self._native_run.next_batch() is not None:
                pass
        except Exception:
            # The run failed: nothing more to wait for.
            return

    async def finish(self) -> AgentStopEvent:
        """Consumes the remaining events and returns the ``stop`` event. Raises
        ``InvalidStateError`` when the run was closed (``aclose()``, a cancelled iterating task)
        before its ``stop`` event (``cancel()`` instead still ends it with one)."""
        async for _ in self:
            pass
        if self._stop is None:
            raise self._early_end("its stop event") or RuntimeError(
                "the run ended without a stop event"
            )
        return self._stop


class Agent:
    """An agent: a ``Client`` (``"anthropic"``, ``"openai-chat"`` for Chat Completions servers or
    ``"openai-responses"`` for the Responses API: the history stays in the Anthropic shape and
    the client translates), a model name, a system prompt and tools. A configuration every run
    would refuse (the core's check: an empty or blank ``model`` or ``fallback_model``,
    ``max_tokens`` of 0 or not above ``extra["thinking"]["budget_tokens"]``, ``extra`` holding
    ``messages`` or ``model``, a ``tool_choice`` forcing tool use with thinking on or naming no
    tool, a tool name the providers refuse — not 1 to 64 ASCII letters, digits, ``_`` or ``-``,
    as a lambda's ``<lambda>`` — or given twice, ...) is a ``ValueError`` here, ``"invalid agent
    configuration: ..."`` as in Node and C, rather than a run stopping with
    ``invalid_configuration`` or ``invalid_tool_definition``.

    ``tools`` is a ``ToolExecutor`` with Python tools, built-in tool names (``"read"``,
    ``"write"``, ``"edit"``, ``"glob"``, ``"grep"``, ``"bash"``, confined to ``workspace``,
    default the current directory), or a list mixing one executor and names. ``max_turns``
    (default 50) caps turns (a request sent again for the same turn counts once: after a
    broken stream, a fallback, a raised output limit, a refused field, a compaction after a
    refusal as too long; 0: none, the
    run stops at once with ``max_turns``),
    ``max_tokens`` (default 8192) is each request's output limit, ``token_budget`` caps input +
    output tokens over a run (0: no model call, the run stops with ``budget``; a last answer
    that ends the run itself stops with its own reason, whatever it spent),
    ``escalated_max_tokens`` (default 64000; 0: never) the limit a turn cut by ``max_tokens`` is
    asked again with, once, before it is continued: the cut response is discarded (its calls
    not run, its usage counted) and a ``max_tokens_raised`` event (``turn``, ``from``, ``to``)
    says so; the limit is capped by the model's output ceiling, the context window left and what
    ``token_budget`` leaves, and
    is not raised for a model the built-in table does not know, nor when ``extra`` sets the
    output limit. ``max_continuations``
    (default 3) how often a ``max_tokens`` stop is continued, ``keep_recent_tool_results``
    (default 5) how many recent tool results microcompact keeps when the context fills up (the
    last turn's, not yet read by the model, are always kept), ``tokenizer`` (default
    ``"claude"``) the family of the loop's token estimates; ``fallback_model`` the model the
    run switches to when the model is overloaded (a call failing as overloaded after the
    client's retries, or seeing ``fallback_after_529_retries``, default 3, consecutive 529
    retries, a retried ``overloaded_error`` event that came before anything was delivered
    counting as one; 0: only when the call fails; the built-in summariser's call counts and
    falls back alike, and its summary is then asked of the fallback): the turn is retried once
    with it (without a ``fallback_model``, an overload announced mid-stream, which the client
    cannot retry, has the turn asked again once of the same model), it answers for the
    rest of the run, and a ``model_fallback`` event (``call``: ``turn`` or ``compaction``,
    ``from``, ``to``, ``reason``:
    ``overloaded`` or ``repeated_529``, the latter for repeated 529s and overload events alike;
    ``error``, for ``repeated_529`` how many overloads were seen and which: "3 consecutive HTTP
    529 responses", "3 consecutive overloaded errors (without an HTTP 529: ...)" or both
    counted) says so; ``extra`` fields (temperature,
    thinking, metadata, ...) are merged into every request, except ``tools``, a list added to
    the tools' definitions: tools the provider runs itself, such as Anthropic's
    ``{"type": "web_search_20250305", "name": "web_search"}``.
    """

    def __init__(
        self,
        client: Client,
        *,
        model: str,
        system: Optional[str] = None,
        tools: Tools = None,
        workspace: Optional[Union[str, "os.PathLike[str]"]] = None,
        max_turns: Optional[int] = None,
        max_tokens: Optional[int] = None,
        token_budget: Optional[int] = None,
        max_continuations: Optional[int] = None,
        escalated_max_tokens: Optional[int] = None,
        prompt_caching: Optional[bool] = True,
        extra: Optional[dict[str, Any]] = None,
        keep_recent_tool_results: Optional[int] = None,
        tokenizer: Optional[str] = None,
        fallback_model: Optional[str] = None,
        fallback_after_529_retries: Optional[int] = None,
    ) -> None:
        if not isinstance(client, Client):
            raise TypeError(f"client must be a ferroloop.Client, not {type(client).__name__}")
        if not isinstance(model, str):
            raise TypeError(f"model must be a str, not {type(model).__name__}")
        for name, value in [("system", system), ("tokenizer", tokenizer), ("fallback_model", fallback_model)]:
            optional_str(name, value)
        optional_bool("prompt_caching", prompt_caching)
        executor: Optional[ToolExecutor] = None
        names: list[str] = []
        items: Sequence[Union[ToolExecutor, str]]
        if tools is None:
            items = []
        elif isinstance(tools, (ToolExecutor, str)):
            items = [tools]
        elif isinstance(tools, Iterable):
            items = list(tools)
        else:
            raise TypeError(
                f"tools must be a ToolExecutor, built-in tool names, or a list of them, not {type(tools).__name__}"
            )
        for item in items:
            if isinstance(item, ToolExecutor):
                if executor is not None:
                    raise ValueError("an agent takes at most one ToolExecutor")
                executor = item
            elif isinstance(item, str):
                names.append(item)
            else:
                raise TypeError("tools must be a ToolExecutor, built-in tool names, or a list of them")
        workspace_path = optional_str_path("workspace", workspace)
        self._client = client
        self._native = _native._Agent(
            client._native,
            model=model,
            system=system,
            executor=executor._native if executor is not None else None,
            builtin_tools=names,
            workspace=workspace_path,
            max_turns=max_turns,
            max_tokens=max_tokens,
            token_budget=token_budget,
            max_continuations=max_continuations,
            escalated_max_tokens=escalated_max_tokens,
            prompt_caching=prompt_caching,
            extra=extra,
            keep_recent_tool_results=keep_recent_tool_results,
            tokenizer=tokenizer,
            fallback_model=fallback_model,
            fallback_after_529_retries=fallback_after_529_retries,
        )

    @property
    def tool_names(self) -> list[str]:
        """The tools offered to the model."""
        return self._native.tool_names

    def tool_definitions(self) -> list[ToolDefinition]:
        """The tool definitions sent to the model: the agent's own tools sorted by name (for prompt
        caching), each an ``AgentToolDefinition``, then the provider's tools of ``extra["tools"]``
        as given (``"type" in definition`` tells them apart)."""
        return self._native.tool_definitions()

    def run(
        self,
        prompt: Union[str, list[dict[str, Any]], None] = None,
        *,
        messages: Optional[list[dict[str, Any]]] = None,
    ) -> AgentRun:
        """Starts a run for a user ``prompt`` (text or content blocks), or continuing
        ``messages`` (ending with a user message), or continuing ``messages`` with ``prompt``
        as the next user message when both are given (as Node's ``run(prompt, { messages })``). Call from a coroutine: Python tools run on
        its event loop, each call in a copy of the ``contextvars`` context of this call. Iterate the result for events. An invalid conversation (not
        user/assistant messages ending with the user's, an empty message or text block, or tool
        calls and results that do not pair up, results first in their message) makes no request: the run's only event is a ``stop`` with reason ``error`` and ``error_code``
        ``invalid_history``. A ``prompt`` that is neither text nor a list is a ``TypeError``
        (as Node's ``InvalidArgumentError``)."""
        if prompt is not None and not isinstance(prompt, (str, list)):
            raise TypeError(
                f"prompt must be a str or a list of content blocks, not {type(prompt).__name__}"
            )
        return AgentRun(self._native.run(prompt, messages=messages))
