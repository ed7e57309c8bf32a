"""The MCP tools' handlers called directly: the checks behind the SDK's schema (a caller
in Python gets them too), and waiting for a queued plan."""

from __future__ import annotations

import pytest
from rest_framework import exceptions

from api.mcp import handlers
from api.selectors import plan_request_wait
from review.models import PlanKind, PlanRequest, PlanRequestStatus
from tests.api.mcp.conftest import AGENT_PERMS, agent
from tests.factories import UserFactory

# Its subject is not the database: the PostgreSQL pass leaves it to the SQLite pass.
pytestmark = [pytest.mark.django_db, pytest.mark.one_database]


def test_an_inactive_or_anonymous_user_is_not_authenticated():
    from django.contrib.auth.models import AnonymousUser

    user = agent(*AGENT_PERMS)
    user.is_active = False

    for who in (user, AnonymousUser(), None):
        with pytest.raises(exceptions.NotAuthenticated):
            handlers.list_tools(user=who, kind=None, search=None, limit=10)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda u: handlers.list_tools(user=u, kind=None, search=None, limit=0), "limit"),
        (lambda u: handlers.list_workflows(user=u, name=None, status=None, limit=999), "limit"),
        (lambda u: handlers.get_run(user=u, run_id=1, wait=-1), "wait"),
        (lambda u: handlers.plan_workflow(user=u, goal="g", sample_inputs=None, wait=-1), "wait"),
    ],
)
def test_out_of_range_arguments_are_refused_naming_them(call, field):
    with pytest.raises(exceptions.ValidationError) as caught:
        call(agent(*AGENT_PERMS))

    assert field in caught.value.detail


def test_lists_say_when_they_are_cut(example_tools):
    user = agent(*AGENT_PERMS)

    page = handlers.list_tools(user=user, kind="builtin", search=None, limit=1)

    assert len(page["tools"]) == 1
    assert page["truncated"] is True
    assert set(page["tools"][0]) >= {"name", "input_schema", "outputs"}


def test_waiting_for_a_plan_returns_when_it_finishes_or_the_time_is_up():
    plan = PlanRequest.objects.create(
        kind=PlanKind.CREATE, goal="g", requested_by=UserFactory(username="u")
    )
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        if now[0] >= 1:
            PlanRequest.objects.filter(pk=plan.pk).update(status=PlanRequestStatus.SUCCEEDED)

    finished = plan_request_wait(request_id=plan.pk, timeout=5, clock=lambda: now[0], sleep=sleep)
    assert finished.status == "succeeded"
    assert now[0] == pytest.approx(1.0)

    PlanRequest.objects.filter(pk=plan.pk).update(status=PlanRequestStatus.RUNNING)
    ticks = []
    late = plan_request_wait(
        request_id=plan.pk, timeout=0.5, clock=lambda: now[0] + len(ticks) * 0.25,
        sleep=ticks.append,
    )  # fmt: skip
    assert late.status == "running"
    assert ticks == [0.25, 0.25]
