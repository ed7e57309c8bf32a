"""The admin side of templates and questions: the New plan page's question rounds, the
template curation actions and their permission (the browser test drives the happy path)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

from tests.factories import DIGEST_GOAL, UserFactory, digest_plan
from tests.review.test_admin import fresh, login, texts, url
from workflows.models import PlanAttempt, TemplateUse, Workflow, WorkflowStatus
from workflows.services import workflow_import, workflow_spec

pytestmark = pytest.mark.django_db

QUESTIONS = {
    "answer": "questions",
    "questions": [
        {"id": "threshold", "question": "How large is large?", "options": ["500", "1000"]}
    ],
}


def ask(planner_llm, client):
    planner_llm.reply_json(QUESTIONS)
    response = client.post(url("plan"), {"goal": DIGEST_GOAL, "sample_inputs": ""})
    assert response.status_code == 200
    return response, PlanAttempt.objects.get(status="questions")


def test_a_second_question_round_is_shown_and_then_the_plan(planner_llm, reviewer):
    client = login(reviewer)
    response, first = ask(planner_llm, client)
    body = response.content.decode()
    assert "1. How large is large?" in body
    assert f'name="attempt" value="{first.pk}"' in body

    planner_llm.reply_json(
        {"answer": "questions", "questions": [{"question": "Which months?", "options": ["all"]}]}
    )
    response = client.post(url("plan"), {"attempt": first.pk, "answer__threshold": "500"})
    second = PlanAttempt.objects.filter(status="questions").latest("id")
    assert second != first
    assert "1. Which months?" in response.content.decode()

    planner_llm.reply_json(digest_plan())
    response = client.post(
        url("plan"), {"attempt": second.pk, "answer__q1": "__other__", "other__q1": "Q1 only"}
    )
    workflow = Workflow.objects.get()
    assert response["Location"] == url("change", workflow)
    assert texts(response) == ["The planner proposed sales_digest v1; review it below."]
    final = PlanAttempt.objects.get(workflow=workflow)
    assert [r["answers"] for r in final.clarifications] == [{"threshold": "500"}, {"q1": "Q1 only"}]
    assert workflow.owner == reviewer
    page = client.get(url("change", workflow)).content.decode()
    assert "How large is large? — <em>500</em>" in page
    # The tools the planner was shown: here the whole catalog, the ones it called marked.
    assert "The tool catalog was small enough to be shown whole" in page
    offered = re.findall(
        r'<tr class="fp-offered-tool( fp-offered-used)?"><td>([^<]+)</td><td>all</td>', page
    )
    assert {name for _, name in offered} == {t["name"] for t in final.offered_tools}
    assert {"csv_read", "aggregate"} <= {name for used, name in offered if used}
    assert all(
        not used for used, name in offered if name not in workflow_spec(workflow).allowlist()
    )


def test_an_unknown_attempt_is_404_and_a_failing_plan_is_shown(planner_llm, reviewer):
    client = login(reviewer)
    assert client.post(url("plan"), {"attempt": "x"}).status_code == 404
    assert client.post(url("plan"), {"attempt": "99999"}).status_code == 404
    assert client.post(url("plan"), {"attempt": "9" * 40}).status_code == 404
    _, attempt = ask(planner_llm, client)

    planner_llm.fail(400, message="model gone")
    response = client.post(url("plan"), {"attempt": attempt.pk, "answer__threshold": "1000"})

    body = response.content.decode()
    assert "No plan: the planner&#x27;s LLM call failed" in body
    assert 'value="1000" class="fp-question" id="id_answer__threshold_1" checked' in body
    assert not Workflow.objects.exists()


def test_template_actions_need_the_curate_permission(reviewer):
    workflow, _ = workflow_import(data=digest_plan(), status=WorkflowStatus.ACTIVE)
    changelist = url("changelist")
    data = {"action": "exclude_template", "_selected_action": [workflow.pk]}

    page = login(reviewer).get(changelist).content.decode()
    assert "exclude_template" not in page
    login(reviewer).post(changelist, data)
    assert fresh(workflow).template_use == TemplateUse.AUTO

    curator = UserFactory(username="curator")
    curator.user_permissions.add(Permission.objects.get(codename="curate_templates"))
    client = login(curator)
    assert "Exclude from planner templates" in client.get(changelist).content.decode()
    response = client.post(changelist, data)
    assert texts(response) == ["1 version excluded from templates."]
    assert fresh(workflow).template_use == TemplateUse.EXCLUDED
    client.post(changelist, {**data, "action": "mark_template"})
    assert fresh(workflow).template_use == TemplateUse.PREFERRED
    client.post(changelist, {**data, "action": "reset_template"})
    assert fresh(workflow).template_use == TemplateUse.AUTO


def test_without_an_llm_the_new_plan_page_says_what_to_set_and_sends_nothing(no_llm, reviewer):
    client = login(reviewer)
    for response in (
        client.get(url("plan")),
        client.post(url("plan"), {"goal": DIGEST_GOAL, "sample_inputs": ""}),
    ):
        assert response.status_code == 200
        assert "set OPENAI_API_KEY" in response.content.decode()
    assert not PlanAttempt.objects.exists()


def test_a_ranked_catalog_shows_why_each_tool_was_offered_and_its_score(reviewer):
    from tests.factories import pending_version

    workflow = pending_version()
    PlanAttempt.objects.create(
        goal="digest the sales",
        workflow=workflow,
        model="m",
        status="valid",
        offered_tools=[
            {"name": "csv_read", "why": "matched", "score": 7.25},
            {"name": "sales_report", "why": "pinned", "score": 0.0},
            {"name": "weather_now", "why": "matched", "score": 1.5},
        ],
    )
    called = set(workflow_spec(workflow).allowlist())

    page = login(reviewer).get(url("change", workflow)).content.decode()

    assert "Tools shown to the planner, best match first" in page
    rows = re.findall(
        r'<tr class="fp-offered-tool( fp-offered-used)?"><td>([^<]+)</td><td>(\w+)</td>'
        r"<td>([^<]+)</td>",
        page,
    )
    assert [(name, why, score) for _, name, why, score in rows] == [
        ("csv_read", "matched", "7.25"),
        ("sales_report", "pinned", "0.0"),
        ("weather_now", "matched", "1.5"),
    ]
    assert "csv_read" in called  # the offline example reads its CSV
    assert "weather_now" not in called
    assert {name for used, name, _, _ in rows if used} == {"csv_read"}
