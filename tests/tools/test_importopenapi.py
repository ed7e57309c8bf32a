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


@pytest.mark.slow
def test_a_stripe_sized_document_imports_whole(cli, tmp_path):
    source = write_spec("stripe", tmp_path / "stripe.json")
    document = json.loads(source.read_text())
    assert 4_000_000 < source.stat().st_size < 5 * 1024 * 1024
    assert len(document["components"]["schemas"]) > 1000
    out = tmp_path / "out"

    result = cli("importopenapi", str(source), "--out", str(out), "--prefix", "stripe")

    assert result.code == 0, result.err
    assert result.out.endswith("600 tool file(s), 0 unsupported construct(s)\n")
    [tool] = load_tool_file(out / "post_v1_account_reports.yaml")
    assert tool.http is not None
    assert tool.http.request.body_type == "form"
    assert "expand" in tool.input_schema["properties"]


@pytest.mark.slow
def test_a_github_sized_document_imports_whole(cli, tmp_path):
    source = write_spec("github", tmp_path / "github.json")
    assert source.stat().st_size > 12_000_000  # over the old 5 MiB cap
    out = tmp_path / "out"

    result = cli("importopenapi", str(source), "--out", str(out), "--prefix", "gh")

    assert result.code == 0, result.err
    written, _, skipped = result.out.rpartition("\n")[0].rpartition("\n")[2].partition(", ")
    assert written == "878 tool file(s)"
    assert skipped == "22 unsupported construct(s)"
    assert len(list(out.iterdir())) == 878
    assert result.out.count("not supported; skipped") == 22
