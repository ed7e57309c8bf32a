"""Imports flow one way: tools ← workflows ← runs (config wires them). STYLE.md §11."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"tools": {"workflows", "runs"}, "workflows": {"runs"}}


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_lower_layers_never_import_upper_ones(package):
    offenders = [
        f"{path.relative_to(ROOT)} imports {sorted(_imported_packages(path) & FORBIDDEN[package])}"
        for path in sorted((ROOT / package).rglob("*.py"))
        if _imported_packages(path) & FORBIDDEN[package]
    ]
    assert offenders == []


def test_the_check_sees_an_upward_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from runs.models import Run\n", encoding="utf-8")
    assert "runs" in _imported_packages(module)
