"""Every flowpilot command the README and docs/*.md show runs, as written.

The commands of each code block run in order (a later one may use what an earlier one
made: ``importopenapi`` then ``loadtools``) as ``manage.py`` subprocesses on a fresh
SQLite database of their own, in a temp directory that sees the repository's ``docs``,
``examples`` and ``tests`` (so ``--out tools/petstore`` writes there, not into the
checkout). ``./flowpilot manage ARGS`` is ``manage.py ARGS``. A command is skipped
only for a reason in ``SKIPPED`` — it needs a service or the network, or it names an
object of the reader's own installation — and each entry must still be shown.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_commands import REPO, DocCommand, doc_commands

NETWORK = "calls a public API over the network"
CELERY = "queues on the Celery workers (a broker and a worker)"
LLM = "talks to an LLM endpoint"
SERVER = "serves until stopped (a long-running server)"
READERS_OWN = (
    "names an object of the reader's own installation (a run, a version, a file, a "
    "workflow such as sales_digest that the repository does not ship)"
)
SYNOPSIS = "a synopsis: [optional] arguments and placeholders, not a command to paste"

SKIPPED: dict[str, str] = {
    "./flowpilot manage testflow sales_report": "needs an approved version (a validation run) "
    "and a second one whose scenario fails: tests/runs/test_testflow.py runs it so",
    "./flowpilot demo": "sets up .venv first (creates it and pip-installs the project)",
    "./flowpilot test": "runs this whole test suite",
    ".venv/bin/python manage.py runflow examples/geo_weather.yaml --tools examples/tools "
    "--input ip=1.1.1.1": NETWORK,
    ".venv/bin/python manage.py runflow examples/geo_weather.yaml --async --tools "
    "examples/tools": CELERY,
    '.venv/bin/python manage.py planflow "Total sales by region from data/sales.csv" '
    "--input path=data/sales.csv": LLM,
    "./flowpilot manage createsuperuser": "asks for a password on the terminal",
    "python manage.py loadtools tools/": READERS_OWN,
    "python manage.py runflow paris_time.yaml": READERS_OWN,
    "python manage.py drf_create_token agent          # a user with the permissions above": (
        READERS_OWN
    ),
    "python manage.py mcpserve --transport http --host 127.0.0.1 --port 8001   # endpoint "
    "/mcp (--path)": SERVER,
    "python manage.py runflow eur_rates": READERS_OWN,
    "python manage.py importopenapi api.yaml --out tools/api --prefix api": READERS_OWN,
    "python manage.py loadtools tools/        # rates.yaml gained an `amount` parameter": (
        READERS_OWN
    ),
    ".venv/bin/python manage.py runflow examples/geo_weather.yaml --async --input "
    "ip=1.1.1.1": CELERY,
    ".venv/bin/python manage.py resumeflow 9 --async     # a failed or cancelled run, from "
    "its checkpoint": CELERY,
    ".venv/bin/python manage.py cancelrun 12             # queued steps never start": (READERS_OWN),
    "python manage.py runflow docs/examples/tool.yaml --tools examples/tools --input "
    "city=Paris": NETWORK,
    "python manage.py runflow docs/examples/decision.yaml --tools examples/tools --input "
    "city=Tokyo": NETWORK,
    "python manage.py runflow docs/examples/foreach.yaml --tools examples/tools --input "
    '\'codes=["DE","JP","XX"]\'': NETWORK,
    "python manage.py runflow docs/examples/workflow.yaml --input ip=1.1.1.1": NETWORK,
    "./flowpilot manage restartflow 42 --from weather          # weather and what follows it": (
        READERS_OWN
    ),
    "./flowpilot manage restartflow 42 --from notify --yes     # notify is not idempotent": (
        READERS_OWN
    ),
    "./flowpilot manage restartflow 42                         # from the trigger: every step": (
        READERS_OWN
    ),
    "./flowpilot manage restartflow 42 --from weather --async  # on the Celery workers": CELERY,
    "./flowpilot manage restartflow 42 --from review#2         # iteration 2 onwards of loop "
    "review": READERS_OWN,
    "python manage.py runflow docs/examples/loop.yaml --input ip=1.1.1.1": NETWORK,
    "./flowpilot manage restartflow 42 --from report --flow-version 4  # onto version 4": (
        READERS_OWN
    ),
    "./flowpilot manage replayflow geo_weather                  # the newest version": (
        READERS_OWN
    ),
    "./flowpilot manage replayflow geo_weather --flow-version 3": READERS_OWN,
    "./flowpilot manage replayflow 17                           # a version by id": READERS_OWN,
    "./flowpilot manage replayflow geo_weather --validation-run 42": READERS_OWN,
    "./flowpilot manage exportflow sales_report --diff 1 2": READERS_OWN,
    "./flowpilot manage exportflow sales_report --diff 1 2 --format json": READERS_OWN,
    '.venv/bin/python manage.py planflow "Total sales by region from data/sales.csv" --input '
    "path=data/sales.csv [--answer ID=TEXT …] [--model vendor/model] [--endpoint NAME] "
    "[--tools DIR] [--owner USER]": SYNOPSIS,
    ".venv/bin/python manage.py planflow --reply-to ATTEMPT --answer ID=TEXT …": SYNOPSIS,
    ".venv/bin/python manage.py evalplanner [GOALS_FILE] [--json] [--store] [--endpoint NAME] "
    "[--model M] [--limit N] [--min-valid RATE] [--tools DIR]": SYNOPSIS,
    './flowpilot manage schedules add sales_digest morning --cron "0 9 * * 1-5" --timezone '
    "Europe/Paris --input region=emea --overlap buffer_one --pause-after-failures 3 "
    "--jitter 30": READERS_OWN,
    "./flowpilot manage schedules add sales_digest often --every 300": READERS_OWN,
    "./flowpilot manage schedules fires sales_digest morning     # the fire log, newest first": (
        READERS_OWN
    ),
    "./flowpilot manage schedules pause sales_digest morning": READERS_OWN,
    "./flowpilot manage schedules resume sales_digest morning": READERS_OWN,
    "./flowpilot manage schedules remove sales_digest morning": READERS_OWN,
}

# What a block assumes the reader has done before it (its page says so): ``manage.py``
# arguments run first on the block's fresh database, keyed by a command of the block.
ADMIN = ["createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.com"]
LOAD = ["loadtools", "examples/tools"]
SALES_REPORT = ["importflow", "examples/sales_report.yaml", "--activate", "--as", "admin"]
GIVEN: dict[str, list[list[str]]] = {
    # README: "Schedules" follows the demo, which stored sales_report.
    './flowpilot manage schedules add sales_report weekdays --cron "0 9 * * 1-5" --timezone '
    "Europe/Paris": [LOAD, ADMIN, SALES_REPORT],
    # docs/api.md: the block's `createsuperuser` (interactive) made `admin`.
    "./flowpilot manage drf_create_token admin": [ADMIN],
    # docs/tools.md "Versions": a tool that was loaded.
    "./flowpilot manage listtools --versions github_issues": [LOAD],
    # docs/operations.md and docs/schedules.md: "--as USERNAME naming an active superuser".
    "./flowpilot manage importflow examples/sales_report.yaml --activate --as admin": [ADMIN],
    "./flowpilot manage importflow examples/sales_report.yaml --activate --as admin   "
    "# a superuser": [ADMIN],
}

COMMANDS = list(doc_commands())
BLOCKS = sorted({(c.document, c.block) for c in COMMANDS})


def test_every_skipped_or_prepared_command_is_still_shown():
    shown = {c.text for c in COMMANDS}
    assert sorted((set(SKIPPED) | set(GIVEN)) - shown) == []


def test_the_commands_are_found_in_code_blocks_as_written():
    texts = [c.text for c in COMMANDS]
    assert (
        ".venv/bin/python manage.py validateflow docs/examples/*.yaml --tools examples/tools"
        in texts
    )
    assert "./flowpilot demo" in texts
    assert any(t.startswith(".venv/bin/python manage.py planflow --reply-to") for t in texts)


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    """A freshly migrated SQLite database, copied for each document."""
    database = tmp_path_factory.mktemp("template") / "db.sqlite3"
    _manage(["migrate", "-v0"], cwd=database.parent, database=database)
    return database


# The commands run on a fresh SQLite database of their own whatever the pass's database,
# so they run once: in the SQLite pass of ``python -m tests``, not again on PostgreSQL.
ONCE = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="runs on a SQLite database of its own: once, in the SQLite pass",
)


@ONCE
@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b[0]}:{b[1]}")
def test_the_commands_of_a_block_run_as_written(block, migrated, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    for shared in ("docs", "examples", "tests"):
        (workdir / shared).symlink_to(REPO / shared)
    database = tmp_path / "db.sqlite3"
    shutil.copy(migrated, database)
    commands = [c for c in COMMANDS if (c.document, c.block) == block]
    for given in (g for c in commands for g in GIVEN.get(c.text, ())):
        done = _manage(given, cwd=workdir, database=database)
        assert done.returncode == 0, f"{given}\n{done.stderr}"
    ran, failed = 0, []
    for command in commands:
        if command.text in SKIPPED:
            continue
        result = _manage(_arguments(command, workdir), cwd=workdir, database=database)
        if command.refusal:  # a transcript shows it refused: that is what must happen
            if result.returncode == 0 or command.refusal not in result.stderr:
                failed.append(f"{command}: not refused with {command.refusal!r}: {result.stderr}")
        elif result.returncode != 0:
            failed.append(f"{command}\n{result.stdout[-800:]}\n{result.stderr[-800:]}")
        ran += 1
    assert not failed, "\n\n".join(failed)
    if ran == 0:
        pytest.skip(f"every command of {block} is skipped (SKIPPED says why)")


def _arguments(command: DocCommand, workdir: Path) -> list[str]:
    """The command's ``manage.py`` arguments, split and globbed as a shell would."""
    words = shlex.split(command.text, comments=True)
    if words[0] == "./flowpilot":
        assert words[1] == "manage", f"{command}: only `./flowpilot manage` is run here"
        words = words[2:]
    else:
        words = words[words.index(next(w for w in words if w.endswith("manage.py"))) + 1 :]
    expanded: list[str] = []
    for word in words:
        matches = sorted(glob.glob(word, root_dir=workdir)) if "*" in word else []
        expanded += matches or [word]
    return expanded


def _manage(args: list[str], *, cwd: Path, database: Path) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FLOWPILOT_", "DATABASE_", "CELERY_", "OPENAI_"))
    }
    env.update(
        DATABASE_URL=f"sqlite:///{database}",
        FLOWPILOT_OUTPUT_DIR=str(cwd / "output"),
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    return subprocess.run(
        [sys.executable, str(REPO / "manage.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
