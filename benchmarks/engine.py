"""Engine benchmarks: ``.venv/bin/python benchmarks/engine.py [--chain N] [--fanout N] …``.

Prints one table: the engine's wall time for a chain and for a fan-out of http
steps against a loopback server, each beside a plain-httpx baseline timed in the
same process, the per-step overhead of the chain, and how long validating (and
compiling) a generated DAG takes beside a plain Kahn sort. Targets are shown
with OK/MISS; nothing is asserted and the exit status is 0 either way.

It sets Django up itself on a throwaway database (SQLite in a temporary
directory, or a database created for the run on the PostgreSQL server of
``--database-url``), so the developer's database is never touched. See
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script

from benchmarks._support import LoopbackServer, format_table, progress, throwaway_database


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--chain", type=_positive, default=50, help="steps in the chain (50)")
    parser.add_argument("--fanout", type=_positive, default=20, help="parallel steps (20)")
    parser.add_argument("--dag", type=_positive, default=5000, help="steps in the DAG (5000)")
    parser.add_argument("--repeat", type=_positive, default=3, help="timed runs, median (3)")
    parser.add_argument(
        "--database-url",
        help="a PostgreSQL server to run on (a throwaway database is created there and "
        "dropped; the role needs CREATEDB). Default: a throwaway SQLite file.",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with throwaway_database(args.database_url) as where, LoopbackServer() as server:
        from benchmarks import _cases  # the project's modules need django.setup() first

        progress(f"chain of {args.chain}")
        rows = [_cases.bench_chain(server.url, n=args.chain, repeat=args.repeat)]
        progress(f"fan-out of {args.fanout}")
        rows.append(_cases.bench_fanout(server.url, n=args.fanout, repeat=args.repeat))
        progress(f"validation of a {args.dag}-step DAG")
        rows += _cases.bench_validation(n=args.dag, repeat=args.repeat)
    print(
        f"flowpilot engine — {where}; Python {platform.python_version()}, "
        f"{os.cpu_count()} cores; median of {args.repeat} after one warm-up"
    )
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
