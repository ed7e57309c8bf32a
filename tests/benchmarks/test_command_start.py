"""``benchmarks/command_start.py`` still runs and prints every row: a smoke run, never a timing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.command_start import CASES, Figures, table

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_has_every_command_and_the_target():
    figures = {case.name: Figures(wall_s=0.5, cpu_s=0.4, modules=100) for case in CASES}
    figures["manage.py listruns"] = Figures(wall_s=0.7, cpu_s=0.45, modules=120)
    figures["django.setup(), the stack alone"] = Figures(wall_s=0.4, cpu_s=0.3, modules=80)
    text = table(figures)
    assert "| manage.py listruns | 0.700 s | 0.450 s | +0.050 s | 120 |" in text
    assert "| django.setup() | 0.500 s | 0.400 s | - | 100 |" in text
    assert "| django.setup(), the stack alone | 0.400 s | 0.300 s | - | 80 |" in text
    assert "the stack alone 0.300 s, flowpilot's own apps +0.100 s (+20 modules)" in text
    assert text.endswith("0.700 s, NOT MET")


@pytest.mark.skipif(sys.platform != "linux", reason="reads the children's CPU time (Linux)")
def test_one_run_prints_a_row_for_each_command():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "command_start.py"), "--runs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows[1:]] == [case.name for case in CASES]
    assert "target: manage.py listruns <= 0.6 s wall (idle)" in done.stdout
