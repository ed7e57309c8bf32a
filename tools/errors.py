"""Typed errors. Retryability lives on the class.

Network, timeout, HTTP 429 and 5xx are retryable; other 4xx, schema and
template errors are fatal. ``as_dict()`` is what a StepResult stores.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


class FlowpilotError(Exception):
    """Base error of the whole app, with a stable code."""

    code = "error"
    retryable = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable

    def as_dict(self) -> dict:
        return {"type": self.code, "message": self.message, "retryable": self.retryable}


class ToolError(FlowpilotError):
    """An error of one tool call, with what the retry decision and the step's record
    need besides the message:

    - ``not_sent``: the request surely never left (connection refused, DNS failure, the
      OAuth2 token endpoint failed), so even a non-idempotent call may be tried again;
    - ``not_processed``: the server answered that it did not process the request (a 429,
      a 503 with ``Retry-After``), with the same consequence;
    - ``request``: the call as stored and shown (``{method, url, status, elapsed_ms,
      headers}``, redacted), attached by the HTTP client once it knows it;
    - ``elapsed``: seconds from sending to a transport failure.
    """

    code = "tool_error"
    not_sent: bool = False
    not_processed: bool = False
    request: dict[str, Any] | None = None
    elapsed: float | None = None

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        not_sent: bool = False,
        not_processed: bool = False,
        request: dict[str, Any] | None = None,
        elapsed: float | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable)
        self.not_sent = not_sent
        self.not_processed = not_processed
        self.request = request
        self.elapsed = elapsed

    def attach_request(self, request: dict[str, Any], *, replace: bool = True) -> None:
        """Record the call this error belongs to; with ``replace=False`` only when none
        is known yet (an inner layer that knew the final URL and status wins)."""
        if replace or self.request is None:
            self.request = request

    def mark_not_sent(self) -> None:
        """Say the tool's own request never left (the failure came before it: the
        OAuth2 token could not be had)."""
        self.not_sent = True


class ToolNotFound(ToolError):
    code = "tool_not_found"


class ToolNotAllowed(ToolError):
    code = "tool_not_allowed"


class ToolInputError(ToolError):
    """The arguments do not match the tool's input schema."""

    code = "tool_input_invalid"


class ToolConfigError(ToolError):
    """A tool definition (YAML) is malformed. ``problems`` lists every located problem
    of the file (the message joins them, one a line)."""

    code = "tool_config_invalid"

    def __init__(self, message: str, *, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems: list[str] = list(problems) if problems is not None else [message]

    @classmethod
    def of(cls, problems: list[str]) -> ToolConfigError:
        """One error for all ``problems`` of a file."""
        return cls("\n".join(problems), problems=problems)


class TemplateError(ToolError):
    code = "template_error"


class ToolUnreachable(ToolError):
    code = "tool_unreachable"
    retryable = True


class ToolTimeout(ToolError):
    code = "tool_timeout"
    retryable = True


class ToolResponseTooLarge(ToolError):
    code = "response_too_large"


class ToolResponseInvalid(ToolError):
    code = "response_invalid"


class ToolHTTPError(ToolError):
    """A non-2xx answer. 5xx are retryable; other statuses are fatal."""

    code = "http_error"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        retryable: bool | None = None,
        not_processed: bool = False,
    ) -> None:
        if retryable is None:
            retryable = status >= 500
        super().__init__(message, retryable=retryable, not_processed=not_processed)
        self.status = status

    def as_dict(self) -> dict:
        return {**super().as_dict(), "status": self.status}


class ToolRateLimited(ToolHTTPError):
    """A 429: the server did not process the request (``not_processed``)."""

    code = "rate_limited"

    def __init__(
        self, message: str, *, status: int = 429, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status=status, retryable=True, not_processed=status == 429)
        self.retry_after = retry_after


class ToolAuthFailed(ToolHTTPError):
    code = "auth_failed"

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message, status=status, retryable=False)


class ToolCallFailed(ToolError):
    """A built-in or MCP tool reported an error result."""

    code = "tool_call_failed"


class ToolOutcomeUnknown(ToolError):
    """A non-idempotent call failed after the request may have reached the server (a
    timeout, a dropped connection, a 5xx): it is not repeated, the step stops for
    review."""

    code = "outcome_unknown"
    retryable = False


class RateLimitWait(ToolError):
    """A call held back by a rate limit (``rate_limit:``) or by the API's own pacing, for
    longer than a worker waits in place: nothing was sent.

    Retryable, told: the step's next try waits ``retry_after`` seconds (re-queued with
    that countdown on Celery, so no worker slot is held), and the try does not use up
    the step's retry policy (``runs.engine.tries.next_try``).
    """

    code = "rate_limit_wait"
    retryable = True

    def __init__(self, *, key: str, retry_after: float) -> None:
        super().__init__(
            f"the rate limit of {key} allows the next call in {retry_after:.1f} s; "
            "nothing was sent; the step waits for it",
            not_sent=True,
        )
        self.key = key
        self.retry_after = retry_after

    def as_dict(self) -> dict:
        return {**super().as_dict(), "key": self.key, "retry_after": round(self.retry_after, 3)}


class CircuitOpen(ToolError):
    """A call refused without sending anything: the host's circuit breaker is open.

    Retryable, but the step's retry waits at least until ``retry_at`` (like a 429's
    ``Retry-After``, capped by the policy's ``max_delay``), so a refused step never
    spins through its attempts; once the step is out of attempts it fails.
    """

    code = "circuit_open"
    retryable = True

    def __init__(self, *, host: str, retry_at: datetime | None, now: datetime) -> None:
        when = retry_at.isoformat() if retry_at is not None else "after the trial call"
        super().__init__(
            f"the circuit breaker for {host} is open after repeated failures; "
            f"nothing was sent; it will be tried again at {when}",
            not_sent=True,  # so a non-idempotent call refused by the breaker is retried too
        )
        self.host = host
        self.retry_at = retry_at
        self.retry_after = (
            max(0.0, (retry_at - now).total_seconds()) if retry_at is not None else None
        )

    def as_dict(self) -> dict:
        when = self.retry_at.isoformat() if self.retry_at is not None else None
        return {**super().as_dict(), "host": self.host, "retry_at": when}
