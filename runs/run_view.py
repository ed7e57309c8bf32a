"""What one run looks like to a person: its steps in order, their timeline and outputs.

``run_view`` reads a run and its step results once and gives the run page, its JSON
endpoint and ``showrun`` the same facts: per step its status, tries, timings, the
error and where it came from, a one-line summary of its output with the size, the
bars of the timeline (each try and each wait before a retry, placed as a share of
the run's span), and what its model calls cost (``runs.costs``: the run's total and
each step's, two queries whatever the steps). ``run_record`` is everything stored,
for ``showrun --json``. Nothing here writes; every value shown is the stored one,
already masked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from runs.concurrency import Waiting, waiting_behind
from runs.costs import Cost, run_cost, step_costs
from runs.engine.tracing import trace_url
from runs.engine.tries import sent_label, wait_reason_label
from runs.models import Run, StepResult
from runs.state import RUN_TERMINAL, StepStatus
from runs.summaries import (
    as_number,
    error_origin,
    human_size,
    json_size,
    replaced_text_note,
    truncation_note,
    value_summary,
)
from tools.jsondata import store_unescape
from workflows.models import Step
from workflows.selectors import workflow_graph_data


@dataclass(frozen=True)
class Bar:
    """One bar of a step's timeline row, as a share (0 to 100) of the run's span."""

    kind: str  # "attempt" (a try), "wait" (the backoff before the next try) or "running"
    left: float
    width: float
    label: str
    status: str = ""


@dataclass(frozen=True)
class StepView:
    step_id: str
    kind: str
    tool: str
    status: str
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: float | None
    output_summary: str
    output_size: int
    output_size_text: str
    built_size: int | None  # the output's size as the step built it (StepResult.output_bytes)
    built_size_text: str
    truncated_note: str
    replaced_note: str
    error: dict[str, Any] | None
    error_origin: str
    bars: list[Bar] = field(default_factory=list)
    result: StepResult | None = None  # the stored row, for the full output and inputs
    # Why a skipped step never ran ("" for any other step): its parents' outcomes.
    skip_reason: str = ""
    cost: Cost | None = None  # its model calls (None: it called no model)


@dataclass(frozen=True)
class RunView:
    run: Run
    steps: list[StepView]
    graph: dict[str, Any]
    terminal: bool
    span_ms: float
    counts: dict[str, int]
    # A queued run: what it waits behind (its concurrency limit's slot holders, its place).
    waiting: Waiting | None = None
    # What its model calls cost, every step's (nothing called: all zero).
    cost: Cost = field(default_factory=Cost)
    # Its trace in the tracing system (FLOWPILOT_TRACE_URL; "": none configured).
    trace_url: str = ""


def _ms(delta: timedelta) -> float:
    return round(delta.total_seconds() * 1000, 1)


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


class _Span:
    """The run's time axis: bars are placed as a percentage of origin..end."""

    def __init__(self, origin: datetime, end: datetime) -> None:
        self.origin = origin
        self.ms = max(_ms(end - origin), 1.0)

    def share(self, start: datetime, length_ms: float) -> tuple[float, float]:
        left = min(max(_ms(start - self.origin) / self.ms * 100, 0.0), 100.0)
        width = min(max(length_ms / self.ms * 100, 0.0), 100.0 - left)
        return round(left, 3), round(width, 3)


def _try_bars(entry: dict[str, Any], following: dict[str, Any] | None, span: _Span) -> list[Bar]:
    """The bar of one try, and of the wait after it when a retry was planned."""
    start = _parse(entry.get("started_at"))
    if start is None:
        return []
    number = int(as_number(entry.get("attempt"), 1))
    took = as_number(entry.get("duration_ms"))
    status = str(entry.get("status", ""))
    error = entry.get("error")
    label = f"try {number}: {status} in {took:.0f} ms"
    if isinstance(error, dict):
        label += f" ({error.get('type', 'error')})"
    if sent := sent_label(entry.get("request")):
        label += f": sent {sent}"
    bars = [Bar("attempt", *span.share(start, took), label, status)]
    if entry.get("retry_in") is not None:
        wait_start = start + timedelta(milliseconds=took)
        next_start = _parse(following.get("started_at")) if following else None
        planned = as_number(entry.get("retry_in")) * 1000
        waited = _ms(next_start - wait_start) if next_start else planned
        text = f"waited {waited / 1000:.2f} s before try {number + 1}"
        if reason := wait_reason_label(entry.get("wait_reason")):
            text += f" ({reason})"
        bars.append(Bar("wait", *span.share(wait_start, max(waited, 0.0)), text))
    return bars


def _attempt_bars(result: StepResult, span: _Span) -> list[Bar]:
    """Every try and wait of a step, then a "running" bar up to now while it is in flight."""
    entries = [e for e in (result.attempt_log or []) if isinstance(e, dict)]
    bars: list[Bar] = []
    for index, entry in enumerate(entries):
        following = entries[index + 1] if index + 1 < len(entries) else None
        bars += _try_bars(entry, following, span)
    if result.status in {StepStatus.RUNNING, StepStatus.QUEUED} and result.started_at:
        now = timezone.now()
        last_end = max((_bar_end(b, span) for b in bars), default=result.started_at)
        bars.append(
            Bar("running", *span.share(last_end, _ms(now - last_end)), "running now", "running")
        )
    return bars


def _bar_end(bar: Bar, span: _Span) -> datetime:
    return span.origin + timedelta(milliseconds=(bar.left + bar.width) / 100 * span.ms)


def _axis(run: Run, results: list[StepResult], terminal: bool) -> _Span:
    """From the run's start (or its first step's, or its creation) to its end, or now."""
    starts = [t for t in [run.started_at, *(r.started_at for r in results)] if t]
    origin = min(starts, default=run.created_at)
    ends = [t for t in [run.finished_at, *(r.finished_at for r in results)] if t]
    if not terminal:
        ends.append(timezone.now())
    return _Span(origin, max(ends, default=origin))


_NOT_IN_JSON = frozenset({"bars", "result", "output_size_text", "built_size_text", "cost"})


def _step_view(
    result: StepResult, step: Step | None, span: _Span, cost: Cost | None = None
) -> StepView:
    kind = step.kind if step is not None else ""
    tool = step.tool if step is not None else ""
    size = json_size(result.output) if result.output is not None else 0
    return StepView(
        step_id=result.step_id,
        kind=kind,
        tool=tool,
        status=result.status,
        attempts=result.attempts,
        started_at=result.started_at,
        finished_at=result.finished_at,
        duration_ms=_ms(result.duration) if result.duration is not None else None,
        output_summary=value_summary(result.output),
        output_size=size,
        output_size_text=human_size(size) if result.output is not None else "",
        built_size=result.output_bytes,
        built_size_text=human_size(result.output_bytes) if result.output_bytes is not None else "",
        truncated_note=truncation_note(
            output=result.output, output_truncated=result.output_truncated
        ),
        replaced_note=replaced_text_note(result.attempt_log),
        error=result.error,
        error_origin=error_origin(
            step_id=result.step_id,
            kind=kind,
            tool=tool,
            error=result.error,
            attempts=result.attempts,
        ),
        bars=_attempt_bars(result, span),
        result=result,
        cost=cost,
    )


def skip_reason(step_id: str, edges: list[dict[str, Any]], results: dict[str, StepResult]) -> str:
    """Why ``step_id`` was skipped, from its incoming edges and its parents' results:
    a branch a decision did not take, a parent that failed or was itself skipped."""
    reasons: list[str] = []
    for edge in edges:
        if edge["to"] != step_id:
            continue
        parent = results.get(edge["from"])
        source = edge["from"]
        if parent is None:
            continue
        if parent.status == StepStatus.SKIPPED:
            reasons.append(f"`{source}` was skipped")
        elif parent.status == StepStatus.FAILED:
            reasons.append(f"`{source}` failed")
        elif parent.status == StepStatus.SUCCEEDED and edge.get("when"):
            output = parent.output if isinstance(parent.output, dict) else {}
            chosen = output.get("branch")
            if chosen != edge["when"]:
                took = f"chose `{chosen}`" if chosen is not None else "chose no branch"
                reasons.append(f"decision `{source}` {took}, not `{edge['when']}`")
        elif parent.status not in {StepStatus.SUCCEEDED}:
            reasons.append(f"`{source}` never finished ({parent.status})")
    if not reasons:
        return "the run ended before it could start"
    unique = list(dict.fromkeys(reasons))
    return "; ".join(unique)


def run_view(*, run: Run, costs: bool = True) -> RunView:
    """The run page's facts about ``run``: steps in definition order, with their bars and
    what their model calls cost (``costs=False``: not read, for the status polls)."""
    steps = {s.step_id: s for s in run.workflow.steps.order_by("position")}
    order = {step_id: index for index, step_id in enumerate(steps)}
    results = sorted(
        run.step_results.all(), key=lambda r: (order.get(r.step_id, len(order)), r.step_id)
    )
    terminal = run.status in RUN_TERMINAL
    span = _axis(run, results, terminal)
    by_step = step_costs(run.pk) if costs else {}
    views = [
        _step_view(result, steps.get(result.step_id), span, by_step.get(result.step_id))
        for result in results
    ]
    graph = workflow_graph_data(run.workflow, steps=steps.values())
    by_id = {r.step_id: r for r in results}
    views = [
        replace(v, skip_reason=skip_reason(v.step_id, graph["edges"], by_id))
        if v.status == StepStatus.SKIPPED
        else v
        for v in views
    ]
    status_of = {v.step_id: v for v in views}
    for node in graph["nodes"]:
        view = status_of.get(node["id"])
        if view is not None:
            node["status"] = view.status
    counts: dict[str, int] = {}
    for view in views:
        counts[view.status] = counts.get(view.status, 0) + 1
    waiting = waiting_behind(run)  # None (no query) unless the run is queued
    total = run_cost(run.pk) if costs else Cost()
    ordered = dict(sorted(counts.items()))
    link = trace_url(str(run.uuid))
    return RunView(run, views, graph, terminal, span.ms, ordered, waiting, total, link)


def run_status_data(view: RunView) -> dict[str, Any]:
    """The small JSON the run page polls while the run is active."""
    run = view.run
    return {
        "id": run.pk,
        "status": run.status,
        "terminal": view.terminal,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "error_summary": run.error_summary,
        **({"waiting": waiting_data(view.waiting)} if view.waiting else {}),
        "steps": [
            {
                "step_id": s.step_id,
                "status": s.status,
                "attempts": s.attempts,
                "duration_ms": s.duration_ms,
            }
            for s in view.steps
        ],
    }


def waiting_data(waiting: Waiting) -> dict[str, Any]:
    """What a queued run waits behind, as JSON: the limit, its key, its place, the runs
    holding the slots."""
    return {
        "limit": waiting.description,
        "max_runs": waiting.limit.max_runs,
        "key": waiting.key if waiting.limit.key_input else None,
        "position": waiting.position,
        "queued": waiting.queued_total,
        "holding": [{"id": r.pk, "status": r.status} for r in waiting.holding],
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def run_record(view: RunView) -> dict[str, Any]:
    """Everything stored about the run, with the summaries: ``showrun --json``.

    Stored values are unescaped (``tools.jsondata``), so they read as the run saw them;
    secrets stay masked. ``llm_cost`` is what the model calls cost, in the API's form
    (``Cost.as_dict``), the run's and each step's (null: the step called no model).
    """
    run = view.run
    steps = []
    for s in view.steps:
        result = s.result
        assert result is not None
        entry = {k: v for k, v in asdict(s).items() if k not in _NOT_IN_JSON}
        entry.update(
            started_at=_iso(s.started_at),
            finished_at=_iso(s.finished_at),
            error=store_unescape(s.error),
            inputs=store_unescape(result.inputs),
            inputs_truncated=result.inputs_truncated,
            output=store_unescape(result.output),
            output_truncated=result.output_truncated,
            attempt_log=store_unescape(result.attempt_log),
            worker=result.worker,
            llm_cost=s.cost.as_dict() if s.cost is not None else None,
        )
        steps.append(entry)
    return {
        "id": run.pk,
        "uuid": str(run.uuid),
        "workflow": run.workflow.name,
        "version": run.workflow.version,
        "definition_hash": run.definition_hash,
        "trigger": run.trigger,
        "status": run.status,
        "inputs": store_unescape(run.inputs),
        "outputs": store_unescape(run.outputs),
        "error_summary": run.error_summary,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration_ms": _ms(run.duration) if run.duration is not None else None,
        "started_by": run.started_by.get_username() if run.started_by is not None else None,
        "resumed_at": _iso(run.resumed_at),
        "resume_duration_ms": _ms(run.resume_duration) if run.resume_duration else None,
        **_restart_record(run),
        "step_counts": view.counts,
        **({"waiting": waiting_data(view.waiting)} if view.waiting else {}),
        "llm_cost": view.cost.as_dict(),
        "steps": steps,
    }


def _restart_record(run: Run) -> dict[str, Any]:
    """A restart's link to the run it restarts and that run's version (both versions:
    ``version`` is the new run's own)."""
    original = run.restarted_from
    if original is None:
        return {}
    return {
        "restarted_from": original.pk,
        "restarted_from_step": run.restarted_from_step,
        "restarted_from_version": original.workflow.version,
    }
