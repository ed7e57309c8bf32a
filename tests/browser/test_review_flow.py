"""The design phase in a real browser: plan → review the picture → reject → approve → active.

Chromium (Debian's, through Playwright) drives the admin served by
``live_server``; the planner talks to the loopback OpenAI-compatible server;
validation runs execute the offline built-in data tools. The assertions are on
what the browser drew: the SVG nodes (step ids, tool names) and edge labels.
"""

from __future__ import annotations

import re

import pytest

from tests.factories import (
    DIGEST_GOAL,
    HOSTILE_TEXT,
    PASSWORD,
    UserFactory,
    digest_plan,
    hostile_data,
    pending_version,
)
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

DIGEST_NODES = {
    "load": "csv_read",
    "by_region": "aggregate",
    "size": "decision",
    "report": "write_report",
    "note": "write_json",
}


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")


def drawn_nodes(page) -> dict[str, dict[str, str]]:
    """What the SVG shows per node: its id and subtitle lines, read from the drawn text."""
    page.wait_for_selector("#fp-graph[data-drawn=true]")
    return page.eval_on_selector_all(
        "#fp-graph svg g.fp-node",
        """nodes => Object.fromEntries(nodes.map(n => [n.dataset.stepId, {
            id: n.querySelector('.fp-node-id').textContent,
            tool: n.querySelector('.fp-node-tool').textContent,
            kind: n.dataset.kind,
            width: n.querySelector('rect').getBBox().width,
        }]))""",
    )


def drawn_edges(page) -> list[tuple[str, str, str]]:
    return sorted(
        tuple(edge)
        for edge in page.eval_on_selector_all(
            "#fp-graph svg g.fp-edge",
            "edges => edges.map(e => [e.dataset.from, e.dataset.to, e.dataset.when])",
        )
    )


def drawn_labels(page) -> list[str]:
    return sorted(
        page.eval_on_selector_all(
            "#fp-graph svg g.fp-edge-label text", "labels => labels.map(t => t.textContent)"
        )
    )


def message(page) -> str:
    return page.text_content("ul.messagelist")


def test_plan_review_reject_and_approve_in_the_browser(
    live_server, page, planner_llm, output_dir, artifacts
):
    UserFactory(username="root", superuser=True)
    log_in(page, live_server, "root")

    # New plan: the goal typed into the admin goes to the planner (the fake LLM).
    planner_llm.reply_json(digest_plan())
    page.goto(f"{live_server.url}/admin/workflows/workflow/")
    page.click("#fp-new-plan")
    page.fill("#id_goal", DIGEST_GOAL)
    page.fill("#id_sample_inputs", '{"threshold": 500}')
    page.click("#fp-plan-submit")
    page.wait_for_url(re.compile(r"/admin/workflows/workflow/\d+/change/$"))
    assert "The planner proposed sales_digest v1" in message(page)
    assert page.inner_text("#fp-status") == "Pending review"
    assert page.inner_text("#fp-goal") == DIGEST_GOAL

    # The picture: every step drawn with its id and tool; the branches labelled.
    nodes = drawn_nodes(page)
    assert {sid: n["id"] for sid, n in nodes.items()} == {sid: sid for sid in DIGEST_NODES}
    assert nodes["load"]["tool"] == "csv_read"
    assert nodes["report"]["tool"] == "write_report"
    assert nodes["size"]["tool"] == "decision: large | small"
    assert all(n["width"] > 40 for n in nodes.values())
    assert drawn_labels(page) == ["large", "small"]
    assert ("size", "report", "large") in drawn_edges(page)
    assert ("load", "by_region", "") in drawn_edges(page)
    # An edge's tooltip (its SVG <title>) gives the types across it.
    edge = '#fp-graph svg g.fp-edge[data-from="load"][data-to="by_region"]'
    typed = "load.rows: array<object> → by_region.rows: array<object>"
    assert page.text_content(f"{edge} > title") == typed
    assert page.get_attribute(edge, "data-types") == typed
    assert page.locator(f"{edge} > path.fp-edge-hit").count() == 1
    assert page.locator("#fp-steps > tbody > tr").count() == 5
    assert page.locator("#fp-plan-history tbody tr").count() == 1
    page.screenshot(path=str(artifacts / "review_page.png"), full_page=True)

    # Reject with feedback: the planner revises; the new version opens.
    planner_llm.reply_json(digest_plan(with_products=True))
    page.fill("#id_feedback", "Also total the sales by product")
    page.click("#fp-reject")
    page.wait_for_url(re.compile(r"/admin/workflows/workflow/\d+/change/$"))
    assert "Rejected sales_digest v1; the planner proposed sales_digest v2" in message(page)
    assert "by_product" in drawn_nodes(page)
    assert page.locator("#fp-plan-history tbody tr").count() == 2
    assert "Also total the sales by product" in page.inner_text("#fp-plan-history")
    assert "1 of 5 revision rounds used" in page.inner_text("#fp-rounds")
    assert "revise" in planner_llm.requests[-1].text.lower()

    # Approve with inputs that break the validation run: it stays in review, showing why.
    assert page.input_value("#id_input__csv_path") == "data/sales.csv"  # the declared default
    page.fill("#id_input__csv_path", "data/no_such.csv")
    page.click("#fp-approve")
    page.wait_for_selector("ul.messagelist")
    assert "failed: step `load` failed" in message(page)
    assert page.inner_text("#fp-status") == "Pending review"
    assert "no_such.csv" in page.inner_text("#fp-approvals .fp-failure")

    # Approve with good sample inputs: the validation run succeeds, the version is active.
    page.fill("#id_input__csv_path", "data/sales.csv")
    page.fill("#id_input__threshold", "500")
    page.click("#fp-approve")
    page.wait_for_selector("ul.messagelist")
    assert "Approved sales_digest v2: validation run" in message(page)
    assert page.inner_text("#fp-status") == "Active"
    assert page.locator("#fp-approve-form").count() == 0
    page.click("#fp-approvals .fp-approval-passed a")
    assert "Succeeded" in page.inner_text("#content-main")
    assert "Validation run" in page.inner_text("#content-main")

    v1, v2 = Workflow.objects.filter(name="sales_digest").order_by("version")
    assert (v1.status, v2.status) == ("rejected", "active")
    assert v2.approved_by.username == "root"
    assert (output_dir / "digest.html").exists()


def test_approval_is_refused_for_a_user_without_the_permission(live_server, page):
    UserFactory(username="reviewer")
    version = pending_version()
    log_in(page, live_server, "reviewer")

    page.goto(f"{live_server.url}/admin/workflows/workflow/{version.pk}/change/")
    assert page.locator("#fp-approve-form").count() == 0
    assert "approving needs" in page.inner_text("#fp-approve-refused")

    # A forged approve form (the button is not there) is refused by the server.
    page.evaluate(
        """([action]) => {
            const form = document.createElement('form');
            form.method = 'post';
            form.action = action;
            const token = document.querySelector('[name=csrfmiddlewaretoken]').cloneNode();
            form.appendChild(token);
            document.body.appendChild(form);
            form.submit();
        }""",
        [f"/admin/workflows/workflow/{version.pk}/approve/"],
    )
    page.wait_for_selector("ul.messagelist")
    assert "Not approved: reviewer may not approve sales_report v1" in message(page)
    assert page.inner_text("#fp-status") == "Pending review"
    assert Workflow.objects.get(pk=version.pk).status == "pending_review"


def test_hostile_labels_are_drawn_as_text(live_server, page):
    UserFactory(username="root", superuser=True)
    version = pending_version(hostile_data())
    log_in(page, live_server, "root")

    page.goto(f"{live_server.url}/admin/workflows/workflow/{version.pk}/change/")

    nodes = drawn_nodes(page)
    assert set(nodes) == {"load", "pick", "evil_step", "other"}
    assert drawn_labels(page) == ["\"'south'\"", "<b>north</b>"]
    name = page.text_content("g.fp-node[data-step-id=load] .fp-node-name")
    assert name == HOSTILE_TEXT[:43] + "…"  # cut to fit, as text
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#fp-graph img, #fp-graph b, #fp-review img").count() == 0
