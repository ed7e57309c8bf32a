"""Tools are pinned: approving records each tool's hash; a run of a version whose
tools changed since is refused naming the tool and what changed; re-approving (a
validation run on the new definitions) lets it run again. Tool history rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from review.services import ApprovalStateError, workflow_approve, workflow_reapprove
from runs.models import RunTrigger
from runs.services import run_create, run_execute
from tests.factories import WorkflowFactory
from tools.models import ToolRevision
from tools.pins import tool_definition_hash
from tools.registry import ToolRegistry
from tools.services import tools_load_dir
from workflows.models import Workflow, WorkflowStatus
from workflows.validator import WorkflowInvalid

pytestmark = pytest.mark.django_db

RATES_TOOL = """
name: rates
description: Latest exchange rates.
base_url: "{{env.FRANKFURTER_BASE_URL}}"
request: {url: /latest, query: {from: "{{from}}"%s}}
inputs: {type: object, properties: {from: {type: string}%s}, required: [from]}
response_extract: {rates: rates, base: base}
"""

FLOW = {
    "name": "eur_rates",
    "description": "Rates against the euro.",
    "inputs": {"base": {"type": "string", "default": "EUR"}},
    "tools": ["rates"],
    "steps": [
        {"id": "fetch", "kind": "tool", "tool": "rates", "input_mapping": {"from": "$input.base"}}
    ],
    "outputs": {"base": "fetch.base"},
}


def _write_tool(directory: Path, *, extra_param: bool = False) -> None:
    query, prop = ("", "")
    if extra_param:
        query, prop = (', amount: "{{amount}}"', ", amount: {type: number}")
    (directory / "rates.yaml").write_text(RATES_TOOL % (query, prop), encoding="utf-8")
    report = tools_load_dir(directory=directory, sync_builtin=False)
    assert report.ok, report.errors


def _run(version: Workflow):
    run = run_create(workflow=version, trigger=RunTrigger.MANUAL, inputs={})
    return run_execute(run=run)


def test_a_changed_tool_refuses_the_run_until_the_version_is_reapproved(
    fake_api, tmp_path, approver, cli
):
    _write_tool(tmp_path)
    version = WorkflowFactory(data=FLOW, status=WorkflowStatus.PENDING_REVIEW)
    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
    assert approval.status == "passed"
    version.refresh_from_db()
    pinned = version.tool_pins["rates"]
    assert pinned == tool_definition_hash(ToolRegistry.from_db(providers=[]).get("rates"))
    assert _run(version).status == "succeeded"

    _write_tool(tmp_path, extra_param=True)  # edit the YAML under the active version, reload
    with pytest.raises(WorkflowInvalid) as refused:
        run_create(workflow=version, trigger=RunTrigger.MANUAL, inputs={})
    issue = refused.value.report.errors[0]
    assert issue.code == "tool_changed"
    assert "tool `rates` changed since `eur_rates v1` was approved" in issue.message
    assert "its parameters changed" in issue.message
    refused_cli = cli("runflow", "eur_rates")
    assert refused_cli.code == 1
    assert "[tool_changed]  tool `rates` changed since `eur_rates v1`" in refused_cli.out
    assert "1 validation error(s); not run" in refused_cli.err
    history = list(ToolRevision.objects.filter(tool_name="rates").values_list("hash", flat=True))
    assert len(history) == 2  # a row per change, newest first
    assert history[1] == pinned

    again = workflow_reapprove(version=version, approved_by=approver, sample_inputs={})
    assert again.status == "passed"
    version.refresh_from_db()
    assert version.status == "active"
    assert version.tool_pins["rates"] == history[0] != pinned
    assert _run(version).status == "succeeded"


def test_what_changed_names_url_auth_and_outputs(fake_api, tmp_path, approver):
    _write_tool(tmp_path)
    version = WorkflowFactory(data=FLOW, status=WorkflowStatus.PENDING_REVIEW)
    workflow_approve(version=version, approved_by=approver, sample_inputs={})
    changed = (
        RATES_TOOL.replace("url: /latest", "url: /v1/latest").replace(
            "response_extract: {rates: rates, base: base}", "response_extract: {base: base}"
        )
        + 'auth: {type: bearer, token: "{{env.RATES_TOKEN}}"}\n'
    ) % ("", "")
    (tmp_path / "rates.yaml").write_text(changed, encoding="utf-8")
    assert tools_load_dir(directory=tmp_path, sync_builtin=False).ok
    with pytest.raises(WorkflowInvalid) as refused:
        run_create(workflow=version, trigger=RunTrigger.SCHEDULE, inputs={})
    assert "its URL, auth, outputs changed" in refused.value.report.errors[0].message

    (tmp_path / "rates.yaml").unlink()
    from tools.models import Tool

    Tool.objects.filter(name="rates").delete()
    with pytest.raises(WorkflowInvalid) as gone:
        run_create(workflow=version, trigger=RunTrigger.MANUAL, inputs={})
    assert any("rates" in e.message for e in gone.value.report.errors)


def test_only_an_active_version_is_reapproved(approver):
    version = WorkflowFactory(data=FLOW, status=WorkflowStatus.PENDING_REVIEW)
    with pytest.raises(ApprovalStateError):
        workflow_reapprove(version=version, approved_by=approver, sample_inputs={})


def test_the_admin_shows_each_tools_history(fake_api, tmp_path, client, django_user_model):
    _write_tool(tmp_path)
    _write_tool(tmp_path, extra_param=True)
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))
    listing = client.get("/admin/tools/toolrevision/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert html.count(">rates<") == 2
    row = ToolRevision.objects.filter(tool_name="rates").first()
    page = client.get(f"/admin/tools/toolrevision/{row.pk}/change/")
    assert page.status_code == 200
    assert "amount" in page.content.decode()  # the newest definition, shown in full


def test_a_failed_reapproval_changes_nothing(fake_api, tmp_path, approver):
    _write_tool(tmp_path)
    version = WorkflowFactory(data=FLOW, status=WorkflowStatus.PENDING_REVIEW)
    workflow_approve(version=version, approved_by=approver, sample_inputs={})
    version.refresh_from_db()
    pins = dict(version.tool_pins)
    _write_tool(tmp_path, extra_param=True)
    red = workflow_reapprove(version=version, approved_by=approver, sample_inputs={"base": "XXX"})
    assert red.status == "failed"
    assert red.validation_run.status == "failed"
    version.refresh_from_db()
    assert (version.status, version.tool_pins) == ("active", pins)
    with pytest.raises(WorkflowInvalid, match="tool `rates` changed since"):
        run_create(workflow=version, trigger=RunTrigger.MANUAL, inputs={})


def test_the_review_page_says_when_a_newer_version_of_a_pinned_tool_exists(
    fake_api, tmp_path, approver
):
    from review.selectors import workflow_review
    from tests.review.test_admin import login, url

    _write_tool(tmp_path)
    version = WorkflowFactory(data=FLOW, status=WorkflowStatus.PENDING_REVIEW)
    workflow_approve(version=version, approved_by=approver, sample_inputs={})
    version.refresh_from_db()
    (row,) = workflow_review(workflow=version).tools
    assert (row.version, row.pinned, row.newer) == ("1.0.0", "1.0.0", "")

    _write_tool(tmp_path, extra_param=True)  # an optional input: compatible
    (row,) = workflow_review(workflow=version).tools
    assert (row.version, row.pinned, row.newer) == ("1.1.0", "1.0.0", "compatible")
    body = login(approver).get(url("change", version)).content.decode()
    cell = body.split('class="fp-tool-version"', 1)[1].split("</td>", 1)[0]
    assert "1.1.0" in cell
    assert "approved with 1.0.0; this newer version has compatible changes only" in cell

    (tmp_path / "rates.yaml").write_text(
        (RATES_TOOL % ("", ""))
        .replace("required: [from]", "required: [from, to]")
        .replace("{from: {type: string}", "{from: {type: string}, to: {type: string}"),
        encoding="utf-8",
    )  # a required input added: breaking
    tools_load_dir(directory=tmp_path, sync_builtin=False)
    (row,) = workflow_review(workflow=version).tools
    assert (row.version, row.pinned, row.newer) == ("2.0.0", "1.0.0", "breaking")


def test_the_review_page_warns_when_a_tool_source_is_stale_or_unreadable(approver, settings):
    from datetime import timedelta

    from django.utils import timezone

    from review.selectors import workflow_review
    from tests.factories import pending_version
    from tests.review.test_admin import login, url
    from tools.models import ToolSource

    version = pending_version()  # sales_report: it calls csv_read, aggregate, write_report
    ToolSource.objects.create(
        kind="mcp", name="files", location="/srv/tools/files.yaml", tools=["csv_read"],
        refreshed_at=timezone.now(),
    )  # fmt: skip
    assert workflow_review(workflow=version).stale_sources == ()

    ToolSource.objects.update(refreshed_at=timezone.now() - timedelta(hours=30))
    ToolSource.objects.create(
        kind="mcp", name="other", location="/srv/tools/other.yaml", tools=["not_called"]
    )  # never read, but none of its tools is called here

    (line,) = workflow_review(workflow=version).stale_sources
    assert line.startswith("mcp files (/srv/tools/files.yaml): stale: last read ")
    body = login(approver).get(url("change", version)).content.decode()
    warning = body.split('id="fp-stale-sources"', 1)[1].split("</ul>", 1)[0]
    assert "The tool catalog may be out of date: mcp files" in warning
    assert "refreshsources" in warning


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("output_dir")
def test_the_review_page_shows_each_test_scenario_and_why_one_failed(approver):
    from review.selectors import workflow_review
    from tests.review.test_admin import login, url
    from tests.runs.test_scenarios import approved_v1, with_scenarios
    from workflows.services import workflow_import

    approved_v1(approver)
    data = with_scenarios()
    data["tests"][0]["expect"][0]["equals"] = 41
    version, _ = workflow_import(data=data, status=WorkflowStatus.PENDING_REVIEW)

    rows = {s.name: s for s in workflow_review(workflow=version).scenarios}
    body = login(approver).get(url("change", version)).content.decode()

    assert (rows["totals"].status, rows["top_three"].status) == ("failed", "passed")
    table = body.split('id="fp-scenarios"', 1)[1].split("</table>", 1)[0]
    failed = table.split('data-scenario="totals"', 1)[1].split("</tr>", 1)[0]
    assert "failed" in failed
    assert "output `rows_read` is 40, expected 41" in failed
    assert f'href="/admin/runs/run/{rows["totals"].run_id}/change/"' in failed
