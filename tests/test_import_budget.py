"""What an everyday command does not import: the import-time budget.

Every ``manage.py`` command, Celery worker and subprocess of the tests pays for what
``django.setup()`` and the URL checks import. The heavy SDKs and the features that
only some commands use are imported inside the code that uses them, so
``manage.py check`` and ``manage.py listruns`` (on a fresh, migrated SQLite
database) must not import any module of ``HEAVY``. This is a list of modules, read
from ``python -X importtime`` in a subprocess, not a timing: it holds on any machine,
and a failure names the chain of importers that pulled the module in.

``-X importtime`` reports what an ``import`` statement loads; a module that Django
loads by name (``importlib.import_module``: an app's models, admin and URL conf)
shows only through what it imports, which is where every module of ``HEAVY`` would
come from.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Each module that must stay out of a command's start-up, and why.
HEAVY: dict[str, str] = {
    "openai": "the LLM SDK (about 0.4 s): loaded with the first LLMClient",
    "mcp": "the MCP SDK (about 0.4 s, with its server side): loaded when a session connects",
    "mcp_types": "the MCP protocol's pydantic models: loaded with an MCP call or listing",
    "uvicorn": "the web server of `mcpserve` only",
    "rank_bm25": "the planner's ranking: loaded when the planner ranks tools or templates",
    "numpy": "only rank_bm25 needs it",
    "schemathesis": "a test tool, never a runtime dependency",
    "authlib": "OAuth2 consent: loaded when a credential is connected or refreshed",
    "tools.credentials.consent": "OAuth2 consent: loaded by the admin's Connect pages",
    "tools.openapi.document": "OpenAPI parsing: loaded by an import (page or command)",
    "tools.openapi.generate": "OpenAPI → tool files: loaded by an import",
    "tools.openapi.services": "the OpenAPI import service: loaded by an import",
    "tools.openapi.admin_views": "the admin's import page: loaded when it is opened",
    "runs.replay.services": "offline replay: loaded when a version is replayed",
    "runs.replay.player": "offline replay's answering tap: loaded when a version is replayed",
    "workflows.planner.services": "the planner: loaded where a plan is made",
    "workflows.planner.session": "the planner's LLM conversation",
    "workflows.planner.catalog": "the planner's tool catalog",
    "workflows.planner.templates": "the planner's template matching",
    "workflows.planner.evaluation": "the planner's evaluation (`evalplanner` only)",
}

# What a command that does its own work (``FlowpilotCommand``: no system checks, so no
# URL conf and no admin modules) leaves out beside ``HEAVY``: the web side and what
# only running a step, validating a definition or rendering a page needs. Checked on
# ``listruns``; ``check`` loads the URL conf and the admin by design.
NOT_FOR_A_COMMAND: dict[str, str] = {
    "rest_framework": "the API: loaded with the URL conf",
    "drf_spectacular.views": "the OpenAPI schema views: loaded with the URL conf",
    "health.views": "the health pages: loaded with the URL conf",
    "runs.admin_views": "the run admin's pages: the admin modules load on first use",
    "runs.engine.local": "the engine: loaded where a run is executed",
    "workflows.schema": "the definition schema: loaded where a definition is read",
    "tools.registry": "the tool registry: loaded where a run is made or a definition checked",
    "pydantic": "the schema's and the retry policy's models",
    "jsonschema": "tool input validation",
    "httpx": "the HTTP client of the tools and the LLM client",
    "redis": "the circuit breakers' store",
    "psycopg": "PostgreSQL's driver, on a SQLite database",
}

# The commands run on a SQLite database of their own whatever the pass's database,
# so they run once: in the SQLite pass, not again on PostgreSQL.
ONCE = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="runs on a SQLite database of its own: once, in the SQLite pass",
)


def imported(stderr: str) -> dict[str, list[str]]:
    """Each module ``-X importtime`` reports in ``stderr``, with its importers (the
    module that imported it first, then that one's importer, …, a top-level import
    last). The report lists a module after everything it imported, one level of
    indentation (two spaces) deeper than its importer."""
    rows: list[tuple[int, str]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        name = line.split("|", 2)[2]
        if name.strip() == "imported package":  # the header
            continue
        rows.append(((len(name) - len(name.lstrip(" "))) // 2, name.strip()))
    found: dict[str, list[str]] = {}
    for index, (depth, name) in enumerate(rows):
        chain, level = [], depth
        for outer_depth, outer in rows[index + 1 :]:
            if level == 0:
                break
            if outer_depth < level:
                chain.append(outer)
                level = outer_depth
        found.setdefault(name, chain)
    return found


def _manage(args: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -X importtime manage.py ARGS`` on ``cwd``'s own SQLite database, with
    none of this process's flowpilot, database, Celery or LLM settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FLOWPILOT_", "DATABASE_", "CELERY_", "OPENAI_", "PYTHONPROFILE"))
    }
    env.update(
        DATABASE_URL=f"sqlite:///{cwd / 'db.sqlite3'}",
        FLOWPILOT_OUTPUT_DIR=str(cwd / "output"),
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    return subprocess.run(
        [sys.executable, "-X", "importtime", str(REPO / "manage.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize("module", sorted(HEAVY.keys() | NOT_FOR_A_COMMAND.keys()))
def test_every_guarded_module_exists(module: str) -> None:
    """A misspelt name would never be imported, and its guard would prove nothing."""
    assert importlib.util.find_spec(module) is not None


@pytest.mark.slow
def test_the_parser_names_a_module_and_its_importers(tmp_path: Path) -> None:
    """The reading of ``-X importtime`` finds a module imported two levels down, with
    the chain that imported it (so the budget test cannot pass by reading nothing)."""
    (tmp_path / "outer_probe.py").write_text("import inner_probe\n", encoding="utf-8")
    (tmp_path / "inner_probe.py").write_text("import rank_bm25\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import outer_probe"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    found = imported(done.stderr)
    assert found["rank_bm25"] == ["inner_probe", "outer_probe"]
    assert found["outer_probe"] == []
    assert "numpy" in found


@ONCE
@pytest.mark.parametrize("command", [["check"], ["listruns"]], ids=" ".join)
@pytest.mark.slow
def test_a_command_imports_no_heavy_module(command: list[str], tmp_path: Path) -> None:
    migrated = _manage(["migrate", "-v0"], cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    done = _manage(command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    found = imported(done.stderr)
    # What each surely imports (so the test cannot pass by reading nothing).
    expected = {"runs.cli_runs"}
    if command == ["check"]:
        expected = {"tools.registry", "runs.engine.context"}
    assert {"django.core.management", *expected} <= set(found)
    guarded = HEAVY if command == ["check"] else {**HEAVY, **NOT_FOR_A_COMMAND}
    pulled = {m: " <- ".join([m, *found[m]]) for m in guarded if m in found}
    assert pulled == {}, "\n".join(f"{chain}  ({guarded[m]})" for m, chain in pulled.items())
