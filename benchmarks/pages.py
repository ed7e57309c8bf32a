"""Server time of the admin and API pages: ``benchmarks/pages.py``.

In one process, through Django's test client (the whole request: middleware, view,
template; no network, no browser), on a throwaway database (SQLite, or a fresh
database on the PostgreSQL server of ``--database-url``):

* the run page (the admin change view of a run) of a finished run of 10, 100 and
  1,000 steps (``tests.factories.finished_run``), beside the admin's index page as the
  baseline of any admin page;
* the changelists of runs, workflow versions, tools and schedule fires, with
  ``--rows`` rows each;
* the OpenAPI schema: its first request in the process (generated) and the next ones
  (kept, ``api.schema_cache``), and the Swagger UI page.

Each page is read once to warm up, then ``--repeat`` times: the median, the queries
of one read and the size of the answer. The target: the run page of 1,000 steps in at
most 300 ms, judged on the CPU time of the request (what it takes on an idle machine,
SQLite in process; the wall time under load adds the waiting). Prints a table;
asserts nothing; exits 0. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script

from benchmarks._support import throwaway_database  # noqa: E402

TARGET_MS = 300.0  # the run page of 1,000 steps
RUN_SIZES = (10, 100, 1000)


@dataclass(frozen=True)
class Row:
    page: str
    ms: float
    cpu_ms: float
    queries: int
    kib: float
    note: str = ""


def _read(client, url: str, accept: str | None) -> tuple[float, float, int, int]:
    """One read: its milliseconds (wall, then CPU of this process), queries and bytes
    (it must answer 200)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    headers = {"HTTP_ACCEPT": accept} if accept else {}
    with CaptureQueriesContext(connection) as captured:
        started, cpu = time.perf_counter(), time.process_time()
        response = client.get(url, **headers)
        elapsed = (time.perf_counter() - started) * 1000
        cpu_ms = (time.process_time() - cpu) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")
    return elapsed, cpu_ms, len(captured), len(response.content)


def measure(
    client, page: str, url: str, repeat: int, *, accept: str | None = None, warm: bool = True
) -> Row:
    if warm:
        _read(client, url, accept)
    reads = [_read(client, url, accept) for _ in range(repeat)]
    return Row(
        page,
        statistics.median(r[0] for r in reads),
        statistics.median(r[1] for r in reads),
        reads[0][2],
        reads[0][3] / 1024,
    )


def _rows(count: int, make: Callable[[int], object]) -> None:
    for i in range(count):
        make(i)


def run_all(repeat: int, rows: int) -> list[Row]:
    from django.test import Client
    from django.test.utils import setup_test_environment

    from api import schema_cache
    from tests.factories import (
        ScheduleFireFactory,
        ToolFactory,
        UserFactory,
        WorkflowFactory,
        finished_run,
        sales_report_data,
    )

    setup_test_environment()  # the test client's hosts and the captured queries
    client = Client()
    client.force_login(UserFactory(username="bench", superuser=True))
    result = [measure(client, "admin index (baseline)", "/admin/", repeat)]

    for steps in RUN_SIZES:
        run = finished_run(steps, name=f"wide_{steps}")
        row = measure(
            client, f"run page, {steps} steps", f"/admin/runs/run/{run.pk}/change/", repeat
        )
        result.append(row)

    _rows(rows, lambda i: WorkflowFactory(data=sales_report_data(name=f"listed_{i}")))
    _rows(rows, lambda i: ToolFactory())
    _rows(rows, lambda i: ScheduleFireFactory())
    for page, url in (
        ("runs changelist", "/admin/runs/run/"),
        ("workflows changelist", "/admin/workflows/workflow/"),
        ("tools changelist", "/admin/tools/tool/"),
        ("schedule fires changelist", "/admin/schedules/schedulefire/"),
    ):
        result.append(measure(client, page, url, repeat))

    json = "application/vnd.oai.openapi+json"
    schema_cache._SCHEMAS.clear()  # the first request of a fresh process
    first = measure(
        client, "OpenAPI schema, first request", "/api/v1/schema/", 1, accept=json, warm=False
    )
    result.append(Row(first.page, first.ms, first.cpu_ms, first.queries, first.kib, "generated"))
    kept = measure(client, "OpenAPI schema, later requests", "/api/v1/schema/", repeat, accept=json)
    result.append(Row(kept.page, kept.ms, kept.cpu_ms, kept.queries, kept.kib, "kept"))
    result.append(measure(client, "Swagger UI page", "/api/v1/docs/", repeat))
    return result


def table(rows: list[Row]) -> str:
    lines = [
        "| page | server time (median) | its CPU time | queries | size | |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.page} | {row.ms:.0f} ms | {row.cpu_ms:.0f} ms | {row.queries} "
            f"| {row.kib:.0f} KiB | {row.note} |"
        )
    big = next(row for row in rows if row.page == f"run page, {RUN_SIZES[-1]} steps")
    # On an idle machine the server time is its CPU time (SQLite in process); under
    # load the wall time adds the waiting for a core.
    verdict = "met" if big.cpu_ms <= TARGET_MS else "NOT MET"
    lines.append("")
    lines.append(
        f"target: run page of {RUN_SIZES[-1]} steps <= {TARGET_MS:.0f} ms: "
        f"{big.ms:.0f} ms wall, {big.cpu_ms:.0f} ms CPU, {verdict}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="reads of each page (default 5)")
    parser.add_argument("--rows", type=int, default=50, help="rows of each changelist (default 50)")
    parser.add_argument("--database-url", help="a PostgreSQL server (default: throwaway SQLite)")
    options = parser.parse_args(argv)
    if options.repeat < 1 or options.rows < 1:
        parser.error("--repeat and --rows must be 1 or more")
    os.environ.setdefault("FLOWPILOT_OUTPUT_DIR", str(ROOT / "out"))
    with throwaway_database(options.database_url) as where:
        load = os.getloadavg()[0]
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {load:.2f}; {where}")
        print(table(run_all(options.repeat, options.rows)))


if __name__ == "__main__":
    main()
