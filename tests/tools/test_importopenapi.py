"""``importopenapi``: ``--path-prefix`` beside ``--tag`` / ``--operation``, a selection
that chooses nothing named with its near matches, the progress bar on a terminal (and
nothing when the output is captured), the command line's size cap, and documents of the
size and shape of Stripe's and GitHub's published ones imported whole (``slow``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from tests.fakes.openapi_specs import write_spec
from tests.tools.openapi.test_document import laughs
from tools.loader import load_tool_file

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[1] / "data" / "openapi"
GITHUB = str(SPECS / "github_subset.yaml")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_path_prefix_chooses_the_operations_under_it(cli, tmp_path):
    result = cli("importopenapi", GITHUB, "--out", str(tmp_path), "--prefix", "gh",
                 "--path-prefix", "/repos/{owner}/{repo}/issues")  # fmt: skip

    assert result.code == 0, result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "issues_create.yaml", "issues_list_for_repo.yaml", "issues_lock.yaml"]  # fmt: skip


def test_a_misspelt_tag_is_refused_with_the_tags_it_may_mean(cli, tmp_path):
    result = cli("importopenapi", GITHUB, "--out", str(tmp_path / "out"), "--prefix", "gh",
                 "--tag", "issues", "--tag", "repo")  # fmt: skip

    assert result.code == 1
    assert result.err == (
        f"CommandError: {GITHUB}: no operation matches --tag 'repo' (did you mean 'repos'?)\n"
    )
    assert not (tmp_path / "out").exists()


def test_the_progress_bar_counts_operations_on_a_terminal_only(tmp_path):
    terminal, captured = Terminal(), io.StringIO()
    args = ("importopenapi", GITHUB, "--prefix", "gh", "--tag", "issues")

    call_command(*args, "--out", str(tmp_path / "a"), stdout=io.StringIO(), stderr=terminal)
    call_command(*args, "--out", str(tmp_path / "b"), stdout=io.StringIO(), stderr=captured)

    shown = terminal.getvalue()
    assert "operations" in shown
    assert "files checked" in shown
    assert "3/3" in shown
    assert captured.getvalue() == ""


def test_the_command_line_cap_is_a_setting(cli, tmp_path, settings):
    settings.FLOWPILOT_OPENAPI_MAX_BYTES = 200
    result = cli("importopenapi", GITHUB, "--out", str(tmp_path), "--prefix", "gh")

    assert result.code == 1
    assert "larger than 200 bytes" in result.err
    assert "the cap set by FLOWPILOT_OPENAPI_MAX_BYTES" in result.err


def test_a_response_schema_is_read_one_level_deep_so_a_bomb_there_is_harmless(cli, tmp_path):
    document = laughs()
    body = document["paths"]["/laugh"]["post"].pop("requestBody")
    document["paths"]["/laugh"]["post"]["responses"] = {"200": body}
    source = tmp_path / "laughs.yaml"
    source.write_text(yaml.safe_dump(document), encoding="utf-8")

    result = cli("importopenapi", str(source), "--out", str(tmp_path / "out"), "--prefix", "x")

    assert result.code == 0, result.err
    written = yaml.safe_load((tmp_path / "out" / "laugh.yaml").read_text())
    assert written["response_extract"] == {"a": "a", "b": "b"}
    # Its types would expand the bomb: past their own budget they are left out.
    assert "output_types" not in written


@pytest.mark.slow
@pytest.mark.one_database
def test_a_stripe_sized_document_imports_whole(cli, tmp_path):
    source = write_spec("stripe", tmp_path / "stripe.json")
    document = json.loads(source.read_text())
    assert 4_000_000 < source.stat().st_size < 5 * 1024 * 1024
    assert len(document["components"]["schemas"]) > 1000
    out = tmp_path / "out"

    result = cli("importopenapi", str(source), "--out", str(out), "--prefix", "stripe")

    assert result.code == 0, result.err
    assert result.out.endswith("imported 600 operations, skipped 0; 0 unsupported construct(s)\n")
    [tool] = load_tool_file(out / "post_v1_account_reports.yaml")
    assert tool.http is not None
    assert tool.http.request.body_type == "form"
    assert "expand" in tool.input_schema["properties"]


@pytest.mark.slow
@pytest.mark.one_database
def test_a_github_sized_document_imports_whole(cli, tmp_path):
    source = write_spec("github", tmp_path / "github.json")
    assert source.stat().st_size > 12_000_000  # over the old 5 MiB cap
    out = tmp_path / "out"

    result = cli("importopenapi", str(source), "--out", str(out), "--prefix", "gh")

    assert result.code == 0, result.err
    summary = result.out.rpartition("\n")[0].rpartition("\n")[2]
    assert summary == "imported 878 operations, skipped 0; 22 unsupported construct(s)"
    assert len(list(out.iterdir())) == 878
    assert result.out.count("not supported; skipped") == 22


def deep_document() -> dict:
    """Three plain operations and one whose request body nests 70 deep in distinct
    schemas (``D0`` refers to ``D1``, … ``D69`` to ``D70``): past the 64-deep bound."""
    schemas: dict = {
        f"D{i}": {
            "type": "object",
            "properties": {"next": {"$ref": f"#/components/schemas/D{i + 1}"}},
        }
        for i in range(70)
    }
    schemas["D70"] = {"type": "string"}

    def plain(op_id: str) -> dict:
        ok = {"200": {"description": "ok"}}
        return {"operationId": op_id, "tags": ["plain"], "responses": ok}

    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/D0"}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": {
            "/a": {"get": plain("listA")},
            "/b": {"get": plain("listB")},
            "/c": {"get": plain("listC")},
            "/deep": {"post": {**plain("makeDeep"), "requestBody": body}},
        },
        "components": {"schemas": schemas},
    }


DEEP_REASON = (
    "POST /deep (makeDeep): $ref references nest more than 64 deep at "
    "#/components/schemas/D64, reached from #/paths/~1deep/post/requestBody"
)


@pytest.fixture
def deep(tmp_path):
    source = tmp_path / "deep.yaml"
    source.write_text(yaml.safe_dump(deep_document()), encoding="utf-8")
    return source


def test_an_operation_that_cannot_be_expanded_is_skipped_and_the_rest_imported(cli, deep, tmp_path):
    out = tmp_path / "out"

    result = cli("importopenapi", str(deep), "--out", str(out), "--prefix", "x")

    assert result.code == 0, result.err
    assert sorted(p.name for p in out.iterdir()) == ["list_a.yaml", "list_b.yaml", "list_c.yaml"]
    assert result.err == f"skipped {DEEP_REASON}\n"
    assert result.out.endswith("imported 3 operations, skipped 1; 0 unsupported construct(s)\n")
    for path in out.iterdir():
        assert load_tool_file(path)[0].http is not None


def test_strict_refuses_the_import_and_writes_nothing(cli, deep, tmp_path):
    out = tmp_path / "out"

    result = cli("importopenapi", str(deep), "--out", str(out), "--prefix", "x", "--strict")

    assert result.code == 1
    assert result.err == (
        f"CommandError: {deep}: 1 operation(s) cannot be imported (--strict), nothing "
        f"written: {DEEP_REASON}\n"
    )
    assert not out.exists()


def test_an_operation_asked_for_by_name_that_cannot_be_imported_is_an_error(cli, deep, tmp_path):
    out = tmp_path / "out"
    named = cli("importopenapi", str(deep), "--out", str(out), "--prefix", "x",
                "--operation", "listA", "--operation", "makeDeep")  # fmt: skip

    assert named.code == 1
    assert named.err == (
        f"CommandError: {deep}: the operation(s) asked for cannot be imported, nothing "
        f"written: {DEEP_REASON}\n"
    )
    assert not out.exists()

    # Chosen by tag (not by name) it is skipped like any other.
    tagged = cli("importopenapi", str(deep), "--out", str(out), "--prefix", "x", "--tag", "plain")
    assert tagged.code == 0, tagged.err
    assert "imported 3 operations, skipped 1;" in tagged.out


def test_a_billion_laughs_shared_by_many_operations_skips_each_and_keeps_the_rest(tmp_path):
    from tools.openapi.generate import openapi_tools

    document = laughs(40)
    bomb = document["paths"]["/laugh"]["post"]
    document["paths"] = {f"/laugh{n}": {"post": {**bomb, "operationId": f"laugh{n}"}}
                         for n in range(100)}  # fmt: skip
    document["paths"]["/fine"] = {"get": {"operationId": "fine", "responses": {}}}

    generated = openapi_tools(document, prefix="x")

    assert [tool["name"] for tool in generated.tools] == ["fine"]
    assert len(generated.skipped) == 100
    assert all(
        "produces more than 500000 values (references that multiply) at #/components/schemas/s"
        in skipped.reason
        for skipped in generated.skipped
    )


def test_the_files_are_written_even_when_the_source_cannot_be_recorded(cli, tmp_path, monkeypatch):
    from django.db import DatabaseError

    def no_table(**_):
        raise DatabaseError("no such table: tools_toolsource")

    monkeypatch.setattr("tools.openapi.services.source_record_openapi", no_table)

    result = cli("importopenapi", GITHUB, "--out", str(tmp_path), "--prefix", "gh")

    assert result.code == 0, result.err
    assert list(tmp_path.glob("*.yaml"))
    assert "warning: not recorded as a tool source (the database: no such table" in result.err
