"""One planning session: call, read, validate, repair — and record every call.

A session is up to ``1 + MAX_REPAIR_ROUNDS`` LLM calls. Each reply is read as JSON
(plain or fenced). A workflow has its name and goal normalised and is validated
against the registry the catalog came from; errors are fed back for a repair round.
When the session may ask (``_Session.ask``), a reply may instead be clarifying
questions (``questions``): well-formed ones end the session with ``PlanQuestions``;
malformed ones, or questions when asking is closed, are sent back for a repair.
Every call is stored as a ``PlanAttempt`` (messages sent, model, raw reply, usage
with the HTTP tries, its cost at the endpoint's prices, validator report, templates
shown, questions, status).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tools.jsondata import storage_problem, store_escape
from tools.llm import LLMClient, LLMError, LLMReply, LLMReplyInvalid
from tools.redaction import Redactor
from tools.registry import ToolRegistry
from workflows.models import (
    PlanAttempt,
    PlanAttemptOutcome,
    PlanAttemptStatus,
    Workflow,
)
from workflows.planner.errors import PlanFailed, PlanQuestions
from workflows.planner.prompts import PLAN_UNCHANGED, REPLY_INVALID, repair_message, response_format
from workflows.planner.questions import QUESTIONS_NOT_ALLOWED, is_questions, read_questions
from workflows.planner.templates import reused_templates
from workflows.schema import WORKFLOW_NAME_PATTERN, WorkflowSpec
from workflows.validation.report import ValidationIssue, error
from workflows.validator import validate_workflow

MAX_REPAIR_ROUNDS = 2

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
    sample_inputs: dict[str, Any] = field(default_factory=dict)
    templates: list[dict[str, Any]] = field(default_factory=list)  # shown: {name, version, score}
    offered_tools: list[dict[str, Any]] = field(default_factory=list)  # {name, why, score}
    lessons: list[dict[str, Any]] = field(default_factory=list)  # warnings: Lesson.as_record
    clarifications: list[dict[str, Any]] = field(default_factory=list)  # earlier Q&A rounds
    ask: bool = False  # the model may answer with questions


@dataclass
class _Checked:
    """A reply read: a valid plan, questions, or the issues to send back."""

    spec: WorkflowSpec | None = None
    questions: list[dict[str, Any]] = field(default_factory=list)
    issues: list[ValidationIssue] = field(default_factory=list)
    data: Any = None


def run_session(session: _Session, messages: list[dict]) -> tuple[WorkflowSpec, PlanAttempt]:
    """The valid plan and its attempt; ``PlanQuestions`` when the model asked, ``PlanFailed``
    when the repairs ran out or the LLM failed."""
    attempts: list[PlanAttempt] = []
    issues: list[ValidationIssue] = []
    fmt = response_format(questions=session.ask)
    for repair_round in range(MAX_REPAIR_ROUNDS + 1):
        sent = session.redactor.scrub(messages)
        try:
            reply = session.client.chat(sent, response_format=fmt)
        except LLMError as exc:
            attempts.append(_record(session, repair_round, sent, failure=exc))
            raise PlanFailed(
                f"the planner's LLM call failed: {exc.message}", attempts=attempts
            ) from exc
        raw = session.redactor.scrub_text(reply.content or "")
        checked = _check(session, reply)
        issues = checked.issues
        attempts.append(_record(session, repair_round, sent, reply=reply, raw=raw, checked=checked))
        if checked.questions:
            raise PlanQuestions(attempt=attempts[-1], attempts=attempts)
        if checked.spec is not None:
            return checked.spec, attempts[-1]
        messages = [*messages, {"role": "assistant", "content": raw}, repair_message(issues)]
    raise PlanFailed(_failure_message(issues), attempts=attempts, issues=issues)


def _check(session: _Session, reply: LLMReply) -> _Checked:
    """The plan as a valid spec, questions, or the issues to feed back."""
    try:
        data = reply.json()
    except LLMReplyInvalid as exc:
        return _Checked(issues=[error(REPLY_INVALID, "", exc.message)])
    if not isinstance(data, dict):
        message = f"the reply is JSON but a {type(data).__name__}, not a workflow object"
        return _Checked(issues=[error(REPLY_INVALID, "", message)])
    unstorable = storage_problem(data)
    if unstorable is not None:  # a plan is configuration: refused, not escaped
        message = f"the plan cannot be stored: {unstorable}"
        return _Checked(issues=[error(REPLY_INVALID, "", message)])
    if is_questions(data):
        return _check_questions(session, data)
    if data.get("answer") == "plan":
        data = {k: v for k, v in data.items() if k != "answer"}
    data = _normalised(data, goal=session.goal, name=session.name)
    report = validate_workflow(data, registry=session.registry)
    issues = list(report.issues)
    based_on = session.based_on
    if (
        report.spec is not None
        and based_on is not None
        and report.ok
        and _unchanged(report.spec, based_on)
    ):
        message = (
            "the revised workflow is identical to the version the reviewer sent back; "
            "change it as the feedback asks"
        )
        issues.append(error(PLAN_UNCHANGED, "", message))
    ok = report.ok and not any(i.code == PLAN_UNCHANGED for i in issues)
    return _Checked(spec=report.spec if ok else None, issues=issues, data=data)


def _check_questions(session: _Session, data: dict[str, Any]) -> _Checked:
    if not session.ask:
        message = (
            "questions are not possible now (the question rounds are used up, or this is a "
            "revision): return the workflow, choosing sensible defaults for anything open"
        )
        return _Checked(issues=[error(QUESTIONS_NOT_ALLOWED, "", message)], data=data)
    questions, issues = read_questions(data)
    return _Checked(questions=questions, issues=issues, data=data)


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
    message = (
        f"the planner could not produce a valid workflow in {MAX_REPAIR_ROUNDS + 1} attempts "
        f"({MAX_REPAIR_ROUNDS} repair rounds); the last plan still has {len(errors)} "
        f"error(s): {lines}"
    )
    if any(i.code == REPLY_INVALID and "truncated" in i.message for i in errors):
        message += (
            ". The replies were cut off at the model's output limit: plan with a model with "
            "a larger output limit (PLANNER_MODEL), or split the goal into smaller workflows"
        )
    return message


def _outcome(failed: bool, repair_round: int) -> PlanAttemptOutcome:
    """What the session does after a plan: accept it, ask for a repair, or give up."""
    if not failed:
        return PlanAttemptOutcome.ACCEPTED
    if repair_round < MAX_REPAIR_ROUNDS:
        return PlanAttemptOutcome.REPAIR_REQUESTED
    return PlanAttemptOutcome.BUDGET_EXHAUSTED


def _status(checked: _Checked | None, failure: LLMError | None) -> tuple[str, str]:
    if failure is not None:
        return PlanAttemptStatus.ERROR, PlanAttemptOutcome.FAILED
    assert checked is not None
    if checked.questions:
        return PlanAttemptStatus.QUESTIONS, PlanAttemptOutcome.QUESTIONS_ASKED
    failed = any(i.severity == "error" for i in checked.issues)
    return (PlanAttemptStatus.INVALID if failed else PlanAttemptStatus.VALID), ""


def _record(
    session: _Session,
    repair_round: int,
    sent: list[dict],
    *,
    reply: LLMReply | None = None,
    raw: str = "",
    checked: _Checked | None = None,
    failure: LLMError | None = None,
) -> PlanAttempt:
    status, outcome = _status(checked, failure)
    cost: int | None = 0  # no answer, no cost
    if failure is not None:
        usage: dict[str, Any] = {"http_attempts": list(failure.attempts)}
    else:
        assert reply is not None  # an attempt either failed or was answered
        usage = {**reply.usage.as_dict(), "http_attempts": list(reply.attempts)}
        outcome = outcome or _outcome(status == PlanAttemptStatus.INVALID, repair_round)
        cost = _cost(session.client, reply)
    issues = checked.issues if checked is not None else []
    reused = set(reused_templates(checked.data if checked else None, _names(session.templates)))
    templates = [{**t, "reused": t["name"] in reused} for t in session.templates]
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
        cost_pico=cost,
        validator_report=store_escape([i.as_dict() for i in issues]),
        sample_inputs=store_escape(session.sample_inputs),
        templates=templates,
        offered_tools=session.offered_tools,
        lessons=store_escape(session.lessons),
        questions=store_escape(checked.questions if checked else []),
        clarifications=store_escape(session.clarifications),
        status=status,
        error=store_escape(session.redactor.scrub_text(failure.message)) if failure else "",
        created_by=session.created_by,
    )
    if session.observer is not None:
        session.observer(attempt)
    return attempt


def _cost(client: LLMClient, reply: LLMReply) -> int | None:
    """What the answered call cost in pico-dollars, at the planner endpoint's prices for
    the model that answered (or the one asked, when the table does not know the answering
    name), as a step's call is charged (``PriceTable.charge``); None: no price."""
    usage = reply.usage
    return client.prices.charge(
        reply.model, client.model, usage.prompt_tokens, usage.completion_tokens
    )


def _names(templates: list[dict[str, Any]]) -> list[str]:
    return [t["name"] for t in templates]
