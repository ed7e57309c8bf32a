"""Each admin page a person works in, opened in chromium at 1400 px with realistic data:
the home, the runs list, a failed run's page, the review page and the schedules list.

Each checks what a person must see (texts, buttons) and that nothing overflows
sideways at 1400 px; the review page's decision fits the first 1400 by 900 screen. The
screenshots (first screen only, to keep them small) are the ones in ``docs/images/``
that the README and docs show: ``FLOWPILOT_SCREENSHOTS=docs/images`` rewrites them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from runs.models import RunStatus
from tests.browser.test_review_flow import log_in
from tests.factories import RunFactory, ScheduleFactory, UserFactory, pending_version
from tests.runs.samples import make_failed_run, make_succeeded_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("example_tools"),
]

WIDTH, HEIGHT = 1400, 900


def shoot(page, artifacts: Path, name: str) -> None:
    """The first screen as a PNG: in ``out/browser``, and in FLOWPILOT_SCREENSHOTS if set."""
    page.screenshot(path=str(artifacts / f"{name}.png"))
    target = os.environ.get("FLOWPILOT_SCREENSHOTS")
    if target:
        page.screenshot(path=str(Path(target) / f"{name}.png"))


def no_sideways_overflow(page) -> None:
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], f"the page is {widths[0]} px wide in a {widths[1]} px window"


def columns_fit(page) -> None:
    """A list's table shows every column without scrolling sideways inside its box."""
    widths = page.eval_on_selector("#changelist .results", "r => [r.scrollWidth, r.clientWidth]")
    assert widths[0] <= widths[1], f"the list's columns need {widths[0]} px of {widths[1]} px"


def in_first_screen(page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    return box is not None and box["y"] + box["height"] <= HEIGHT and box["x"] >= 0


def test_home_runs_and_run_page_read_at_1400px(live_server, page, fake_api, monkeypatch, artifacts):
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    failed = make_failed_run(fake_api, monkeypatch)
    make_succeeded_run(fake_api, monkeypatch)
    RunFactory(status=RunStatus.SUCCEEDED)
    pending_version(name="sales_digest")
    ScheduleFactory()
    UserFactory(username="root", superuser=True)
    log_in(page, live_server, "root")

    # The home: branded, with what failed, what waits, what fires next, and health.
    page.goto(f"{live_server.url}/admin/")
    assert page.inner_text("#site-name") == "flowpilot"
    failed_box = page.inner_text("#fp-home-failed")
    assert f"run {failed.pk}" in failed_box
    assert "step `langs` failed (http_error)" in failed_box
    assert "sales_digest v1" in page.inner_text("#fp-home-waiting")
    assert " in " in page.inner_text("#fp-home-schedules .fp-home-fire")
    health = page.inner_text("#fp-home-health")
    assert "beat" in health
    assert "workers" in health
    content = page.inner_text("#content")
    for hidden in ("Periodic tasks", "Crontabs", "Intervals", "Clocked", "Solar events"):
        assert hidden not in content
    no_sideways_overflow(page)
    shoot(page, artifacts, "home")

    # The runs list: failing step and error per row; the home's link filters it.
    page.click("#fp-home-failed-all")
    page.wait_for_url("**failed_since=24h")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1
    assert "langs" in rows.first.locator("td.field-failure").inner_text()
    page.goto(f"{live_server.url}/admin/runs/run/")
    assert page.locator("#result_list tbody tr").count() == 3
    assert "Command line" in page.inner_text("#result_list")
    no_sideways_overflow(page)
    columns_fit(page)
    shoot(page, artifacts, "runs_list")

    # The run page: its title once, the error, and the operations as buttons.
    page.goto(f"{live_server.url}/admin/runs/run/{failed.pk}/change/")
    assert page.locator("#content h1").inner_text() == f"Run {failed.pk} of repo_report v1"
    assert page.locator("#content h2", has_text=f"Run {failed.pk}").count() == 0
    assert page.locator("#fp-run-buttons #fp-resume").is_visible()
    assert page.locator("#fp-run-buttons #fp-again").is_visible()
    assert page.locator("#fp-run-buttons #fp-restart-link").is_visible()
    assert page.locator("#fp-cancel").count() == 0  # a failed run does not cancel
    assert in_first_screen(page, "#fp-resume")
    no_sideways_overflow(page)
    page.wait_for_selector("#fp-graph[data-drawn=true]")
    shoot(page, artifacts, "run_page")

    # Resume from the page: the service runs it again from its checkpoint.
    fake_api.heal("github_languages")
    page.click("#fp-resume")
    page.wait_for_selector("ul.messagelist")
    assert f"Run {failed.pk} resumed from its checkpoint" in page.inner_text("ul.messagelist")
    # Once it has finished, the page gives the resume's own time beside the run's total.
    page.goto(f"{live_server.url}/admin/runs/run/{failed.pk}/change/")
    assert page.inner_text("#fp-run-status") == "Succeeded"
    assert page.locator("#fp-resume-duration").count() == 1
    assert "since it was resumed at" in page.inner_text("#content")


def test_review_and_schedules_pages_put_the_decision_first(live_server, page, artifacts):
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    version = pending_version(name="sales_report")
    ScheduleFactory()
    UserFactory(username="root", superuser=True)
    log_in(page, live_server, "root")

    page.goto(f"{live_server.url}/admin/workflows/workflow/{version.pk}/change/")
    assert page.inner_text("#fp-status") == "Pending review"
    for selector in ("#fp-goal", "#fp-tools", "#fp-approve", "#fp-reject", "#fp-edit-json"):
        assert in_first_screen(page, selector), f"{selector} is below the first screen"
    assert "write_report" in page.inner_text("#fp-tools")
    assert page.locator("#fp-steps .fp-mapping tr").count() > 0  # mappings as rows
    assert "{" not in page.locator("#fp-steps .fp-mapping").first.inner_text()
    graph = page.locator("#fp-graph").bounding_box()
    assert graph is not None
    assert graph["y"] > page.locator("#fp-approve").bounding_box()["y"]
    no_sideways_overflow(page)
    page.wait_for_selector("#fp-graph[data-drawn=true]")
    shoot(page, artifacts, "review_page")

    page.goto(f"{live_server.url}/admin/schedules/schedule/")
    listed = page.inner_text("#result_list")
    assert "next fire" in listed.lower()
    assert re.search(r"\bin \d+ (h|min|s|day)", page.inner_text("#result_list td.field-next_fire"))
    assert "active" in page.inner_text("#result_list td.field-state")
    assert page.locator("#result_list img[alt]").count() == 0  # words, not ✔/✖ icons
    no_sideways_overflow(page)
    columns_fit(page)
    shoot(page, artifacts, "schedules_list")

    page.goto(f"{live_server.url}/admin/workflows/workflow/")
    assert "sales_report" in page.inner_text("#result_list")
    no_sideways_overflow(page)
    columns_fit(page)
    shoot(page, artifacts, "workflows_list")
