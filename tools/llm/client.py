"""The LLM client: chat completions on any OpenAI-compatible endpoint (OpenRouter by default).

One ``LLMClient`` per user of it (a planner call, a run) — never a module-level
client. It wraps the official ``openai`` SDK with the SDK's own retries turned
off: this class retries 429 and 5xx itself (honouring ``Retry-After``, with an
injectable sleep and random source, like the engine), so every HTTP try is
recorded in ``LLMReply.attempts`` and errors come out typed
(``tools.llm.errors``). Token usage is returned with every reply.

The SDK is imported where a client is built or an SDK error is translated, not at
module import: every command imports this module (through the engine), and
``openai`` alone costs a large share of a command's start-up.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings

from tools.llm.content import parse_json_reply
from tools.llm.endpoints import llm_endpoint, llm_endpoint_ready
from tools.llm.errors import (
    LLMAuthFailed,
    LLMError,
    LLMRateLimited,
    LLMReplyInvalid,
    LLMTimeout,
    LLMUnavailable,
)
from tools.llm.prices import PriceTable, price_table
from tools.policy import RetryPolicy

if TYPE_CHECKING:
    import openai

logger = logging.getLogger("flowpilot.llm")

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_BACKOFF = RetryPolicy(initial_delay=1.0, max_delay=20.0, multiplier=2.0, jitter=0.2)
MAX_RETRY_AFTER = 60.0
_MESSAGE_CHARS = 500


@dataclass(frozen=True)
class Usage:
    """Tokens reported for one call (or summed over several with ``+``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reported: bool = True  # False: the endpoint's answer had no usage (the counts are 0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.reported and other.reported,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for; ``arguments`` is the JSON text as sent."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object; ``LLMReplyInvalid`` when they are not one."""
        if not self.arguments.strip():
            return {}
        value = parse_json_reply(self.arguments)
        if not isinstance(value, dict):
            raise LLMReplyInvalid(f"the arguments of tool call `{self.name}` are not an object")
        return value

    def as_message_part(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class LLMReply:
    """One completion: the text, the tool calls, the usage and the raw document.

    ``attempts`` has one entry per HTTP try (``{attempt, status, duration_ms}``,
    plus ``error`` and ``retry_in`` for failed tries).
    """

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    raw: dict[str, Any]
    model: str
    finish_reason: str | None = None
    attempts: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def message(self) -> dict[str, Any]:
        """The assistant message to append to a conversation before continuing it."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.as_message_part() for call in self.tool_calls]
        return message

    def json(self) -> Any:
        """The content parsed as JSON (plain or fenced); ``LLMReplyInvalid`` otherwise."""
        return parse_json_reply(self.content)


class ChatTap(Protocol):
    """Stands between one ``chat`` call and the endpoint.

    ``chat(request, send)`` gets the request body (model, messages, tools, response
    format, options) and returns what ``send()`` would — an ``LLMReply`` — or raises
    as it would (a typed ``LLMError``). Built per call by the caller (``runs.replay``):
    a recorder calls ``send`` and keeps a masked copy, a replayer never calls it.
    """

    def chat(self, request: dict[str, Any], send: Callable[[], LLMReply]) -> LLMReply: ...


class LLMClient:
    """Chat completions with typed errors, recorded retries and usage.

    ``max_retries`` is the number of extra tries after a retryable failure (429,
    5xx, timeout, connection error); ``timeout`` is seconds per HTTP try.
    ``sleep`` and ``rand`` are injectable so tests need not wait.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        *,
        backoff: RetryPolicy = DEFAULT_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
        rand: random.Random | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.base_url = base_url
        self.endpoint = ""  # the configured name, when built from settings
        # What its calls cost (tools.llm.prices): the endpoint's table when built from
        # settings, else the shipped prices under FLOWPILOT_LLM_PRICES.
        self.prices = prices or price_table(getattr(settings, "FLOWPILOT_LLM_PRICES", None))
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.sleep = sleep
        self.rand = rand or random.Random()
        # An endpoint without keys (a local server) still needs a non-empty value here;
        # a real endpoint answers 401 for it, which is reported as LLMAuthFailed.
        import openai  # the SDK loads with the first client (module docstring)

        self._sdk = openai.OpenAI(
            base_url=base_url, api_key=api_key or "unset", timeout=timeout, max_retries=0
        )

    @classmethod
    def from_settings(
        cls,
        *,
        model: str | None = None,
        endpoint: str | None = None,
        offline: bool = False,
        **overrides: Any,
    ) -> LLMClient:
        """A client for the named ``endpoint`` (default: ``OPENAI_BASE_URL`` /
        ``OPENAI_API_KEY`` / ``PLANNER_MODEL``; ``tools.llm.endpoints``).

        ``LLM_TIMEOUT`` and ``LLM_MAX_RETRIES`` settings are read when present.
        Raises ``LLMEndpointUnknown`` for a name that is not configured, and
        ``LLMNotConfigured`` for the public default endpoint without a key: no client,
        so nothing is sent (``tools.llm.endpoints.llm_endpoint_ready``). ``offline``: a
        client whose calls are all answered without sending (a replay's taps), which
        needs no configured endpoint.
        """
        chosen = llm_endpoint(endpoint) if offline else llm_endpoint_ready(endpoint)
        client = cls(
            chosen.base_url,
            chosen.api_key,
            model or chosen.model,
            float(getattr(settings, "LLM_TIMEOUT", DEFAULT_TIMEOUT)),
            int(getattr(settings, "LLM_MAX_RETRIES", DEFAULT_MAX_RETRIES)),
            **{"prices": chosen.prices, **overrides},
        )
        client.endpoint = chosen.name
        return client

    def close(self) -> None:
        self._sdk.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        deadline: float | None = None,
        tap: ChatTap | None = None,
    ) -> LLMReply:
        """One completion, retried on retryable failures. Raises a typed ``LLMError``.

        ``deadline`` (a ``time.monotonic()`` instant) bounds the whole call, retries
        included: each try gets at most the time left, and no retry starts past it.
        ``tap`` (``ChatTap``) sees the call: a recorder sends it and keeps a copy, a
        replayer answers it from a recording without reaching the endpoint.
        """
        request = _request(
            model or self.model,
            messages,
            tools=tools,
            response_format=response_format,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
        )
        if tap is not None:
            return tap.chat(request, lambda: self._send(request, deadline))
        return self._send(request, deadline)

    def _send(self, request: dict[str, Any], deadline: float | None) -> LLMReply:
        import openai  # already loaded by __init__; a dictionary look-up here

        attempts: list[dict[str, Any]] = []
        for attempt in range(1, self.max_retries + 2):
            started = time.perf_counter()
            entry: dict[str, Any] = {"attempt": attempt}
            try:
                completion = self._sdk.chat.completions.create(
                    **request, timeout=self._try_timeout(deadline)
                )
            except openai.OpenAIError as exc:
                error = _typed_error(exc)
                entry.update(_took(started), status=error.status, error=error.code)
                attempts.append(entry)
                delay = self._delay(attempt, error) if error.retryable else 0.0
                if not error.retryable or attempt > self.max_retries or _past(deadline, delay):
                    error.attempts = attempts
                    raise error from exc
                entry["retry_in"] = round(delay, 3)
                logger.info("LLM call failed (%s), retry in %ss", error.code, entry["retry_in"])
                self.sleep(entry["retry_in"])
                continue
            entry.update(_took(started), status=200)
            attempts.append(entry)
            return _reply(completion, request["model"], attempts)
        raise AssertionError("unreachable")  # pragma: no cover

    def _try_timeout(self, deadline: float | None) -> float:
        if deadline is None:
            return self.timeout
        left = deadline - time.monotonic()
        if left <= 0:
            raise LLMTimeout("the step's time limit ran out before its next model call")
        return min(self.timeout, left)

    def _delay(self, attempt: int, error: LLMError) -> float:
        delay = self.backoff.delay(attempt, self.rand.random())
        if isinstance(error, LLMRateLimited) and error.retry_after is not None:
            delay = min(max(error.retry_after, 0.0), MAX_RETRY_AFTER)
        return delay


def _request(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    response_format: Mapping[str, Any] | None,
    temperature: float | None,
    max_tokens: int | None,
    seed: int | None,
) -> dict[str, Any]:
    """The request body: only the options that were given."""
    request: dict[str, Any] = {"model": model, "messages": list(messages)}
    if tools:
        request["tools"] = list(tools)
    if response_format:
        request["response_format"] = dict(response_format)
    optional = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
    request.update({key: value for key, value in optional.items() if value is not None})
    return request


def _past(deadline: float | None, delay: float) -> bool:
    """Whether a retry after ``delay`` seconds would start past ``deadline``."""
    return deadline is not None and time.monotonic() + delay >= deadline


def _took(started: float) -> dict[str, float]:
    return {"duration_ms": round((time.perf_counter() - started) * 1000, 2)}


def _reply(completion: Any, model: str, attempts: list[dict]) -> LLMReply:
    if not hasattr(completion, "choices"):
        raise LLMReplyInvalid(
            f"the endpoint answered something that is not a completion: "
            f"{str(completion)[:_MESSAGE_CHARS]!r}"
        )
    if not completion.choices:
        raise LLMReplyInvalid("the reply has no choices")
    choice = completion.choices[0]
    message = choice.message
    calls = tuple(
        ToolCall(call.id or f"call_{i}", call.function.name, call.function.arguments or "")
        for i, call in enumerate(message.tool_calls or ())
        if getattr(call, "function", None) is not None
    )
    usage = completion.usage
    return LLMReply(
        content=message.content,
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            total_tokens=getattr(usage, "total_tokens", 0) or 0,
            reported=usage is not None,
        ),
        raw=completion.model_dump(mode="json", exclude_none=True),
        model=completion.model or model,
        finish_reason=choice.finish_reason,
        attempts=tuple(attempts),
    )


def _typed_error(exc: openai.OpenAIError) -> LLMError:
    """The SDK's exception as one of ours, with the server's own message."""
    import openai  # loaded by the client that raised ``exc``

    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeout("the LLM endpoint did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return LLMUnavailable(f"the LLM endpoint is unreachable: {exc}")
    if isinstance(exc, openai.APIResponseValidationError):
        return LLMReplyInvalid(f"the LLM endpoint's reply is malformed: {exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        text = f"the LLM endpoint answered HTTP {status}: {_server_message(exc)}"
        if status == 429:
            return LLMRateLimited(text, retry_after=_retry_after(exc.response.headers))
        if status in (401, 403):
            return LLMAuthFailed(text, status=status)
        if status >= 500 or status == 408:
            return LLMUnavailable(text, status=status)
        return LLMError(text, status=status)
    return LLMError(f"the LLM call failed: {type(exc).__name__}: {exc}")


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:_MESSAGE_CHARS]
    return str(exc.message)[:_MESSAGE_CHARS]


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to the backoff
