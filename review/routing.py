"""What a version's parallelism and worker routing imply, in sentences for the review page.

A reviewer approves what will run, and where: ``max_parallel`` on the workflow (steps
of a run in flight at once), on a ``foreach`` step (items in flight at once), and the
``queue`` of the workflow or of a tool (which Celery workers run the steps). Read from
the definition and the tool registry before approval; nothing here runs or writes. The
rules these sentences describe are the engine's (``runs.engine.celery.broker.step_queue``,
``runs.engine.local.steps_at_once``), and docs/limits.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from workflows.schema import ForeachStep, WorkflowSpec


class _Tool(Protocol):
    @property
    def queue(self) -> str | None: ...


class _Registry(Protocol):
    def get(self, name: str) -> _Tool | None: ...


@dataclass(frozen=True)
class RoutingNote:
    """One sentence, and what it is about (``parallelism`` or ``queue``)."""

    topic: str
    text: str


def routing_notes(
    spec: WorkflowSpec, registry: _Registry, *, in_process_steps: int
) -> list[RoutingNote]:
    """The sentences, parallelism first; ``in_process_steps`` is the site's
    ``FLOWPILOT_MAX_PARALLEL_STEPS`` (the in-process driver's ceiling)."""
    return [*_parallelism(spec, in_process_steps), *_queues(spec, registry)]


def _parallelism(spec: WorkflowSpec, site: int) -> list[RoutingNote]:
    notes = []
    if spec.max_parallel is not None:
        in_process = min(spec.max_parallel, site)
        notes.append(
            RoutingNote(
                "parallelism",
                f"At most {_steps(spec.max_parallel)} of a run at once (max_parallel "
                f"{spec.max_parallel}): on the Celery workers the others wait as pending; "
                f"in process, {in_process} at once (the lower of it and "
                f"FLOWPILOT_MAX_PARALLEL_STEPS, {site}).",
            )
        )
    for step in spec.steps:
        if isinstance(step, ForeachStep):
            bound = step.items_in_flight
            if step.max_parallel is not None:
                why = f"max_parallel {bound}"
            elif "concurrency" in step.model_fields_set:
                why = f"concurrency {bound}"
            else:
                why = "the default; max_parallel sets it"
            notes.append(
                RoutingNote(
                    "parallelism",
                    f"Step `{step.id}` calls `{step.tool}` once per item, {bound} "
                    f"item{'s' if bound != 1 else ''} at a time ({why}): 100 items take at "
                    f"least {math.ceil(100 / bound)} times as long as one call.",
                )
            )
    return notes


def _queues(spec: WorkflowSpec, registry: _Registry) -> list[RoutingNote]:
    by_queue: dict[str, list[str]] = {}
    for step in spec.steps:
        for name in step.direct_tools():
            tool = registry.get(name)
            queue = getattr(tool, "queue", None)
            if queue:
                by_queue.setdefault(queue, []).append(f"`{step.id}` ({name})")
                break
    notes = [
        RoutingNote(
            "queue",
            f"Steps {', '.join(steps)} run on queue `{queue}`, set by their tool: only a "
            f"worker started with `-Q {queue}` (e.g. `celery -A config worker -Q {queue}`) "
            "runs them.",
        )
        for queue, steps in sorted(by_queue.items())
    ]
    if spec.queue:
        rest = "its other steps and" if by_queue else "its steps and"
        notes.append(
            RoutingNote(
                "queue",
                f"The workflow names queue `{spec.queue}`: {rest} its run-level tasks run "
                f"there, on workers started with `-Q {spec.queue}`.",
            )
        )
    return notes


def _steps(count: int) -> str:
    return f"{count} step{'s' if count != 1 else ''}"
