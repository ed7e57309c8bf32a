"""``benchmarks/celery_cpu.py`` prints where a step's CPU goes on Celery: its table's
arithmetic and its reading of ``/proc``, never a timing (a real run starts two Celery
workers for a minute: it is run by hand, as ``compare.py``'s Celery section is)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.celery_cpu import GROUPS, Sample, cpu_seconds, named, process_tree, table


def sample(wall: float, *cpu: float) -> Sample:
    return Sample(wall, dict(zip(GROUPS, cpu, strict=True)))


def test_the_table_shows_both_per_step_and_flowpilots_excess_over_raw_celery():
    text = table(sample(6.0, 8.0, 2.0, 0.5, 2.0), sample(4.0, 4.0, 0.0, 0.5, 2.5))

    assert "| flowpilot | 6.00 ms | 8.00 ms | 2.00 ms | 0.50 ms | 2.00 ms | 12.50 ms |" in text
    assert "| raw Celery | 4.00 ms | 4.00 ms | 0.00 ms | 0.50 ms | 2.50 ms | 7.00 ms |" in text
    excess = "| flowpilot - raw Celery | +2.00 ms | +4.00 ms | +2.00 ms | +0.00 ms | -0.50 ms "
    assert excess + "| +5.50 ms |" in text
    assert "1.50x raw Celery's wall time, 1.79x its CPU" in text


def test_a_process_tree_and_its_cpu_are_read_from_proc():
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    parent = subprocess.Popen(  # a child that burns 0.3 s of CPU, then waits to be read
        [sys.executable, "-c", "import subprocess, sys; subprocess.run([sys.executable, '-c', "
         f"{busy!r} + '\\nimport time; time.sleep(30)'])"],
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            tree = process_tree(parent.pid)
            if len(tree) == 2 and cpu_seconds(tree[1:]) >= 0.25:  # 0.3 s, in 10 ms ticks
                break
            assert time.monotonic() < deadline, (tree, cpu_seconds(tree))
            time.sleep(0.05)
        assert tree[0] == parent.pid
        assert cpu_seconds(tree) > cpu_seconds(tree[1:])  # the tree's is the two's
    finally:
        for pid in reversed(process_tree(parent.pid)):
            os.kill(pid, 9)
        parent.wait()
    assert cpu_seconds([parent.pid]) == 0  # a process gone counts nothing, without an error
    assert os.getpid() in named(Path(f"/proc/{os.getpid()}/comm").read_text().strip())
