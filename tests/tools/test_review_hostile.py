"""Hostile input against the tool-file loader and the http client (review findings)."""

from __future__ import annotations

import pytest

from tools.errors import ToolConfigError
from tools.loader import load_tool_text


def _laughs(indent: str) -> str:
    """A 'billion laughs' YAML block: 9 anchors, each nine aliases of the previous one."""
    lines = [f"{indent}a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines)


def test_alias_bomb_in_a_tool_body_is_refused_quickly():
    text = (
        "name: t\nbase_url: https://x.org\nrequest:\n  method: POST\n  body:\n"
        + _laughs("    ")
        + "\n"
    )
    with pytest.raises(ToolConfigError, match="anchors"):
        load_tool_text(text, source="bomb.yaml")


def test_deeply_nested_tool_file_is_a_config_error():
    text = "name: t\nbase_url: https://x.org\nrequest:\n  body: " + "[" * 5000 + "]" * 5000
    with pytest.raises(ToolConfigError, match="nest"):
        load_tool_text(text, source="deep.yaml")
