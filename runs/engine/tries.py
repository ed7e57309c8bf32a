"""A step's tries: one try, as recorded, and the one rule that decides the next try.

Every driver makes its tries differently (the in-process driver in a loop on a pool
thread, a Celery step task once per message, a `foreach` item in a loop of its own, a
parked `workflow` step when its child run ends), but each asks ``next_try`` what to
do after a failed try, and records the try as an ``AttemptRecord``:

- a fatal error (``retryable`` is False on its class), or a try that used up the
  policy's ``max_attempts``, gives up (``GiveUp``);
- otherwise the next try waits the policy's backoff, unless the failure said how long
  to wait: a 429's ``Retry-After`` (``ToolRateLimited.retry_after``) or an open
  circuit breaker's cool-down (``CircuitOpen.retry_after``), or the tool's rate limit
  (``RateLimitWait.retry_after``: the wait for its slot was too long to sleep in place).
  Such a wait is capped by the policy's ``max_delay`` and never shorter than the
  backoff. ``Retry`` says the wait and its reason (``WaitReason``), stored in the
  attempt log as ``retry_in`` and ``wait_reason``.

A new kind of told wait is one more row of ``_TOLD_WAITS`` and one more ``WaitReason``:
no driver changes. A try held back by a rate limit sent nothing and is the limit's
doing, not the API's: it never gives up, waits exactly its slot's wait (neither the
backoff nor ``max_delay`` applies: a shorter wait would only be held back again) and
does not use up the policy
(``Retry.spends_try`` is False: the drivers add a try to the step's budget).

The rule is pure: no clock, no I/O, the jitter's random number drawn from the caller's
``rand`` only when a retry is decided, so tests pin it with ``ctx.rand`` and a recorded
``ctx.sleep``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from runs.state import StepStatus
from tools.errors import CircuitOpen, FlowpilotError, RateLimitWait, ToolError, ToolRateLimited
from tools.logcontext import log_fields

if TYPE_CHECKING:
    from runs.engine.context import RunContext
    from tools.policy import RetryPolicy  # pydantic: not for a reader of the labels below

__all__ = [
    "AttemptRecord",
    "Decision",
    "GiveUp",
    "Retry",
    "Tried",
    "WaitReason",
    "error_record",
    "next_try",
    "sent_label",
    "sent_record",
    "try_once",
    "try_until_done",
    "wait_reason_label",
]

T = TypeVar("T")


class WaitReason(StrEnum):
    """Why the next try waits as long as it does."""

    BACKOFF = "backoff"  # the policy's exponential backoff (with jitter)
    RETRY_AFTER = "retry_after"  # the server's ``Retry-After`` (HTTP 429)
    BREAKER = "breaker"  # the host's circuit breaker is open until its cool-down ends
    RATE_LIMIT = "rate_limit"  # the tool's rate limit (or the API's pause): its next slot

    @property
    def label(self) -> str:
        """How the run page and ``showrun`` say it."""
        return _LABELS[self]


_LABELS = {
    WaitReason.BACKOFF: "backoff",
    WaitReason.RETRY_AFTER: "the server's Retry-After",
    WaitReason.BREAKER: "circuit breaker cool-down",
    WaitReason.RATE_LIMIT: "rate limit",
}


def wait_reason_label(stored: Any) -> str | None:
    """The label of a stored ``wait_reason``; None for an entry without one (logged
    before reasons were) or with an unknown one."""
    try:
        return WaitReason(stored).label
    except ValueError:
        return None


SENT_URL_CHARS = 200  # what a label quotes of a (masked) URL


def sent_label(stored: Any) -> str | None:
    """How the run page and ``showrun`` say what a try sent and what came back
    (``GET https://api.example/v1/x → 503``), and the wait for its rate limit's slot it
    slept in place first (``rate_limit_wait``), from a stored entry's ``request``; None
    for a try that sent no HTTP request (or was logged before tries recorded it)."""
    if not isinstance(stored, dict) or not stored.get("method") or not stored.get("url"):
        return None
    url = str(stored["url"])
    if len(url) > SENT_URL_CHARS:
        url = f"{url[:SENT_URL_CHARS]}…"
    status = stored.get("status")
    label = f"{stored['method']} {url}" + (f" → {status}" if status is not None else "")
    paced = stored.get("rate_limit_wait")  # seconds slept in place for the rate limit's slot
    if isinstance(paced, int | float) and not isinstance(paced, bool) and paced > 0:
        label += f", after waiting {paced:.2f} s for its rate limit"
    return label


@dataclass(frozen=True)
class Retry:
    """Try again after ``delay`` seconds (rounded to the millisecond), for ``reason``.
    ``spends_try`` False: the try sent nothing (a rate limit held it back), so it does
    not count against the policy's ``max_attempts``."""

    delay: float
    reason: WaitReason
    spends_try: bool = True


@dataclass(frozen=True)
class GiveUp:
    """No next try: ``exhausted`` when the policy's tries are used up, else the error
    is fatal."""

    exhausted: bool


Decision = Retry | GiveUp

# Errors that tell how long to wait, and the reason recorded when that wait is kept.
_TOLD_WAITS: tuple[tuple[type[FlowpilotError], WaitReason], ...] = (
    (CircuitOpen, WaitReason.BREAKER),
    (ToolRateLimited, WaitReason.RETRY_AFTER),
    (RateLimitWait, WaitReason.RATE_LIMIT),
)
# Told waits whose try sent nothing and does not use up the policy.
_FREE_WAITS: tuple[type[FlowpilotError], ...] = (RateLimitWait,)


def next_try(
    policy: RetryPolicy, attempt: int, error: FlowpilotError, rand: Callable[[], float]
) -> Decision:
    """What follows failed try number ``attempt`` (1-based, counted within ``policy``'s
    budget) that raised ``error``; ``rand`` gives a number in [0, 1) for the jitter."""
    if not error.retryable:
        return GiveUp(exhausted=False)
    free = isinstance(error, _FREE_WAITS)
    if attempt >= policy.max_attempts and not free:
        return GiveUp(exhausted=True)
    told = _told_wait(error)
    if free and told is not None:  # the limit's own wait, exactly: no backoff, no cap
        return Retry(round(told[0], 3), told[1], spends_try=False)
    delay, reason = policy.delay(attempt, rand()), WaitReason.BACKOFF
    if told is not None:
        wait = min(told[0], policy.max_delay)
        if wait > delay:
            delay, reason = wait, told[1]
    return Retry(round(delay, 3), reason, spends_try=not free)


def _told_wait(error: FlowpilotError) -> tuple[float, WaitReason] | None:
    for kind, reason in _TOLD_WAITS:
        if isinstance(error, kind):
            seconds = getattr(error, "retry_after", None)
            return (float(seconds), reason) if seconds else None
    return None


@dataclass(frozen=True)
class AttemptRecord:
    """One try of a step, as the attempt log stores it (``entry``).

    ``error`` is the classified error record (``error_record``: its type,
    message, retryability, scrubbed and capped); ``sent`` what the try sent and what
    came back of it, when it made an HTTP request (``{method, url, status, elapsed_ms,
    headers}``, masked: ``sent_record``); ``wait`` the decided wait before the next try,
    None when there is none. Immutable: a decision makes a new record (``waiting``).
    """

    number: int
    started_at: datetime
    duration_ms: float
    status: str  # StepStatus: succeeded | failed
    worker: str | None = None  # the Celery hostname, or what stood in for it
    error: dict[str, Any] | None = None
    wait: Retry | None = None
    sent: dict[str, Any] | None = None

    def waiting(self, wait: Retry) -> AttemptRecord:
        return replace(self, wait=wait)

    def entry(self) -> dict[str, Any]:
        """The attempt log entry; its keys are what the run page, the API, ``showrun``
        and the failure report read (``retry_in`` in seconds)."""
        entry: dict[str, Any] = {"attempt": self.number, "started_at": self.started_at.isoformat()}
        if self.worker is not None:
            entry["worker"] = self.worker
        entry.update(duration_ms=self.duration_ms, status=str(self.status))
        if self.error is not None:
            entry["error"] = self.error
        if self.sent is not None:
            entry["request"] = self.sent
        if self.wait is not None:
            entry.update(retry_in=self.wait.delay, wait_reason=self.wait.reason.value)
        return entry


MAX_ERROR_MESSAGE_CHARS = 4000  # an error quoting a huge value must not fill the checkpoint


def error_record(ctx: RunContext, exc: FlowpilotError) -> dict[str, Any]:
    """The classified record of ``exc`` as a try stores it: scrubbed, then capped (an
    untyped ``error`` is an ``internal_error``)."""
    record = exc.as_dict()
    if record["type"] == "error":
        record["type"] = "internal_error"
    return capped_error(ctx.redactor.scrub(record))


def capped_error(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its message cut to ``MAX_ERROR_MESSAGE_CHARS``.

    Cut after scrubbing, so a cut never leaves part of a secret unmasked.
    """
    message = record.get("message")
    if isinstance(message, str) and len(message) > MAX_ERROR_MESSAGE_CHARS:
        cut = f"{message[:MAX_ERROR_MESSAGE_CHARS]}… [truncated: {len(message)} characters in all]"
        record = {**record, "message": cut}
    return record


@dataclass(frozen=True)
class Tried(Generic[T]):
    """One try: its record, and what it returned (``value``) or raised (``error``)."""

    record: AttemptRecord
    value: T | None = None
    error: FlowpilotError | None = None


def try_once(
    ctx: RunContext,
    number: int,
    call: Callable[[], T],
    *,
    worker: str | None = None,
    request_of: Callable[[T], dict[str, Any] | None] | None = None,
    step_id: str = "",
    item: int | None = None,
) -> Tried[T]:
    """Make try number ``number`` (``call``) and record it; a ``FlowpilotError`` it
    raises is returned, classified (``error_record``), not raised.

    What the try sent is recorded (``AttemptRecord.sent``): a failed call's request
    from its ``ToolError``, a successful one's as ``request_of`` reads it of the value.
    With tracing on, the try is a span (``runs.engine.tracing``) that its record
    describes, current while ``call`` runs, so that its calls are its children. What is
    logged meanwhile carries the run's, the step's and the try's ids
    (``tools.logcontext``).
    """
    trace_id = ctx.run_uuid.replace("-", "")
    fields = {"run_id": ctx.run_id, "trace_id": trace_id, "step_id": step_id or None}
    with log_fields(**fields, attempt=number, item=item):
        if ctx.tracer is None:
            tried = _tried(ctx, number, call, worker, request_of)
        else:
            with ctx.tracer.step_try(step_id, number, item) as span:
                tried = _tried(ctx, number, call, worker, request_of)
                record = tried.record
                ctx.tracer.try_ended(span, str(record.status), record.error, record.worker)
    if ctx.metrics is not None and item is None:  # an item's tries are its tool's calls
        _count(ctx, step_id, tried.record)
    return tried


def _count(ctx: RunContext, step_id: str, record: AttemptRecord) -> None:
    """The try in the process's metrics (``runs.engine.metrics``): a step's tool names
    it, or its kind when it calls none."""
    assert ctx.metrics is not None
    step = ctx.spec.step(step_id) if step_id else None
    tool = (getattr(step, "tool", None) or step.kind) if step is not None else ""
    ctx.metrics.try_done(
        workflow=ctx.spec.name,
        tool=tool,
        status=str(record.status),
        seconds=record.duration_ms / 1000,
        number=record.number,
        error=record.error,
    )


def _tried(
    ctx: RunContext,
    number: int,
    call: Callable[[], T],
    worker: str | None,
    request_of: Callable[[T], dict[str, Any] | None] | None,
) -> Tried[T]:
    started, t0 = ctx.now(), time.perf_counter()
    try:
        value = call()
    except FlowpilotError as exc:
        sent = sent_record(ctx, _request_of(exc))
        record = AttemptRecord(
            number, started, _ms(t0), StepStatus.FAILED, worker, error_record(ctx, exc),
            sent=sent,
        )  # fmt: skip
        return Tried(record, None, exc)
    sent = sent_record(ctx, request_of(value) if request_of is not None else None)
    record = AttemptRecord(number, started, _ms(t0), StepStatus.SUCCEEDED, worker, sent=sent)
    return Tried(record, value)


def _request_of(exc: FlowpilotError) -> dict[str, Any] | None:
    """The request a failed call sent: none when it surely never left (``not_sent``: an
    open breaker refused it, the connection was refused)."""
    if not isinstance(exc, ToolError) or exc.not_sent:
        return None
    return exc.request


def sent_record(ctx: RunContext, request: dict[str, Any] | None) -> dict[str, Any] | None:
    """The request a try sent, as its record stores it: masked by value once more (the
    HTTP client masked the URL and the credential headers already; a header or URL part
    holding a secret value it did not know of is masked here too)."""
    return None if request is None else ctx.redactor.scrub(request)


def try_until_done(
    ctx: RunContext,
    policy: RetryPolicy,
    call: Callable[[], T],
    *,
    first_attempt: int = 1,
    worker: str | None = None,
    request_of: Callable[[T], dict[str, Any] | None] | None = None,
    step_id: str = "",
    item: int | None = None,
) -> tuple[list[AttemptRecord], Tried[T]]:
    """Try ``call`` until it succeeds, fails fatally or runs out of ``policy``'s tries,
    waiting what ``next_try`` decides with ``ctx.sleep`` (injectable) between tries.

    Returns every try's record and the last try. Tries are numbered from
    ``first_attempt`` (a resumed step goes on counting); the policy's budget starts there.
    """
    records: list[AttemptRecord] = []
    number, free = first_attempt, 0  # free: tries a rate limit held back (not counted)
    while True:
        tried = try_once(
            ctx, number, call, worker=worker, request_of=request_of, step_id=step_id, item=item
        )
        if tried.error is not None:
            budget_try = number - first_attempt + 1 - free
            decision = next_try(policy, budget_try, tried.error, ctx.rand.random)
            if isinstance(decision, Retry):
                records.append(tried.record.waiting(decision))
                ctx.sleep(decision.delay)
                number += 1
                free += 0 if decision.spends_try else 1
                continue
        records.append(tried.record)
        return records, tried


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)
