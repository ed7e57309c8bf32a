"""Planning over HTTP: a request is stored, planned by a Celery task, and polled.

An LLM session takes seconds to minutes, longer than a client should hold a
request open, so ``plan_request_create`` stores a ``PlanRequest`` and hands it to
the ``api.plan_execute`` task (``review/tasks.py``; the name is older than the move
and kept for messages in flight); the client polls the record. On the embedded default
(Celery eager) the task runs before the create call returns, so the first answer
is already finished — the contract (poll until ``succeeded`` or ``failed``) is
the same. Like ``run_enqueue``, it then calls the service directly rather than
through an eager task. The task is sent by its name (``PLAN_TASK``), as the engine
sends its step tasks: the task module imports this one, never the other way round.

Plan requests belong to the design phase, beside approvals: the planner itself
(``workflows/planner/``) is a library below ``runs``, while a request needs the
driver's question — is there a broker? — which only a layer above ``runs`` may ask.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from celery import current_app
from django.contrib.auth.models import User
from django.utils import timezone

from review.models import PlanKind, PlanRequest, PlanRequestStatus
from runs.engine.celery.broker import in_process
from tools.errors import FlowpilotError
from tools.registry import ToolRegistry
from tools.secrets import free_text_redactor
from workflows.models import PlanAttempt, PlanAttemptStatus, Workflow, WorkflowStatus
from workflows.planner import PlanError, PlanFailed, PlanNotRevisable, PlanQuestions
from workflows.planner.selectors import plan_attempts_for_version
from workflows.revisions import ApprovalStateError, FeedbackRequired, workflow_reject

logger = logging.getLogger("flowpilot.api")

PLAN_TASK = "api.plan_execute"


def plan_request_create(
    *,
    kind: str,
    user: User | None,
    goal: str = "",
    sample_inputs: Mapping[str, Any] | None = None,
    feedback: str = "",
    based_on: Workflow | None = None,
    answers_to: int | None = None,
    answers: Mapping[str, str] | None = None,
) -> PlanRequest:
    """Check what can be checked now, store the request and queue its planning.

    A goal (``create``) or feedback (``revise``, ``reject``) is required; a revised
    version must be pending review or rejected, a rejected one pending review —
    refused at once (``PlanError``, ``PlanNotRevisable``, ``ApprovalStateError``, and
    ``LLMNotConfigured`` when the planner has no LLM to talk to)
    rather than on the worker. ``answers_to`` (a plan attempt that asked questions)
    with ``answers`` (``{question id: text}``) answers a question round instead of a
    goal; the goal and sample inputs are the attempt's.
    """
    from workflows.planner.services import planner_llm_check  # the planner loads on use

    asked = _asked(answers_to) if answers_to is not None else None
    if asked is not None:
        goal, sample_inputs = asked.goal, asked.sample_inputs
    _check(kind=kind, goal=goal, feedback=feedback, based_on=based_on)
    planner_llm_check()  # no LLM configured: refused at once, nothing stored or sent
    texts = (goal, sample_inputs, feedback, answers)
    masked = free_text_redactor(ToolRegistry.from_db(), os.environ, *texts)
    request = PlanRequest.objects.create(
        kind=kind,
        goal=masked.scrub_text(goal.strip() or (based_on.goal if based_on else "")),
        sample_inputs=masked.scrub(dict(sample_inputs or {})),
        feedback=masked.scrub_text(feedback.strip()),
        based_on=based_on,
        answers_to=asked,
        answers=masked.scrub(dict(answers or {})),
        requested_by=user,
    )
    if in_process():  # no broker (eager Celery): plan here, as runs execute here
        return plan_request_execute(request_id=request.pk)
    try:
        plan_request_publish(request_id=request.pk)
    except Exception as exc:  # noqa: BLE001 - a broker that is down fails this request only
        _finish(request, error={"code": "broker_unavailable", "message": str(exc), "details": []})
    request.refresh_from_db()
    return request


def plan_request_publish(*, request_id: int) -> None:
    """Send the planning of request ``request_id`` to the workers (``PLAN_TASK``)."""
    current_app.send_task(PLAN_TASK, args=[request_id])


def _asked(attempt_id: int) -> PlanAttempt:
    attempt = PlanAttempt.objects.filter(pk=attempt_id).first()
    if attempt is None or attempt.status != PlanAttemptStatus.QUESTIONS:
        raise PlanError(f"plan attempt {attempt_id} does not exist or asked no questions")
    return attempt


def _check(*, kind: str, goal: str, feedback: str, based_on: Workflow | None) -> None:
    from workflows.planner.services import REVISABLE_STATUSES

    if kind == PlanKind.CREATE:
        if not goal.strip():
            raise PlanError("a goal is needed: say in plain words what the workflow should do")
        return
    if not feedback.strip():
        raise FeedbackRequired("say what should change: the planner revises from your feedback")
    if based_on is None:
        raise PlanError(f"a `{kind}` request names the version it is about (based_on)")
    if kind == PlanKind.REVISE and based_on.status not in REVISABLE_STATUSES:
        raise PlanNotRevisable(
            f"`{based_on}` is {based_on.status}; only a version pending review (or rejected) "
            "is revised by the planner"
        )
    if kind == PlanKind.REJECT and based_on.status != WorkflowStatus.PENDING_REVIEW:
        raise ApprovalStateError(
            f"`{based_on}` is {based_on.status}; only a version pending review can be rejected"
        )


def plan_request_execute(*, request_id: int) -> PlanRequest:
    """Plan a queued request and record the version or the error. Never raises for a
    planning failure: the record is the answer the client polls."""
    claimed = PlanRequest.objects.filter(pk=request_id, status=PlanRequestStatus.QUEUED).update(
        status=PlanRequestStatus.RUNNING, started_at=timezone.now()
    )
    request = PlanRequest.objects.select_related("based_on", "requested_by").get(pk=request_id)
    if not claimed:  # a duplicate delivery of the task: someone else has it
        return request
    try:
        workflow = _plan(request)
    except PlanQuestions as exc:
        _finish(request, questions=exc, attempts=[a.pk for a in exc.attempts])
    except FlowpilotError as exc:
        attempts = [a.pk for a in getattr(exc, "attempts", [])]
        details = [
            {"path": i.path, "code": i.code, "message": i.message}
            for i in getattr(exc, "issues", [])
        ]
        _finish(
            request,
            error={"code": exc.code, "message": exc.message, "details": details},
            attempts=attempts,
        )
    except Exception as exc:
        logger.exception("plan request %s failed", request.pk)
        error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}", "details": []}
        _finish(request, error=error)
    else:
        attempts = list(plan_attempts_for_version(workflow=workflow).values_list("pk", flat=True))
        _finish(request, workflow=workflow, attempts=sorted(attempts))
    request.refresh_from_db()
    return request


def _plan(request: PlanRequest) -> Workflow:
    from workflows.planner.services import plan_answer, plan_create, plan_revise

    user = request.requested_by
    if request.kind == PlanKind.CREATE and request.answers_to is not None:
        return plan_answer(attempt=request.answers_to, answers=request.answers, owner=user)
    if request.kind == PlanKind.CREATE:
        return plan_create(goal=request.goal, sample_inputs=request.sample_inputs, owner=user)
    if request.based_on is None:
        raise PlanFailed("the version to revise was deleted before planning started")
    if request.kind == PlanKind.REJECT:
        return workflow_reject(
            version=request.based_on, rejected_by=user, feedback=request.feedback
        )
    return plan_revise(workflow=request.based_on, feedback=request.feedback, user=user)


def _finish(
    request: PlanRequest,
    *,
    workflow: Workflow | None = None,
    error: dict[str, Any] | None = None,
    attempts: Iterable[int] = (),
    questions: PlanQuestions | None = None,
) -> None:
    status = PlanRequestStatus.FAILED if error else PlanRequestStatus.SUCCEEDED
    if questions is not None:
        status = PlanRequestStatus.QUESTIONS
    PlanRequest.objects.filter(pk=request.pk).update(
        status=status,
        workflow=workflow,
        error=error,
        attempts=list(attempts),
        questions=questions.questions if questions is not None else [],
        question_attempt=questions.attempt if questions is not None else None,
        finished_at=timezone.now(),
    )
