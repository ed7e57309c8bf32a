"""The run page in a real browser: the graph coloured by status, the timeline, collapsed
outputs, errors in place, live refresh, and the runs list with its status strips.

Runs are real (the shipped GitHub tools against the loopback fake API); chromium
(Debian's, through Playwright) reads the admin served by ``live_server``. The
screenshots land in ``out/browser/`` to be looked at.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from runs.models import Run, RunTrigger
from runs.services import run_create, run_execute
from tests.browser.test_review_flow import log_in
from tests.factories import UserFactory
from tests.fakes import FakeResponse
from tests.fakes.apis import default_repo
from tests.runs.samples import SECRET_TOKEN, failed_flow, make_failed_run, make_succeeded_run
from workflows.services import workflow_import

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("example_tools"),
]


def graph_nodes(page) -> dict[str, dict]:
    page.wait_for_selector("#fp-graph[data-drawn=true]")
    return page.eval_on_selector_all(
        "#fp-graph svg g.fp-node",
        """nodes => Object.fromEntries(nodes.map(n => [n.dataset.stepId, {
            status: n.dataset.status,
            classes: n.getAttribute('class'),
            fill: getComputedStyle(n.querySelector('rect')).fill,
            label: (n.querySelector('.fp-node-status') || {}).textContent,
        }]))""",
    )


def bars(page, step_id: str) -> list[dict]:
    return page.eval_on_selector_all(
        f"#fp-run-timeline .fp-gantt-row[data-step-id={step_id}] .fp-bar",
        """bars => bars.map(b => ({kind: b.dataset.kind, cls: b.className, title: b.title,
            left: b.getBoundingClientRect().left, width: b.getBoundingClientRect().width}))""",
    )


def test_a_failed_run_reads_at_a_glance(live_server, page, fake_api, monkeypatch, artifacts):
    run = make_failed_run(fake_api, monkeypatch)
    make_succeeded_run(fake_api, monkeypatch)
    UserFactory(username="root", superuser=True)
    log_in(page, live_server, "root")

    page.goto(f"{live_server.url}/admin/runs/run/{run.pk}/change/")
    assert page.get_attribute("#fp-run-status", "data-status") == "failed"
    assert "step `langs` failed (http_error)" in page.inner_text("#fp-run-error")

    # The graph: one colour per status, the status written in each box.
    nodes = graph_nodes(page)
    assert {sid: n["status"] for sid, n in nodes.items()} == {
        "repo": "succeeded",
        "issues": "succeeded",
        "langs": "failed",
        "summary": "pending",
    }
    assert nodes["langs"]["label"] == "failed"
    assert "fp-step-failed" in nodes["langs"]["classes"]
    fills = {status: n["fill"] for n in nodes.values() for status in [n["status"]]}
    assert len(set(fills.values())) == 3  # succeeded, failed and pending look different
    assert fills["failed"] == "rgb(253, 226, 225)"
    assert page.locator("#fp-status-legend .fp-swatch").count() == 7  # waiting: an approval

    # The timeline: two tries of `repo` with the wait between them, one failed try of `langs`.
    repo = bars(page, "repo")
    assert [b["kind"] for b in repo] == ["attempt", "wait", "attempt"]
    assert "fp-bar-failed" in repo[0]["cls"]
    assert "fp-bar-succeeded" in repo[2]["cls"]
    assert repo[0]["left"] < repo[1]["left"] < repo[2]["left"]
    assert repo[1]["width"] > 40  # the 0.2 s backoff is most of this short run
    assert "waited" in repo[1]["title"]
    langs = bars(page, "langs")
    assert len(langs) == 1
    assert "fp-bar-failed" in langs[0]["cls"]
    assert langs[0]["left"] >= repo[2]["left"]  # it ran after `repo`
    assert bars(page, "summary") == []
    assert "2 tries" in page.inner_text("#fp-run-timeline .fp-gantt-row[data-step-id=repo]")

    # Outputs collapsed to a summary with the size; the full record behind "show full".
    issues = page.locator("#fp-run-steps article[data-step-id=issues]")
    assert (
        issues.locator(".fp-output-summary")
        .inner_text()
        .startswith("object with 7 keys: count, issues")
    )
    assert issues.locator(".fp-size").first.inner_text().endswith("B")
    full = issues.locator("details.fp-full-output pre")
    assert not full.is_visible()
    issues.locator("details.fp-full-output summary").click()
    assert full.is_visible()
    assert "Widget spins backwards" in full.inner_text()

    # The error in place, at its step, with where it came from.
    langs_card = page.locator("#fp-run-steps article[data-step-id=langs]")
    assert "step `langs` (tool `github_languages`), try 1: http_error (HTTP 404" in (
        langs_card.locator(".fp-error-origin").inner_text()
    )
    assert "returned HTTP 404" in langs_card.locator(".fp-error-message").inner_text()

    # The version link; no approval for a version run from a file.
    assert (
        page.locator("#fp-run-links li[data-label=version] a")
        .inner_text()
        .startswith("repo_report v1")
    )
    assert SECRET_TOKEN not in page.content()
    page.screenshot(path=str(artifacts / "run_page_failed.png"), full_page=True)
    page.emulate_media(color_scheme="dark")  # the admin's dark theme: text stays readable
    dark = graph_nodes(page)
    assert dark["langs"]["fill"] == "rgb(253, 226, 225)"
    text_fill = page.eval_on_selector(
        "#fp-graph g.fp-node[data-step-id=langs] .fp-node-id", "t => getComputedStyle(t).fill"
    )
    assert text_fill == "rgb(31, 45, 61)"
    page.screenshot(path=str(artifacts / "run_page_failed_dark.png"), full_page=True)
    page.emulate_media(color_scheme="light")

    # The runs list: duration, trigger, and a strip per workflow of its recent runs.
    page.goto(f"{live_server.url}/admin/runs/run/")
    strips = page.eval_on_selector_all(
        "#fp-strips tr.fp-strip",
        "rows => rows.map(r => [r.dataset.workflow,"
        " [...r.querySelectorAll('.fp-strip-cell')].map(c => c.dataset.status)])",
    )
    assert sorted(strips) == [["repo_report", ["failed"]], ["repo_report_ok", ["succeeded"]]]
    assert page.locator("#result_list .fp-run-status").count() == 2
    assert "Command line" in page.inner_text("#result_list")
    page.screenshot(path=str(artifacts / "runs_list.png"), full_page=True)
    page.click("#changelist-filter a:text-is('Failed')")
    page.wait_for_url("**status__exact=failed")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == 1


def test_the_page_follows_a_running_run_without_a_reload(
    live_server, page, fake_api, monkeypatch, artifacts
):
    """`repo` is held by the fake until released; the open page shows it finish."""
    monkeypatch.setenv("GITHUB_TOKEN", SECRET_TOKEN)
    release = threading.Event()
    arrived = threading.Event()

    def held(request, match):
        arrived.set()
        release.wait(20)
        return FakeResponse.json(default_repo().info)

    fake_api.respond("github_repo", held)
    fake_api.fail("github_languages", status=404, body={"message": "Not Found"})
    workflow, _ = workflow_import(data=failed_flow())
    run = run_create(
        workflow=workflow,
        trigger=RunTrigger.MANUAL,
        inputs={"owner": "octo-org", "repo": "widgets"},
    )

    def execute() -> None:
        try:
            run_execute(run=Run.objects.get(pk=run.pk))
        finally:
            connection.close()

    worker = threading.Thread(target=execute)
    worker.start()
    try:
        assert arrived.wait(10)
        UserFactory(username="root", superuser=True)
        log_in(page, live_server, "root")
        page.goto(f"{live_server.url}/admin/runs/run/{run.pk}/change/")
        assert page.get_attribute("#fp-run-status", "data-status") == "running"
        assert graph_nodes(page)["repo"]["status"] == "running"
        assert page.locator("#fp-live").is_visible()
        assert bars(page, "repo")[-1]["kind"] == "running"
        page.evaluate("window.fpNotReloaded = true")
        page.screenshot(path=str(artifacts / "run_page_running.png"), full_page=True)
    finally:
        release.set()
        worker.join(20)
    assert not worker.is_alive()

    page.wait_for_selector("#fp-run-status[data-status=failed]", timeout=10_000)
    assert page.evaluate("window.fpNotReloaded") is True  # refreshed in place
    page.wait_for_selector("#fp-run[data-live=stopped]")
    nodes = graph_nodes(page)
    assert nodes["repo"]["status"] == "succeeded"
    assert nodes["langs"]["status"] == "failed"
    assert nodes["repo"]["label"] == "succeeded"
    assert page.locator("#fp-live").count() == 0
    assert "Failed" in page.inner_text("#run_form .field-status")  # the record below, too
    assert [b["kind"] for b in bars(page, "repo")] == ["attempt"]
    page.screenshot(path=str(artifacts / "run_page_refreshed.png"), full_page=True)
