"""The admin modules load when the admin is first used: its URLs or its checks.

Each case runs in a fresh process, the only place where nothing has imported an
admin module yet.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.contrib import admin

from config.admin import FlowpilotAdminSite
from runs.models import Run

REPO = Path(__file__).resolve().parents[2]
START = """
import sys
import django
django.setup()
from django.contrib import admin
assert "runs.admin" not in sys.modules, "runs.admin loaded at start-up"
assert admin.site._registry == {}, sorted(m._meta.label for m in admin.site._registry)
"""


def _fresh(body: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "FLOWPILOT_"))}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        FLOWPILOT_OUTPUT_DIR=str(tmp_path / "output"),
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    done = subprocess.run(
        [sys.executable, "-c", START + textwrap.dedent(body)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_site_is_flowpilots():
    assert isinstance(admin.site, FlowpilotAdminSite)


@pytest.mark.parametrize(
    "first_use",
    ["admin.site.get_urls()", "errors = admin.site.check(None); assert errors == [], errors"],
    ids=["urls", "checks"],
)
def test_the_first_use_registers_every_admin_module(first_use: str, tmp_path: Path):
    out = _fresh(
        f"""
        {first_use}
        print(" ".join(sorted(m._meta.label for m in admin.site._registry)))
        """,
        tmp_path,
    )
    labels = set(out.split())
    assert {"runs.Run", "tools.Tool", "workflows.Workflow", "auth.User"} <= labels


def test_a_broken_model_admin_is_reported_by_the_checks(monkeypatch: pytest.MonkeyPatch):
    """``check`` still sees every model admin, here one with a field that does not exist."""
    admin.autodiscover()
    model_admin = admin.site._registry[Run]
    monkeypatch.setattr(model_admin, "list_display", [*model_admin.list_display, "no_such_field"])
    errors = admin.site.check(None)
    assert "admin.E108" in {e.id for e in errors if e.obj is type(model_admin)}
