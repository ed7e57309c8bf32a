"""Imports flow one way: review → schedules | notifications → runs → workflows → tools.

Two checks, each proven to catch a planted violation:

* the import-linter ``layers`` contract in ``pyproject.toml`` (also run by CI as
  ``lint-imports``): no module of a lower layer imports an upper one, at module
  level or inside a function;
* no lower layer names a reverse accessor that leads to an upper layer's table
  (``workflow.runs``, ``approval__isnull``, ``Count("runs")``): the names come from
  Django's model meta, so a new relation is covered the day it is declared.

``config``, ``tests`` and ``benchmarks`` wire the layers and sit outside both.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _levels() -> dict[str, int]:
    """Each app's level in the contract, top first (siblings ``a | b`` share one)."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = (c for c in config["contracts"] if c["type"] == "layers")
    return {
        app.strip(): level
        for level, layer in enumerate(contract["layers"])
        for app in layer.split("|")
    }


def _layers() -> list[str]:
    """The contract's apps, top first."""
    return list(_levels())


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- the import contract -------------------------------------------------------------------


def test_the_import_contract_is_kept():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken." in result.stdout


def test_the_contract_catches_an_upward_import_even_inside_a_function(tmp_path):
    for package in _layers():
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    (tmp_path / "tools" / "planted.py").write_text(
        "def f():\n    from runs.models import Run\n\n    return Run\n", encoding="utf-8"
    )

    result = _lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout
    assert "tools.planted -> runs.models" in result.stdout


# --- reverse accessors of upper layers' models ----------------------------------------------


def upper_accessors() -> dict[str, set[str]]:
    """Per layer: the reverse accessor and query names its models get from upper layers.

    Read from Django's model meta: every relation declared on a model of an upper
    app that points at a model of this app (``Run.workflow`` gives ``workflows`` the
    name ``runs``). A layer below that one cannot see the upper model either, so
    each name is forbidden in every layer below the upper model's app.
    """
    levels = _levels()
    forbidden: dict[str, set[str]] = {layer: set() for layer in levels}
    for model in apps.get_models():
        if model._meta.app_label not in levels:
            continue
        for relation in model._meta.related_objects:
            upper = relation.related_model._meta.app_label
            if upper not in levels or levels[upper] >= levels[model._meta.app_label]:
                continue
            names = {relation.get_accessor_name(), relation.field.related_query_name()}
            for lower in (app for app, level in levels.items() if level > levels[upper]):
                forbidden[lower] |= names
    return forbidden


def accessor_uses(path: Path, names: set[str]) -> list[str]:
    """Where ``path`` names one of ``names``: ``x.name``, or a lookup ``"name"`` / ``"name__…"``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.keyword) and node.arg and node.arg.split("__")[0] in names:
            found.append((node.lineno, f"{node.arg}="))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.split("__")[0] in names
        ):
            found.append((node.lineno, repr(node.value)))
    return [f"{path.name}:{line} {use}" for line, use in sorted(found)]


def test_lower_layers_never_name_an_upper_layers_reverse_accessor():
    offenders = [
        f"{path.relative_to(ROOT)}: {use}"
        for layer, names in upper_accessors().items()
        if names
        for path in sorted((ROOT / layer).rglob("*.py"))
        if "migrations" not in path.parts
        for use in accessor_uses(path, names)
    ]
    assert offenders == []


def test_the_accessor_names_come_from_the_models():
    forbidden = upper_accessors()

    assert {"runs", "approvals"} <= forbidden["workflows"]  # Run.workflow, Approval.workflow
    assert {"runs", "approvals"} <= forbidden["tools"]
    assert "approval" in forbidden["runs"]  # Approval.validation_run
    assert "step_results" not in forbidden["runs"]  # StepResult is runs' own
    assert forbidden["review"] == set()


def test_the_accessor_check_sees_attributes_lookups_and_names(tmp_path):
    module = tmp_path / "planted.py"
    module.write_text(
        "def f(workflow, Run, Count):\n"
        "    workflow.runs.count()\n"
        "    Run.objects.filter(approval__isnull=True)\n"
        "    return workflow.annotate(n=Count('approvals'))\n",
        encoding="utf-8",
    )

    uses = accessor_uses(module, upper_accessors()["workflows"] | upper_accessors()["runs"])

    assert uses == [
        "planted.py:2 .runs",
        "planted.py:3 approval__isnull=",
        "planted.py:4 'approvals'",
    ]
