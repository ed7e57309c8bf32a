"""Imports flow one way (api | health → review → schedules | notifications | triggers
→ runs → workflows → tools), and never in a circle.

Four checks, each proven to catch a planted violation:

* the import-linter ``layers`` contract in ``pyproject.toml`` (also run by CI as
  ``lint-imports``): no module of a lower layer imports an upper one, at module
  level or inside a function;
* its ``runs-engine`` contract: inside ``runs``, the engine imports nothing but the
  checkpoint rows, their transitions and the summaries below it;
* no lower layer names a reverse accessor that leads to an upper layer's table
  (``workflow.runs``, ``approval__isnull``, ``Count("runs")``): the names come from
  Django's model meta, so a new relation is covered the day it is declared;
* no import circle between any modules of the apps, ``config`` and ``benchmarks``,
  counting imports under ``TYPE_CHECKING`` and inside functions: a circle hidden
  that way is still a circle (grimp's import graph, strongly connected components).

``config``, ``tests`` and ``benchmarks`` wire the layers and sit outside the
layers contract; the circle check covers ``config`` and ``benchmarks`` too.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

import grimp
import pytest
from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
OUTSIDE_THE_LAYERS = ("config", "benchmarks")  # wiring and measuring: circle-checked too


def _import_linter() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]


def _levels() -> dict[str, int]:
    """Each app's level in the contract, top first (siblings ``a | b`` share one)."""
    (contract,) = (c for c in _import_linter()["contracts"] if c["id"] == "layers")
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


def _copy_apps(tmp_path: Path) -> None:
    for package in _layers():
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")


def test_the_import_contracts_are_kept():
    contracts = len(_import_linter()["contracts"])

    result = _lint_imports(ROOT)

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {contracts} kept, 0 broken." in result.stdout


def test_the_contract_catches_an_upward_import_even_inside_a_function(tmp_path):
    _copy_apps(tmp_path)
    (tmp_path / "tools" / "planted.py").write_text(
        "def f():\n    from runs.models import Run\n\n    return Run\n", encoding="utf-8"
    )

    result = _lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout
    assert "tools.planted -> runs.models" in result.stdout


def test_the_engine_contract_catches_an_import_of_runs_above_it_and_an_unplaced_module(tmp_path):
    _copy_apps(tmp_path)
    (tmp_path / "runs" / "engine" / "planted.py").write_text(
        "def f():\n    from runs.services import run_create\n\n    return run_create\n",
        encoding="utf-8",
    )
    (tmp_path / "runs" / "unplaced.py").write_text("", encoding="utf-8")

    result = _lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "runs.engine.planted -> runs.services" in result.stdout
    assert "runs.unplaced" in result.stdout  # exhaustive: every module of runs is placed


# --- import circles -------------------------------------------------------------------------


def import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted, in order.

    Tarjan's algorithm, iterative (no recursion limit on a deep chain of imports).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> Iterator[str]:
        index[module] = low[module] = len(index)
        stack.append(module)
        return iter(sorted(graph.find_modules_directly_imported_by(module)))

    for root in sorted(m for m in graph.modules):
        if root in index:
            continue
        work = [(root, visit(root))]
        while work:
            module, imported = work[-1]
            following = next((m for m in imported if m not in index or m in stack), None)
            if following is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    circles.extend(_component(stack, module))
            elif following in index:  # on the stack: a way back
                low[module] = min(low[module], index[following])
            else:
                work.append((following, visit(following)))
    return sorted(circles)


def _component(stack: list[str], root: str) -> list[list[str]]:
    """Pop the component ``root`` heads off ``stack``: ``[its modules]`` if a circle."""
    members = stack[stack.index(root) :]
    del stack[stack.index(root) :]
    return [sorted(members)] if len(members) > 1 else []


def _describe(graph: grimp.ImportGraph, circle: Iterable[str]) -> str:
    members = set(circle)
    lines = [
        f"  {importer} -> {imported} (line {detail['line_number']}: {detail['line_contents']})"
        for importer in sorted(members)
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members)
        for detail in graph.get_import_details(importer=importer, imported=imported)[:1]
    ]
    return "circle of " + ", ".join(sorted(members)) + ":\n" + "\n".join(lines)


def _graph(*packages: str) -> grimp.ImportGraph:
    # TYPE_CHECKING imports are kept (grimp's default made explicit); grimp reads every
    # import statement, those inside functions too.
    return grimp.build_graph(*packages, exclude_type_checking_imports=False, cache_dir=None)


def test_no_modules_import_each_other_in_a_circle():
    graph = _graph(*_layers(), *OUTSIDE_THE_LAYERS)

    circles = import_circles(graph)

    assert circles == [], "\n".join(_describe(graph, c) for c in circles)


def test_the_circle_check_sees_imports_in_functions_and_under_type_checking(tmp_path, monkeypatch):
    probe = tmp_path / "circleprobe"
    probe.mkdir()
    modules = {
        "__init__": "",
        "a": "from circleprobe import b\n",
        "b": "def f():\n    from circleprobe import a\n",  # a -> b -> a, in a function
        "c": "import typing\n\nif typing.TYPE_CHECKING:\n    from circleprobe import d\n",
        "d": "from circleprobe import e\n",
        "e": "import circleprobe.c\n",  # c -> d -> e -> c, under TYPE_CHECKING
        "f": "from circleprobe import a\n",  # imports into a circle: not part of it
    }
    for name, text in modules.items():
        (probe / f"{name}.py").write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = _graph("circleprobe")

    circles = import_circles(graph)

    assert circles == [
        ["circleprobe.a", "circleprobe.b"],
        ["circleprobe.c", "circleprobe.d", "circleprobe.e"],
    ]
    assert "circleprobe.b -> circleprobe.a (line 2:" in _describe(graph, circles[0])


@pytest.mark.parametrize("package", OUTSIDE_THE_LAYERS)
def test_the_circle_check_covers_the_packages_outside_the_layers(package):
    assert any(m.startswith(f"{package}.") for m in _graph(package).modules)


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
    assert "review_approval" in forbidden["runs"]  # Approval.validation_run
    assert "step_results" not in forbidden["runs"]  # StepResult is runs' own
    assert forbidden["review"] == set()


def test_the_accessor_check_sees_attributes_lookups_and_names(tmp_path):
    module = tmp_path / "planted.py"
    module.write_text(
        "def f(workflow, Run, Count):\n"
        "    workflow.runs.count()\n"
        "    Run.objects.filter(review_approval__isnull=True)\n"
        "    return workflow.annotate(n=Count('approvals'))\n",
        encoding="utf-8",
    )

    uses = accessor_uses(module, upper_accessors()["workflows"] | upper_accessors()["runs"])

    assert uses == [
        "planted.py:2 .runs",
        "planted.py:3 review_approval__isnull=",
        "planted.py:4 'approvals'",
    ]
