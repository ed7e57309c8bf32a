"""Celery overhead: ``.venv/bin/python benchmarks/celery_overhead.py [compare.py's options]``.

The Celery section of ``benchmarks/compare.py`` on its own: the same shapes as plain
Python, as raw Celery tasks (``benchmarks/raw_celery.py``) and as flowpilot runs on
Celery workers, with the same worker flags (prefork, ``--slots`` processes, Redis).
What that section needs (real ``celery worker`` subprocesses, this process's Celery
app pointed at them) is ``benchmarks/_workers.py``.

Needs PostgreSQL (``--database-url``, a server where the role may create databases: a
throwaway database is made and dropped) and Redis (``--redis-url``; queues of their
own, removed afterwards). See docs/benchmarks.md and docs/scale-out.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script

from benchmarks import compare  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """The Celery section of ``benchmarks/compare.py`` alone (its options apply)."""
    return compare.main(["--only", "celery", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
