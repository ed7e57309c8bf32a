"""Planner services: a goal (or a rejected plan plus feedback) → a version pending review.

One session = up to ``1 + MAX_REPAIR_ROUNDS`` LLM calls. Each reply is read as
JSON (plain or fenced), its name and goal are normalised, and the validator
checks it against the same registry the catalog came from; errors are fed
back for a repair round. Every call is stored as a ``PlanAttempt`` (messages
sent, model, raw reply, usage with the HTTP tries, validator report, status)
whether or not the session succeeds. A valid plan is stored with
``workflow_import(status="pending_review")``.

A revision keeps the workflow's name, so it becomes the next version; the
version it answers becomes ``rejected``. A goal lineage gets at most
``MAX_REVISION_ROUNDS`` revisions.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max, Q

from tools.jsondata import storage_problem, store_escape
from tools.llm import LLMClient, LLMError, LLMReply, LLMReplyInvalid
from tools.redaction import Redactor
from tools.registry import ToolRegistry
from workflows.errors import WorkflowError
from workflows.models import (
    PlanAttempt,
    PlanAttemptOutcome,
    PlanAttemptStatus,
    Workflow,
    WorkflowStatus,
)
from workflows.planner.catalog import catalog_entries, catalog_text, secret_values, select_tools
from workflows.planner.errors import PlanError, PlanFailed, PlanNotRevisable, PlanRoundsExhausted
from workflows.planner.prompts import (
    PLAN_UNCHANGED,
    REPLY_INVALID,
    create_messages,
    repair_message,
    response_format,
    revise_messages,
)
from workflows.schema import WORKFLOW_NAME_PATTERN, WorkflowSpec
from workflows.services import workflow_import, workflow_transition
from workflows.validation.report import ValidationIssue, error
from workflows.validator import validate_workflow

MAX_REPAIR_ROUNDS = 2
MAX_REVISION_ROUNDS = 5
REVISABLE_STATUSES = frozenset({WorkflowStatus.PENDING_REVIEW, WorkflowStatus.REJECTED})
_NAME_TRIES = 20

AttemptObserver = Callable[[PlanAttempt], None]


@dataclass
class _Session:
    """What every call of one planning session shares."""

    goal: str
    client: LLMClient
    registry: ToolRegistry
    redactor: Redactor
    created_by: Any
    name: str | None = None  # fixed name (revisions); None: the model's, made free later
    revision: int = 1
    feedback: str = ""
    based_on: Workflow | None = None
    observer: AttemptObserver | None = None


def plan_create(
    *,
    goal: str,
    sample_inputs: dict | None = None,
    owner=None,
    registry: ToolRegistry | None = None,
    client: LLMClient | None = None,
    observer: AttemptObserver | None = None,
) -> Workflow:
    """Plan ``goal`` into a new workflow, stored ``pending_review`` and owned by ``owner``.

    Raises ``PlanFailed`` (its ``attempts`` are stored) when no valid plan came
    out of the repairs, or when the LLM could not be reached.
    """
    goal = (goal or "").strip()
    if not goal:
        raise PlanError("a goal is needed: say in plain words what the workflow should do")
    registry = registry if registry is not None else ToolRegistry.from_db()
    query = " ".join([goal, *map(str, sample_inputs or {})])
    catalog = catalog_text(catalog_entries(registry, select_tools(registry, query)))
    messages = create_messages(goal=goal, catalog=catalog, sample_inputs=sample_inputs)
    with _llm(client) as llm:
        session = _Session(goal, llm, registry, _redactor(registry), owner, observer=observer)
        spec, attempt = _run_session(session, messages)
    return _store_new(spec, owner=owner, attempt=attempt)


def plan_revise(
    *,
    workflow: Workflow,
    feedback: str,
    user=None,
    registry: ToolRegistry | None = None,
    client: LLMClient | None = None,
    observer: AttemptObserver | None = None,
) -> Workflow:
    """Revise ``workflow`` (pending review or rejected) with a reviewer's ``feedback``.

    The new plan is the next version of the same name, ``pending_review``; the
    revised version becomes ``rejected``. Raises ``PlanRoundsExhausted`` after
    ``MAX_REVISION_ROUNDS`` revisions of one goal, ``PlanFailed`` as ``plan_create``.
    """
    feedback = (feedback or "").strip()
    if not feedback:
        raise PlanError("feedback is needed: say what the revision should change")
    if workflow.status not in REVISABLE_STATUSES:
        raise PlanNotRevisable(
            f"`{workflow}` is {workflow.status}; only a version pending review (or rejected) "
            "is revised by the planner"
        )
    revision = _next_revision(workflow)
    goal = workflow.goal or workflow.description or f"the workflow `{workflow.name}`"
    registry = registry if registry is not None else ToolRegistry.from_db()
    previous = WorkflowSpec.model_validate(workflow.definition)
    pinned = set(previous.allowed_tools())
    pinned |= {t for s in previous.steps for t in s.model_tools()}
    names = select_tools(registry, f"{goal} {feedback}", pinned=sorted(pinned))
    messages = revise_messages(
        goal=goal,
        catalog=catalog_text(catalog_entries(registry, names)),
        previous=previous.to_data(),  # field order, whatever the JSON column did
        version=workflow.version,
        feedback=feedback,
    )
    with _llm(client) as llm:
        session = _Session(
            goal,
            llm,
            registry,
            _redactor(registry),
            user,
            name=workflow.name,
            revision=revision,
            feedback=feedback,
            based_on=workflow,
            observer=observer,
        )
        spec, attempt = _run_session(session, messages)
    return _store_revision(spec, previous=workflow, owner=workflow.owner or user, attempt=attempt)


# --- the session: call, read, validate, repair ----------------------------------------


def _run_session(session: _Session, messages: list[dict]) -> tuple[WorkflowSpec, PlanAttempt]:
    attempts: list[PlanAttempt] = []
    issues: list[ValidationIssue] = []
    for repair_round in range(MAX_REPAIR_ROUNDS + 1):
        sent = session.redactor.scrub(messages)
        try:
            reply = session.client.chat(sent, response_format=response_format())
        except LLMError as exc:
            attempts.append(_record(session, repair_round, sent, failure=exc))
            raise PlanFailed(
                f"the planner's LLM call failed: {exc.message}", attempts=attempts
            ) from exc
        raw = session.redactor.scrub_text(reply.content or "")
        spec, issues = _check(session, reply)
        attempts.append(_record(session, repair_round, sent, reply=reply, raw=raw, issues=issues))
        if spec is not None:
            return spec, attempts[-1]
        messages = [*messages, {"role": "assistant", "content": raw}, repair_message(issues)]
    raise PlanFailed(_failure_message(issues), attempts=attempts, issues=issues)


def _check(session: _Session, reply: LLMReply) -> tuple[WorkflowSpec | None, list]:
    """The plan as a valid spec, or ``None`` and the issues to feed back."""
    try:
        data = reply.json()
    except LLMReplyInvalid as exc:
        return None, [error(REPLY_INVALID, "", exc.message)]
    if not isinstance(data, dict):
        message = f"the reply is JSON but a {type(data).__name__}, not a workflow object"
        return None, [error(REPLY_INVALID, "", message)]
    unstorable = storage_problem(data)
    if unstorable is not None:  # a plan is configuration: refused, not escaped
        return None, [error(REPLY_INVALID, "", f"the plan cannot be stored: {unstorable}")]
    data = _normalised(data, goal=session.goal, name=session.name)
    report = validate_workflow(data, registry=session.registry)
    issues = list(report.issues)
    if report.ok and session.based_on is not None and _unchanged(report.spec, session.based_on):
        message = (
            "the revised workflow is identical to the version the reviewer sent back; "
            "change it as the feedback asks"
        )
        issues.append(error(PLAN_UNCHANGED, "", message))
    ok = report.ok and not any(i.code == PLAN_UNCHANGED for i in issues)
    return (report.spec if ok else None), issues


def _normalised(data: dict[str, Any], *, goal: str, name: str | None) -> dict[str, Any]:
    """The model's plan with the lineage's goal and a well-formed (or the fixed) name."""
    data = dict(data)
    data["goal"] = goal
    data["name"] = name or _slug(data.get("name")) or _slug(goal) or "planned_workflow"
    return data


def _slug(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    slug = re.sub(r"[^a-z0-9_-]+", "_", text.strip().lower()).strip("_-")
    slug = re.sub(r"^[^a-z]+", "", slug)[:60].rstrip("_-")
    return slug if re.match(WORKFLOW_NAME_PATTERN, slug) else ""


def _unchanged(spec: WorkflowSpec, previous: Workflow) -> bool:
    latest = Workflow.objects.filter(name=previous.name).order_by("-version").first()
    digest = spec.definition_hash()
    return digest in {previous.definition_hash, latest.definition_hash if latest else None}


def _failure_message(issues: list[ValidationIssue]) -> str:
    errors = [i for i in issues if i.severity == "error"]
    lines = "; ".join(f"{i.path or '(workflow)'} [{i.code}]: {i.message}" for i in errors)
    return (
        f"the planner could not produce a valid workflow in {MAX_REPAIR_ROUNDS + 1} attempts "
        f"({MAX_REPAIR_ROUNDS} repair rounds); the last plan still has {len(errors)} "
        f"error(s): {lines}"
    )


def _outcome(failed: bool, repair_round: int) -> PlanAttemptOutcome:
    """What the session does after a plan: accept it, ask for a repair, or give up."""
    if not failed:
        return PlanAttemptOutcome.ACCEPTED
    if repair_round < MAX_REPAIR_ROUNDS:
        return PlanAttemptOutcome.REPAIR_REQUESTED
    return PlanAttemptOutcome.BUDGET_EXHAUSTED


def _record(
    session: _Session,
    repair_round: int,
    sent: list[dict],
    *,
    reply: LLMReply | None = None,
    raw: str = "",
    issues: list[ValidationIssue] | None = None,
    failure: LLMError | None = None,
) -> PlanAttempt:
    if failure is not None:
        status, usage = PlanAttemptStatus.ERROR, {"http_attempts": list(failure.attempts)}
        outcome = PlanAttemptOutcome.FAILED
    else:
        failed = any(i.severity == "error" for i in issues or [])
        status = PlanAttemptStatus.INVALID if failed else PlanAttemptStatus.VALID
        usage = {**reply.usage.as_dict(), "http_attempts": list(reply.attempts)}
        outcome = _outcome(failed, repair_round)
    # Stored escaped (tools.jsondata): a reply may hold text no database can store.
    attempt = PlanAttempt.objects.create(
        goal=session.goal,
        based_on=session.based_on,
        revision=session.revision,
        repair_round=repair_round,
        repair_budget=MAX_REPAIR_ROUNDS,
        outcome=outcome,
        feedback=session.feedback,
        model=session.client.model,
        prompt=store_escape(sent),
        raw_reply=store_escape(raw),
        usage=store_escape(usage),
        validator_report=store_escape([i.as_dict() for i in issues or []]),
        status=status,
        error=store_escape(session.redactor.scrub_text(failure.message)) if failure else "",
        created_by=session.created_by,
    )
    if session.observer is not None:
        session.observer(attempt)
    return attempt


# --- storing ---------------------------------------------------------------------


def _store_new(spec: WorkflowSpec, *, owner, attempt: PlanAttempt) -> Workflow:
    """Store under the model's name, suffixed ``-2``, ``-3`` … when an unrelated one has it."""
    data = spec.to_data()
    for _ in range(_NAME_TRIES):
        data["name"] = _free_name(spec.name)
        try:
            with transaction.atomic():
                workflow, created = workflow_import(
                    data=data, owner=owner, status=WorkflowStatus.PENDING_REVIEW
                )
                if not created or workflow.version != 1:  # taken since the look-up
                    raise _NameTaken
                _link(attempt, workflow)
                return workflow
        except (_NameTaken, WorkflowError):
            continue
    raise PlanError(f"could not find a free name for `{spec.name}`")


def _store_revision(
    spec: WorkflowSpec, *, previous: Workflow, owner, attempt: PlanAttempt
) -> Workflow:
    with transaction.atomic():
        workflow, created = workflow_import(
            data=spec, owner=owner, status=WorkflowStatus.PENDING_REVIEW
        )
        if not created:
            raise PlanError(f"the revised plan is identical to `{workflow}`")
        previous.refresh_from_db()
        if previous.status == WorkflowStatus.PENDING_REVIEW:
            workflow_transition(workflow=previous, to=WorkflowStatus.REJECTED)
        _link(attempt, workflow)
    return workflow


class _NameTaken(Exception):
    pass


def _free_name(base: str) -> str:
    taken = set(
        Workflow.objects.filter(Q(name=base) | Q(name__startswith=f"{base}-")).values_list(
            "name", flat=True
        )
    )
    if base not in taken:
        return base
    number = 2
    while True:
        suffix = f"-{number}"
        candidate = base[: 100 - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        number += 1


def _link(attempt: PlanAttempt, workflow: Workflow) -> None:
    PlanAttempt.objects.filter(pk=attempt.pk).update(workflow=workflow)
    attempt.workflow = workflow


def _next_revision(workflow: Workflow) -> int:
    """1 + the highest revision of this lineage the model answered (errors do not count)."""
    lineage = PlanAttempt.objects.filter(
        Q(workflow__name=workflow.name) | Q(based_on__name=workflow.name)
    ).exclude(status=PlanAttemptStatus.ERROR)
    top = lineage.aggregate(top=Max("revision"))["top"] or 1
    if top - 1 >= MAX_REVISION_ROUNDS:
        raise PlanRoundsExhausted(
            f"workflow `{workflow.name}` has had {MAX_REVISION_ROUNDS} revision rounds, the "
            f"limit for one goal; the planner will not revise it again — edit the workflow "
            "by hand, or plan the goal afresh"
        )
    return top + 1


# --- helpers -------------------------------------------------------------------------


def _redactor(registry: ToolRegistry) -> Redactor:
    return Redactor(secret_values(registry))


@contextlib.contextmanager
def _llm(client: LLMClient | None) -> Iterator[LLMClient]:
    """The caller's client, or one from settings closed afterwards."""
    if client is not None:
        yield client
        return
    owned = LLMClient.from_settings()
    try:
        yield owned
    finally:
        owned.close()
