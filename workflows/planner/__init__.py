"""The planner (the design phase): a goal → a proposed workflow, pending review.

``plan_create(goal=…)``, ``plan_answer(attempt=…, answers=…)`` and
``plan_revise(workflow=…, feedback=…)`` are the services, in
``workflows.planner.services``; the admin review flow, the API and ``planflow`` call
them. See ``docs/planner.md``.

The package re-exports only its errors: a caller that merely catches a planner error
(the API's error handler, the review pages) does not load the planner, which every
command would otherwise pay for through the admin and the URL conf. The services
are imported where a plan is made.
"""

from workflows.planner.errors import (
    PlanError,
    PlanFailed,
    PlanNotRevisable,
    PlanQuestions,
    PlanRoundsExhausted,
)

__all__ = [
    "PlanError",
    "PlanFailed",
    "PlanNotRevisable",
    "PlanQuestions",
    "PlanRoundsExhausted",
]
