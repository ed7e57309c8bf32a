"""Where a step's CPU goes on Celery: ``benchmarks/celery_cpu.py``.

``compare.py`` times a wide graph on Celery against raw Celery (``raw_celery.py``): the
same calls as plain Celery tasks, with the same worker flags. On a small machine that
wall time is the CPU of every process involved, shared between the cores. This runs
both, ``--steps`` independent calls per run (one prefork worker of ``--slots``
processes each, Redis, a throwaway PostgreSQL database, the loopback server of
``compare.py``), alternating ``--runs`` runs of each for ``--rounds`` rounds, and reads
the CPU time (user + system, ``/proc/<pid>/stat``) each group of processes used:

- **the workers**: the worker's main process and its pool processes (Celery's own work,
  and for flowpilot its step task: claim, call, outcome);
- **PostgreSQL**: every ``postgres`` process of this machine (the server's share of
  flowpilot's statements; raw Celery sends none);
- **Redis**: ``redis-server`` (the broker and, for raw Celery, the results);
- **this process**: publishing, waiting for the run to end, and the loopback server.

It prints each one per step, the wall time per step, and flowpilot's excess over raw
Celery's: what a change to the step task, the database or the broker would have to
save. Linux only (``/proc``); assumes nothing else busy on the machine. Prints;
asserts nothing; exits 0.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"
GROUPS = ("workers", "PostgreSQL", "Redis", "this process")


@dataclass(frozen=True)
class Sample:
    """Per step, in ms: the wall time and each group's CPU time."""

    wall_ms: float
    cpu_ms: dict[str, float]

    @property
    def total_ms(self) -> float:
        return sum(self.cpu_ms.values())


def _stat(pid: int | str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, …);
    empty when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` (a process gone meanwhile counts 0)."""
    ticks = 0
    for pid in pids:
        if fields := _stat(pid):
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _parents() -> dict[int, int]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(entry.name)):
            found[int(entry.name)] = int(fields[1])
    return found


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants."""
    parents = _parents()
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += [child for child, parent in parents.items() if parent == pid]
    return tree


def named(command: str) -> list[int]:
    """The processes whose command name (``/proc/<pid>/comm``) is ``command``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == command:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def sample(run: Callable[[], object], worker_pid: int, runs: int, steps: int) -> Sample:
    """``runs`` runs of ``run``: wall time and each group's CPU, per step."""
    groups = {
        "workers": process_tree(worker_pid),
        "PostgreSQL": named("postgres"),
        "Redis": named("redis-server"),
        "this process": [os.getpid()],
    }
    before = {name: cpu_seconds(pids) for name, pids in groups.items()}
    started = time.perf_counter()
    for _ in range(runs):
        run()
    wall = time.perf_counter() - started
    per_step = 1000 / (runs * steps)
    cpu = {name: (cpu_seconds(pids) - before[name]) * per_step for name, pids in groups.items()}
    return Sample(wall * per_step, cpu)


def measure(args: argparse.Namespace) -> tuple[Sample, Sample]:
    """Medians over the rounds: (flowpilot, raw Celery)."""
    from benchmarks._support import LoopbackServer, throwaway_database
    from benchmarks._workers import Workers, database_url, point_celery_at

    common = {"count": 1, "concurrency": args.slots, "redis_url": args.redis_url}
    with throwaway_database(args.database_url), LoopbackServer() as server:
        from benchmarks import _measure

        _measure.store_tool(server.url)
        _measure.set_slots(args.slots)
        with (
            Workers(database_url=database_url(), **common) as flow,
            Workers(database_url="", app="benchmarks.raw_celery", name="raw", **common) as raw,
        ):
            point_celery_at(args.redis_url, flow.queue)
            _measure.point_raw_at(args.redis_url, raw.queue)
            workflow = _measure.prepare(_measure.shape("wide", args.steps))
            ours = _measure.on_celery(workflow)
            theirs = _measure.raw_celery(server.url, "wide", args.steps, delay_ms=0)
            _measure.warm_celery(workflow, args.slots)  # every pool process, as compare.py
            _measure.raw_celery(server.url, "wide", args.slots * 2, delay_ms=50)()
            ours()
            theirs()
            samples: dict[str, list[Sample]] = {"flowpilot": [], "raw": []}
            for number in range(1, args.rounds + 1):
                print(f"  round {number} of {args.rounds}", file=sys.stderr, flush=True)
                for name, run, worker in (("flowpilot", ours, flow), ("raw", theirs, raw)):
                    pid = worker.procs[0][0].pid
                    samples[name].append(sample(run, pid, args.runs, args.steps))
    return _median(samples["flowpilot"]), _median(samples["raw"])


def _median(samples: list[Sample]) -> Sample:
    return Sample(
        statistics.median(s.wall_ms for s in samples),
        {name: statistics.median(s.cpu_ms[name] for s in samples) for name in GROUPS},
    )


def table(ours: Sample, raw: Sample) -> str:
    columns = ["wall", *GROUPS, "all CPU"]
    lines = [
        "| per step | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    rows = (("flowpilot", ours), ("raw Celery", raw))
    for label, s in rows:
        values = [s.wall_ms, *(s.cpu_ms[name] for name in GROUPS), s.total_ms]
        lines.append(f"| {label} | " + " | ".join(f"{v:.2f} ms" for v in values) + " |")
    excess = [
        ours.wall_ms - raw.wall_ms,
        *(ours.cpu_ms[name] - raw.cpu_ms[name] for name in GROUPS),
        ours.total_ms - raw.total_ms,
    ]
    lines.append("| flowpilot - raw Celery | " + " | ".join(f"{v:+.2f} ms" for v in excess) + " |")
    lines += [
        "",
        f"flowpilot per step: {ours.wall_ms / raw.wall_ms:.2f}x raw Celery's wall time, "
        f"{ours.total_ms / raw.total_ms:.2f}x its CPU",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--database-url", default=os.environ.get("DATABASE_URL", DEFAULT_URL))
    add("--redis-url", default=DEFAULT_REDIS, help=f"broker for both ({DEFAULT_REDIS})")
    add("--steps", type=int, default=200, help="independent calls per run (200)")
    add("--runs", type=int, default=6, help="runs of each per round (6)")
    add("--rounds", type=int, default=2, help="rounds, alternating the two (2)")
    add("--slots", type=int, default=8, help="pool processes per worker (8)")
    args = parser.parse_args(argv)
    ours, raw = measure(args)
    print(
        f"{args.steps} independent calls on Celery ({args.slots} pool processes, Redis), "
        f"{args.runs} runs x {args.rounds} rounds each, alternating; medians of the rounds; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(table(ours, raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
