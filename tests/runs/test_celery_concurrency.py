"""Concurrency limits on real Celery workers: 200 runs started by webhooks.

Named after the feature, not a module. A workflow limited to 3 runs at once per
account is started 200 times through the real webhook endpoint (signed deliveries,
from four threads at once, over five accounts); two real workers (prefork, 4
processes each) and beat run them against this test's PostgreSQL database, each run
one call to a loopback server that answers after 80 ms. The deliveries land while the
workers are stopped (3 runs per account admitted, the rest queued), then the workers
start. A thread reads the database every 100 ms: no account ever has more than 3 runs
holding a slot. Mid-way, with runs still queued, a worker is killed (``kill -9``, its
pool with it) and beat restarted: the killed worker's steps are taken back by the step
sweeper, and the fills it would have sent are recovered by the queued-run sweep, so
every run finishes. Queued runs
start first in, first out per account. These tests never run on SQLite.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict

import pytest
from django.db import connection
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from runs.models import Run
from tests.celery_support import wait_until
from triggers.webhooks import webhook_create, webhook_sign
from workflows.services import workflow_import

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers", "echo_tools"),
]

RUNS = 200
ACCOUNTS = [f"acct-{n}" for n in range(1, 6)]
MAX_RUNS = 3
SENDERS = 4


def limited_flow() -> dict:
    return {
        "name": "per_account",
        "inputs": {"account": {"type": "string"}, "seq": {"type": "string"}},
        "steps": [
            {
                "id": "call",
                "kind": "tool",
                "tool": "echo",
                "input_mapping": {"tag": "$input.account", "name": "$input.seq", "delay": 0.08},
            }
        ],
        "concurrency": {"max_runs": MAX_RUNS, "key": "$input.account", "on_limit": "queue"},
    }


def deliver(url: str, secret: str, payload: dict) -> int:
    body = json.dumps(payload).encode()
    timestamp = int(time.time())
    signature = webhook_sign(secret=secret, timestamp=timestamp, body=body)
    response = APIClient().post(
        url,
        body,
        content_type="application/json",
        HTTP_X_FLOWPILOT_TIMESTAMP=str(timestamp),
        HTTP_X_FLOWPILOT_SIGNATURE=signature,
    )
    return response.status_code


class Sampler(threading.Thread):
    """Reads the runs every 100 ms: the most runs holding a slot (pending or running) and
    running per account at any sample, and every run seen queued."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.max_holding: dict[str, int] = defaultdict(int)
        self.max_running: dict[str, int] = defaultdict(int)
        self.seen_queued: set[int] = set()
        self.samples = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self._sample()
                time.sleep(0.1)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connection.close()

    def _sample(self) -> None:
        rows = Run.objects.filter(workflow__name="per_account").values_list(
            "pk", "concurrency_key", "status"
        )
        holding: dict[str, int] = defaultdict(int)
        running: dict[str, int] = defaultdict(int)
        for pk, key, status in rows:
            if status in ("pending", "running"):
                holding[key] += 1
            if status == "running":
                running[key] += 1
            if status == "queued":
                self.seen_queued.add(pk)
        for key, count in holding.items():
            self.max_holding[key] = max(self.max_holding[key], count)
        for key, count in running.items():
            self.max_running[key] = max(self.max_running[key], count)
        self.samples += 1


def test_webhook_runs_keep_the_limit_per_account_start_fifo_and_survive_a_killed_worker(
    workers, echo_tools, monkeypatch
):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "webhook", "100000/minute")
    workflow_import(data=limited_flow(), status="active")
    trigger = webhook_create(workflow_name="per_account", user=None)
    url = f"/api/v1/hooks/{trigger.public_id}/"
    workers.start_beat()
    sampler = Sampler()
    sampler.start()
    answers: list[int] = []

    def send(sender: int) -> None:
        try:
            for seq in range(sender, RUNS, SENDERS):
                payload = {"account": ACCOUNTS[seq % len(ACCOUNTS)], "seq": f"{seq:03d}"}
                answers.append(deliver(url, trigger.secret, payload))
        finally:
            connection.close()

    try:
        # The deliveries land while the workers are down, so the queue is long when they
        # come back (a loopback call is faster than a delivery through the endpoint).
        for name in ("w1", "w2"):
            workers.stop(name)
        senders = [threading.Thread(target=send, args=(n,)) for n in range(SENDERS)]
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join()
        assert answers == [202] * RUNS
        statuses = Run.objects.values_list("status", flat=True)
        # Started (their steps wait on the broker) or queued behind them.
        assert sorted(set(statuses)) == ["queued", "running"]
        assert statuses.filter(status="running").count() == MAX_RUNS * len(ACCOUNTS)
        for name in ("w1", "w2"):
            workers.start_worker(name)

        # Mid-way: runs finished, others still queued. Kill a worker, restart beat.
        wait_until(
            lambda: Run.objects.filter(status="succeeded").count() >= 20,
            timeout=60,
            what="the first runs to finish",
        )
        queued_at_kill = Run.objects.filter(status="queued").count()
        workers.kill("w1")
        workers.stop("beat")
        time.sleep(0.5)
        workers.start_worker("w1")
        workers.start_beat()

        def all_ended() -> bool:
            return not Run.objects.exclude(
                status__in=["succeeded", "failed", "cancelled", "skipped"]
            ).exists()

        wait_until(all_ended, timeout=240, what="every run to end")
    finally:
        sampler.stop.set()
        sampler.join(timeout=10)
        workers.stop("beat")

    assert sampler.error is None, sampler.error
    runs = list(Run.objects.filter(workflow__name="per_account").order_by("pk"))
    assert len(runs) == RUNS
    failed = {r.pk: r.error_summary for r in runs if r.status != "succeeded"}
    assert failed == {}, workers.logs()
    assert queued_at_kill > 0  # the kill happened with runs waiting for a slot

    # Never more than 3 per account, and the limit was reached on every account.
    assert sampler.samples > 10
    assert max(sampler.max_holding.values()) == MAX_RUNS, dict(sampler.max_holding)
    assert max(sampler.max_running.values()) <= MAX_RUNS
    assert set(sampler.max_holding) == set(ACCOUNTS)
    assert len(sampler.seen_queued) >= queued_at_kill

    # First in, first out per account: a run seen queued started no later than any run
    # of its account created after it.
    by_account: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_account[run.concurrency_key].append(run)
    assert sorted(by_account) == ACCOUNTS
    for account, account_runs in by_account.items():
        for index, run in enumerate(account_runs):
            if run.pk not in sampler.seen_queued:
                continue
            later = [r.started_at for r in account_runs[index + 1 :]]
            assert all(run.started_at <= start for start in later), (account, run.pk)

    # Every call made (a step the killed worker was making is made again: idempotent GET).
    seqs = {r.segments[2] for r in echo_tools.requests("echo")}
    assert seqs == {f"{n:03d}" for n in range(RUNS)}
