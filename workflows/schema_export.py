"""Regenerate ``docs/workflow.schema.json`` from the pydantic models.

Run ``python -m workflows.schema_export`` after changing ``workflows/schema.py``;
a test fails while the committed file differs from what this renders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workflows.schema import workflow_json_schema

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "docs" / "workflow.schema.json"


def render_workflow_schema() -> str:
    """The published JSON Schema of the workflow format, as stable text."""
    return json.dumps(workflow_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_workflow_schema(path: Path = SCHEMA_PATH) -> bool:
    """Write the schema file; returns whether its content changed."""
    text = render_workflow_schema()
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


if __name__ == "__main__":
    changed = write_workflow_schema()
    sys.stdout.write(f"{SCHEMA_PATH}: {'updated' if changed else 'unchanged'}\n")
