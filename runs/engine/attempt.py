"""Executing one step: one attempt, and the in-process retry loop around it.

``execute_attempt`` is the single entry point every driver uses (the in-process
thread pool here, Celery tasks for scale-out): it dispatches on the step kind and
either returns an ``Attempt`` or raises a typed ``FlowpilotError``. Errors carry
their retryability on the class (network, timeout, 429 and 5xx errors are retried;
other errors are fatal); anything else a tool raises is an
``internal_error`` (fatal) whose message, never its stack locals, is recorded.

Steps never share data: the arguments a step receives are a deep copy
(``tools.jsondata.json_snapshot``), and what it returns is copied once, and checked to
be JSON, before anything else reads it. A step that mutates what it was given, or
keeps and later mutates what it returned, changes nothing another step, the run
outputs or the checkpoint sees. A result that is not JSON (a ``set``, bytes, NaN) is
an ``output_invalid`` step failure naming the type, never an engine crash.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from runs.engine.context import RunContext
from runs.engine.kinds import KINDS
from runs.engine.kinds.base import Attempt
from runs.state import StepStatus
from tools.errors import CircuitOpen, FlowpilotError, ToolRateLimited
from tools.jsondata import NotJSON, json_snapshot
from tools.policy import RetryPolicy
from tools.registry import ToolRegistry
from workflows.schema import AnyStep

__all__ = [
    "Attempt",
    "StepOutcome",
    "effective_retry",
    "execute_attempt",
    "run_with_retries",
    "step_idempotent",
]


@dataclass
class StepOutcome:
    status: str  # succeeded | failed
    output: Any = None
    error: dict | None = None
    truncated: bool = False
    branch: str | None = None
    attempts: list[dict] = field(default_factory=list)


def effective_retry(ctx: RunContext, step: AnyStep) -> RetryPolicy:
    """The step's own policy, else its tool's, else a single try.

    A foreach step retries per item (inside the step), so the step itself is tried once.
    """
    if step.retries_per_item:
        return RetryPolicy()
    if step.retry is not None:
        return step.retry
    for tool_name in step.direct_tools():
        spec = ctx.registry.get(tool_name)
        if spec is not None and spec.retry is not None:
            return spec.retry
    return RetryPolicy()


def step_idempotent(registry: ToolRegistry, step: AnyStep) -> bool:
    """Whether repeating the step's call is safe: its tool says so (a step calling no
    tool, or an unknown one, repeats nothing)."""
    specs = [registry.get(tool) for tool in step.direct_tools()]
    return all(spec.idempotent for spec in specs if spec is not None)


class OutputInvalid(FlowpilotError):
    """A step returned something that is not JSON data (fatal: trying again would too)."""

    code = "output_invalid"


def execute_attempt(ctx: RunContext, step: AnyStep, args: dict[str, Any]) -> Attempt:
    """One try of ``step`` with resolved ``args``. Raises FlowpilotError on failure.

    The step gets its own copy of ``args``; its output is copied (and checked) once.
    """
    try:
        attempt = KINDS[step.kind].execute(ctx, step, _own_copy(args))
    except FlowpilotError:
        raise
    except Exception as exc:
        raise FlowpilotError(f"{type(exc).__name__}: {exc}") from exc
    try:
        return replace(attempt, output=json_snapshot(attempt.output, "output"))
    except NotJSON as exc:
        raise OutputInvalid(f"step `{step.id}` returned {exc}") from exc


def _own_copy(args: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of the step's arguments: what a step changes in them, no one else sees."""
    try:
        copied: dict[str, Any] = json_snapshot(args, "arguments")
    except NotJSON as exc:  # every source (definitions, inputs, outputs) is JSON already
        raise OutputInvalid(f"the step's {exc}") from exc
    return copied


MAX_ERROR_MESSAGE_CHARS = 4000  # an error quoting a huge value must not fill the checkpoint


def error_record(ctx: RunContext, exc: FlowpilotError) -> dict:
    record = exc.as_dict()
    if record["type"] == "error":
        record["type"] = "internal_error"
    return capped_error(ctx.redactor.scrub(record))


def capped_error(record: dict) -> dict:
    """``record`` with its message cut to ``MAX_ERROR_MESSAGE_CHARS``.

    Cut after scrubbing, so a cut never leaves part of a secret unmasked.
    """
    message = record.get("message")
    if isinstance(message, str) and len(message) > MAX_ERROR_MESSAGE_CHARS:
        cut = f"{message[:MAX_ERROR_MESSAGE_CHARS]}… [truncated: {len(message)} characters in all]"
        record = {**record, "message": cut}
    return record


def retry_delay(ctx: RunContext, policy: RetryPolicy, attempt: int, exc: FlowpilotError) -> float:
    delay = policy.delay(attempt, ctx.rand.random())
    if isinstance(exc, (ToolRateLimited, CircuitOpen)) and exc.retry_after:
        delay = max(delay, min(exc.retry_after, policy.max_delay))
    return delay


def run_with_retries(
    ctx: RunContext,
    step: AnyStep,
    args: dict[str, Any],
    *,
    first_attempt: int = 1,
    on_attempt: Callable[[dict], None] | None = None,
) -> StepOutcome:
    """Try ``step`` until it succeeds, fails fatally or runs out of attempts.

    Waits between tries with ``ctx.sleep`` (injectable). Every try is logged.
    """
    policy = effective_retry(ctx, step)
    log: list[dict] = []
    attempt = first_attempt
    last_allowed = first_attempt - 1 + policy.max_attempts
    while True:
        started = ctx.now()
        t0 = time.perf_counter()
        entry: dict[str, Any] = {"attempt": attempt, "started_at": started.isoformat()}
        try:
            result = execute_attempt(ctx, step, args)
        except FlowpilotError as exc:
            entry.update(_timing(t0), status=StepStatus.FAILED, error=error_record(ctx, exc))
            if exc.retryable and attempt < last_allowed:
                entry["retry_in"] = round(
                    retry_delay(ctx, policy, attempt - first_attempt + 1, exc), 3
                )
                log.append(entry)
                if on_attempt:
                    on_attempt(entry)
                ctx.sleep(entry["retry_in"])
                attempt += 1
                continue
            log.append(entry)
            return StepOutcome(StepStatus.FAILED, error=entry["error"], attempts=log)
        entry.update(_timing(t0), status=StepStatus.SUCCEEDED)
        log.append(entry)
        return StepOutcome(
            StepStatus.SUCCEEDED,
            output=result.output,
            truncated=result.truncated,
            branch=result.branch,
            attempts=log,
        )


def _timing(t0: float) -> dict[str, Any]:
    return {"duration_ms": round((time.perf_counter() - t0) * 1000, 2)}
