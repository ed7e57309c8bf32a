"""Templates: approved workflows similar to the goal are shown to the planner, over the
loopback OpenAI-compatible server; excluded ones never are; the review page says which."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from tests.workflows.test_planner import (
    VALID_PLAN,
    _schema,
    base_specs,
    client,  # noqa: F401 - fixture
    llm,  # noqa: F401 - fixture
    plan,
    sleeps,  # noqa: F401 - fixture
)
from tools.permissions import PermissionRefused
from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.errors import WorkflowError
from workflows.models import PlanAttempt, TemplateUse, WorkflowStatus
from workflows.planner.services import plan_create
from workflows.planner.templates import compact_template, select_templates
from workflows.services import workflow_import, workflow_set_template_use

pytestmark = pytest.mark.django_db

WEATHER_GOAL = "Weather for a city, then post it to the team channel"

POST_SPEC = ToolSpec(
    name="post_json",
    kind="builtin",
    description="POST a JSON document to a webhook URL.",
    input_schema=_schema({"url": {"type": "string"}, "body": {"type": "object"}}, ["url"]),
    outputs=["status"],
)


def registry() -> ToolRegistry:
    return ToolRegistry([*base_specs(), POST_SPEC])


WEATHER_POST = {
    "name": "city_weather_post",
    "description": "The forecast for a city, posted to a webhook.",
    "goal": WEATHER_GOAL,
    "inputs": {"city": {"type": "string"}, "url": {"type": "string"}},
    "steps": [
        {
            "id": "geo",
            "kind": "tool",
            "tool": "geocode_city",
            "input_mapping": {"city": "$input.city"},
        },
        {
            "id": "weather",
            "kind": "tool",
            "tool": "weather_forecast",
            "input_mapping": {"lat": "geo.lat", "lon": "geo.lon"},
        },
        {
            "id": "post",
            "kind": "tool",
            "tool": "post_json",
            "input_mapping": {"url": "$input.url", "body": "$step.weather"},
        },
    ],
    "outputs": {"temperature": "weather.temperature", "status": "post.status"},
}

ISSUES = {
    "name": "repo_issue_count",
    "description": "How many issues a repository has open.",
    "goal": "Count the open GitHub issues of a repository",
    "inputs": {"owner": {"type": "string"}, "repo": {"type": "string"}},
    "steps": [
        {
            "id": "issues",
            "kind": "tool",
            "tool": "github_issues",
            "input_mapping": {"owner": "$input.owner", "repo": "$input.repo"},
        }
    ],
}


def approved(data: dict, *, use: str = TemplateUse.AUTO):
    workflow, _ = workflow_import(data=data, status=WorkflowStatus.ACTIVE)
    workflow.template_use = use
    workflow.save(update_fields=["template_use"])
    return workflow


def templates_in(request) -> list[dict]:
    """The template entries of a planner request's user message."""
    text = request.messages[1]["content"]
    if "Approved workflows similar to this goal" not in text:
        return []
    block = text.split("best match first):\n", 1)[1].split("\n")
    return [json.loads(line) for line in block if line.startswith("{")]


def test_a_similar_approved_workflow_is_shown_to_the_planner(llm, client):  # noqa: F811
    template = approved(WEATHER_POST)
    approved(ISSUES)
    llm.reply_json(plan(name="weather_to_channel"))

    workflow = plan_create(
        goal="Post the weather for Bergen to our channel", registry=registry(), client=client
    )

    (request,) = llm.requests
    shown = templates_in(request)
    assert [t["name"] for t in shown] == ["city_weather_post"]
    assert shown[0]["steps"][2] == {
        "id": "post",
        "kind": "tool",
        "tool": "post_json",
        "input_mapping": {"url": "$input.url", "body": "$step.weather"},
    }
    assert shown[0]["inputs"] == {"city": "string", "url": "string"}
    (attempt,) = PlanAttempt.objects.all()
    assert attempt.templates == [
        {
            "name": "city_weather_post",
            "version": 1,
            "score": attempt.templates[0]["score"],
            "reused": False,
        }
    ]
    assert attempt.templates[0]["score"] > 0
    assert attempt.workflow == workflow
    assert template.name in request.messages[1]["content"]


def test_an_excluded_or_unapproved_workflow_is_not_retrieved(llm, client):  # noqa: F811
    approved(WEATHER_POST, use=TemplateUse.EXCLUDED)
    pending = dict(WEATHER_POST, name="weather_post_draft")
    workflow_import(data=pending, status=WorkflowStatus.PENDING_REVIEW)
    llm.reply_json(VALID_PLAN)

    plan_create(
        goal="Post the weather for Bergen to our channel", registry=registry(), client=client
    )

    assert templates_in(llm.requests[0]) == []
    assert "Approved workflows" not in llm.requests[0].messages[1]["content"]
    assert PlanAttempt.objects.get().templates == []


def test_an_unrelated_workflow_is_not_shown():
    approved(ISSUES)
    assert select_templates(query="Post the weather for Bergen to our channel") == []
    assert [m.workflow.name for m in select_templates(query="open github issues count")] == [
        "repo_issue_count"
    ]


def test_ranking_prefers_the_closer_match_and_marked_templates():
    weather = approved(WEATHER_POST)
    other = approved(
        dict(
            WEATHER_POST,
            name="weather_city_brief",
            goal="A weather brief for a city",
            description="Weather for a city.",
        )
    )
    found = select_templates(query="weather for a city then post it", limit=3)
    assert [m.workflow for m in found] == [weather, other]
    workflow_set_template_use(workflow=other, use=TemplateUse.PREFERRED, actor=None)
    boosted = {
        m.workflow: m.score for m in select_templates(query="weather for a city then post it")
    }
    assert boosted[other] == pytest.approx(found[1].score * 1.5)
    assert boosted[weather] == pytest.approx(found[0].score)
    assert select_templates(query="weather city", limit=0) == []
    assert select_templates(query="the a of", limit=3) == []


def test_the_template_limit_is_a_setting(settings, llm, client):  # noqa: F811
    settings.FLOWPILOT_PLANNER_TEMPLATES = 0
    approved(WEATHER_POST)
    llm.reply_json(VALID_PLAN)
    plan_create(goal=WEATHER_GOAL, registry=registry(), client=client)
    assert templates_in(llm.requests[0]) == []


def test_a_large_template_is_shown_without_its_mappings():
    data = json.loads(json.dumps(WEATHER_POST))
    data["steps"][0]["input_mapping"]["country"] = "x" * 3000
    entry = compact_template(approved(data))
    assert entry["steps"][0] == {"id": "geo", "kind": "tool", "tool": "geocode_city"}


def test_template_use_needs_its_permission():
    workflow = approved(WEATHER_POST)
    clerk = get_user_model().objects.create_user("clerk")
    with pytest.raises(PermissionRefused, match="curate_templates"):
        workflow_set_template_use(workflow=workflow, use=TemplateUse.EXCLUDED, actor=clerk)
    clerk.user_permissions.add(Permission.objects.get(codename="curate_templates"))
    clerk = get_user_model().objects.get(pk=clerk.pk)
    workflow_set_template_use(workflow=workflow, use=TemplateUse.EXCLUDED, actor=clerk)
    assert workflow.template_use == "excluded"
    with pytest.raises(WorkflowError, match="none of auto, preferred, excluded"):
        workflow_set_template_use(workflow=workflow, use="always", actor=None)


def test_the_prompt_offers_the_workflow_kind_only_beside_templates(llm, client):  # noqa: F811
    approved(WEATHER_POST)
    llm.reply_json(VALID_PLAN)
    plan_create(goal=WEATHER_GOAL, registry=registry(), client=client)
    system, user = (m["content"] for m in llm.requests[0].messages[:2])
    assert '"kind": "workflow"' in user
    assert "reuse it as one step" in user
    assert '"kind": "workflow"' not in system
    assert '"kind": "loop"' in user  # a review-and-fix cycle over a template
    assert '"until": "output.passed == true"' in user
    assert '"kind": "loop"' not in system


def test_a_plan_looping_a_template_until_it_passes_is_accepted(llm, client):  # noqa: F811
    approved(WEATHER_POST)
    llm.reply_json(
        {
            "name": "warm_enough_post",
            "inputs": {"url": {"type": "string"}},
            "steps": [
                {
                    "id": "again",
                    "kind": "loop",
                    "workflow": "city_weather_post",
                    "max_iterations": 3,
                    "until": "output.temperature > 20",
                    "input_mapping": {"city": "Bergen", "url": "$input.url"},
                }
            ],
            "outputs": {"temperature": "again.last.temperature", "tries": "again.count"},
        }
    )

    workflow = plan_create(
        goal="Post the weather for Bergen until it is warm", registry=registry(), client=client
    )

    assert workflow.steps.get().kind == "loop"
    attempt = PlanAttempt.objects.get(workflow=workflow)
    assert attempt.templates[0]["reused"] is True


def test_a_plan_reusing_a_template_as_a_workflow_step_is_accepted(llm, client):  # noqa: F811
    approved(WEATHER_POST)
    llm.reply_json(
        {
            "name": "weather_post_bergen",
            "inputs": {"url": {"type": "string"}},
            "steps": [
                {
                    "id": "forecast",
                    "kind": "workflow",
                    "workflow": "city_weather_post",
                    "input_mapping": {"city": "Bergen", "url": "$input.url"},
                }
            ],
            "outputs": {"temperature": "forecast.temperature"},
        }
    )

    workflow = plan_create(
        goal="Post the weather for Bergen to our channel", registry=registry(), client=client
    )

    assert workflow.steps.get().kind == "workflow"
    attempt = PlanAttempt.objects.get(workflow=workflow)
    assert attempt.templates[0]["name"] == "city_weather_post"
    assert attempt.templates[0]["reused"] is True
