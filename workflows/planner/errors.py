"""Planner errors. None is retryable by the engine: a person decides what happens next."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tools.errors import FlowpilotError

if TYPE_CHECKING:
    from workflows.models import PlanAttempt
    from workflows.validation.report import ValidationIssue


class PlanError(FlowpilotError):
    code = "plan_error"


class PlanFailed(PlanError):
    """No valid plan came out of a session (after its repair rounds), or the LLM failed.

    ``attempts`` are the stored ``PlanAttempt`` rows of the session; ``issues`` the
    validator's problems with the last plan, when there was one.
    """

    code = "plan_failed"

    def __init__(
        self,
        message: str,
        *,
        attempts: Iterable[PlanAttempt] = (),
        issues: Iterable[ValidationIssue] = (),
    ) -> None:
        super().__init__(message)
        self.attempts = list(attempts)
        self.issues = list(issues)


class PlanRoundsExhausted(PlanFailed):
    """A goal lineage has had its ``MAX_REVISION_ROUNDS`` revisions."""

    code = "plan_rounds_exhausted"


class PlanNotRevisable(PlanError):
    """Only a version pending review (or already rejected) can be revised."""

    code = "plan_not_revisable"


class PlanQuestions(PlanError):
    """The planner asked clarifying questions instead of planning.

    ``attempt`` is the stored ``PlanAttempt`` holding them (``attempt.questions``:
    ``[{id, question, options}]``); answer with ``plan_answer(attempt=…, answers=…)``.
    Not a failure: a ``PlanError`` only so that a caller unaware of questions still
    reports something sensible.
    """

    code = "plan_questions"

    def __init__(self, *, attempt: PlanAttempt, attempts: Iterable[PlanAttempt] = ()) -> None:
        questions = attempt.questions
        listed = "; ".join(f"[{q['id']}] {q['question']}" for q in questions)
        super().__init__(
            f"the planner asked {len(questions)} question(s) before planning: {listed}"
        )
        self.attempt = attempt
        self.questions = list(questions)
        self.attempts = list(attempts)
