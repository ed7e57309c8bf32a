"""Lessons: earlier plans for similar goals that went wrong, shown to the planner as warnings.

Two kinds:

- ``rejected``: a reviewer sent a version back with feedback (``workflow_reject``, or a
  revision asked from the review page or the API). The feedback is on the plan attempt
  that answered it (``PlanAttempt.feedback``, ``based_on`` the version sent back).
- ``validation_failed``: an approved version whose validation run failed, with the
  run's error. Approvals live above this layer, so they come from the providers named
  in ``FLOWPILOT_PLANNER_LESSON_PROVIDERS`` (dotted paths of callables taking
  ``limit`` and returning ``Lesson`` objects, newest first; ``review.links`` is one).

The candidates (the newest ``MAX_CANDIDATES`` of each kind) are ranked with BM25 over
the goal, name and description of the version they are about, against the new goal,
as templates are (``templates.rank_similar``: a candidate must share two words with
the goal). The best ``FLOWPILOT_PLANNER_LESSONS`` (3) are shown, each a line that says
what happened and why, the reviewer's words or the error capped at
``MAX_LESSON_CHARS``. The lineage being revised is left out of a revision's lessons:
its own feedback is in the prompt already.

What the planner was shown is recorded on the attempt (``PlanAttempt.lessons``) and
listed on the review page. The texts were masked when they were stored (feedback is
scrubbed before it is saved, a run's error summary is masked by value), and the prompt
is masked again as a whole before it is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from workflows.models import PlanAttempt, Workflow
from workflows.planner.templates import rank_similar

logger = logging.getLogger("flowpilot.planner")

DEFAULT_LESSONS = 3
MAX_CANDIDATES = 200
MAX_LESSON_CHARS = 500

REJECTED = "rejected"
VALIDATION_FAILED = "validation_failed"


@dataclass(frozen=True)
class Lesson:
    """One earlier plan that went wrong: which version, its goal, and why."""

    kind: str  # REJECTED | VALIDATION_FAILED
    workflow: str  # the version's name
    version: int
    goal: str
    text: str  # the reviewer's feedback, or the validation run's error
    description: str = ""
    score: float = 0.0

    def as_record(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "workflow": self.workflow,
            "version": self.version,
            "text": _capped(self.text),
            "score": round(self.score, 3),
        }

    def line(self) -> str:
        what = (
            "was rejected by a reviewer, who wrote"
            if self.kind == REJECTED
            else "failed its validation run with"
        )
        goal = f' (goal: "{_capped(self.goal, 200)}")' if self.goal else ""
        return f'- `{self.workflow}` version {self.version}{goal} {what}: "{_capped(self.text)}"'


def lesson_limit() -> int:
    return int(getattr(settings, "FLOWPILOT_PLANNER_LESSONS", DEFAULT_LESSONS))


def select_lessons(
    *, query: str, limit: int | None = None, exclude_name: str | None = None
) -> list[Lesson]:
    """The earlier failures most similar to ``query``, best first; none of the workflow
    named ``exclude_name`` (a revision's own lineage)."""
    limit = lesson_limit() if limit is None else limit
    if limit <= 0:
        return []
    candidates = [
        lesson
        for lesson in [*rejected_lessons(), *_provided_lessons()]
        if lesson.text.strip() and lesson.workflow != exclude_name
    ]
    candidates = _distinct(candidates)
    if not candidates:
        return []
    documents = [" ".join([c.workflow, c.goal, c.description]) for c in candidates]
    ranked = rank_similar(query, documents)
    lessons = [replace(candidates[index], score=score) for index, score in ranked]
    lessons.sort(key=lambda c: (-c.score, c.workflow, -c.version, c.kind))
    return lessons[:limit]


def rejected_lessons(limit: int = MAX_CANDIDATES) -> list[Lesson]:
    """The feedback reviewers gave on versions they sent back, newest first."""
    attempts = (
        PlanAttempt.objects.filter(based_on__isnull=False)
        .exclude(feedback="")
        .select_related("based_on")
        .order_by("-created_at", "-id")[:limit]
    )
    return [
        Lesson(
            REJECTED,
            attempt.based_on.name,
            attempt.based_on.version,
            attempt.based_on.goal or attempt.goal,
            attempt.feedback,
            attempt.based_on.description,
        )
        for attempt in attempts
        if attempt.based_on is not None
    ]


def lesson_of_version(workflow: Workflow, kind: str, text: str) -> Lesson:
    """A lesson about ``workflow`` (for a provider)."""
    return Lesson(kind, workflow.name, workflow.version, workflow.goal, text, workflow.description)


def _provided_lessons() -> list[Lesson]:
    """The lessons of ``FLOWPILOT_PLANNER_LESSON_PROVIDERS``; a provider that fails is
    logged and skipped (a planner must not fail for want of a warning)."""
    found: list[Lesson] = []
    for path in getattr(settings, "FLOWPILOT_PLANNER_LESSON_PROVIDERS", []):
        try:
            found += list(import_string(path)(limit=MAX_CANDIDATES))
        except Exception:
            logger.exception("planner lesson provider %s failed; its lessons are left out", path)
    return found


def _distinct(lessons: Iterable[Lesson]) -> list[Lesson]:
    """One lesson per (kind, version, text): the same feedback given twice counts once."""
    seen: set[tuple[str, str, int, str]] = set()
    kept = []
    for lesson in lessons:
        key = (lesson.kind, lesson.workflow, lesson.version, lesson.text.strip())
        if key not in seen:
            seen.add(key)
            kept.append(lesson)
    return kept


def lessons_text(lessons: Iterable[Lesson]) -> str:
    """One line per lesson, best first."""
    return "\n".join(lesson.line() for lesson in lessons)


def _capped(text: str, limit: int = MAX_LESSON_CHARS) -> str:
    text = " ".join(str(text).split())  # one line: no newline can start a new section
    return text if len(text) <= limit else text[: limit - 1] + "…"
