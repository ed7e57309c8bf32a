"""The planner asks before it plans, in a real browser: New plan → the questions as a
form → answers → the plan, whose review page names the template and the answers it
drew on. Chromium through Playwright; the planner is the loopback OpenAI-compatible
server."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_review_flow import log_in, message
from tests.factories import DIGEST_GOAL, UserFactory, digest_plan
from workflows.models import PlanAttempt, WorkflowStatus
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = {
    "answer": "questions",
    "questions": [
        {
            "id": "threshold",
            "question": "Above what revenue is a region 'large'?",
            "options": ["500", "1000", "5000"],
        },
        {
            "id": "format",
            "question": "Which format should the digest have?",
            "options": ["HTML report", "JSON file"],
        },
        {"id": "period", "question": "Over which period?", "options": ["last month"]},
    ],
}


def test_questions_are_answered_in_the_new_plan_form(live_server, page, planner_llm, artifacts):
    UserFactory(username="root", superuser=True)
    template = dict(digest_plan(), name="regional_sales_digest", goal="Sales by region digest")
    workflow_import(data=template, status=WorkflowStatus.ACTIVE)
    log_in(page, live_server, "root")

    planner_llm.reply_json(QUESTIONS)
    page.goto(f"{live_server.url}/admin/workflows/workflow/")
    page.click("#fp-new-plan")
    page.fill("#id_goal", DIGEST_GOAL)
    page.click("#fp-plan-submit")

    # The questions, as a form: each with its suggestions and "something else".
    page.wait_for_selector("#fp-answer-page-form")
    assert "the planner asks 3 questions" in page.inner_text("#fp-intro")
    form = page.inner_text("#fp-answer-page-form")
    assert "1. Above what revenue is a region 'large'?" in form
    assert "2. Which format should the digest have?" in form
    assert page.locator("input[name=answer__threshold]").count() == 4  # 3 + something else
    page.screenshot(path=str(artifacts / "plan_questions.png"), full_page=True)

    # "Something else" without a text is refused, and what was chosen is kept.
    page.check("input[name=answer__threshold][value='1000']")
    page.check("input[name=answer__format][value='__other__']")
    planner_llm.reply_json(digest_plan())
    page.click("#fp-answer-submit")
    page.wait_for_selector(".errorlist")
    assert "say what, or choose one of the suggestions" in page.inner_text(".errorlist")
    assert page.is_checked("input[name=answer__threshold][value='1000']")
    assert len(planner_llm.requests) == 1

    page.fill("#id_other__format", "A short HTML page")
    page.click("#fp-answer-submit")
    page.wait_for_url(re.compile(r"/admin/workflows/workflow/\d+/change/$"))
    assert "The planner proposed sales_digest v1" in message(page)

    # The answers reached the planner; the third question was left to it.
    text = planner_llm.requests[1].messages[1]["content"]
    assert "- Above what revenue is a region 'large'? -> 1000" in text
    assert "- Which format should the digest have? -> A short HTML page" in text
    assert "- Over which period? -> (no preference" in text
    assert "regional_sales_digest" in planner_llm.requests[0].messages[1]["content"]

    # The review page says what the plan drew on.
    assert "regional_sales_digest v1" in page.inner_text("#fp-templates")
    answers = page.inner_text("#fp-clarifications")
    assert "Above what revenue is a region 'large'? — 1000" in answers
    assert "Over which period? — no preference" in answers
    assert page.locator("#fp-plan-history tbody tr").count() == 2  # the questions, the plan
    page.screenshot(path=str(artifacts / "plan_answered_review.png"), full_page=True)
    assert PlanAttempt.objects.filter(status="questions").count() == 1
