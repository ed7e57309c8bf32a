"""flowpilot beside plain Python and raw Celery, in one run: ``benchmarks/compare.py``.

Shapes, against one loopback HTTP server: a chain of ``--chain`` calls (each sends
the previous answer), a fan-out of ``--fanout`` x ``--delay-ms`` calls, ``--wide``
independent instant calls, and a one-step workflow (the fixed per-run cost). Columns:
plain Python, raw Celery (the same calls as one Celery task each), flowpilot in process
on SQLite and on PostgreSQL, flowpilot on Celery. Celery runs one ``celery worker``
(prefork, ``--slots`` processes, Redis) for raw Celery and one for flowpilot, with the
same flags; the in-process driver gets ``--slots`` threads. Then scaling tables
(chains and wide graphs of ``--scale`` steps in process: per-step overhead and peak
memory; of ``--celery-scale`` steps on Celery beside raw Celery), the chain in process
with tracing off and on (spans sent over OTLP to a loopback receiver), and the targets,
each met or not. Prints; asserts nothing; exits 0.

Every section runs in a child process of its own (a fresh interpreter per database
and per scaling size, so peak memory is that size's), on a throwaway database.
``--quick`` shrinks everything for a smoke run. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script

from benchmarks import _children  # noqa: E402 - each section, run in a child process
from benchmarks._report import report  # noqa: E402

RESULT = "RESULT "  # a child's last line: RESULT {json}


def _sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of positive sizes")
    return sizes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    add = parser.add_argument
    add("--chain", type=int, default=100, help="steps in the chain (100)")
    add("--fanout", type=int, default=20, help="parallel calls in the fan-out (20)")
    add("--delay-ms", type=int, default=100, help="each fan-out call's latency (100)")
    add("--wide", type=int, default=200, help="independent instant calls (200)")
    add("--scale", type=_sizes, help="scaling sizes, comma-separated (10,100,1000,10000)")
    add("--celery-scale", type=_sizes, help="Celery scaling sizes (10,100,1000)")
    add("--slots", type=int, default=8, help="worker processes / in-process threads (8)")
    add("--repeat", type=int, default=5, help="timed runs per figure, median (5)")
    add("--quick", action="store_true", help="tiny sizes, one repeat: a smoke run")
    add("--only", choices=["inprocess", "celery", "scale", "tracing"], action="append",
        help="run only these sections (repeatable)")  # fmt: skip
    add("--no-postgres", action="store_true", help="SQLite only: no PostgreSQL, no Celery")
    add(
        "--database-url",
        default=os.environ.get("FLOWPILOT_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1/flowpilot"),
        help="PostgreSQL server (throwaway databases are created there and dropped)",
    )  # fmt: skip
    add(
        "--redis-url",
        default=os.environ.get("FLOWPILOT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
        help="Redis for both Celery apps (queues of their own, removed afterwards)",
    )
    add("--json", type=Path, help="also write every figure to this file (after each section)")
    add("--child", help=argparse.SUPPRESS)
    add("--child-args", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.chain, args.fanout, args.delay_ms, args.wide, args.repeat = 5, 4, 20, 6, 1
    if args.scale is None:
        args.scale = [5, 10] if args.quick else [10, 100, 1000, 10000]
    if args.celery_scale is None:
        args.celery_scale = [3] if args.quick else [10, 100, 1000]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return _children.run(args.child, json.loads(args.child_args), args)
    sections = set(args.only or ["inprocess", "celery", "scale", "tracing"])
    results: dict = {"machine": _machine(), "args": _plain_args(args)}
    databases = ["sqlite"] if args.no_postgres else ["sqlite", args.database_url]
    if "inprocess" in sections:
        results["inprocess"] = {}
        for db in databases:
            results["inprocess"][_db_name(db)] = _child(args, "inprocess", {"db": db})
            _save(args, results)
    if "celery" in sections and not args.no_postgres:
        results["celery"] = _child(args, "celery", {"db": args.database_url})
        _save(args, results)
    if "scale" in sections:
        results["scale"] = []
        for kind in ("chain", "wide"):
            for n in args.scale:
                figures = _child(args, "scale", {"db": "sqlite", "kind": kind, "n": n})
                results["scale"].append({"shape": kind, "n": n, **figures})
                _save(args, results)
    if "tracing" in sections:
        results["tracing"] = {}
        for db in databases:
            results["tracing"][_db_name(db)] = _child(args, "tracing", {"db": db})
            _save(args, results)
    print(report(results))
    return 0


def _save(args: argparse.Namespace, results: dict) -> None:
    """Write what is measured so far (``--json``): a long run interrupted keeps it."""
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def _child(args: argparse.Namespace, kind: str, params: dict) -> dict:
    """Run one section in a fresh interpreter and return its RESULT."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", kind]
    argv += ["--child-args", json.dumps(params), *_forwarded(args)]
    print(f"measuring {kind} {params}…", file=sys.stderr, flush=True)
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode or not lines:
        raise RuntimeError(f"{kind} {params} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return json.loads(lines[-1][len(RESULT) :])


def _forwarded(args: argparse.Namespace) -> list[str]:
    out = []
    for name in ("chain", "fanout", "delay_ms", "wide", "slots", "repeat", "redis_url"):
        out += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return [*out, "--celery-scale", ",".join(map(str, args.celery_scale))]


def _db_name(db: str) -> str:
    return "sqlite" if db == "sqlite" else "postgresql"


def _plain_args(args: argparse.Namespace) -> dict:
    keys = ("chain", "fanout", "delay_ms", "wide", "scale", "celery_scale", "slots", "repeat")
    return {key: getattr(args, key) for key in keys}


def _machine() -> dict:
    return {
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "load": os.getloadavg()[0],
        "commit": _git_commit(),
    }


def _git_commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
