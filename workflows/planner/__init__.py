"""The planner (the design phase): a goal → a proposed workflow, pending review.

``plan_create(goal=…)`` and ``plan_revise(workflow=…, feedback=…)`` are the
services; the admin review flow, the API and ``planflow`` call them. See
``docs/planner.md``.
"""

from workflows.planner.errors import (
    PlanError,
    PlanFailed,
    PlanNotRevisable,
    PlanQuestions,
    PlanRoundsExhausted,
)
from workflows.planner.services import (
    MAX_REPAIR_ROUNDS,
    MAX_REVISION_ROUNDS,
    plan_answer,
    plan_create,
    plan_revise,
    planner_llm_check,
)

__all__ = [
    "MAX_REPAIR_ROUNDS",
    "MAX_REVISION_ROUNDS",
    "PlanError",
    "PlanFailed",
    "PlanNotRevisable",
    "PlanQuestions",
    "PlanRoundsExhausted",
    "plan_answer",
    "plan_create",
    "plan_revise",
    "planner_llm_check",
]
