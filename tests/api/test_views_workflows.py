"""Workflow versions over the API: list, create (validated), validate, versions, detail,
export, archive."""

from __future__ import annotations

import pytest
import yaml

from tests.api.conftest import assert_error
from tests.conftest import EXAMPLES_DIR
from tests.factories import WorkflowFactory, sales_report_data
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

VIEW = "workflows.view_workflow"
ADD = "workflows.add_workflow"
V1 = "/api/v1/workflows/sales_report/versions/1/"


def test_create_from_a_file_then_unchanged_answers_the_same_version(make_client):
    client = make_client(VIEW, ADD)
    source = (EXAMPLES_DIR / "sales_report.yaml").read_text(encoding="utf-8")

    first = client.post("/api/v1/workflows/", {"source": source}, format="json")
    again = client.post("/api/v1/workflows/", {"definition": yaml.safe_load(source)}, format="json")

    assert first.status_code == 201, first.json()
    assert (first.json()["name"], first.json()["version"], first.json()["status"]) == (
        "sales_report",
        1,
        "draft",
    )
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert Workflow.objects.get().owner == client.user


def test_create_refuses_an_invalid_definition_with_every_issue_and_its_path(make_client):
    data = sales_report_data()
    data["steps"][0]["tool"] = "no_such_tool"
    data["steps"][1]["input_mapping"]["rows"] = "ghost.rows"

    response = make_client(VIEW, ADD).post(
        "/api/v1/workflows/", {"definition": data}, format="json"
    )

    body = assert_error(response, 400, "workflow_invalid")
    paths = {d["path"] for d in body["details"]}
    assert "steps[0].tool" in paths
    assert "steps[1].input_mapping.rows" in paths
    assert not Workflow.objects.exists()


def test_create_refuses_a_schema_error_bad_yaml_and_a_bad_body(make_client):
    client = make_client(VIEW, ADD)
    body = assert_error(
        client.post("/api/v1/workflows/", {"definition": {"name": "x", "steps": 3}}, format="json"),
        400,
        "workflow_invalid",
    )
    assert any(d["path"].startswith("steps") for d in body["details"])
    assert_error(
        client.post("/api/v1/workflows/", {"source": "name: [x"}, format="json"),
        400,
        "workflow_file_invalid",
    )
    body = assert_error(client.post("/api/v1/workflows/", {}, format="json"), 400, "invalid")
    assert "exactly one" in body["message"]
    body = assert_error(
        client.post("/api/v1/workflows/", {"definition": {}, "status": "active"}, format="json"),
        400,
        "invalid",
    )
    assert body["details"][0]["path"] == "status"


def test_validate_stores_nothing_and_lists_warnings_and_errors(make_client):
    data = sales_report_data()
    data["steps"][0]["tool"] = "csv_reed"
    client = make_client(VIEW)

    body = client.post("/api/v1/workflows/validate/", {"definition": data}, format="json").json()
    good = client.post(
        "/api/v1/workflows/validate/", {"definition": sales_report_data()}, format="json"
    ).json()

    assert body["ok"] is False
    (issue,) = [i for i in body["issues"] if i["path"] == "steps[0].tool"]
    assert issue["severity"] == "error"
    assert "csv_read" in issue["message"]
    assert good == {"ok": True, "issues": []}
    assert not Workflow.objects.exists()


def test_list_filters_by_name_and_status_newest_version_first(make_client):
    WorkflowFactory()
    WorkflowFactory(data=sales_report_data(description="second"), status="pending_review")
    WorkflowFactory(data=sales_report_data(name="other"))
    client = make_client(VIEW)

    rows = client.get("/api/v1/workflows/").json()["results"]
    named = client.get("/api/v1/workflows/", {"name": "sales_report"}).json()["results"]
    pending = client.get("/api/v1/workflows/", {"status": "pending_review"}).json()["results"]
    versions = client.get("/api/v1/workflows/sales_report/versions/").json()

    assert [(r["name"], r["version"]) for r in rows] == [
        ("other", 1),
        ("sales_report", 2),
        ("sales_report", 1),
    ]
    assert [r["version"] for r in named] == [2, 1]
    assert [(r["name"], r["version"]) for r in pending] == [("sales_report", 2)]
    assert versions["count"] == 2
    assert versions["results"][0]["version"] == 2
    page = client.get("/api/v1/workflows/", {"limit": 1, "offset": 1}).json()
    assert page["count"] == 3
    assert [r["version"] for r in page["results"]] == [2]
    assert "offset=2" in page["next"]
    # A limit or offset beyond 64 bits is no 500: the limit is capped, the offset empty.
    huge = str(2**71)
    capped = client.get("/api/v1/workflows/", {"limit": huge}).json()
    assert [(r["name"], r["version"]) for r in capped["results"]] == [
        ("other", 1),
        ("sales_report", 2),
        ("sales_report", 1),
    ]
    far = client.get("/api/v1/workflows/", {"limit": huge, "offset": huge}).json()
    assert (far["count"], far["results"]) == (3, [])


def test_detail_has_definition_graph_validation_and_hash(make_client):
    version = WorkflowFactory()

    body = make_client(VIEW).get(V1).json()

    assert body["definition_hash"] == version.definition_hash
    assert body["definition"]["steps"][0]["id"] == "load"
    assert [n["id"] for n in body["graph"]["nodes"]] == [
        "load",
        "by_region",
        "top_products",
        "report",
    ]
    assert {"from": "load", "to": "by_region", "when": "", "inferred": True} in body["graph"][
        "edges"
    ]
    assert body["validation"] == {"ok": True, "issues": []}


def test_export_gives_the_file_form_and_yaml(make_client):
    WorkflowFactory()

    body = make_client(VIEW).get(V1 + "export/").json()

    assert body["definition"]["name"] == "sales_report"
    assert yaml.safe_load(body["yaml"]) == body["definition"]


def test_archive_needs_change_and_refuses_twice(make_client):
    WorkflowFactory(status="active")
    assert_error(make_client(VIEW).post(V1 + "archive/"), 403, "permission_denied")
    client = make_client(VIEW, "workflows.change_workflow")

    assert client.post(V1 + "archive/").json()["status"] == "archived"
    assert_error(client.post(V1 + "archive/"), 409, "workflow_transition_invalid")


def test_unknown_versions_are_404_and_no_permission_is_403_either_way(make_client):
    WorkflowFactory()
    viewer, stranger = make_client(VIEW), make_client()

    assert_error(viewer.get("/api/v1/workflows/sales_report/versions/9/"), 404, "not_found")
    assert_error(viewer.get("/api/v1/workflows/nope/versions/1/export/"), 404, "not_found")
    for url in (V1, "/api/v1/workflows/sales_report/versions/9/", "/api/v1/workflows/"):
        assert_error(stranger.get(url), 403, "permission_denied")


# --- test scenarios --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("output_dir")
def test_a_versions_test_scenarios_are_read_and_run_over_the_api(make_client, approver):
    from tests.runs.test_scenarios import approved_v1, with_scenarios
    from workflows.models import WorkflowStatus
    from workflows.services import workflow_import

    approved_v1(approver)
    data = with_scenarios()
    data["tests"][0]["expect"][0]["equals"] = 41
    data["tests"].append({"name": "later", "expect": [{"jmespath": "outputs.report"}]})
    workflow_import(data=data, status=WorkflowStatus.PENDING_REVIEW)
    url = "/api/v1/workflows/sales_report/versions/2/tests/"
    assert_error(make_client(VIEW).get(url), 403, "permission_denied")  # runs' data in it
    viewer = make_client(VIEW, "runs.view_run")

    body = viewer.get(url).json()["scenarios"]

    assert [(r["scenario"], r["status"]) for r in body] == [
        ("totals", "failed"),
        ("top_three", "passed"),
        ("later", "passed"),
    ]
    assert body[0]["failures"] == ["output `rows_read` is 40, expected 41"]
    assert body[0]["run"] is not None
    assert body[0]["validation_run"] is not None
    assert_error(viewer.post(url), 403, "permission_denied")  # running needs operate_run

    operator = make_client(VIEW, "runs.view_run", "runs.operate_run")
    again = operator.post(url).json()["scenarios"]
    assert [r["status"] for r in again] == ["failed", "passed", "passed"]
    assert again[0]["run"] != body[0]["run"]  # played again
    assert_error(viewer.get("/api/v1/workflows/sales_report/versions/9/tests/"), 404, "not_found")


def test_a_version_without_scenarios_lists_none(make_client):
    WorkflowFactory(data=sales_report_data())
    client = make_client(VIEW, "runs.view_run")
    body = client.get("/api/v1/workflows/sales_report/versions/1/tests/").json()
    assert body == {"version": 1, "scenarios": []}
