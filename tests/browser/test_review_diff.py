"""The review diff in a real browser: a revision of an active version with one step
changed and one added is drawn (colours, legend) and listed as such; the approval
policy's "1 of 2 approvals" is on the same page.

Chromium (Debian's, through Playwright) drives the admin served by ``live_server``.
A screenshot of the page is written to ``out/browser/review_diff.png``.
"""

from __future__ import annotations

import copy

import pytest

from tests.browser.test_review_flow import drawn_edges, log_in
from tests.factories import UserFactory, pending_version, sales_report_data
from workflows.models import WorkflowStatus
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

ADDED_RGB = "rgb(31, 138, 59)"
CHANGED_RGB = "rgb(199, 119, 0)"


def revision_of(data: dict) -> dict:
    """`by_region` changed (grouping, retry), `summary` added after it."""
    revised = copy.deepcopy(data)
    by_region = revised["steps"][1]
    by_region["input_mapping"]["group_by"] = "country"
    by_region["retry"] = {"max_attempts": 3}
    revised["steps"].insert(
        2,
        {
            "id": "summary",
            "kind": "transform",
            "expression": "{total: total}",
            "input_mapping": {"total": "by_region.total"},
        },
    )
    return revised


def drawn_changes(page) -> dict[str, dict[str, str]]:
    page.wait_for_selector("#fp-graph[data-drawn=true]")
    return page.eval_on_selector_all(
        "#fp-graph svg g.fp-node",
        """nodes => Object.fromEntries(nodes.map(n => [n.dataset.stepId, {
            change: n.dataset.change,
            stroke: getComputedStyle(n.querySelector('rect')).stroke,
            opacity: getComputedStyle(n).opacity,
        }]))""",
    )


def test_a_revision_is_drawn_and_listed_as_a_diff(live_server, page, artifacts, settings):
    settings.FLOWPILOT_APPROVALS_REQUIRED = 2
    UserFactory(username="root", superuser=True)
    data = sales_report_data()
    workflow_import(data=data, status=WorkflowStatus.ACTIVE)
    revision = pending_version(revision_of(data))

    log_in(page, live_server, "root")
    page.goto(f"{live_server.url}/admin/workflows/workflow/{revision.pk}/change/")
    nodes = drawn_changes(page)

    assert {step: n["change"] for step, n in nodes.items()} == {
        "load": "unchanged",
        "by_region": "changed",
        "summary": "added",
        "top_products": "unchanged",
        "report": "unchanged",
    }
    assert nodes["by_region"]["stroke"] == CHANGED_RGB
    assert nodes["summary"]["stroke"] == ADDED_RGB
    assert nodes["load"]["stroke"] not in {ADDED_RGB, CHANGED_RGB}
    assert ("by_region", "summary", "") in drawn_edges(page)
    added_edges = page.eval_on_selector_all(
        "#fp-graph svg g.fp-edge.fp-change-added",
        "es => es.map(e => e.dataset.from + '>' + e.dataset.to)",
    )
    assert added_edges == ["by_region>summary"]
    assert page.is_visible("#fp-change-legend")
    assert "What changed since sales_report v1" in page.text_content("#fp-changes h2")
    rows = page.eval_on_selector_all(
        "#fp-change-table tr.fp-change-row",
        "rows => rows.map(r => [r.dataset.change, r.cells[1].textContent.trim(),"
        " r.cells[r.cells.length - 1].textContent.trim()])",
    )
    assert rows[0][:2] == ["changed", "by_region"]
    assert 'input_mapping.group_by: "region" → "country"' in rows[0][2]
    assert "retry:" in rows[0][2]
    assert rows[1] == ["added", "summary", "new step"]
    assert rows[2][0] == "added"
    assert "by_region → summary" in rows[2][1]
    assert "0 of 2 approvals" in page.text_content("#fp-tally")
    page.screenshot(path=str(artifacts / "review_diff.png"), full_page=True)


def test_a_removed_step_is_drawn_ghosted(live_server, page, artifacts):
    UserFactory(username="root", superuser=True)
    data = sales_report_data()
    workflow_import(data=data, status=WorkflowStatus.ACTIVE)
    revised = copy.deepcopy(data)
    revised["steps"] = [s for s in revised["steps"] if s["id"] != "top_products"]
    revised["steps"][-1]["input_mapping"]["sections"].pop()
    revision = pending_version(revised)

    log_in(page, live_server, "root")
    page.goto(f"{live_server.url}/admin/workflows/workflow/{revision.pk}/change/")
    nodes = drawn_changes(page)

    assert nodes["top_products"]["change"] == "removed"
    assert float(nodes["top_products"]["opacity"]) < 0.6
    assert nodes["report"]["change"] == "changed"
    removed = page.eval_on_selector_all(
        "#fp-graph svg g.fp-edge.fp-change-removed",
        "es => es.map(e => e.dataset.from + '>' + e.dataset.to).sort()",
    )
    assert removed == ["load>top_products", "top_products>report"]
    page.screenshot(path=str(artifacts / "review_diff_removed.png"), full_page=True)
