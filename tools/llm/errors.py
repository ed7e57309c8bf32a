"""Typed LLM errors; retryability on the class, like the tool errors.

429 and 5xx, timeouts and connection failures are retryable; other 4xx (a bad
request, a wrong key) and replies that are not what was asked for are fatal.
``attempts`` records every HTTP try made before the error was raised.
"""

from __future__ import annotations

from tools.errors import FlowpilotError


class LLMError(FlowpilotError):
    """The LLM call failed. ``status`` is the HTTP status, when there was one."""

    code = "llm_error"

    def __init__(
        self, message: str, *, status: int | None = None, retryable: bool | None = None
    ) -> None:
        super().__init__(message, retryable=retryable)
        self.status = status
        self.attempts: list[dict] = []

    def as_dict(self) -> dict:
        data = super().as_dict()
        if self.status is not None:
            data["status"] = self.status
        return data


class LLMRateLimited(LLMError):
    """HTTP 429. ``retry_after`` is the server's hint in seconds, if it gave one."""

    code = "llm_rate_limited"
    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, status=429)
        self.retry_after = retry_after


class LLMUnavailable(LLMError):
    """5xx, a refused or dropped connection, or a timeout."""

    code = "llm_unavailable"
    retryable = True


class LLMTimeout(LLMUnavailable):
    code = "llm_timeout"


class LLMAuthFailed(LLMError):
    """401/403: the key is missing, wrong or lacks access. Retrying cannot help."""

    code = "llm_auth_failed"


class LLMReplyInvalid(LLMError):
    """The reply is not what was asked for: no choices, not JSON, a bad tool call."""

    code = "llm_reply_invalid"
