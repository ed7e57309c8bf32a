"""notifications.report: the difference from the validation run, step by step, and the
report masking exactly what the run page, showrun and the API mask."""

import json

import pytest

from notifications.report import json_type, step_diff
from runs.models import StepResult


@pytest.mark.parametrize(
    ("value", "name"),
    [({}, "object"), ([], "array"), ("x", "string"), (1, "number"), (1.5, "number"),
     (True, "boolean"), (None, "null")],
)  # fmt: skip
def test_json_type(value, name):
    assert json_type(value) == name


def test_the_diff_names_status_keys_and_changed_shapes():
    now = StepResult(step_id="s", status="failed", output={"items": "oops", "new": 1}, run_id=2)
    then = StepResult(
        step_id="s", status="succeeded", output={"items": [1], "gone": True}, run_id=1
    )

    diff = step_diff(now, then)

    assert diff["validation_run"] == 1
    assert diff["status"] == {"validation": "succeeded", "now": "failed"}
    assert diff["keys_missing"] == ["gone"]
    assert diff["keys_new"] == ["new"]
    assert diff["shape_changed"] == {"items": {"validation": "array", "now": "string"}}


def test_without_a_validation_run_the_diff_says_so():
    diff = step_diff(StepResult(step_id="s", status="failed"), None)
    assert diff["validation_run"] is None


# --- one rule for every surface ---------------------------------------------------------

TOKEN = "ldg-live-token-0123456789"
LEDGER_TOOL = """
name: ledger
kind: http
description: Ledger entries of a region (loopback fake); a bearer token, a configured base.
base_url: "{{env.LEDGER_BASE}}"
request: {method: GET, url: "/entries/{{region}}"}
auth: {type: bearer, token: "{{env.LEDGER_TOKEN}}"}
inputs: {type: object, properties: {region: {type: string}}, required: [region]}
timeout: 5
"""
LEDGER_FLOW = {
    "name": "ledger_digest",
    "steps": [{"id": "fetch", "kind": "tool", "tool": "ledger",
               "input_mapping": {"region": "eu"}}],
}  # fmt: skip


@pytest.fixture
def ledger_run(monkeypatch, settings):
    """A failed run whose tool reads a secret token and a non-secret base URL from the
    environment; the API's answer echoes both."""
    from runs.models import RunTrigger
    from tests.fakes import FakeAPI, FakeResponse
    from tests.notifications.conftest import run_now
    from tools.loader import load_tool_text
    from tools.services import tool_upsert
    from workflows.services import workflow_import

    settings.FLOWPILOT_REPORT_REPLAY = False
    fake = FakeAPI().start()
    base = fake.url + "/ledger/v2"
    monkeypatch.setenv("LEDGER_BASE", base)
    monkeypatch.setenv("LEDGER_TOKEN", TOKEN)
    answer = {"error": f"token {TOKEN} revoked for {base}"}
    fake.route("ledger", "GET", r"/ledger/v2/entries/(?P<region>[^/]+)",
               lambda request, match: FakeResponse.json(answer, status=403))  # fmt: skip
    for spec in load_tool_text(LEDGER_TOOL, source="tests"):
        tool_upsert(spec=spec, source="tests")
    workflow, _ = workflow_import(data=LEDGER_FLOW)
    yield run_now(workflow, RunTrigger.CLI), base
    fake.stop()


@pytest.mark.django_db(transaction=True)
def test_the_report_the_run_page_showrun_and_the_api_mask_exactly_the_same_values(
    ledger_run, admin_client, admin_user, cli
):
    from django.urls import reverse
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from notifications.models import Event
    from notifications.report import report_build

    run, base = ledger_run
    assert run.status == "failed"
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")

    report = report_build(run=run, event=Event.FAILED)
    detail = api.get(f"/api/v1/runs/{run.pk}/").json()
    page = admin_client.get(reverse("admin:runs_run_change", args=[run.pk])).content.decode()
    shown = cli("showrun", str(run.pk)).out

    [stored] = [s for s in detail["steps"] if s["step_id"] == "fetch"]
    [reported] = report["failed_steps"]
    assert reported["error"] == stored["error"]  # the same masked copy, value for value
    assert reported["response"]["attempt_log"] == stored["attempt_log"]
    assert report["error_summary"] == detail["error_summary"]
    message = stored["error"]["message"]
    assert f"{base}/entries/eu" in message
    assert f"token *** revoked for {base}" in message
    for surface in (json.dumps(report), json.dumps(detail), page, shown):
        assert TOKEN not in surface  # the declared secret is masked everywhere
        assert base in surface  # the configured base URL is shown in clear everywhere
        assert "***" in surface
