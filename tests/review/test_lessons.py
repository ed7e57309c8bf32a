"""review.lessons: the versions whose validation run failed, as planner lessons (the
prompt side is in tests/workflows/test_planner_lessons.py)."""

from __future__ import annotations

import pytest

from review.lessons import failed_validations
from review.models import ApprovalStatus
from runs.models import RunStatus
from tests.factories import ApprovalFactory, pending_version

pytestmark = pytest.mark.django_db


def failed(version, error: str):
    return ApprovalFactory(
        workflow=version,
        status=ApprovalStatus.FAILED,
        validation_run__status=RunStatus.FAILED,
        validation_run__error_summary=error,
    )


def test_each_failed_validation_is_a_lesson_newest_first_with_the_runs_error():
    first = pending_version(goal="Total the sales by region")
    second = pending_version(goal="Total the sales by product")
    failed(first, "step `load` failed: file not found")
    failed(second, "")  # a run that stored no summary still says how it ended
    ApprovalFactory(workflow=pending_version(goal="Report the sales"))  # passed: no lesson

    lessons = failed_validations(limit=10)

    assert [(lesson.workflow, lesson.version, lesson.kind) for lesson in lessons] == [
        (second.name, second.version, "validation_failed"),
        (first.name, first.version, "validation_failed"),
    ]
    assert [lesson.text for lesson in lessons] == [
        "the validation run ended failed",
        "step `load` failed: file not found",
    ]
    assert lessons[1].goal == "Total the sales by region"


def test_the_limit_keeps_the_newest():
    versions = [pending_version(goal=f"Sales goal {n}") for n in range(3)]
    for version in versions:
        failed(version, f"failed {version.version}")

    assert [lesson.version for lesson in failed_validations(limit=2)] == [
        versions[2].version,
        versions[1].version,
    ]
