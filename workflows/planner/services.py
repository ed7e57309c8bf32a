"""Planner services: a goal (or a rejected plan plus feedback) → a version pending review.

A session (``workflows.planner.session``) is up to ``1 + MAX_REPAIR_ROUNDS`` LLM
calls, each stored as a ``PlanAttempt``. A first plan sees the tool catalog, the
approved workflows most similar to the goal (``templates``), earlier plans for
similar goals that were rejected or failed their validation run (``lessons``) and
the questions answered so far; it may ask clarifying questions instead (``PlanQuestions``,
answered with ``plan_answer``). A valid plan is stored with
``workflow_import(status="pending_review")``.

A revision keeps the workflow's name, so it becomes the next version; the
version it answers becomes ``rejected``. A goal lineage gets at most
``MAX_REVISION_ROUNDS`` revisions.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q

from tools.llm import LLMClient, llm_endpoint_ready
from tools.permissions import actor_user
from tools.redaction import Redactor
from tools.registry import ToolRegistry
from tools.secrets import free_text_redactor
from workflows.errors import WorkflowError
from workflows.models import PlanAttempt, PlanAttemptStatus, Workflow, WorkflowStatus
from workflows.planner.catalog import (
    catalog_entries,
    catalog_text,
    rank_tools,
    unavailable_tools,
)
from workflows.planner.errors import PlanError, PlanNotRevisable, PlanRoundsExhausted
from workflows.planner.lessons import lessons_text, select_lessons
from workflows.planner.prompts import create_messages, revise_messages
from workflows.planner.questions import clarifications_text, question_rounds, resolve_answers
from workflows.planner.session import (
    MAX_REPAIR_ROUNDS,
    AttemptObserver,
    _Session,
    run_session,
)
from workflows.planner.templates import select_templates, template_tools, templates_text
from workflows.schema import WorkflowSpec
from workflows.services import workflow_import, workflow_transition

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tools.permissions import Actor

MAX_REVISION_ROUNDS = 5
REVISABLE_STATUSES = frozenset({WorkflowStatus.PENDING_REVIEW, WorkflowStatus.REJECTED})
_NAME_TRIES = 20

__all__ = [
    "MAX_REPAIR_ROUNDS",
    "AttemptObserver",
    "PlanOptions",
    "plan_answer",
    "plan_create",
    "plan_revise",
]


class PlanOptions(TypedDict, total=False):
    """The keyword arguments ``plan_create`` and ``plan_answer`` share, for a caller
    that plans and then answers the questions with the same ones."""

    owner: User | None
    registry: ToolRegistry | None
    client: LLMClient | None
    observer: AttemptObserver | None


def plan_create(
    *,
    goal: str,
    sample_inputs: dict | None = None,
    owner: User | None = None,
    registry: ToolRegistry | None = None,
    client: LLMClient | None = None,
    observer: AttemptObserver | None = None,
    clarifications: list[dict[str, Any]] | None = None,
    allow_questions: bool = True,
) -> Workflow:
    """Plan ``goal`` into a new workflow, stored ``pending_review`` and owned by ``owner``.

    The approved workflows most similar to the goal are shown as templates. While
    fewer than ``FLOWPILOT_PLANNER_QUESTION_ROUNDS`` question rounds were answered
    (``clarifications``) and ``allow_questions``, the model may ask instead: then
    ``PlanQuestions`` is raised (answer with ``plan_answer``). Raises ``PlanFailed``
    (its ``attempts`` are stored) when no valid plan came out of the repairs, or
    when the LLM could not be reached.
    """
    goal = (goal or "").strip()
    if not goal:
        raise PlanError("a goal is needed: say in plain words what the workflow should do")
    registry = registry if registry is not None else ToolRegistry.from_db()
    # Free text people type: a credential in it is masked before it is stored or sent.
    redactor = _redactor(registry, goal, sample_inputs, clarifications)
    goal = redactor.scrub_text(goal)
    sample_inputs = redactor.scrub(dict(sample_inputs)) if sample_inputs else None
    clarifications = redactor.scrub(list(clarifications or []))
    query = " ".join([goal, *map(str, sample_inputs or {})])
    templates = select_templates(query=goal)
    lessons = select_lessons(query=goal)
    offered = rank_tools(
        registry, query, pinned=template_tools(templates), unavailable=unavailable_tools()
    )
    names = sorted(tool.name for tool in offered)
    ask = allow_questions and len(clarifications) < question_rounds()
    messages = create_messages(
        goal=goal,
        catalog=catalog_text(catalog_entries(registry, names)),
        sample_inputs=sample_inputs,
        templates=templates_text(templates),
        clarifications=clarifications_text(clarifications),
        ask=ask,
        lessons=lessons_text(lessons),
    )
    with _llm(client) as llm:
        session = _Session(
            goal,
            llm,
            registry,
            redactor,
            owner,
            observer=observer,
            sample_inputs=dict(sample_inputs or {}),
            templates=[t.as_record() for t in templates],
            offered_tools=[tool.as_dict() for tool in offered],
            lessons=[lesson.as_record() for lesson in lessons],
            clarifications=clarifications,
            ask=ask,
        )
        spec, attempt = run_session(session, messages)
    return _store_new(spec, owner=owner, attempt=attempt)


def plan_answer(
    *,
    attempt: PlanAttempt,
    answers: Mapping[str, str] | Iterable[str],
    owner: User | None = None,
    registry: ToolRegistry | None = None,
    client: LLMClient | None = None,
    observer: AttemptObserver | None = None,
) -> Workflow:
    """Answer the questions ``attempt`` asked and plan its goal again with them.

    ``answers``: ``{question id or 1-based number: text}``, or entries ``"id=text"``,
    ``"2=text"`` or bare ``"text"`` (the next question in order); a question left
    unanswered means "no preference". The earlier rounds and this one are fed to the
    model and kept on the next attempt (``clarifications``). Raises ``PlanQuestions``
    again while question rounds are left, ``PlanError`` for an attempt that asked
    nothing or an answer to no question.
    """
    if attempt.status != PlanAttemptStatus.QUESTIONS or not attempt.questions:
        raise PlanError(f"plan attempt {attempt.pk} asked no questions; there is nothing to answer")
    resolved = resolve_answers(list(attempt.questions), answers)
    rounds = [*attempt.clarifications, {"questions": attempt.questions, "answers": resolved}]
    return plan_create(
        goal=attempt.goal,
        sample_inputs=attempt.sample_inputs or None,
        owner=owner if owner is not None else attempt.created_by,
        registry=registry,
        client=client,
        observer=observer,
        clarifications=rounds,
    )


def plan_revise(
    *,
    workflow: Workflow,
    feedback: str,
    user: Actor | None = None,
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
    redactor = _redactor(registry, goal, feedback)
    goal, feedback = redactor.scrub_text(goal), redactor.scrub_text(feedback)
    previous = WorkflowSpec.model_validate(workflow.definition)
    pinned = set(previous.allowed_tools())
    pinned |= {t for s in previous.steps for t in s.model_tools()}
    offered = rank_tools(
        registry, f"{goal} {feedback}", pinned=sorted(pinned), unavailable=unavailable_tools()
    )
    names = sorted(tool.name for tool in offered)
    # Other plans' failures: this lineage's own feedback is in the prompt already.
    lessons = select_lessons(query=goal, exclude_name=workflow.name)
    messages = revise_messages(
        goal=goal,
        catalog=catalog_text(catalog_entries(registry, names)),
        previous=previous.to_data(),  # field order, whatever the JSON column did
        version=workflow.version,
        feedback=feedback,
        lessons=lessons_text(lessons),
    )
    with _llm(client) as llm:
        session = _Session(
            goal,
            llm,
            registry,
            redactor,
            user,
            name=workflow.name,
            revision=revision,
            feedback=feedback,
            based_on=workflow,
            observer=observer,
            offered_tools=[tool.as_dict() for tool in offered],
            lessons=[lesson.as_record() for lesson in lessons],
        )
        spec, attempt = run_session(session, messages)
    return _store_revision(
        spec, previous=workflow, owner=workflow.owner or actor_user(user), attempt=attempt
    )


# --- storing ---------------------------------------------------------------------


def _store_new(spec: WorkflowSpec, *, owner: User | None, attempt: PlanAttempt) -> Workflow:
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
    spec: WorkflowSpec, *, previous: Workflow, owner: User | None, attempt: PlanAttempt
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


def _redactor(registry: ToolRegistry, *texts: Any) -> Redactor:
    """What the planner masks in every prompt, stored reply and stored free text: the
    registry's declared secrets (``tools.secrets``), read from the environment now, and
    every token-shaped value in the free text of the request (``texts``: the goal,
    sample inputs, answers, feedback), each by value wherever it recurs."""
    return free_text_redactor(registry, os.environ, *texts)


def planner_llm_check() -> None:
    """Raise ``LLMEndpointError`` (``LLMNotConfigured``: what to set) when the planner's
    endpoint cannot be used, so a page or a request refuses before a goal is taken,
    let alone sent."""
    llm_endpoint_ready(getattr(settings, "FLOWPILOT_PLANNER_ENDPOINT", "") or None)


@contextlib.contextmanager
def _llm(client: LLMClient | None) -> Iterator[LLMClient]:
    """The caller's client, or one from settings closed afterwards."""
    if client is not None:
        yield client
        return
    owned = LLMClient.from_settings(endpoint=getattr(settings, "FLOWPILOT_PLANNER_ENDPOINT", ""))
    try:
        yield owned
    finally:
        owned.close()
