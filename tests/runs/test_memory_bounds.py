"""A run's memory is bounded: hostile inputs and responses fail with ``output_too_large``.

Named after the feature. Each test runs the two hostile workflows of
``tests.runs.memory_probe`` in a child process — four transforms that each map their
input eight times (64 KiB of run input would become 8**4 times 64 KiB), and an http tool
answered by a ~200 KB gzip body inflating to ~200 MB — in process, and on a real
Celery worker (PostgreSQL and Redis; skipped on SQLite like the other worker tests).
Each run fails with the size error naming the step, nothing of the oversized value
is stored, and the peak RSS of the child (and of the worker it started) stays under
200 MB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.celery_support import (
    REPO_ROOT,
    new_queue_name,
    purge_queue,
    redis_url,
    require_services,
    worker_database_url,
    worker_env,
)
from tests.fakes import FakeAPI, FakeResponse

pytestmark = pytest.mark.django_db(transaction=True)

PEAK_RSS_KB = 200 * 1024
BOMB_BLOCKS = 200  # MiB of text inflated from the ~200 KB body
CAP = 4 * 1024 * 1024


def _bomb() -> bytes:
    """``BOMB_BLOCKS`` MiB of text, gzipped (~1000:1), built a block at a time."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"A" * (1 << 20)
    parts = [compressor.compress(b'{"data": "')]
    parts += [compressor.compress(block) for _ in range(BOMB_BLOCKS)]
    return b"".join(parts) + compressor.compress(b'"}') + compressor.flush()


@pytest.fixture(scope="module")
def bomb_server():
    body = _bomb()
    assert 150_000 < len(body) < 300_000
    fake = FakeAPI().start()
    headers = {"Content-Encoding": "gzip", "Content-Type": "text/plain"}
    fake.route("bomb", "GET", r"/bomb", lambda request, match: FakeResponse(200, body, headers))
    yield fake
    fake.stop()


# Linux keeps the peak RSS across exec, and a child spawned from this (large) test
# process starts with this process's RSS as its ``ru_maxrss``. A small launcher
# process spawns the probe instead, so the probe's own measure starts from ~10 MB.
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def _probe(mode: str, base: str, env: dict[str, str]) -> dict[str, Any]:
    probe = [sys.executable, "-m", "tests.runs.memory_probe", mode, base]
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *probe],
        cwd=REPO_ROOT,
        env={**os.environ, "FLOWPILOT_MAX_STEP_OUTPUT_BYTES": str(CAP), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    failure = done.stdout[-3000:] + done.stderr[-5000:]
    assert done.returncode == 0, failure
    assert lines, failure
    report: dict[str, Any] = json.loads(lines[-1][len("PROBE ") :])
    return report


def _database_env(tmp_path: Path) -> dict[str, str]:
    from django.db import connection

    if connection.vendor == "postgresql":
        return {"DATABASE_URL": worker_database_url()}
    return {"DATABASE_URL": f"sqlite:///{tmp_path / 'probe.sqlite3'}"}


def _assert_refused(report: dict[str, Any]) -> None:
    amplify, bomb = report["runs"]
    assert amplify["status"] == "failed"
    assert amplify["steps"]["t1"]["status"] == "succeeded"
    refused = amplify["steps"]["t2"]
    assert refused["status"] == "failed"
    assert refused["error"]["type"] == "output_too_large"
    assert refused["error"]["step"] == "t2"
    assert refused["error"]["size"] > CAP
    assert "step `t2`" in refused["error"]["message"]
    assert refused["stored"] < 64 * 1024, "nothing of the refused arguments is stored"
    assert {amplify["steps"][s]["status"] for s in ("t3", "t4")} == {"skipped"}
    fetch = bomb["steps"]["fetch"]
    assert bomb["status"] == "failed"
    assert fetch["error"]["type"] == "output_too_large"
    assert fetch["error"]["step"] == "fetch"
    assert fetch["stored"] + fetch["attempt_log"] < 64 * 1024, "no part of the body is stored"
    for run in (amplify, bomb):
        assert run["outputs"] < 64 * 1024


def _assert_peak(report: dict[str, Any]) -> None:
    peak = max(report["self_kb"], report["children_kb"])
    print(f"peak RSS: probe {report['self_kb']} kB, its children {report['children_kb']} kB")
    assert peak < PEAK_RSS_KB, f"peak RSS {peak} kB (self {report['self_kb']} kB)"


@pytest.mark.slow
def test_in_process_amplification_and_gzip_bomb_fail_within_200_mb(bomb_server, tmp_path):
    report = _probe("local", bomb_server.url, _database_env(tmp_path))

    _assert_refused(report)
    _assert_peak(report)


@pytest.mark.postgres
@pytest.mark.celery
@pytest.mark.slow
def test_on_a_celery_worker_amplification_and_gzip_bomb_fail_within_200_mb(bomb_server, tmp_path):
    require_services()
    url, queue = redis_url(), new_queue_name()
    env = {**worker_env(url=url, queue=queue), "PROBE_LOG_DIR": str(tmp_path)}
    try:
        report = _probe("celery", bomb_server.url, env)
    finally:
        purge_queue(url, queue)

    _assert_refused(report)
    _assert_peak(report)
    assert report["children_kb"] > 0  # the worker and its pool process were measured


# --- the rule in process, step by step ---------------------------------------------------


def _shape_flow(**shape: Any) -> dict[str, Any]:
    return {
        "name": "shape",
        "inputs": {"data": {"type": "string"}},
        "steps": [
            {
                "id": "shape",
                "kind": "transform",
                "input_mapping": {"a": "$input.data", "b": "$input.data"},
                "expression": "{a: a, b: b}",
                **shape,
            }
        ],
        "outputs": {"shape": "$step.shape"},
    }


def _run(flow: dict[str, Any], data: str):
    from runs.services import run_create, run_execute
    from tests.celery_support import import_flow

    run = run_create(workflow=import_flow(flow), trigger="api", inputs={"data": data})
    run_execute(run=run)
    run.refresh_from_db()
    return run, run.step_results.get(step_id="shape")


def test_a_step_max_output_bytes_sets_its_cap_and_is_part_of_the_definition():
    from tests.celery_support import import_flow

    run, row = _run(_shape_flow(max_output_bytes=100), "x" * 60)

    assert run.status == "failed"
    assert row.error["type"] == "output_too_large"
    assert (row.error["step"], row.error["what"], row.error["cap"]) == ("shape", "arguments", 100)
    assert row.inputs is None, "refused arguments are not recorded"
    assert row.output is None
    plain = import_flow(_shape_flow())
    assert plain.definition_hash != run.workflow.definition_hash


def test_each_output_size_is_recorded_and_shown_on_the_run_page(admin_client):
    from django.urls import reverse

    from tools.sizes import json_bytes

    run, row = _run(_shape_flow(), "y" * 3000)

    assert run.status == "succeeded"
    assert row.output_bytes == json_bytes({"a": "y" * 3000, "b": "y" * 3000})
    page = admin_client.get(reverse("admin:runs_run_change", args=[run.pk])).content.decode()
    assert f'data-bytes="{row.output_bytes}" title="the output' in page
    assert "built 5.9 KB" in page


def test_a_body_decoded_with_replacements_is_flagged_on_the_run_page(admin_client):
    from django.urls import reverse

    from tests.factories import RunFactory, StepResultFactory

    run = RunFactory()
    log = [{"attempt": 1, "status": "succeeded", "request": {"replaced_text": True}}]
    StepResultFactory(run=run, step_id="fetch", output={"text": "caf\ufffd"}, attempt_log=log)

    page = admin_client.get(reverse("admin:runs_run_change", args=[run.pk])).content.decode()

    assert "invalid text: the response body was not valid in its charset" in page


def test_the_operator_maximum_bounds_a_step_cap():
    from runs.engine.context import Limits

    limits = Limits(
        max_response_bytes=10,
        max_stored_output_bytes=10,
        max_parallel_steps=1,
        max_step_output_bytes=1000,
        max_step_output_limit=5000,
    )
    assert limits.step_output_cap(None) == 1000
    assert limits.step_output_cap(200) == 200
    assert limits.step_output_cap(10**12) == 5000


ROW_TOOL = """
- name: take_row
  kind: http
  description: Takes a row (never called here; the refusal comes first).
  base_url: "http://127.0.0.1:9"
  request: {method: POST, url: /rows, body: {row: "{{row}}", again: "{{again}}"}}
  inputs: {type: object, properties: {row: {}, again: {}}}
"""


def _foreach_run(items: list[Any], **step: Any):
    from runs.services import run_create, run_execute
    from tests.celery_support import import_flow
    from tools.loader import load_tool_text
    from tools.services import tool_upsert

    for spec in load_tool_text(ROW_TOOL, source="test_memory_bounds"):
        tool_upsert(spec=spec, source="test_memory_bounds")
    flow = {
        "name": "each",
        "tools": ["take_row"],
        "inputs": {"rows": {"type": "array"}},
        "steps": [
            {
                "id": "each",
                "kind": "foreach",
                "tool": "take_row",
                "input_mapping": {"items": "$input.rows"},
                "item_mapping": {"row": "$item", "again": "$item"},
                **step,
            }
        ],
    }
    run = run_create(workflow=import_flow(flow), trigger="api", inputs={"rows": items})
    run_execute(run=run)
    return run.step_results.get(step_id="each")


def test_a_foreach_list_is_bounded_by_count_before_its_items_are_built():
    row = _foreach_run(list(range(10_001)))

    assert row.status == "failed"
    assert "10001 items is over the 10000 limit" in row.error["message"]


def test_a_foreach_list_is_bounded_by_the_size_of_its_items_arguments():
    row = _foreach_run(["x" * 500] * 20, max_output_bytes=15_000)

    assert row.status == "failed"
    assert row.error["type"] == "output_too_large"
    assert row.error["what"] == "arguments with the items'"
    assert row.inputs is None
