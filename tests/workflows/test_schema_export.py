"""docs/workflow.schema.json is generated from workflows.schema and never drifts."""

import json

from workflows.schema_export import SCHEMA_PATH, render_workflow_schema, write_workflow_schema


def test_committed_schema_matches_the_models():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render_workflow_schema(), (
        "docs/workflow.schema.json is stale: run `python -m workflows.schema_export`"
    )


def test_schema_is_a_draft_2020_12_document_of_the_workflow_format():
    schema = json.loads(render_workflow_schema())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["required"]) == {"name", "steps"}
    assert "from" in schema["$defs"]["Edge"]["properties"]


def test_write_reports_whether_it_changed(tmp_path):
    target = tmp_path / "workflow.schema.json"
    assert write_workflow_schema(target) is True
    assert write_workflow_schema(target) is False
    assert target.read_text(encoding="utf-8") == render_workflow_schema()
