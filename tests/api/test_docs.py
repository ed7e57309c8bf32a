"""docs/api.md's walkthrough, restart and replay, webhook and schedules blocks, run as
written with bash and curl.

Every ``sh`` block after a ``<!-- tested -->`` line is run, in order, as one bash
script (``set -euo pipefail``: any failing command or HTTP error fails the test)
against a live server on loopback, with ``FLOWPILOT_URL`` and ``TOKEN`` set as the
page tells the reader to set them, and the planner pointed at the fake LLM.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from django.test import override_settings
from rest_framework.authtoken.models import Token

from runs.models import Run
from schedules.models import Schedule
from tests.conftest import REPO_ROOT
from tests.factories import UserFactory, digest_plan

DOC = REPO_ROOT / "docs" / "api.md"
TESTED = re.compile(r"<!-- tested -->\s*```sh\n(.*?)```", re.DOTALL)


def doc_blocks() -> list[str]:
    return TESTED.findall(DOC.read_text(encoding="utf-8"))


def test_the_page_has_the_walkthrough_restart_webhook_and_schedules_blocks():
    blocks = doc_blocks()

    assert len(blocks) == 4
    assert "/api/v1/plans/" in blocks[0]
    assert "approve/" in blocks[0]
    assert "wait/" in blocks[0]
    assert "restart/" in blocks[1]
    assert "/replay/" in blocks[1]
    assert "openssl dgst -sha256 -hmac" in blocks[2]
    assert "/api/v1/schedules/" in blocks[3]


def run_doc_blocks(url: str, token: str) -> list[str]:
    """The tested blocks as one bash script against ``url``: its output lines."""
    for tool in ("bash", "curl", "openssl", "python3"):
        if shutil.which(tool) is None and not os.environ.get("CI"):
            pytest.skip(f"{tool} is not installed")
    env = {**os.environ, "FLOWPILOT_URL": url, "TOKEN": token}
    script = "set -euo pipefail\n" + "\n".join(doc_blocks())

    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=180
    )

    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def admin_token() -> str:
    user = UserFactory(username="admin", superuser=True)
    return Token.objects.create(user=user).key


def assert_walkthrough(lines: list[str], output_dir, approval: tuple[str, ...]) -> None:
    """What the blocks print and store, the same with or without Celery workers."""
    assert "plan: succeeded" in lines
    assert "proposed: sales_digest v1" in lines
    assert any(
        line.startswith(tuple(f"approval: {s}, validation run /api/v1/runs/" for s in approval))
        for line in lines
    ), lines
    assert "validation run: succeeded" in lines
    assert "run: succeeded" in lines
    assert "restart: succeeded, from step size" in lines
    assert "reused: load by_region" in lines
    assert "replay matched: true" in lines
    assert "webhook run: succeeded" in lines
    assert lines[-3:] == ["0 9 * * 1-5", "holidays", "fire log entries: 1"]
    schedule = Schedule.objects.get()
    assert (schedule.workflow_name, schedule.name, schedule.timezone) == (
        "sales_digest",
        "morning",
        "Europe/Paris",
    )
    assert (schedule.inputs, schedule.overlap, schedule.pause_after_failures) == (
        {"threshold": 1000},
        "buffer_one",
        3,
    )
    runs = Run.objects.order_by("id")
    assert [(r.trigger, r.status) for r in runs] == [
        ("validation", "succeeded"),
        ("api", "succeeded"),
        ("api", "succeeded"),  # the restart
        ("replay", "succeeded"),
        ("webhook", "succeeded"),
    ]
    assert (runs[2].restarted_from, runs[2].restarted_from_step) == (runs[1], "size")
    assert runs[3].replay_of == runs[0]
    assert runs[4].inputs["threshold"] == 500
    assert (output_dir / "digest.html").exists()  # 1000 of revenue and more: the report


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_the_curl_walkthrough_runs_as_written(live_server, planner_llm, output_dir):
    planner_llm.reply_json(digest_plan())

    lines = run_doc_blocks(live_server.url, admin_token())

    assert_walkthrough(lines, output_dir, approval=("passed",))


@pytest.mark.postgres
@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_the_curl_walkthrough_runs_as_written_on_celery_workers(
    live_server, planner_llm, output_dir, tmp_path
):
    # The plan, the validation run and the runs execute on a real worker: the
    # walkthrough must wait for the validation run before it starts a run.
    from tests.celery_support import WORKER_SETTINGS, start_cluster

    planner_llm.reply_json(digest_plan())
    worker_env = {
        "OPENAI_BASE_URL": planner_llm.base_url,
        "OPENAI_API_KEY": "test-key",
        "PLANNER_MODEL": "fake-planner",
        "FLOWPILOT_OUTPUT_DIR": str(output_dir),
    }
    with start_cluster(tmp_path, workers=()) as cluster:
        cluster.start_worker("w1", env=worker_env)
        with override_settings(**{k: float(v) for k, v in WORKER_SETTINGS.items()}):
            lines = run_doc_blocks(live_server.url, admin_token())
        logs = cluster.logs()

    assert_walkthrough(lines, output_dir, approval=("validating", "passed"))
    assert "Task runs.execute_step" in logs, logs[-2000:]
