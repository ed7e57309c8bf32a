"""Rate limits and adaptive pacing on real Celery workers, against an API on loopback that
allows 10 requests a second and answers 429 (with ``Retry-After``) past it.

Named after the feature: four ``celery worker`` processes share one limit through Redis.
The API is a token bucket (10 a second, a bucket of 10: how Stripe or Shopify state
"10 requests per second"); it records when each request arrived and what it answered.

- 50 runs started at once, two calls each, through a tool with ``rate_limit: {requests:
  10, per: 1}``: no 429 at all, the requests arrive at no less than 90 % of the limit,
  and the calls that would wait longer than ``FLOWPILOT_RATE_LIMIT_MAX_SLEEP`` were
  re-queued with their wait recorded (``wait_reason: rate_limit``), shown on the run page.
- A tool with no limit at all, on an API that refuses everything for 2 s with a
  ``Retry-After``: once one call got the 429, no worker sends a request before the
  ``Retry-After`` expired (the pause is shared through Redis), and every run finishes.

No timing is asserted on how fast the machine is: the throughput is the server's count
over the server's clock, which the limit, not the machine, decides.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run, StepResult
from runs.services import run_create, run_enqueue
from tests.celery_support import import_flow, redis_url, start_cluster, wait_until
from tests.fakes import FakeAPI, FakeResponse
from tools.loader import load_tool_text
from tools.ratelimit.redis_store import RedisPaceStore
from tools.services import tool_upsert

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.slow,
]

RATE, BUCKET = 10.0, 10.0
RUNS = 50
WORKERS = ("w1", "w2", "w3", "w4")


@dataclass
class TokenBucketAPI:
    """``RATE`` requests a second, ``BUCKET`` at once; past it a 429 with ``Retry-After``
    (the seconds until a token is back) and the draft's ``RateLimit-*`` headers."""

    tokens: float = BUCKET
    at: float = field(default_factory=time.monotonic)
    log: list[tuple[float, int, float | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Any, match: Any) -> FakeResponse:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(BUCKET, self.tokens + (now - self.at) * RATE)
            self.at = now
            if self.tokens >= 1:
                self.tokens -= 1
                self.log.append((now, 200, None))
                headers = {"RateLimit-Remaining": str(int(self.tokens)), "RateLimit-Reset": "1"}
                return FakeResponse.json({"ok": True}, headers=headers)
            wait = (1 - self.tokens) / RATE
            self.log.append((now, 429, wait))
        headers = {"Retry-After": f"{wait:.3f}", "RateLimit-Remaining": "0"}
        return FakeResponse.json({"error": "rate limited"}, status=429, headers=headers)

    @property
    def refused(self) -> list[tuple[float, int, float | None]]:
        return [entry for entry in self.log if entry[1] == 429]

    def per_second(self) -> float:
        times = [t for t, status, _ in self.log if status == 200]
        return (len(times) - 1) / (times[-1] - times[0])


@dataclass
class ClosedAPI:
    """Refuses every request for ``closed`` seconds from the first one, with the
    ``Retry-After`` of what is left; then answers."""

    closed: float = 2.0
    opened_at: float | None = None
    log: list[tuple[float, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Any, match: Any) -> FakeResponse:
        with self.lock:
            now = time.monotonic()
            if self.opened_at is None:
                self.opened_at = now + self.closed
            left = self.opened_at - now
            self.log.append((now, 429 if left > 0 else 200))
        if left > 0:
            headers = {"Retry-After": str(max(1, round(left)))}
            return FakeResponse.json({"error": "closed"}, status=429, headers=headers)
        return FakeResponse.json({"ok": True})


TOOLS = """
- name: limited_get
  description: A call of the API that allows 10 requests a second.
  base_url: "{base}"
  request: {{method: GET, url: "/limited/{{{{tag}}}}"}}
  inputs: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
  rate_limit: {{requests: 10, per: 1, key: host}}
- name: plain_get
  description: A call of the API with no limit declared.
  base_url: "{base}"
  request: {{method: GET, url: "/closed/{{{{tag}}}}"}}
  inputs: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
  retry: {{max_attempts: 6, initial_delay: 0.1, max_delay: 5, jitter: 0}}
"""


def two_calls(name: str, tool: str) -> dict:
    step = {"kind": "tool", "tool": tool, "input_mapping": {"tag": "$input.tag"}}
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}},
        "steps": [{"id": "first", **step}, {"id": "second", **step}],
        "edges": [{"from": "first", "to": "second"}],
        "outputs": {"ok": "second.ok"},
    }


@pytest.fixture(scope="module")
def api():
    fake = FakeAPI().start()
    limited, closed = TokenBucketAPI(), ClosedAPI()
    fake.route("limited", "GET", r"/limited/[^/]+", limited)
    fake.route("closed", "GET", r"/closed/[^/]+", closed)
    yield fake, limited, closed
    fake.stop()


@pytest.fixture(scope="module")
def cluster(django_db_setup, tmp_path_factory):
    env = {
        "FLOWPILOT_RATE_LIMIT_BACKEND": "redis",
        "FLOWPILOT_RATE_LIMIT_REDIS_URL": redis_url(),
        "FLOWPILOT_RATE_LIMIT_MAX_SLEEP": "0.05",  # longer waits re-queue
        "FLOWPILOT_PACING_REFRESH": "0",  # every call reads the paused keys: strict
        "FLOWPILOT_BREAKER_BACKEND": "off",
    }
    RedisPaceStore.from_url(redis_url()).reset(None)
    with start_cluster(
        tmp_path_factory.mktemp("celery-limits"), WORKERS, concurrency=3, env=env
    ) as started:
        yield started
    RedisPaceStore.from_url(redis_url()).reset(None)


def start_runs(workflow, count: int) -> list[Run]:
    runs = [
        run_create(workflow=workflow, trigger="api", inputs={"tag": f"t{i:02d}"})
        for i in range(count)
    ]
    return [run_enqueue(run=run) for run in runs]


def all_finished(runs: list[Run], cluster, timeout: float) -> None:
    ids = [run.pk for run in runs]

    def done() -> bool:
        return Run.objects.filter(pk__in=ids, status__in=["succeeded", "failed"]).count() == len(
            ids
        )

    try:
        wait_until(done, timeout=timeout, what=f"{len(ids)} runs to finish", interval=0.25)
    except AssertionError:
        raise AssertionError(cluster.logs()) from None


def test_fifty_runs_on_four_workers_never_exceed_the_limit(api, cluster, admin_client):
    fake, limited, _ = api
    for spec in load_tool_text(TOOLS.format(base=fake.url), source="test_celery_rate_limits"):
        tool_upsert(spec=spec, source="test_celery_rate_limits")
    runs = start_runs(import_flow(two_calls("paced", "limited_get")), RUNS)

    all_finished(runs, cluster, timeout=120)

    statuses = set(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True))
    assert statuses == {"succeeded"}
    assert len(limited.log) == 2 * RUNS
    assert limited.refused == []  # not one 429
    print(f"{limited.per_second():.2f} requests a second")
    assert limited.per_second() >= 0.9 * RATE
    steps = StepResult.objects.filter(run__in=[r.pk for r in runs])
    held = [
        entry
        for step in steps
        for entry in step.attempt_log
        if entry.get("wait_reason") == "rate_limit"
    ]
    slept = [
        entry["request"]["rate_limit_wait"]
        for step in steps
        for entry in step.attempt_log
        if (entry.get("request") or {}).get("rate_limit_wait")
    ]
    print(f"{len(held)} re-queued, {len(slept)} slept, longest {max(slept, default=0)}")
    assert held, "with 50 runs at once some calls waited longer than max_sleep"
    assert {e["error"]["type"] for e in held} == {"rate_limit_wait"}
    assert all(e.get("request") is None for e in held)  # nothing was sent
    assert {s.status for s in steps} == {"succeeded"}
    shown = next(s for s in steps if any(e.get("wait_reason") for e in s.attempt_log))
    page = admin_client.get(reverse("admin:runs_run_change", args=[shown.run_id]))
    assert "(rate limit)" in page.content.decode()


def test_a_retry_after_holds_every_worker_until_it_expires(api, cluster):
    fake, _, closed = api
    for spec in load_tool_text(TOOLS.format(base=fake.url), source="test_celery_rate_limits"):
        tool_upsert(spec=spec, source="test_celery_rate_limits")
    runs = start_runs(import_flow(two_calls("paused", "plain_get")), 20)

    all_finished(runs, cluster, timeout=120)

    statuses = set(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True))
    assert statuses == {"succeeded"}
    assert closed.opened_at is not None
    first_refusal = min(t for t, status in closed.log if status == 429)
    # Calls already on their way when the first 429 was answered may still arrive (up to
    # a worker's round trip later); after that, none before the Retry-After expired.
    settled = first_refusal + 0.5
    early = [t for t, _ in closed.log if settled < t < closed.opened_at - 0.05]
    assert early == [], f"{len(early)} requests were sent while the API said to wait"
    assert sum(1 for _, status in closed.log if status == 200) == 2 * 20
