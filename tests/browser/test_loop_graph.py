"""A `loop` step on the graph, in a real browser: on the version's review page and on
a run's page it is a box of its own kind with its bound and the workflow it repeats.

The run is real (``tests.runs.loops``: a review-and-fix loop against a loopback
reviewer, three iterations); chromium reads the admin served by ``live_server``.
"""

from __future__ import annotations

import pytest

from runs.services import run_create, run_execute
from tests.browser.test_review_flow import drawn_nodes, log_in
from tests.factories import UserFactory
from tests.fakes import FakeAPI
from tests.runs.loops import fixup_flow, install_check, load_check_tool, polish_flow
from tests.runs.subflows import activate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def reviewer_api():
    fake = FakeAPI().start()
    install_check(fake)
    load_check_tool(fake)
    yield fake
    fake.stop()


def loop_box(page) -> dict:
    return page.eval_on_selector(
        "#fp-graph svg g.fp-node[data-step-id=review]",
        """n => ({classes: n.getAttribute('class'), bound: n.dataset.maxIterations,
            title: n.querySelector('title').textContent,
            dash: getComputedStyle(n.querySelector('rect')).strokeDasharray})""",
    )


def test_a_loop_is_drawn_with_its_bound_on_the_review_and_run_pages(
    live_server, page, reviewer_api, artifacts
):
    activate(fixup_flow())
    polish = activate(polish_flow())
    run = run_execute(run=run_create(workflow=polish, trigger="api", inputs={"draft": "hi"}))
    assert run.status == "succeeded", run.error_summary
    UserFactory(username="root", superuser=True)
    log_in(page, live_server, "root")

    page.goto(f"{live_server.url}/admin/workflows/workflow/{polish.pk}/change/")
    nodes = drawn_nodes(page)
    assert nodes["review"]["kind"] == "loop"
    assert nodes["review"]["tool"] == "\u21bb loop \u22645\u00d7: fixup"
    assert nodes["publish"]["tool"] == "transform"
    box = loop_box(page)
    assert "fp-kind-loop" in box["classes"]
    assert box["bound"] == "5"
    assert "repeats fixup until output.passed == true (at most 5 iterations)" in box["title"]
    assert box["dash"] not in ("none", "")  # drawn apart from the solid boxes
    page.screenshot(path=str(artifacts / "loop-review.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/runs/run/{run.pk}/change/")
    nodes = drawn_nodes(page)
    assert nodes["review"]["tool"] == "\u21bb loop \u22645\u00d7: fixup"
    assert "fp-step-succeeded" in loop_box(page)["classes"]
    page.screenshot(path=str(artifacts / "loop-run.png"), full_page=True)
