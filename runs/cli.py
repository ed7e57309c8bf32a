"""Progress output of the run commands: one line per step on stdout."""

from __future__ import annotations

import logging
import sys
from datetime import datetime

from django.conf import settings
from django.core.management.base import CommandError, CommandParser, OutputWrapper

from runs.models import ApprovalStatus, Run, StepResult
from runs.services import run_enqueue, run_execute
from runs.state import RUN_TERMINAL, RunStatus, StepStatus
from tools.errors import FlowpilotError
from tools.jsondata import store_unescape
from tools.logformat import formatter_for
from workflows.cli import dumps

_MARKS = {
    "started": "..",
    StepStatus.SUCCEEDED: "ok",
    StepStatus.FAILED: "FAILED",
    StepStatus.SKIPPED: "skipped",
    StepStatus.WAITING: "waiting",
}


class ProgressPrinter:
    """An engine observer printing a line per finished (or skipped/failed) step."""

    def __init__(self, out: OutputWrapper, *, show_started: bool = False) -> None:
        self.out = out
        self.show_started = show_started

    def __call__(self, event: str, result: StepResult) -> None:
        if event == "started" and not self.show_started:
            return
        line = f"  {_MARKS.get(event, event):<8} {result.step_id:<24}"
        if event in {StepStatus.SUCCEEDED, StepStatus.FAILED} and result.duration is not None:
            line += f" {result.duration.total_seconds() * 1000:8.0f} ms"
            if result.attempts > 1:
                line += f"  ({result.attempts} attempts)"
        if event == StepStatus.FAILED and result.error:
            line += f"  {result.error.get('type')}: {result.error.get('message', '')[:300]}"
        if result.output_truncated:
            line += "  [output truncated]"
        self.out.write(line)


def summary_line(run: Run, *, resumed_at: datetime | None = None) -> str:
    """``run 6 failed in 3.02 s``; a resume's own time first, then the run's total since
    it first started (``resumed_at``: when this resume began)."""
    if run.duration is None:
        return f"run {run.pk} {run.status}"
    total = run.duration.total_seconds()
    if resumed_at is None or run.finished_at is None:
        return f"run {run.pk} {run.status} in {total:.2f} s"
    own = max((run.finished_at - resumed_at).total_seconds(), 0.0)
    return (
        f"run {run.pk} {run.status} in {own:.2f} s (this resume); "
        f"{total:.2f} s since the run first started"
    )


def execute_and_report(
    out: OutputWrapper, run: Run, *, enqueue: bool, resumed_at: datetime | None = None
) -> None:
    """Run in this process (or hand to the Celery workers) and print how it went."""
    if run.status == RunStatus.QUEUED:  # its workflow's concurrency limit: every slot taken
        out.write(
            f"run {run.pk} queued: its workflow's concurrency limit has no free slot; it "
            f"starts when one frees (cancel with: manage.py cancelrun {run.pk})"
        )
        return
    if run.status in RUN_TERMINAL:  # not admitted by its concurrency limit (skipped, failed)
        report_end(out, run, resumed_at=resumed_at)
    if enqueue:
        try:
            run = run_enqueue(run=run, observer=ProgressPrinter(out))
        except FlowpilotError as exc:  # the run cannot start, or the broker is down
            raise CommandError(exc.message, returncode=1) from exc
        if run.status not in RUN_TERMINAL:
            out.write(
                f"run {run.pk} queued on the Celery workers; "
                f"cancel with: manage.py cancelrun {run.pk}"
            )
            return
    else:
        run = run_execute(run=run, observer=ProgressPrinter(out))
    report_end(out, run, resumed_at=resumed_at)


def report_end(out: OutputWrapper, run: Run, *, resumed_at: datetime | None = None) -> None:
    """Print how a run ended; raise ``CommandError`` (exit 1) unless it succeeded or
    waits for an approval (which it prints how to give)."""
    out.write(summary_line(run, resumed_at=resumed_at))
    if run.status == RunStatus.SUCCEEDED:
        out.write("outputs: " + dumps(store_unescape(run.outputs)))
        return
    if run.status == RunStatus.WAITING:  # not a failure: it goes on once decided
        for request in run.approval_requests.filter(status=ApprovalStatus.PENDING):
            out.write(
                f"waiting for approval of step `{request.step_id}`: decide it in the admin "
                f"(/admin/runs/approvalrequest/{request.pk}/change/) or with POST "
                f"/api/v1/approvals/{request.pk}/approve/ (or reject/)"
            )
        return
    if run.error_summary:
        out.write(f"error: {run.error_summary}")
    if run.status == RunStatus.FAILED:
        out.write(f"resume with: manage.py resumeflow {run.pk}")
    raise CommandError(f"run {run.pk} {run.status}", returncode=1)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def add_log_level_argument(parser: CommandParser) -> None:
    """``--log-level LEVEL`` in any case (``debug``, ``Debug``, ``DEBUG``)."""
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help="Log to stderr at this level: debug, info, warning or error (any case). Debug "
        "adds a line per step start and end, per tool call (request and response summary, "
        "secrets masked) and per llm prompt and reply (masked, cut).",
    )


def configure_logging(level: str | None) -> None:
    """Debug logs go to stderr; user-facing progress stays on stdout.

    Only flowpilot's own loggers are raised: they log requests with secrets redacted.
    httpx's loggers stay quiet, because they print URLs (query-string keys) verbatim.
    The lines are in the site's format (``FLOWPILOT_LOG_FORMAT``: text or JSON).
    """
    if not level:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter_for(getattr(settings, "FLOWPILOT_LOG_FORMAT", "text")))
    log = logging.getLogger("flowpilot")
    log.setLevel(level.upper())
    log.addHandler(handler)
    log.propagate = False
