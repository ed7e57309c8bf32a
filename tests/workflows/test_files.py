"""Workflow files (YAML/JSON) and their round trip through the database.

import → export → import gives the identical definition and hash for every
shipped example, in both formats; malformed files get messages that say where.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES_DIR
from workflows.files import (
    MAX_FILE_BYTES,
    WorkflowFileError,
    dump_workflow,
    parse_workflow_text,
    read_workflow_file,
)
from workflows.models import Workflow
from workflows.schema import WorkflowSpec
from workflows.services import workflow_export, workflow_import

SHIPPED = sorted(p.name for p in EXAMPLES_DIR.glob("*.yaml"))


def test_the_shipped_examples_are_the_four_of_the_design():
    assert SHIPPED == [
        "geo_weather.yaml",
        "github_intel.yaml",
        "sales_report.yaml",
        "travel_briefing.yaml",
    ]


# --- parsing ------------------------------------------------------------------------------


def test_invalid_yaml_names_line_and_column():
    with pytest.raises(WorkflowFileError) as caught:
        parse_workflow_text("name: x\nsteps:\n  - id: a\n   kind: tool\n", source="f.yaml")

    assert caught.value.code == "workflow_file_invalid"
    assert caught.value.message.startswith("f.yaml: invalid YAML at line 4, column 4: ")


def test_invalid_json_names_line_and_column():
    text = '{\n  "name": "x",\n  "steps": [1,,2]\n}'

    with pytest.raises(WorkflowFileError) as caught:
        parse_workflow_text(text, source="f.json", fmt="json")

    assert caught.value.message.startswith("f.json: invalid JSON at line 3, column 15: ")


@pytest.mark.parametrize(
    ("text", "found"),
    [("", "nothing"), ("- a\n- b\n", "list"), ("just text\n", "str"), ("[1, 2]", "list")],
)
def test_a_file_must_hold_a_mapping(text, found):
    with pytest.raises(WorkflowFileError, match=f"must hold a mapping, found {found}"):
        parse_workflow_text(text, source="f")


def test_the_format_is_guessed_from_the_text():
    assert parse_workflow_text('{"name": "x"}', source="s") == {"name": "x"}
    assert parse_workflow_text("name: x\n", source="s") == {"name": "x"}


def test_yaml_aliases_and_tags_are_not_code():
    with pytest.raises(WorkflowFileError, match="invalid YAML"):
        parse_workflow_text("name: !!python/object/apply:os.system ['true']\n", source="f")


def test_read_workflow_file_reports_missing_big_and_binary_files(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")

    with pytest.raises(WorkflowFileError, match="cannot read"):
        read_workflow_file(tmp_path / "missing.yaml")
    with pytest.raises(WorkflowFileError, match=f"over the {MAX_FILE_BYTES} byte limit"):
        read_workflow_file(big)
    with pytest.raises(WorkflowFileError, match=r"not UTF-8 text \(byte 6\)"):
        read_workflow_file(binary)


def test_a_json_suffix_is_parsed_as_json(tmp_path):
    path = tmp_path / "flow.json"
    path.write_text("name: x\n", encoding="utf-8")  # YAML in a .json file

    with pytest.raises(WorkflowFileError, match="invalid JSON at line 1, column 1"):
        read_workflow_file(path)


# --- files <-> database -------------------------------------------------------------------


def write_as(tmp_path, data: dict, fmt: str):
    path = tmp_path / f"flow.{fmt}"
    path.write_text(dump_workflow(data, fmt=fmt), encoding="utf-8")
    return path


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("name", SHIPPED)
def test_import_export_import_gives_the_identical_definition_and_hash(tmp_path, name, fmt):
    original = read_workflow_file(EXAMPLES_DIR / name)
    first, created = workflow_import(data=read_workflow_file(write_as(tmp_path, original, fmt)))
    assert created

    exported = workflow_export(workflow=first)
    again_path = write_as(tmp_path, exported, fmt)
    second, created_again = workflow_import(data=read_workflow_file(again_path))

    assert exported == original
    assert created_again is False
    assert second.pk == first.pk
    assert second.definition == first.definition == original
    assert second.definition_hash == first.definition_hash
    assert first.definition_hash == WorkflowSpec.model_validate(original).definition_hash()
    assert Workflow.objects.filter(name=first.name).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("name", SHIPPED)
def test_yaml_and_json_of_one_workflow_hash_the_same(tmp_path, name):
    data = read_workflow_file(EXAMPLES_DIR / name)
    from_yaml = WorkflowSpec.model_validate(read_workflow_file(write_as(tmp_path, data, "yaml")))
    from_json = WorkflowSpec.model_validate(read_workflow_file(write_as(tmp_path, data, "json")))

    assert from_yaml.definition_hash() == from_json.definition_hash()
    assert from_yaml.canonical_json() == from_json.canonical_json()


@pytest.mark.django_db
def test_key_order_does_not_change_the_hash():
    data = read_workflow_file(EXAMPLES_DIR / "github_intel.yaml")
    shuffled = dict(reversed(list(data.items())))
    shuffled["inputs"] = dict(reversed(list(data["inputs"].items())))

    first, _ = workflow_import(data=data)
    second, created = workflow_import(data=shuffled)

    assert created is False
    assert second.pk == first.pk


@pytest.mark.django_db
def test_an_unchanged_file_keeps_its_version_and_a_changed_one_makes_the_next(tmp_path):
    data = read_workflow_file(EXAMPLES_DIR / "travel_briefing.yaml")
    path = write_as(tmp_path, data, "yaml")

    v1, created1 = workflow_import(data=read_workflow_file(path))
    same, created2 = workflow_import(data=read_workflow_file(path))
    data["inputs"]["city"]["default"] = "Paris"
    v2, created3 = workflow_import(data=read_workflow_file(write_as(tmp_path, data, "yaml")))

    assert (v1.version, created1) == (1, True)
    assert (same.pk, created2) == (v1.pk, False)
    assert (v2.version, created3) == (2, True)
    assert v2.definition_hash != v1.definition_hash
    assert v2.definition["inputs"]["city"]["default"] == "Paris"
    v1.refresh_from_db()
    assert v1.definition["inputs"]["city"]["default"] == "Berlin"  # old version untouched


def test_dump_workflow_writes_readable_yaml_in_field_order():
    data = read_workflow_file(EXAMPLES_DIR / "geo_weather.yaml")

    text = dump_workflow(data)

    assert text.splitlines()[0] == "name: geo_weather"
    assert parse_workflow_text(text, source="s") == data
    assert json.loads(dump_workflow(data, fmt="json")) == data


# --- hostile files ------------------------------------------------------------------------


def test_alias_bomb_is_refused_before_anything_expands_it():
    lines = ["      a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"      a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    text = (
        "name: lol\nsteps:\n  - id: s\n    kind: transform\n    expression: x\n"
        "    input_mapping:\n" + "\n".join(lines) + "\n"
    )
    with pytest.raises(WorkflowFileError, match="anchors"):
        parse_workflow_text(text, source="lol.yaml")


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_deep_nesting_is_a_file_error_not_a_crash(fmt):
    text = '{"name": "deep", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(WorkflowFileError, match="nest"):
        parse_workflow_text(text, source=f"deep.{fmt}", fmt=fmt)


def test_recursive_anchor_is_a_file_error():
    with pytest.raises(WorkflowFileError, match="itself"):
        parse_workflow_text("name: r\nx: &a [*a]\n", source="r.yaml")


def test_a_key_written_twice_is_an_error_with_both_lines():
    text = "name: first\nsteps: []\nname: second\n"
    with pytest.raises(
        WorkflowFileError, match=r"line 3.*duplicate key 'name' \(first written on line 1\)"
    ):
        parse_workflow_text(text, source="dup.yaml")


def test_merge_keys_may_still_override_what_they_merge():
    text = "base: &b {kind: tool, tool: t}\nstep:\n  <<: *b\n  tool: u\n"
    assert parse_workflow_text(text, source="m.yaml")["step"] == {"kind": "tool", "tool": "u"}
