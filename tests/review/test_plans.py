"""Plan requests (``review/plans.py``): stored, planned once by the task or in process,
every failure recorded on the request the client polls."""

from __future__ import annotations

import pytest

import review.plans as plans
from review.models import PlanKind, PlanRequest
from review.plans import plan_request_create, plan_request_execute
from tests.factories import pending_version
from tools.llm import LLMNotConfigured
from workflows.planner import PlanError

pytestmark = pytest.mark.django_db


def test_a_plan_request_is_planned_once_even_when_its_task_is_delivered_twice(planner_llm):
    from tests.factories import digest_plan

    planner_llm.reply_json(digest_plan())
    plan = plan_request_create(kind=PlanKind.CREATE, user=None, goal="digest")

    again = plan_request_execute(request_id=plan.pk)

    assert (again.status, again.workflow_id) == ("succeeded", plan.workflow_id)
    assert len(planner_llm.requests) == 1


def test_a_broker_that_is_down_fails_the_request_not_the_call(monkeypatch, settings):
    settings.OPENAI_API_KEY = "sk-configured"

    def refuse(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(plans, "in_process", lambda: False)
    monkeypatch.setattr(plans.current_app, "send_task", refuse)

    plan = plan_request_create(kind=PlanKind.CREATE, user=None, goal="digest")

    assert plan.status == "failed"
    assert plan.error == {
        "code": "broker_unavailable",
        "message": "broker unreachable",
        "details": [],
    }


def test_an_unexpected_error_is_recorded_on_the_request(monkeypatch, settings):
    settings.OPENAI_API_KEY = "sk-configured"

    def explode(request):
        raise RuntimeError("boom")

    monkeypatch.setattr(plans, "_plan", explode)

    plan = plan_request_create(kind=PlanKind.CREATE, user=None, goal="digest")

    assert (plan.status, plan.error["code"]) == ("failed", "internal_error")
    assert "RuntimeError: boom" in plan.error["message"]


def test_a_revision_whose_version_was_deleted_fails_cleanly(monkeypatch, settings):
    settings.OPENAI_API_KEY = "sk-configured"
    version = pending_version()
    monkeypatch.setattr(plans, "in_process", lambda: False)
    monkeypatch.setattr(plans, "plan_request_publish", lambda request_id: None)
    plan = plan_request_create(kind=PlanKind.REVISE, user=None, feedback="more", based_on=version)
    PlanRequest.objects.filter(pk=plan.pk).update(based_on=None)

    done = plan_request_execute(request_id=plan.pk)

    assert (done.status, done.error["code"]) == ("failed", "plan_failed")


def test_the_task_plans_the_request(planner_llm):
    from review.tasks import plan_execute
    from tests.factories import digest_plan

    planner_llm.reply_json(digest_plan())
    plan = PlanRequest.objects.create(kind=PlanKind.CREATE, goal="digest")

    assert plan_execute(plan.pk) == "succeeded"


def test_a_goal_is_required():
    with pytest.raises(PlanError, match="a goal is needed"):
        plan_request_create(kind=PlanKind.CREATE, user=None, goal="  ")


def test_the_plan_task_keeps_the_name_messages_in_flight_carry():
    from review.tasks import plan_execute

    assert plan_execute.name == plans.PLAN_TASK == "api.plan_execute"


def test_a_revision_names_its_version():
    with pytest.raises(PlanError, match="names the version"):
        plan_request_create(kind=PlanKind.REVISE, user=None, feedback="more", based_on=None)


def test_without_a_key_a_plan_request_is_refused_with_what_to_set(no_llm):
    with pytest.raises(LLMNotConfigured, match="set OPENAI_API_KEY"):
        plan_request_create(kind=PlanKind.CREATE, user=None, goal="digest our sales")
    assert not PlanRequest.objects.exists()
