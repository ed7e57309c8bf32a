"""Every app module with logic has a test file named after it (README.md, "Layout").

The rule, exactly:

* **App modules**: every ``.py`` file under ``api``, ``notifications``, ``review``,
  ``runs``, ``schedules``, ``tools`` and ``workflows``, except ``migrations/`` and
  ``apps.py``.
* **With logic**: its top level defines a function, or a class whose body defines a
  method other than ``__str__`` / ``__repr__``. Constants, choices, field-only models
  and dataclasses, and re-exports are declarations.
* **Named after it**: the module's dotted path below ``tests/`` spelled as a folder
  plus a file name, any prefix of the path as folders and the rest joined by ``_``:
  ``runs/engine/plan.py`` is tested by ``tests/runs/engine/test_plan.py`` or
  ``tests/runs/test_engine_plan.py``; a package's ``__init__.py`` is named as the
  package (``tests/workflows/test_planner.py``); a management command
  ``<app>/management/commands/<name>.py`` may also drop ``management/commands``
  (``tests/runs/test_showrun.py``). A name may go on with ``_<aspect>``
  (``test_admin_policy.py`` tests ``review/admin.py``) unless that longer name spells
  another module.

Modules still without one are listed in ``tests/modules_without_tests.txt``; the list
only shrinks: a listed module that gains a test, loses its logic or goes away fails
here until its line is removed. The paths are read from the tree at test time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
APPS = ("api", "notifications", "review", "runs", "schedules", "tools", "workflows")
ALLOWLIST = REPO / "tests" / "modules_without_tests.txt"
PLAIN_DUNDERS = frozenset({"__str__", "__repr__"})


def has_logic(source: str) -> bool:
    """Whether a module's top level defines a function or a class with a real method."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return True
        if isinstance(node, ast.ClassDef) and any(
            isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            and item.name not in PLAIN_DUNDERS
            for item in node.body
        ):
            return True
    return False


def app_modules() -> list[str]:
    """Every app module, as a path relative to the repository (``runs/state.py``)."""
    found = []
    for app in APPS:
        for path in (REPO / app).rglob("*.py"):
            relative = path.relative_to(REPO)
            if "migrations" not in relative.parts and relative.name != "apps.py":
                found.append(relative.as_posix())
    return sorted(found)


def dotted(module: str) -> tuple[str, ...]:
    """``runs/engine/plan.py`` -> (runs, engine, plan); a package's ``__init__`` is the package."""
    parts = tuple(Path(module).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def spellings(module: str) -> list[tuple[str, str]]:
    """Every (folder under the repository, test name without ``test_``) naming ``module``."""
    paths = [dotted(module)]
    if paths[0][1:3] == ("management", "commands") and len(paths[0]) == 4:
        paths.append((paths[0][0], paths[0][3]))
    names = []
    for parts in paths:
        for cut in range(1, len(parts)):
            names.append(("/".join(("tests", *parts[:cut])), "_".join(parts[cut:])))
        if len(parts) == 1:
            names.append(("tests", parts[0]))
    return names


def named_tests(module: str, taken: frozenset[tuple[str, str]]) -> list[str]:
    """The test files named after ``module`` (``taken``: every module's spellings, so that
    ``test_schema_export.py`` counts for ``schema_export.py``, not for ``schema.py``)."""
    found = []
    for folder, name in spellings(module):
        for path in sorted((REPO / folder).glob(f"test_{name}*.py")):
            stem = path.stem.removeprefix("test_")
            if stem == name or (stem.startswith(f"{name}_") and (folder, stem) not in taken):
                found.append(path.relative_to(REPO).as_posix())
    return found


def modules_without_named_tests() -> list[str]:
    modules = app_modules()
    with_logic = [m for m in modules if has_logic((REPO / m).read_text(encoding="utf-8"))]
    taken = frozenset(s for m in modules for s in spellings(m))
    return [m for m in with_logic if not named_tests(m, taken)]


def allowlisted() -> list[str]:
    lines = ALLOWLIST.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_every_app_module_with_logic_has_a_test_named_after_it_or_is_listed():
    listed = set(allowlisted())
    unlisted = [m for m in modules_without_named_tests() if m not in listed]
    assert unlisted == [], (
        f"{unlisted}: add a test file named after each (rule in {Path(__file__).name})"
    )


def test_the_list_of_modules_without_tests_only_shrinks():
    missing = set(modules_without_named_tests())
    stale = [m for m in allowlisted() if m not in missing]
    assert stale == [], f"{stale} have a named test now (or no logic, or are gone): unlist them"
    assert allowlisted() == sorted(set(allowlisted())), "keep the list sorted, one line each"


@pytest.mark.parametrize(
    ("source", "logic"),
    [
        ('"""Doc."""\nfrom a import b\n__all__ = ["b"]\nLIMIT = 3\n', False),
        ("class Kind(models.TextChoices):\n    A = 'a', 'A'\n", False),
        ("class Row(models.Model):\n    name = 1\n    def __str__(self): ...\n", False),
        ("def helper():\n    return 1\n", True),
        ("class Client:\n    async def send(self):\n        ...\n", True),
        ("class Admin:\n    def __str__(self): ...\n    def save(self): ...\n", True),
    ],
)
def test_with_logic_means_a_function_or_a_real_method(source, logic):
    assert has_logic(source) is logic


def test_the_names_a_module_may_be_tested_under():
    assert spellings("runs/engine/plan.py") == [
        ("tests/runs", "engine_plan"),
        ("tests/runs/engine", "plan"),
    ]
    assert spellings("workflows/planner/__init__.py") == [("tests/workflows", "planner")]
    assert spellings("api/__init__.py") == [("tests", "api")]
    assert ("tests/runs", "showrun") in spellings("runs/management/commands/showrun.py")
    taken = frozenset(s for m in app_modules() for s in spellings(m))
    assert "tests/workflows/test_schema_export.py" not in named_tests("workflows/schema.py", taken)
    assert named_tests("workflows/schema_export.py", taken) == [
        "tests/workflows/test_schema_export.py"
    ]
    assert "tests/review/test_admin_policy.py" in named_tests("review/admin.py", taken)
