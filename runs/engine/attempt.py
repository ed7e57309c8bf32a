"""Executing one step: one try, recorded, and the retry loop around it.

``execute_attempt`` is the single entry point every driver uses (the in-process
thread pool, Celery tasks for scale-out): it dispatches on the step kind and either
returns an ``Attempt`` or raises a typed ``FlowpilotError``. Errors carry their
retryability on the class (network, timeout, 429 and 5xx errors are retried; other
errors are fatal); anything else a tool raises is an ``internal_error`` (fatal) whose
message, never its stack locals, is recorded.

How a try is recorded and when the next one comes is ``runs.engine.tries``: the
in-process driver (``run_with_retries`` here) and every `foreach` item loop with its
``try_until_done``. A Celery step task makes one try per message and asks ``next_try`` when it
settles (``runs.engine.celery.settle``), so no worker sleeps.

Steps never share data: the arguments a step receives are a deep copy
(``tools.jsondata.json_snapshot``), and what it returns is copied once, and checked to
be JSON, before anything else reads it. A step that mutates what it was given, or
keeps and later mutates what it returned, changes nothing another step, the run
outputs or the checkpoint sees. A result that is not JSON (a ``set``, bytes, NaN) is
an ``output_invalid`` step failure naming the type, never an engine crash.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from runs.engine.context import RunContext
from runs.engine.kinds import KINDS
from runs.engine.kinds.base import Attempt, StepFailedWithProgress
from runs.engine.tries import AttemptRecord, Tried, try_until_done
from runs.state import StepStatus
from tools.errors import FlowpilotError
from tools.jsondata import NotJSON, json_snapshot
from tools.policy import RetryPolicy
from tools.registry import ToolRegistry
from tools.sizes import OutputTooLarge, check_size
from workflows.schema import AnyStep

__all__ = [
    "Attempt",
    "StepOutcome",
    "attempt_request",
    "effective_retry",
    "execute_attempt",
    "outcome_of",
    "run_with_retries",
    "step_idempotent",
]


@dataclass(frozen=True)
class StepOutcome:
    """How a step ended on its driver: its status, output or error, and its tries."""

    status: str  # succeeded | failed | waiting (an approval step)
    output: Any = None
    error: dict | None = None
    truncated: bool = False
    branch: str | None = None
    attempts: tuple[AttemptRecord, ...] = ()
    size: int | None = None  # the output's size as JSON (``tools.sizes``), when it has one


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

    The step gets its own copy of ``args``; its output is measured against the step's
    cap (``OutputTooLarge`` before anything copies it), then copied (and checked) once.
    """
    try:
        attempt = KINDS[step.kind].execute(ctx, step, _own_copy(args))
    except OutputTooLarge as exc:
        named = exc.for_step(step.id)
        if named is exc:
            raise
        raise named from exc
    except FlowpilotError:
        raise
    except Exception as exc:
        raise FlowpilotError(f"{type(exc).__name__}: {exc}") from exc
    cap = ctx.limits.step_output_cap(step.max_output_bytes)
    try:
        size = check_size(attempt.output, cap=cap, step=step.id, what="output")
        return replace(attempt, output=json_snapshot(attempt.output, "output"), size=size)
    except (NotJSON, ValueError) as exc:
        raise OutputInvalid(f"step `{step.id}` returned {exc}") from exc


def _own_copy(args: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of the step's arguments: what a step changes in them, no one else sees."""
    try:
        copied: dict[str, Any] = json_snapshot(args, "arguments")
    except NotJSON as exc:  # every source (definitions, inputs, outputs) is JSON already
        raise OutputInvalid(f"the step's {exc}") from exc
    return copied


def run_with_retries(
    ctx: RunContext, step: AnyStep, args: dict[str, Any], *, first_attempt: int = 1
) -> StepOutcome:
    """The in-process driver's try of ``step``: ``try_until_done`` under its policy."""
    policy = effective_retry(ctx, step)
    records, last = try_until_done(
        ctx, policy, lambda: execute_attempt(ctx, step, args), first_attempt=first_attempt,
        request_of=attempt_request, step_id=step.id,
    )  # fmt: skip
    return outcome_of(last, tuple(records))


def attempt_request(attempt: Attempt) -> dict[str, Any] | None:
    """What a successful try sent (a tool step's HTTP request), for its record."""
    return attempt.request


def outcome_of(last: Tried[Attempt], records: tuple[AttemptRecord, ...]) -> StepOutcome:
    """The step's outcome when ``last`` was its last try (``records``: all its tries)."""
    if last.value is None:  # a failure that kept part of its work keeps it as its output
        progress = last.error.progress if isinstance(last.error, StepFailedWithProgress) else None
        return StepOutcome(
            StepStatus.FAILED, output=progress, error=last.record.error, attempts=records
        )
    if last.value.waiting:
        return StepOutcome(StepStatus.WAITING, attempts=records)
    return StepOutcome(
        StepStatus.SUCCEEDED,
        output=last.value.output,
        truncated=last.value.truncated,
        branch=last.value.branch,
        attempts=records,
        size=last.value.size,
    )
