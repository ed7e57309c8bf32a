"""What ``showrun`` and ``listruns`` print: a run's steps, and runs one per line.

Text only, from ``runs.run_view`` and ``runs.selectors``; the values are the stored
ones (secrets masked when they were recorded).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from runs.engine.tries import sent_label, wait_reason_label
from runs.models import Run
from runs.summaries import as_number
from tools.errors import FlowpilotError

if TYPE_CHECKING:  # the run page's view: read by `showrun` only, not at `listruns`'s start
    from runs.run_view import RunView, StepView

ERROR_CHARS = 600  # of an error message on a showrun line


class SinceInvalid(FlowpilotError):
    code = "since_invalid"


_RELATIVE = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, *, now: datetime) -> datetime:
    """``--since``: a duration back from now (``30m``, ``6h``, ``2d``, ``1w``), a date
    (``2026-11-24``, midnight UTC) or an ISO 8601 date and time (UTC unless it says)."""
    value = text.strip()
    match = _RELATIVE.match(value)
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        moment = parse_datetime(value)
        day = None if moment else parse_date(value)
    except ValueError:
        moment = day = None
    if moment is None and day is not None:
        moment = datetime(day.year, day.month, day.day)
    if moment is None:
        raise SinceInvalid(
            f"--since {text!r} is not a duration (30m, 6h, 2d, 1w), a date (2026-11-24) "
            "or an ISO 8601 date and time (2026-11-24T09:00:00+01:00)"
        )
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


def _when(value: datetime | None) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _took(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _cut(text: str, limit: int = ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _attempt_lines(entries: Iterable[Any]) -> list[str]:
    lines = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        line = f"      try {entry.get('attempt', '?')}: {entry.get('status', '?')}"
        line += f" in {as_number(entry.get('duration_ms')):.0f} ms"
        error = entry.get("error")
        if isinstance(error, dict):
            line += f" ({error.get('type', 'error')})"
        if sent := sent_label(entry.get("request")):
            line += f", sent {sent}"
        if entry.get("retry_in") is not None:
            line += f", retry in {entry['retry_in']} s"
            if reason := wait_reason_label(entry.get("wait_reason")):
                line += f" ({reason})"
        if entry.get("worker"):
            line += f" on {entry['worker']}"
        lines.append(line)
    return lines


def _step_lines(step: StepView) -> list[str]:
    tool = f" {step.tool}" if step.tool else ""
    tries = f"{step.attempts} tr{'y' if step.attempts == 1 else 'ies'}"
    timing = f"started {_when(step.started_at)}  took {_took(step.duration_ms)}"
    if step.status == "skipped" and step.attempts == 0:  # never tried: say why instead
        tries, timing = "never ran", step.skip_reason
    lines = [f"  {step.status:<10} {step.step_id:<24} {step.kind}{tool}  {tries}  {timing}"]
    result = step.result
    if result is not None and (step.attempts > 1 or step.error):
        lines += _attempt_lines(result.attempt_log or [])
    if step.error:
        lines.append(f"      error from {step.error_origin}")
        message = step.error.get("message")
        if message:
            lines.append(f"      {_cut(str(message))}")
    if result is not None and result.output is not None:
        lines.append(f"      output: {step.output_summary} ({step.output_size_text})")
    if step.truncated_note:
        lines.append(f"      [truncated] {step.truncated_note}")
    if step.replaced_note:
        lines.append(f"      [invalid text] {step.replaced_note}")
    if step.cost is not None:
        lines.append(f"      model cost: {step.cost.text()}")
    return lines


def restart_origin(run: Run) -> str | None:
    """How a restarted run says what it restarts, naming both versions when they differ
    (``restarts run 12 of name v1 from step `x`, onto v2``); None for a run that is not a
    restart (or whose original was purged)."""
    original = run.restarted_from
    if original is None:
        return None
    where = f"step `{run.restarted_from_step}`" if run.restarted_from_step else "the trigger"
    text = f"restarts run {original.pk} of {original.workflow} from {where}"
    if original.workflow_id != run.workflow_id:
        text += f", onto v{run.workflow.version}"
    return text


def run_lines(view: RunView) -> list[str]:
    """``showrun``: the run, then each step in definition order (with what its model calls
    cost, when it made any)."""
    run = view.run
    took = f", took {_took(run.duration.total_seconds() * 1000)}" if run.duration else ""
    if run.duration and run.resume_duration is not None:
        resumed = _took(run.resume_duration.total_seconds() * 1000)
        took += f" in all ({resumed} since it was resumed)"
    by = f", by {run.started_by.get_username()}" if run.started_by is not None else ""
    counts = ", ".join(f"{n} {status}" for status, n in view.counts.items())
    lines = [
        f"run {run.pk} of {run.workflow.name} v{run.workflow.version}: {run.status}"
        f" (trigger {run.trigger}{by}){took}",
        f"created {_when(run.created_at)}, started {_when(run.started_at)}, "
        f"finished {_when(run.finished_at)}",
    ]
    if (origin := restart_origin(run)) is not None:
        lines.append(origin)
    if run.error_summary:
        lines.append(f"error: {_cut(run.error_summary, 2000)}")
    if cost := view.cost.text():
        lines.append(f"model cost: {cost}")
    lines.append(f"steps ({len(view.steps)}): {counts or 'none'}")
    for step in view.steps:
        lines += _step_lines(step)
    return lines


def run_list_lines(runs: Iterable[Run]) -> list[str]:
    """``listruns``: a header, then one line per run."""
    lines = [
        f"{'ID':>6} {'WORKFLOW':<28} {'VER':>4} {'STATUS':<10} {'TRIGGER':<10} "
        f"{'CREATED':<19} {'TOOK':>9}"
    ]
    for run in runs:
        duration = run.duration.total_seconds() * 1000 if run.duration else None
        lines.append(
            f"{run.pk:>6} {run.workflow.name:<28} {run.workflow.version:>4} {run.status:<10} "
            f"{run.trigger:<10} {_when(run.created_at):<19} {_took(duration):>9}"
        )
    return lines
