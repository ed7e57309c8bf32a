"""Tools over the API: list with filters, detail, load (staff only, allowed dirs only)."""

from __future__ import annotations

import pytest

from tests.api.conftest import assert_error
from tests.conftest import EXAMPLE_TOOLS_DIR

pytestmark = pytest.mark.django_db

VIEW = "tools.view_tool"


@pytest.fixture
def loaded(example_tools):
    return example_tools


def test_list_filters_by_kind_and_search_in_name_order(make_client, loaded):
    client = make_client(VIEW)

    everything = client.get("/api/v1/tools/").json()
    names = [t["name"] for t in everything["results"]]
    assert names == sorted(names)
    assert len(names) == everything["count"] > 5
    builtin = client.get("/api/v1/tools/", {"kind": "builtin"}).json()["results"]
    assert {t["kind"] for t in builtin} == {"builtin"}
    assert "csv_read" in {t["name"] for t in builtin}
    found = client.get("/api/v1/tools/", {"search": "WEATHER"}).json()["results"]
    assert found
    assert all("weather" in (t["name"] + t["description"]).lower() for t in found)
    assert_error(client.get("/api/v1/tools/", {"kind": "nope"}), 400, "invalid")


def test_detail_has_the_input_schema_and_outputs(make_client, loaded):
    body = make_client(VIEW).get("/api/v1/tools/csv_read/").json()

    assert body["name"] == "csv_read"
    assert body["input_schema"]["properties"]["path"]["type"] == "string"
    assert "rows" in body["outputs"]


def test_a_missing_tool_is_404_for_a_viewer_and_403_without_the_permission(make_client, loaded):
    assert_error(make_client(VIEW).get("/api/v1/tools/nope/"), 404, "not_found")
    stranger = make_client()
    # The same refusal whether the tool exists or not.
    assert_error(stranger.get("/api/v1/tools/nope/"), 403, "permission_denied")
    assert_error(stranger.get("/api/v1/tools/csv_read/"), 403, "permission_denied")


def test_load_is_for_staff_with_the_tool_permissions(make_client, db):
    perms = ("tools.add_tool", "tools.change_tool")
    body = {"directory": str(EXAMPLE_TOOLS_DIR)}
    assert_error(make_client(*perms).post("/api/v1/tools/load/", body), 403, "permission_denied")
    assert_error(
        make_client(staff=True).post("/api/v1/tools/load/", body), 403, "permission_denied"
    )

    response = make_client(*perms, staff=True).post("/api/v1/tools/load/", body, format="json")

    assert response.status_code == 200, response.json()
    report = response.json()
    assert report["ok"] is True
    assert report["errors"] == []
    assert {t["action"] for t in report["tools"]} == {"created"}


def test_load_refuses_a_directory_outside_the_allowed_ones(admin_client_api, tmp_path):
    for outside in ("/", str(EXAMPLE_TOOLS_DIR / ".." / ".."), str(tmp_path)):
        response = admin_client_api.post("/api/v1/tools/load/", {"directory": outside})
        body = assert_error(response, 400, "tool_directory_refused")
        assert "FLOWPILOT_API_TOOL_DIRS" in body["message"]


def test_load_reports_a_bad_file_by_name(admin_client_api, settings, tmp_path):
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    settings.FLOWPILOT_API_TOOL_DIRS = [tmp_path]

    report = admin_client_api.post(
        "/api/v1/tools/load/", {"directory": str(tmp_path), "sync_builtin": False}
    ).json()

    assert report["ok"] is False
    assert report["errors"][0]["source"].endswith("bad.yaml")


# --- versions ------------------------------------------------------------------------


@pytest.fixture
def two_versions(loaded, tmp_path):
    """``github_issues`` as shipped (1.0.0), then with a state value dropped (2.0.0)."""
    from tools.services import tools_load_dir

    text = (EXAMPLE_TOOLS_DIR / "github_issues.yaml").read_text()
    (tmp_path / "github_issues.yaml").write_text(
        text.replace("[open, closed, all]", "[open, closed]")
    )
    report = tools_load_dir(directory=tmp_path, sync_builtin=False)
    assert [t.action for t in report.tools] == ["updated"]


def test_the_detail_says_the_current_version(make_client, two_versions):
    assert make_client(VIEW).get("/api/v1/tools/github_issues/").json()["version"] == "2.0.0"
    assert make_client(VIEW).get("/api/v1/tools/csv_read/").json()["version"] == "1.0.0"


def test_the_versions_newest_first_with_what_changed(make_client, two_versions):
    body = make_client(VIEW).get("/api/v1/tools/github_issues/versions/").json()

    assert body["count"] == 2
    newest, first = body["results"]
    assert (newest["number"], newest["version"], newest["bump"]) == (2, "2.0.0", "major")
    assert newest["changes"] == [
        {
            "path": "input_schema.properties.state.enum",
            "what": "input `state`: values removed: all",
            "level": "major",
        }
    ]
    assert (first["number"], first["version"], first["bump"], first["changes"]) == (
        1,
        "1.0.0",
        "",
        [],
    )
    assert len(first["hash"]) == 64


def test_a_diff_between_two_versions(make_client, two_versions):
    client = make_client(VIEW)

    body = client.get("/api/v1/tools/github_issues/versions/diff/", {"a": "1", "b": "2.0.0"}).json()

    assert body["from"] == {"number": 1, "version": "1.0.0"}
    assert body["to"] == {"number": 2, "version": "2.0.0"}
    assert body["bump"] == "major"
    assert [c["level"] for c in body["changes"]] == ["major"]
    assert body["diff"].startswith("--- github_issues 1.0.0\n+++ github_issues 2.0.0\n")


@pytest.mark.parametrize(
    ("path", "query", "status", "code"),
    [
        ("/api/v1/tools/nope/versions/", {}, 404, "not_found"),
        ("/api/v1/tools/github_issues/versions/diff/", {"a": "1"}, 400, "invalid"),
        ("/api/v1/tools/github_issues/versions/diff/", {"a": "1", "b": "9"}, 404, "not_found"),
        ("/api/v1/tools/github_issues/versions/diff/", {"a": "1", "b": "x" * 33}, 400, "invalid"),
        (
            "/api/v1/tools/github_issues/versions/diff/",
            {"a": "1", "b": "' OR 1=1 --"},
            404,
            "not_found",
        ),
    ],
)
def test_an_unknown_tool_or_version_or_a_bad_query_is_refused_clearly(
    make_client, two_versions, path, query, status, code
):
    assert_error(make_client(VIEW).get(path, query), status, code)
    assert_error(make_client().get(path, query), 403, "permission_denied")
