"""One retry rule for every driver (``runs.engine.tries``).

``next_try`` alone decides what follows a failed try. The driver tests below run the
same failing host (a loopback server) under each driver — the in-process driver, the
Celery step task's settle, a `foreach` item, and a `workflow` step parked on its child
run — and prove the same sequence of tries and waits in four cases: the host's breaker
is open, it answers 429 with ``Retry-After``, it answers 503, it times out. Waits are
recorded (``ctx.sleep`` in process, the re-published countdown on Celery), never
slept, and no assertion depends on how long anything took.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from django.utils import timezone

from runs.engine.build import build_run_context
from runs.engine.celery.run import run_start
from runs.engine.tries import AttemptRecord, GiveUp, Retry, WaitReason, next_try, sent_label
from runs.models import Run, StepResult
from runs.services import run_create, run_execute
from runs.state import RunStatus, StepStatus
from tests.celery_support import Bus, import_flow
from tests.fakes import FakeAPI, FakeResponse
from tests.runs.engine.conftest import settle
from tests.runs.subflows import activate
from tools.breaker.core import BreakerPolicy, breaker_host
from tools.breaker.db_store import DatabaseBreakerStore
from tools.errors import (
    CircuitOpen,
    RateLimitWait,
    ToolInputError,
    ToolRateLimited,
    ToolTimeout,
)
from tools.loader import load_tool_text
from tools.policy import RetryPolicy
from tools.services import tool_upsert
from workflows.services import workflow_spec

POLICY = RetryPolicy(max_attempts=3, initial_delay=0.1, max_delay=2.0, multiplier=2, jitter=0)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def never() -> float:
    raise AssertionError("no random number is drawn when the rule gives up")


# --- the rule -------------------------------------------------------------------------


def test_a_fatal_error_gives_up_and_draws_no_random_number():
    assert next_try(POLICY, 1, ToolInputError("bad"), never) == GiveUp(exhausted=False)


def test_the_last_try_of_the_budget_gives_up():
    assert next_try(POLICY, 3, ToolTimeout("slow"), never) == GiveUp(exhausted=True)


def test_a_plain_retryable_error_waits_the_backoff_with_its_jitter():
    assert next_try(POLICY, 1, ToolTimeout("slow"), lambda: 0.5) == Retry(0.1, WaitReason.BACKOFF)
    assert next_try(POLICY, 2, ToolTimeout("slow"), lambda: 0.5) == Retry(0.2, WaitReason.BACKOFF)
    jittery = POLICY.model_copy(update={"jitter": 0.5})
    assert next_try(jittery, 1, ToolTimeout("slow"), lambda: 0.0) == Retry(0.05, WaitReason.BACKOFF)


def test_retry_after_is_kept_when_longer_than_the_backoff_and_capped_by_max_delay():
    told = ToolRateLimited("429", retry_after=1.0)
    assert next_try(POLICY, 1, told, lambda: 0.5) == Retry(1.0, WaitReason.RETRY_AFTER)
    long = ToolRateLimited("429", retry_after=120.0)
    assert next_try(POLICY, 1, long, lambda: 0.5) == Retry(2.0, WaitReason.RETRY_AFTER)
    short = ToolRateLimited("429", retry_after=0.01)
    assert next_try(POLICY, 1, short, lambda: 0.5) == Retry(0.1, WaitReason.BACKOFF)


def test_an_open_breaker_waits_its_cool_down():
    refused = CircuitOpen(host="api:443", retry_at=NOW.replace(minute=10), now=NOW)
    assert next_try(POLICY, 1, refused, lambda: 0.5) == Retry(2.0, WaitReason.BREAKER)
    trial_due = CircuitOpen(host="api:443", retry_at=NOW, now=NOW)  # 0 s left: the backoff
    assert next_try(POLICY, 2, trial_due, lambda: 0.5) == Retry(0.2, WaitReason.BACKOFF)


def test_a_rate_limit_wait_is_told_and_spends_no_try():
    held = RateLimitWait(key="host:api:443", retry_after=1.5)
    assert next_try(POLICY, 1, held, lambda: 0.5) == Retry(1.5, WaitReason.RATE_LIMIT, False)
    # Even past the budget (a policy of one try): the limit held it back, nothing was sent.
    once = RetryPolicy(max_attempts=1)
    assert next_try(once, 1, held, lambda: 0.5) == Retry(1.5, WaitReason.RATE_LIMIT, False)
    long = RateLimitWait(key="k", retry_after=99)  # past max_delay: kept, exactly
    assert next_try(POLICY, 1, long, never) == Retry(99, WaitReason.RATE_LIMIT, False)
    short = RateLimitWait(key="k", retry_after=0.02)  # shorter than the backoff: kept
    assert next_try(POLICY, 1, short, never) == Retry(0.02, WaitReason.RATE_LIMIT, False)
    assert WaitReason.RATE_LIMIT.label == "rate limit"


def test_try_until_done_does_not_count_the_held_back_tries():
    from runs.engine.tries import try_until_done

    ctx = _StubContext()
    outcomes: list[Exception | None] = [
        RateLimitWait(key="k", retry_after=1.0),
        RateLimitWait(key="k", retry_after=1.0),
        ToolTimeout("slow"),
        None,
    ]

    def call() -> str:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return "done"

    policy = RetryPolicy(max_attempts=2, initial_delay=0.1, jitter=0)
    records, last = try_until_done(ctx, policy, call)  # type: ignore[arg-type]
    assert last.value == "done"
    assert [r.wait.reason if r.wait else None for r in records] == [
        WaitReason.RATE_LIMIT, WaitReason.RATE_LIMIT, WaitReason.BACKOFF, None,
    ]  # fmt: skip
    assert ctx.slept == [1.0, 1.0, 0.1]


class _StubContext:
    """What ``try_until_done`` reads of a run context."""

    def __init__(self) -> None:
        import random

        from tools.redaction import Redactor

        self.slept: list[float] = []
        self.rand = random.Random(0)
        self.redactor = Redactor()
        self.tracer = None  # tracing off
        self.metrics = None  # metrics off
        self.run_id = 1
        self.run_uuid = "00000000-0000-4000-8000-000000000001"

    def now(self) -> datetime:
        return NOW

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_the_log_entry_keeps_its_keys_and_adds_the_reason():
    record = AttemptRecord(2, NOW, 12.5, StepStatus.FAILED, "w@h", {"type": "http_error"})
    assert record.entry() == {
        "attempt": 2,
        "started_at": NOW.isoformat(),
        "worker": "w@h",
        "duration_ms": 12.5,
        "status": "failed",
        "error": {"type": "http_error"},
    }
    waited = record.waiting(Retry(0.2, WaitReason.BACKOFF)).entry()
    assert (waited["retry_in"], waited["wait_reason"]) == (0.2, "backoff")
    assert record.wait is None  # immutable: ``waiting`` made a new record


# --- the same failing host under every driver -----------------------------------------

FLAKY_TOOL = """
- name: flaky
  kind: http
  description: A host that fails the way the test asks (loopback fake).
  base_url: "{base}"
  request: {{method: GET, url: "/flaky/{{{{mode}}}}"}}
  inputs: {{type: object, properties: {{mode: {{type: string}}}}, required: [mode]}}
  timeout: 0.3
  retry: {{max_attempts: 3, initial_delay: 0.1, max_delay: 2, multiplier: 2, jitter: 0}}
"""

# What each case's tries must be, on every driver: (error type, wait, wait reason).
CASES: dict[str, list[tuple[str, float | None, str | None]]] = {
    "breaker": [*[("circuit_open", 2.0, "breaker")] * 2, ("circuit_open", None, None)],
    "limited": [*[("rate_limited", 1.0, "retry_after")] * 2, ("rate_limited", None, None)],
    "down": [
        ("http_error", 0.1, "backoff"),
        ("http_error", 0.2, "backoff"),
        ("http_error", None, None),
    ],
    "slow": [
        ("tool_timeout", 0.1, "backoff"),
        ("tool_timeout", 0.2, "backoff"),
        ("tool_timeout", None, None),
    ],
}
SENT = {"breaker": 0, "limited": 3, "down": 3, "slow": 3}  # requests that reach the host


def _answer(request: Any, match: Any) -> FakeResponse:
    mode = match["mode"]
    if mode == "ok":
        return FakeResponse.json({"answer": "fine"})
    if mode == "limited":
        return FakeResponse.json({"error": "slow down"}, status=429, headers={"Retry-After": "1"})
    if mode == "slow":
        time.sleep(1.0)  # past the tool's 0.3 s timeout
    return FakeResponse.json({"error": "down"}, status=503)


@pytest.fixture
def host(settings):
    """The failing host, its tool stored; breakers off unless a case opens one."""
    settings.FLOWPILOT_BREAKER_BACKEND = "off"
    fake = FakeAPI().start()
    fake.route("flaky", "GET", r"/flaky/(?P<mode>[a-z]+)", _answer)
    for spec in load_tool_text(FLAKY_TOOL.format(base=fake.url), source="test_tries"):
        tool_upsert(spec=spec, source="test_tries")
    yield fake
    fake.stop()


def prepare(case: str, fake: FakeAPI, settings: Any) -> str:
    """Open the host's breaker for the ``breaker`` case (cool-down 600 s: longer than
    the policy's ``max_delay``); the mode the tool is called with."""
    if case != "breaker":
        return case
    settings.FLOWPILOT_BREAKER_BACKEND = "database"
    policy = BreakerPolicy(failures=1, cooldown=600, window=300)
    DatabaseBreakerStore().record_failure(breaker_host(fake.url), now=timezone.now(), policy=policy)
    return "down"


def tool_flow(name: str) -> dict:
    return {
        "name": name,
        "inputs": {"mode": {"type": "string"}},
        "steps": [
            {
                "id": "call",
                "kind": "tool",
                "tool": "flaky",
                "input_mapping": {"mode": "$input.mode"},
            }
        ],
        "outputs": {"answer": "call.error"},
    }


def tries_of(result: StepResult) -> list[tuple[str, float | None, str | None]]:
    return [
        (e["error"]["type"], e.get("retry_in"), e.get("wait_reason")) for e in result.attempt_log
    ]


def in_process(run: Run, slept: list[float]) -> Run:
    """The in-process driver, its waits recorded instead of slept."""
    spec = workflow_spec(run.workflow)
    with build_run_context(
        run_id=run.pk, run_uuid=str(run.uuid), spec=spec, sleep=slept.append
    ) as ctx:
        return run_execute(run=run, context=ctx)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_in_process_driver(case, host, settings):
    mode = prepare(case, host, settings)
    run = run_create(
        workflow=import_flow(tool_flow(f"local-{case}")), trigger="api", inputs={"mode": mode}
    )
    slept: list[float] = []

    run = in_process(run, slept)

    assert run.status == RunStatus.FAILED
    assert tries_of(run.step_results.get(step_id="call")) == CASES[case]
    assert slept == [wait for _, wait, _ in CASES[case] if wait is not None]
    assert len(host.requests("flaky")) == SENT[case]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_celery_step_task(case, host, settings):
    mode = prepare(case, host, settings)
    run = run_create(
        workflow=import_flow(tool_flow(f"celery-{case}")), trigger="api", inputs={"mode": mode}
    )
    bus = Bus()
    run_start(run=run, publish=bus)

    verdicts = bus.drain()

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert tries_of(run.step_results.get(step_id="call")) == CASES[case]
    waits = [v.retry_in for v in verdicts if v.retry_in is not None]
    assert waits == [wait for _, wait, _ in CASES[case] if wait is not None]
    assert [m.countdown for m in bus.published[1:]] == waits  # re-published after the wait
    assert len(host.requests("flaky")) == SENT[case]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_foreach_item(case, host, settings):
    """An item's tries are not logged one by one: its waits are what it slept, its last
    error is the step's ``errors`` entry; the waits' lengths tell the reasons apart."""
    mode = prepare(case, host, settings)
    flow = {
        "name": f"each-{case}",
        "inputs": {"modes": {"type": "array"}},
        "steps": [
            {
                "id": "each",
                "kind": "foreach",
                "tool": "flaky",
                "input_mapping": {"items": "$input.modes"},
                "item_mapping": {"mode": "$item"},
                "on_error": "continue",
            }
        ],
        "outputs": {"errors": "each.errors"},
    }
    run = run_create(workflow=import_flow(flow), trigger="api", inputs={"modes": [mode]})
    slept: list[float] = []

    run = in_process(run, slept)

    assert run.status == RunStatus.SUCCEEDED, run.error_summary
    [failed] = run.step_results.get(step_id="each").output["errors"]
    assert failed["error"]["type"] == CASES[case][-1][0]
    assert slept == [wait for _, wait, _ in CASES[case] if wait is not None]
    assert len(host.requests("flaky")) == SENT[case]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_step_parked_on_its_child_run(case, host, settings, tasks):
    """On Celery the child's step tries as any step task does; the parked parent step is
    settled through the same rule, which gives up at once (a failed child is fatal to
    its step: the retries were the child's), even under a retry policy of its own."""
    mode = prepare(case, host, settings)
    activate(tool_flow(f"child-{case}"))
    parent = activate(
        {
            "name": f"parent-{case}",
            "inputs": {"mode": {"type": "string"}},
            "steps": [
                {
                    "id": "sub",
                    "kind": "workflow",
                    "workflow": f"child-{case}",
                    "input_mapping": {"mode": "$input.mode"},
                    "retry": {"max_attempts": 3, "initial_delay": 0.1},
                }
            ],
            "outputs": {"answer": "sub.answer"},
        }
    )
    run = run_create(workflow=parent, trigger="api", inputs={"mode": mode})
    bus = Bus()
    run_start(run=run, publish=bus)

    settle(bus, tasks)

    run.refresh_from_db()
    child = Run.objects.get(parent_run=run)
    assert (run.status, child.status) == (RunStatus.FAILED, RunStatus.FAILED)
    assert tries_of(child.step_results.get(step_id="call")) == CASES[case]
    assert tries_of(run.step_results.get(step_id="sub")) == [("subworkflow_failed", None, None)]
    assert len(host.requests("flaky")) == SENT[case]




def sent_of(result: StepResult) -> list[dict | None]:
    return [e.get("request") for e in result.attempt_log]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("driver", ["in_process", "celery"])
def test_every_try_records_what_it_sent_and_what_came_back(driver, host, settings):
    """A try's record holds its request (method, masked URL, the status that came back);
    a try the breaker refused sent nothing, and says so."""

    def run_mode(mode: str, name: str) -> StepResult:
        run = run_create(
            workflow=import_flow(tool_flow(name)), trigger="api", inputs={"mode": mode}
        )
        if driver == "in_process":
            in_process(run, [])
        else:
            bus = Bus()
            run_start(run=run, publish=bus)
            bus.drain()
        return StepResult.objects.get(run=run, step_id="call")

    down = run_mode("down", f"{driver}-down")
    ok = run_mode("ok", f"{driver}-ok")
    refused = run_mode(prepare("breaker", host, settings), f"{driver}-refused")

    url = f"{host.url}/flaky/down"
    assert [(s["method"], s["url"], s["status"]) for s in sent_of(down)] == [("GET", url, 503)] * 3
    [fine] = sent_of(ok)
    assert (fine["method"], fine["url"], fine["status"]) == ("GET", f"{host.url}/flaky/ok", 200)
    assert sent_of(refused) == [None, None, None]


def test_the_sent_label_says_the_request_and_the_status():
    assert sent_label({"method": "GET", "url": "https://a.example/x", "status": 503}) == (
        "GET https://a.example/x → 503"
    )
    assert sent_label({"method": "POST", "url": "https://a.example/y", "status": None}) == (
        "POST https://a.example/y"
    )
    assert sent_label(None) is None
    assert sent_label({"status": 200}) is None
    paced = {"method": "GET", "url": "https://a.example/x", "status": 200, "rate_limit_wait": 0.4}
    assert sent_label(paced) == (
        "GET https://a.example/x → 200, after waiting 0.40 s for its rate limit"
    )
    long = sent_label({"method": "GET", "url": "https://a.example/" + "z" * 500, "status": 200})
    assert long is not None
    assert long.endswith("… → 200")
    assert len(long) < 260
