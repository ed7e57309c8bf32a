"""How long the tests give a subprocess to start: a multiple of a start measured here.

A fixed limit (30 s, 60 s) is either far too long on an idle machine, so a broken start
takes a minute to report, or too short on two busy cores, where a Django process can
take ten times its idle start. So the limit follows the machine: once per test process,
the first time a limit is asked for, ``start_seconds`` times a Python process setting
up Django with the project's settings (what every ``manage.py`` command, Celery worker
and MCP server pays before it does anything), and ``start_deadline`` allows ``MARGIN``
such starts, never less than ``FLOOR`` seconds, per start-up the subprocess makes.

The measurement is cached for the process: it is what this machine costs, not state
a test changes; a later start under more load is what the margin is for.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROBE = "import django; django.setup()"
MARGIN = 25  # a subprocess may take this many measured starts (load comes and goes)
FLOOR = 20.0  # seconds: never less, however fast the measured start


@functools.cache
def start_seconds() -> float:
    """Seconds a ``python -c 'import django; django.setup()'`` with the project's
    settings takes here, now (measured once per process)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    began = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return time.monotonic() - began


def start_deadline(starts: float = 1.0) -> float:
    """Seconds to allow a subprocess whose start costs ``starts`` Django set-ups (a
    Celery worker forking its pool: 2)."""
    return deadline_for(start_seconds(), starts)


def deadline_for(measured: float, starts: float = 1.0) -> float:
    """``MARGIN`` times ``measured`` per start, at least ``FLOOR`` per start."""
    return max(FLOOR, MARGIN * measured) * starts
