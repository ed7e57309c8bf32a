"""``openapi_write``: a selection that chooses nothing names what was asked and the
nearest the document has; each tool is written in full (no YAML aliases, though
expanded references are shared); ``progress`` follows the operations; documents over
the size cap are refused naming the setting, on a URL as on a file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.tools.conftest import Reply
from tools.openapi.document import OpenAPIError, openapi_parse, openapi_read
from tools.openapi.services import openapi_write, tool_yaml

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[2] / "data" / "openapi"


@pytest.fixture
def github():
    text = (SPECS / "github_subset.yaml").read_text()
    return openapi_parse(text, source="github_subset.yaml")


def write(document, out: Path, **selection):
    return openapi_write(document=document, source="gh.yaml", out_dir=out, prefix="gh",
                         **selection)  # fmt: skip


def test_a_path_prefix_chooses_the_operations_under_it(github, tmp_path):
    report = write(github, tmp_path, path_prefixes=["/repos/{owner}/{repo}/issues/"])

    assert [p.name for p in report.written] == ["issues_lock.yaml"]


def test_options_add_up_an_operation_matching_any_is_chosen(github, tmp_path):
    issues = "/repos/{owner}/{repo}/issues/"
    report = write(github, tmp_path, tags=["repos"], path_prefixes=[issues])

    assert sorted(p.name for p in report.written) == ["issues_lock.yaml", "repos_get.yaml"]


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (
            {"tags": ["isues"]},
            "gh.yaml: no operation matches --tag 'isues' (did you mean 'issues'?)",
        ),
        (
            {"operations": ["issues/craete"]},
            "gh.yaml: no operation matches --operation 'issues/craete' (did you mean "
            "'issues/create', 'issues/lock'?)",
        ),
        (
            {"path_prefixes": ["/repo/"]},
            "gh.yaml: no operation matches --path-prefix '/repo/' (did you mean "
            "'/repos/{owner}/{repo}'?)",
        ),
        ({"tags": ["zzz"]}, "gh.yaml: no operation matches --tag 'zzz'"),
        (
            {"tags": ["issues", "nope"], "path_prefixes": ["/x"]},
            "gh.yaml: no operation matches --tag 'nope'; --path-prefix '/x'",
        ),
    ],
)
def test_a_selection_that_chooses_nothing_names_it_and_the_near_matches(
    github, tmp_path, selection, message
):
    with pytest.raises(OpenAPIError) as refused:
        write(github, tmp_path / "out", **selection)

    assert refused.value.message == message
    assert not (tmp_path / "out").exists()


def test_progress_counts_the_operations_made_then_the_files_checked(github, tmp_path):
    calls: list[tuple[str, int, int]] = []

    write(github, tmp_path, tags=["issues"], progress=lambda *call: calls.append(call))

    assert calls == [("generate", 1, 3), ("generate", 2, 3), ("generate", 3, 3),
                     ("check", 1, 3), ("check", 2, 3), ("check", 3, 3)]  # fmt: skip


def test_a_shared_value_is_written_in_full_at_every_place():
    shared = {"type": "string", "maxLength": 5}
    text = tool_yaml({"name": "t", "inputs": {"properties": {"a": shared, "b": shared}}})

    assert "&" not in text
    assert "*" not in text
    assert yaml.safe_load(text)["inputs"]["properties"]["b"] == shared


def test_a_url_serving_more_than_the_cap_is_cut_off_naming_the_setting(server, settings):
    settings.FLOWPILOT_OPENAPI_HOSTS = ["127.0.0.1"]
    settings.FLOWPILOT_OPENAPI_MAX_BYTES = 2048
    server.handler = lambda req: Reply(body=b"#" * 100_000)

    with pytest.raises(OpenAPIError) as refused:
        openapi_read(f"{server.url}/big.yaml")

    assert refused.value.message.endswith(
        "/big.yaml: the document is larger than 2048 bytes (0.00195312 MiB), "
        "the cap set by FLOWPILOT_OPENAPI_MAX_BYTES"
    )
