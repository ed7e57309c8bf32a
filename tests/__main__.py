"""The whole test suite: ``python -m tests [--fast] [--no-cov] [pytest args…]``.

Runs pytest on the embedded default (SQLite) and on PostgreSQL, both passes at the
same time, each spread over ``WORKERS`` pytest-xdist workers (``-n``; pass ``-n N``
to choose, ``-n 0`` for one process). Each pass's output is shown whole, under its
label, when it ends; then a summary line per pass. Any failing pass fails the run.

The PostgreSQL URL is ``FLOWPILOT_TEST_POSTGRES_URL`` (default: the local server,
user ``postgres``); each worker has its own test database (``test_<name>_gw0``…),
as each has its own in-memory SQLite database. Under ``CI=true`` an unreachable
PostgreSQL fails the run; elsewhere that pass is skipped with a note saying why.

The tests' Redis dbs start at ``FLOWPILOT_TEST_REDIS_URL``'s (default db 12): the
SQLite pass's workers take one db each from there, the PostgreSQL pass's the next
ones (``tests.celery_support.redis_url``), so no two workers share a Celery queue, a
broadcast or a FLUSHDB.

Coverage is on unless ``--no-cov`` is given, and enforced: each pass records into a
data file of its own, the files are combined (into ``COVERAGE_FILE``, default
``.coverage``) and the combined report fails the run below ``fail_under`` of
``[tool.coverage.report]`` in pyproject.toml. Pass ``--no-cov`` when running part of
the suite.

``--fast`` is for local work: the SQLite pass alone, without coverage, and without
the tests marked ``slow`` (real browsers, Celery worker processes, the documented
commands, Schemathesis, the benchmarks and other tests that start many processes).

What does not depend on the pass's database runs once. When a PostgreSQL pass runs
too, the SQLite pass is told so (``FLOWPILOT_TEST_PASS=first``) and the Schemathesis
command line skips there, running on the PostgreSQL pass; and the PostgreSQL pass is
told ``FLOWPILOT_TEST_PASS=database``: it keeps only the tests that use the database
(a ``django_db`` or ``postgres`` mark, or a database fixture; ``tests/conftest.py``)
and are not marked ``one_database`` (costly tests whose subject is not the database),
leaving the rest (more than half of the suite) to the SQLite pass.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import urlparse

DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/flowpilot"
DEFAULT_REDIS = "redis://127.0.0.1:6379/12"
# Workers per pass when both passes run: 2 each on 2 cores keeps them busy while
# tests wait on subprocesses, servers and sleeps.
WORKERS = 2
SQLITE, POSTGRES = "SQLite (embedded default)", "PostgreSQL"
WORKER_FLAGS = ("-n", "--numprocesses")


@dataclass
class Pass:
    """One pytest run: its label, environment and arguments; then its outcome."""

    label: str
    env: dict[str, str]
    args: list[str]
    coverage_file: Path | None = None
    status: int | None = None
    seconds: float = 0.0
    log: IO[str] | None = field(default=None, repr=False)
    process: subprocess.Popen | None = field(default=None, repr=False)
    started: float = 0.0

    def command(self) -> list[str]:
        return [sys.executable, "-m", "pytest", *self.args]


def _reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 5432), 3):
            return True
    except OSError:
        return False


def _split(argv: list[str]) -> tuple[set[str], list[str]]:
    """This runner's own flags (``--fast``, ``--no-cov``) and the arguments for pytest."""
    own = {"--fast", "--no-cov"}
    return {a for a in argv if a in own}, [a for a in argv if a not in own]


def _workers(args: list[str]) -> int | None:
    """The ``-n`` the arguments ask for (``-n 3``, ``-n3``, ``--numprocesses=3``;
    ``auto``/``logical``: the CPU count), or None when they do not."""
    for i, arg in enumerate(args):
        if arg in WORKER_FLAGS:
            value = args[i + 1] if i + 1 < len(args) else ""
        elif arg.startswith("--numprocesses="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-n") and len(arg) > 2:
            value = arg[2:]
        else:
            continue
        return int(value) if value.isdigit() else os.cpu_count() or 1
    return None


def _with_workers(args: list[str], workers: int) -> list[str]:
    """``args`` with ``-n workers`` unless they choose themselves (or turn xdist off)."""
    if _workers(args) is not None or "no:xdist" in args:
        return args
    return ["-n", str(workers), *args]


def redis_for_pass(base: str, first_worker: int) -> str:
    """The Redis URL a pass's workers count up from: ``base``'s db + ``first_worker``."""
    from tests.celery_support import worker_redis_url

    return worker_redis_url(base, f"gw{first_worker}")


def _coverage_args(
    data_file: Path, environ: dict[str, str], version: tuple[int, int] = sys.version_info[:2]
) -> tuple[list[str], dict[str, str]]:
    """pytest-cov flags and environment: record into ``data_file``, report nothing, and
    leave the floor to the combined report.

    On Python 3.12+ coverage listens through ``sys.monitoring`` (``COVERAGE_CORE=sysmon``),
    which stops reporting a line once it is counted and never reports code outside the
    app packages: measured on this suite's engine tests, coverage then costs about a
    fifth of the run instead of doubling it, as the trace function of Python 3.11 does
    (docs/benchmarks.md, "The test suite"). A ``COVERAGE_CORE`` the caller set is kept."""
    env = {"COVERAGE_FILE": str(data_file)}
    if version >= (3, 12) and "COVERAGE_CORE" not in environ:
        env["COVERAGE_CORE"] = "sysmon"
    return ["--cov", "--cov-report=", "--cov-fail-under=0"], env


def plan(argv: list[str], environ: dict[str, str], *, pg_up: bool) -> list[Pass]:
    """The passes ``python -m tests argv`` runs, in ``environ``, PostgreSQL reachable or not.

    Coverage data files are placed by ``run``; here a pass only says it measures
    (``coverage_file`` set to its file's name)."""
    own, args = _split(argv)
    base = {k: v for k, v in environ.items() if k not in {"DATABASE_URL", "FLOWPILOT_TEST_PASS"}}
    redis = environ.get("FLOWPILOT_TEST_REDIS_URL", DEFAULT_REDIS)
    if "--fast" in own:
        env = {**base, "FLOWPILOT_TEST_REDIS_URL": redis}
        return [Pass(SQLITE, env, _with_workers(["-m", "not slow", *args], WORKERS))]
    asked = _workers(args)
    workers = asked if asked is not None else 0 if "no:xdist" in args else WORKERS
    sqlite = Pass(SQLITE, {**base, "FLOWPILOT_TEST_REDIS_URL": redis}, _with_workers(args, workers))
    passes = [sqlite]
    if pg_up:
        # A few costly tests that check no database behaviour run once, on the PostgreSQL
        # pass; every other test that uses no database runs once, on the SQLite pass.
        sqlite.env["FLOWPILOT_TEST_PASS"] = "first"
        pg_env = {
            **base,
            "FLOWPILOT_TEST_PASS": "database",
            "DATABASE_URL": environ.get("FLOWPILOT_TEST_POSTGRES_URL", DEFAULT_PG),
            "FLOWPILOT_TEST_REDIS_URL": redis_for_pass(redis, max(workers, 1)),
        }
        passes.append(Pass(POSTGRES, pg_env, _with_workers(args, workers)))
    redis_for_pass(redis, len(passes) * max(workers, 1) - 1)  # the last worker's db exists
    if "--no-cov" not in own:
        for each in passes:
            each.coverage_file = Path(each.label.split()[0].lower()) / ".coverage"
    return passes


def _start(each: Pass, log: IO[str] | None) -> None:
    """Start the pass, its output into ``log`` (None: onto this terminal)."""
    each.log = log
    print(f"=== {each.label}: pytest {' '.join(each.args)} ===", flush=True)
    if log is not None:
        print(f"    (shown when the pass ends; to follow it: tail -f {log.name})", flush=True)
    each.started = time.monotonic()
    each.process = subprocess.Popen(
        each.command(),
        env=each.env,
        stdout=log,
        stderr=subprocess.STDOUT if log else None,
    )


def _finish(each: Pass) -> None:
    assert each.process is not None
    each.status = each.process.wait()
    each.seconds = time.monotonic() - each.started
    if each.log is not None:
        each.log.seek(0)
        print(f"\n=== {each.label} pass: output ===", flush=True)
        shutil.copyfileobj(each.log, sys.stdout)
    sys.stdout.flush()


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def combine_coverage(data_files: list[Path], target: Path) -> int:
    """Combine the passes' data into ``target`` and report it; coverage's exit status
    (2 below ``fail_under``)."""
    coverage = [sys.executable, "-m", "coverage"]
    found = [str(f) for f in data_files if f.exists()]
    if not found:
        print("coverage: no pass recorded any data", flush=True)
        return 1
    combined = subprocess.call([*coverage, "combine", "-q", f"--data-file={target}", *found])
    if combined != 0:
        return combined
    print("\n=== coverage: every pass combined ===", flush=True)
    return subprocess.call([*coverage, "report", f"--data-file={target}", "--skip-covered"])


def run(passes: list[Pass], coverage_file: Path) -> int:
    """Run ``passes`` at the same time (the output of each shown when it ends, unless
    there is one), combine and judge their coverage; the exit status."""
    with ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="flowpilot-tests-"))
        for each in passes:
            if each.coverage_file is not None:
                each.coverage_file = Path(scratch) / each.coverage_file
                each.coverage_file.parent.mkdir(parents=True)
                args, env = _coverage_args(each.coverage_file, each.env)
                each.args[:0] = args
                each.env.update(env)
        for each in passes:
            log = Path(scratch) / f"{each.label.split()[0].lower()}.log"
            buffered = len(passes) > 1  # two passes at once: each one's output in one piece
            _start(each, stack.enter_context(log.open("w+")) if buffered else None)
        running = list(passes)
        while running:  # each pass's output as soon as it ends
            for each in [p for p in running if p.process and p.process.poll() is not None]:
                _finish(each)
                running.remove(each)
            time.sleep(0.2)
        covered = [p.coverage_file for p in passes if p.coverage_file is not None]
        cov_status = combine_coverage(covered, coverage_file) if covered else 0
    print("\n=== flowpilot tests: summary ===")
    for each in passes:
        outcome = "passed" if each.status == 0 else f"FAILED (pytest exit {each.status})"
        print(f"{each.label:<28} {outcome:<26} {_minutes(each.seconds)}")
    if covered:
        verdict = "at or above fail_under" if cov_status == 0 else "FAILED"
        print(f"{'coverage (passes combined)':<28} {verdict}")
    sys.stdout.flush()
    return next((p.status for p in passes if p.status), 0) or cov_status


def main(argv: list[str]) -> int:
    ci = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
    fast = "--fast" in argv
    pg_url = os.environ.get("FLOWPILOT_TEST_POSTGRES_URL", DEFAULT_PG)
    pg_up = not fast and _reachable(pg_url)
    try:
        passes = plan(argv, dict(os.environ), pg_up=pg_up)
    except ValueError as refused:
        print(f"python -m tests: {refused}", file=sys.stderr)
        return 2
    status = run(passes, Path(os.environ.get("COVERAGE_FILE", ".coverage")).resolve())
    if fast or pg_up:
        return status
    if ci:
        print(f"PostgreSQL at {pg_url} is unreachable, and CI=true requires it", file=sys.stderr)
        return status or 1
    print(f"note: PostgreSQL pass skipped: {pg_url} is unreachable (required when CI=true)")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
