"""The report about a run: what failed, with what request and response, how that step
differs from the same step in the validation run (with the calls that run recorded
for it), and — for a failed run, when ``FLOWPILOT_REPORT_REPLAY`` is on — what a
replay of the version against its validation run finds (``runs.replay``).

Built from stored rows: step inputs and errors are stored with secrets masked by the
engine, and the report is scrubbed once more by the same rule (``tools.secrets``:
the secrets the tools declare), so no channel ever carries a secret and a report
masks exactly what the run page, ``showrun`` and the API mask — a base URL, which
is configuration, stays in clear in all of them. The replay sends nothing (its calls
are answered from the recordings), writes no file and announces nothing; whatever it
raises becomes the replay's one line, never a report that is not sent.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from django.conf import settings
from django.urls import reverse

from notifications.models import Event
from runs.engine import caches
from runs.models import Run, RunStatus, RunTrigger, StepResult, StepStatus, ToolCallRecording
from tools.errors import FlowpilotError
from tools.redaction import Redactor
from tools.secrets import redactor_for

MAX_RECORDED_CALLS = 20
logger = logging.getLogger("flowpilot.notifications")


def report_build(*, run: Run, event: str) -> dict[str, Any]:
    """The report as JSON-ready data (the webhook body; the email renders it).

    ``replay`` is the replay difference of a failed run (``replay_difference``), or
    None (another event, or ``FLOWPILOT_REPORT_REPLAY`` off)."""
    workflow = run.workflow
    failing = _failing_steps(run)
    links = report_links(run=run)
    replay = None
    if event == Event.FAILED and settings.FLOWPILOT_REPORT_REPLAY:
        replay = replay_difference(run=run)
    report = {
        "event": event,
        "workflow": workflow.name,
        "version": workflow.version,
        "run": run.pk,
        "trigger": run.trigger,
        "status": run.status,
        "error_summary": run.error_summary,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "links": links,
        "failed_steps": [
            {**_step_report(run, r), "link": _step_link(links["run"], r.step_id)} for r in failing
        ],
        "replay": replay,
    }
    return _redactor().scrub(report)


PUBLIC_URL_UNSET = (
    "FLOWPILOT_PUBLIC_URL is not set: no links (set it to the site's public address, "
    "scheme and host, and every report links its run, failing steps and workflow)"
)


def report_links(*, run: Run) -> dict[str, str | None]:
    """Admin URLs of the run and of its workflow version under ``FLOWPILOT_PUBLIC_URL``.

    A report is read away from the site (an inbox, a chat channel), so only an absolute
    URL helps; the host is never guessed from a request or ``ALLOWED_HOSTS``. Unset,
    both links are ``None`` and ``note`` says which setting gives them.
    """
    public = str(settings.FLOWPILOT_PUBLIC_URL or "").rstrip("/")
    if not public:
        return {"run": None, "workflow": None, "note": PUBLIC_URL_UNSET}
    return {
        "run": public + reverse("admin:runs_run_change", args=[run.pk]),
        "workflow": public + reverse("admin:workflows_workflow_change", args=[run.workflow_id]),
        "note": "",
    }


def _step_link(run_url: str | None, step_id: str) -> str | None:
    """The step's card on the run page (its anchor is ``step-<id>``)."""
    return f"{run_url}#step-{step_id}" if run_url else None


def replay_difference(*, run: Run) -> dict[str, Any]:
    """``run``'s version replayed offline against its newest green validation run:
    the summary, and each differing step's lines. Never raises: a replay refused or
    broken is reported as its summary line."""
    from runs.replay.services import version_replay  # loaded by a report that replays

    try:
        replay = version_replay(version=run.workflow)
    except FlowpilotError as exc:
        return {"summary": f"not replayed: {exc.message}"}
    except Exception as exc:  # the report goes out whatever the replay did
        logger.exception("run %s: replaying its version for the report failed", run.pk)
        return {"summary": f"the replay failed: {type(exc).__name__}: {exc}"}
    return {
        "summary": replay.summary,
        "matched": replay.matched,
        "replay_run": replay.replay_run.pk,
        "validation_run": replay.source_run.pk,
        "differences": [
            {"step": step.step_id, "lines": list(step.differences)}
            for step in replay.steps
            if step.differences
        ],
    }


def _failing_steps(run: Run) -> list[StepResult]:
    return list(run.step_results.filter(status=StepStatus.FAILED).order_by("finished_at", "id"))


def _step_report(run: Run, result: StepResult) -> dict[str, Any]:
    error = result.error or {}
    return {
        "step": result.step_id,
        "error": error,
        "request": {"inputs": result.inputs, "attempts": result.attempts},
        "response": {
            "status": error.get("status"),
            "message": error.get("message"),
            "output": result.output,
            "attempt_log": result.attempt_log,
        },
        "validation_diff": step_diff(result, _validation_result(run, result.step_id)),
    }


def _validation_result(run: Run, step_id: str) -> StepResult | None:
    """The step in the newest succeeded validation run of this version (else the name)."""
    runs = Run.objects.filter(trigger=RunTrigger.VALIDATION, status=RunStatus.SUCCEEDED)
    same_name = runs.filter(workflow__name=run.workflow.name)
    for scope in (runs.filter(workflow=run.workflow), same_name):
        found = (
            StepResult.objects.filter(run__in=scope, step_id=step_id)
            .order_by("-run__finished_at", "-run_id")
            .first()
        )
        if found is not None:
            return found
    return None


def json_type(value: Any) -> str:
    """The JSON type name of a value (``object``, ``array``, ``string``, …)."""
    for kind, name in ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string")):
        if isinstance(value, kind):
            return name
    if isinstance(value, int | float):
        return "number"
    return "null"


def step_diff(result: StepResult, baseline: StepResult | None) -> dict[str, Any]:
    """Status, output keys and value shapes of ``result`` against the validation run."""
    if baseline is None:
        return {"validation_run": None, "note": "no succeeded validation run has this step"}
    now_out = result.output if isinstance(result.output, dict) else {}
    then_out = baseline.output if isinstance(baseline.output, dict) else {}
    shared = sorted(now_out.keys() & then_out.keys())
    return {
        "validation_run": baseline.run_id,
        "status": {"validation": baseline.status, "now": result.status},
        "keys_missing": sorted(then_out.keys() - now_out.keys()),
        "keys_new": sorted(now_out.keys() - then_out.keys()),
        "shape_changed": {
            key: {"validation": json_type(then_out[key]), "now": json_type(now_out[key])}
            for key in shared
            if json_type(then_out[key]) != json_type(now_out[key])
        },
        "error": {"validation": baseline.error, "now": result.error},
        "recorded_calls": _recorded_calls(baseline),
    }


def _recorded_calls(baseline: StepResult) -> list[dict[str, Any]]:
    """The calls the validation run recorded for the step (masked when stored): what
    it sent then, and what it got — beside this run's request and error. ``kind`` is
    ``http`` (method, URL), ``mcp`` (``tools/call``, ``mcp:<server>/<tool>``) or
    ``llm`` (``chat``, ``llm:<endpoint>/<model>``)."""
    if baseline.pk is None:
        return []
    calls = ToolCallRecording.objects.filter(step_result_id=baseline.pk).order_by("id")
    return [
        {"kind": c.kind, "tool": c.tool, "method": c.method, "url": c.url,
         "status": c.status, "error": (c.error or {}).get("type")}
        for c in calls[:MAX_RECORDED_CALLS]
    ]  # fmt: skip


def _redactor() -> Redactor:
    """The rule of the run page, ``showrun`` and the API (``tools.secrets``): the
    secrets the registered tools declare, read from the environment now. Stored rows
    are already masked with it; the report is masked once more for the text built
    here (a replay's failure). Non-secret configuration (a base URL) stays in clear."""
    return redactor_for(caches.registry_for(caches.tools_state()), os.environ)
