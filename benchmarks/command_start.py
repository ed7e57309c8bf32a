"""How long a command takes to start: ``benchmarks/command_start.py``.

Times ``manage.py listruns`` (on an empty, migrated SQLite database) and
``manage.py help`` as whole processes, beside three baselines measured in the same run:
``python -c pass`` (the interpreter alone), ``python -c "import django;
django.setup()"`` with the same settings (Django, the installed apps and their models,
nothing a command adds), and the same ``django.setup()`` with flowpilot's own apps
left out of ``INSTALLED_APPS`` (the stack alone: Django's apps, Django REST framework,
django-filter, drf-spectacular and django-celery-beat, whose models import Celery).
Each is run ``--runs`` times; the table shows the median wall
time and the median CPU time (user + system) of the child, and the number of modules
the process imported (``-X importtime``, one extra run: a count, steady under load).

The target: ``listruns`` in at most 0.6 s of wall time on an idle machine. Under load
the wall time grows with the waiting, the CPU time much less: compare the rows, not
the machine. Prints a table; asserts nothing; exits 0. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 0.6  # listruns, wall, idle machine


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]  # after the interpreter
    baseline: bool
    settings: str = "config.settings"


MANAGE = str(ROOT / "manage.py")
SETUP = ("-c", "import django; django.setup()")
STACK = "django.setup(), the stack alone"
CASES = (
    Case("python -c pass", ("-c", "pass"), baseline=True),
    Case(STACK, SETUP, baseline=True, settings="stack_settings"),
    Case("django.setup()", SETUP, baseline=True),
    Case("manage.py help", (MANAGE, "help"), baseline=False),
    Case("manage.py listruns", (MANAGE, "listruns"), baseline=False),
)

# The settings of the stack-alone baseline, written beside the run's database: the
# project's own, with every app of this repository left out (the admin without discovery
# at start-up, as flowpilot's own admin config).
STACK_SETTINGS = """\
from pathlib import Path

from config.settings import *  # noqa: F403 - the project's settings, then fewer apps
from config.settings import INSTALLED_APPS

OWN = {path.name for path in Path(%r).iterdir() if path.is_dir()}
INSTALLED_APPS = ["django.contrib.admin.apps.SimpleAdminConfig"] + [
    app for app in INSTALLED_APPS if app.split(".")[0] not in OWN
]
"""


@dataclass(frozen=True)
class Figures:
    wall_s: float
    cpu_s: float
    modules: int


def _environment(folder: Path) -> dict[str, str]:
    """This process's environment without flowpilot's, the database's, Celery's or the
    LLM's settings: the embedded defaults on a SQLite database of the run's own."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FLOWPILOT_", "DATABASE_", "CELERY_", "OPENAI_", "PYTHONPROFILE"))
    }
    env.update(
        DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}",
        FLOWPILOT_OUTPUT_DIR=str(folder / "output"),
        DJANGO_SETTINGS_MODULE="config.settings",
        PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
    )
    return env


def _env_of(case: Case, env: dict[str, str]) -> dict[str, str]:
    return {**env, "DJANGO_SETTINGS_MODULE": case.settings}


def _once(args: tuple[str, ...], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=600
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _modules(args: tuple[str, ...], env: dict[str, str], cwd: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:")) - 1


def measure(runs: int) -> dict[str, Figures]:
    """Each case's figures, the cases interleaved run by run so that a change in the
    machine's load falls on all of them alike."""
    with tempfile.TemporaryDirectory(prefix="command-start-") as name:
        folder = Path(name)
        env = _environment(folder)
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(folder)])
        (folder / "stack_settings.py").write_text(STACK_SETTINGS % str(ROOT))
        subprocess.run(
            [sys.executable, MANAGE, "migrate", "-v0"],
            cwd=folder,
            env=env,
            check=True,
            capture_output=True,
            timeout=600,
        )
        for case in CASES:  # warm the file cache and the bytecode
            _once(case.args, _env_of(case, env), folder)
        walls: dict[str, list[float]] = {case.name: [] for case in CASES}
        cpus: dict[str, list[float]] = {case.name: [] for case in CASES}
        for _ in range(runs):
            for case in CASES:
                wall, cpu = _once(case.args, _env_of(case, env), folder)
                walls[case.name].append(wall)
                cpus[case.name].append(cpu)
        return {
            case.name: Figures(
                wall_s=statistics.median(walls[case.name]),
                cpu_s=statistics.median(cpus[case.name]),
                modules=_modules(case.args, _env_of(case, env), folder),
            )
            for case in CASES
        }


def table(figures: dict[str, Figures]) -> str:
    setup = figures["django.setup()"]
    lines = [
        "| command | wall (median) | CPU (median) | over django.setup() (CPU) | modules |",
        "|---|---|---|---|---|",
    ]
    for case in CASES:
        f = figures[case.name]
        over = "-" if case.baseline else f"{f.cpu_s - setup.cpu_s:+.3f} s"
        lines.append(f"| {case.name} | {f.wall_s:.3f} s | {f.cpu_s:.3f} s | {over} | {f.modules} |")
    listruns = figures["manage.py listruns"].wall_s
    verdict = "met" if listruns <= TARGET_S else "NOT MET"
    stack = figures[STACK]
    lines.append("")
    lines.append(
        f"of django.setup()'s CPU: the stack alone {stack.cpu_s:.3f} s, flowpilot's own apps "
        f"{setup.cpu_s - stack.cpu_s:+.3f} s ({setup.modules - stack.modules:+d} modules)"
    )
    lines.append(
        f"target: manage.py listruns <= {TARGET_S} s wall (idle): {listruns:.3f} s, {verdict}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command (default 7)")
    options = parser.parse_args(argv)
    if options.runs < 1:
        parser.error("--runs must be 1 or more")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(table(measure(options.runs)))


if __name__ == "__main__":
    main()
