"""Is flowpilot able to work? One check per component, each ok or failing with the reason.

``health_report()`` checks the database, the broker, the live workers and their
queues, beat's last tick, the LLM endpoint and the circuit breakers, each with a
short timeout, and never raises: a check that cannot answer is ``failing`` with
the reason. A component the configuration does not use (no broker: runs execute
in process; no LLM key) is ``not_configured``, which is not a failure unless the
settings require it (``FLOWPILOT_HEALTH_REQUIRE_LLM``). ``manage.py health``,
``/healthz`` (status words only) and the staff page (reasons too) read it.

Reasons never carry a secret: URLs are shown without their password, and error
texts are the exception's class and first line.

It sits in its own top app, ``health``, above everything it checks: it reads the
Celery app the engine publishes to, the tables of django-celery-beat and the
breakers of ``tools``; nothing but the URL configuration imports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Max
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from kombu.utils.url import maybe_sanitize_url

from schedules.next_fire import beat_max_age
from tools.breaker.selectors import breakers_list
from tools.breaker.setup import breaker_backend, breaker_store_from_settings
from tools.models import Tool, ToolSource
from tools.sources import source_state, stale_sources
from workflows.models import Step, Workflow, WorkflowStatus

OK, FAILING, NOT_CONFIGURED = "ok", "failing", "not_configured"
COMPONENTS = ("database", "broker", "workers", "beat", "llm", "breakers", "sources")


@dataclass(frozen=True)
class CheckResult:
    component: str
    status: str  # ok | failing | not_configured
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def failing(self) -> bool:
        return self.status == FAILING


@dataclass(frozen=True)
class HealthReport:
    checks: tuple[CheckResult, ...]
    checked_at: datetime

    @property
    def ok(self) -> bool:
        return not any(c.failing for c in self.checks)

    def as_dict(self, *, details: bool = True) -> dict[str, Any]:
        """The report as JSON; ``details=False`` keeps only each component's status word."""
        if not details:
            return {
                "status": OK if self.ok else FAILING,
                "components": {c.component: c.status for c in self.checks},
            }
        return {
            "status": OK if self.ok else FAILING,
            "checked_at": self.checked_at.isoformat(),
            "components": [{**asdict(c), "seconds": round(c.seconds, 3)} for c in self.checks],
        }


def _reason(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _timeout() -> float:
    return float(getattr(settings, "FLOWPILOT_HEALTH_TIMEOUT", 2.0))


def _broker_url() -> str:
    return str(current_app.conf.broker_url or "") if _broker_configured() else ""


def _broker_configured() -> bool:
    return bool(current_app.conf.broker_url) and not current_app.conf.task_always_eager


# --- the checks -------------------------------------------------------------------------


def check_database() -> CheckResult:
    """The database answers, and every migration is applied."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        reason = f"{len(pending)} migration(s) not applied; run `manage.py migrate`"
        return CheckResult("database", FAILING, reason, {"vendor": connection.vendor})
    return CheckResult("database", OK, f"{connection.vendor} answered, migrations applied")


def check_broker() -> CheckResult:
    if not _broker_configured():
        return CheckResult("broker", NOT_CONFIGURED, "no broker: runs execute in process")
    shown = maybe_sanitize_url(_broker_url())
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=_timeout())
    return CheckResult("broker", OK, f"{shown} answered", {"url": shown})


def check_workers(*, node: str | None = None) -> CheckResult:
    """Live workers (Celery inspect, short timeout) and whether one consumes the queue;
    with ``node``, that worker (``worker@host``) must be among them. Every queue an
    active workflow routes to (``routed_queues``) needs a consumer too: a step published
    to a queue no worker reads waits until its queued lease runs out, again and again."""
    if not _broker_configured():
        return CheckResult("workers", NOT_CONFIGURED, "no broker: runs execute in process")
    wait = _timeout()
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=wait)
        answers = current_app.control.inspect(timeout=wait, connection=conn).active_queues()
    answers = answers or {}
    queues = {node: sorted(q["name"] for q in found or []) for node, found in answers.items()}
    queues = dict(sorted(queues.items()))
    default = current_app.conf.task_default_queue
    details = {"workers": queues, "queue": default}
    if not queues:
        return CheckResult("workers", FAILING, f"no worker answered within {wait:g} s", details)
    if node and node not in queues:
        reason = f"worker {node} did not answer ({len(queues)} other(s) did)"
        return CheckResult("workers", FAILING, reason, details)
    consumers = [name for name, names in queues.items() if default in names]
    if not consumers:
        reason = f"{len(queues)} worker(s) answered, none consumes queue `{default}`"
        return CheckResult("workers", FAILING, reason, details)
    routed = _routed_or_none()
    if routed:
        details["routed"] = routed
        consumed = {name for names in queues.values() for name in names}
        missing = [queue for queue in routed if queue not in consumed]
        if missing:
            named = "; ".join(f"`{q}` ({', '.join(routed[q])})" for q in missing)
            reason = (
                f"no worker consumes {named}: start one with "
                f"`celery -A config worker -Q {','.join(missing)}`"
            )
            return CheckResult("workers", FAILING, reason, details)
    return CheckResult(
        "workers", OK, f"{len(consumers)} worker(s) consume queue `{default}`", details
    )


def routed_queues() -> dict[str, list[str]]:
    """The queues the active workflow versions route to, each with who names it
    (``workflow NAME``, ``tool NAME``): a workflow's ``queue``, and the ``queue`` of a
    tool one of their steps calls. Two queries."""
    named: dict[str, set[str]] = {}
    active = Workflow.objects.filter(status=WorkflowStatus.ACTIVE)
    for name, queue in active.values_list("name", "definition__queue"):
        if isinstance(queue, str) and queue:
            named.setdefault(queue, set()).add(f"workflow {name}")
    used = Step.objects.filter(workflow__status=WorkflowStatus.ACTIVE).exclude(tool="")
    tools = Tool.objects.filter(name__in=used.values("tool"))
    for name, queue in tools.values_list("name", "spec__queue"):
        if isinstance(queue, str) and queue:
            named.setdefault(queue, set()).add(f"tool {name}")
    return {queue: sorted(who) for queue, who in sorted(named.items())}


def _routed_or_none() -> dict[str, list[str]]:
    """``routed_queues``, or nothing when the database cannot answer (its own check
    says so; the workers' check is about the workers)."""
    try:
        return routed_queues()
    except DatabaseError:
        return {}


def check_beat(*, now: datetime | None = None) -> CheckResult:
    """Beat's last tick: the newest ``last_run_at`` django-celery-beat recorded."""
    if not _broker_configured():
        return CheckResult("beat", NOT_CONFIGURED, "no broker: nothing is scheduled")
    now = now or timezone.now()
    last = PeriodicTask.objects.filter(enabled=True).aggregate(last=Max("last_run_at"))["last"]
    limit = timedelta(seconds=beat_max_age())
    if last is None:
        return CheckResult("beat", FAILING, "beat has never sent a task", {"last_tick": None})
    age = (now - last).total_seconds()
    details = {"last_tick": last.isoformat(), "age_seconds": round(age, 1)}
    if now - last > limit:
        reason = f"last tick {age:.0f} s ago (more than {limit.total_seconds():.0f} s)"
        return CheckResult("beat", FAILING, reason, details)
    return CheckResult("beat", OK, f"last tick {age:.0f} s ago", details)


def check_llm() -> CheckResult:
    """The LLM endpoint's model list (GET ``/models``), a cheap call that spends no tokens."""
    base = str(settings.OPENAI_BASE_URL).rstrip("/")
    shown = maybe_sanitize_url(base)
    if not settings.OPENAI_API_KEY:
        if getattr(settings, "FLOWPILOT_HEALTH_REQUIRE_LLM", False):
            return CheckResult(
                "llm", FAILING, "OPENAI_API_KEY is not set, and FLOWPILOT_HEALTH_REQUIRE_LLM is"
            )
        return CheckResult("llm", NOT_CONFIGURED, "no OPENAI_API_KEY: planner and llm steps off")
    headers = {"Authorization": f"Bearer {settings.OPENAI_API_KEY}"}
    response = httpx.get(f"{base}/models", headers=headers, timeout=_timeout())
    details = {"url": shown, "status": response.status_code}
    if response.status_code >= 400:
        return CheckResult(
            "llm", FAILING, f"{shown}/models answered {response.status_code}", details
        )
    return CheckResult("llm", OK, f"{shown}/models answered {response.status_code}", details)


def check_breakers() -> CheckResult:
    backend = breaker_backend()
    store = breaker_store_from_settings()
    if store is None:  # the backend is off
        return CheckResult("breakers", NOT_CONFIGURED, "circuit breakers are off")
    try:
        states = breakers_list(store=store)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()
    tripped = [s for s in states if s.state != "closed"]
    details = {
        "backend": backend,
        "breakers": [
            {
                "host": s.host,
                "state": s.state,
                "failures": s.failures,
                "retry_at": s.tried_again_at.isoformat() if s.tried_again_at else None,
            }
            for s in tripped
        ],
    }
    opened = [s for s in tripped if s.state == "open"]
    if opened:
        hosts = ", ".join(s.host for s in opened)
        return CheckResult("breakers", FAILING, f"open: {hosts}", details)
    trial = ", ".join(s.host for s in tripped)
    reason = f"half-open (trial call): {trial}" if trial else f"none open ({backend})"
    return CheckResult("breakers", OK, reason, details)


def check_sources() -> CheckResult:
    """The tool sources (MCP server files, OpenAPI documents): failing while one is stale
    (not read for FLOWPILOT_SOURCE_STALE_HOURS) or could not be read at its last try."""
    if not ToolSource.objects.exists():
        return CheckResult("sources", NOT_CONFIGURED, "no MCP server or OpenAPI source recorded")
    behind = stale_sources()
    details = {
        "sources": [
            {"name": s.name, "kind": s.kind, "location": s.location, "state": source_state(s)}
            for s in behind
        ]
    }
    if behind:
        shown = "; ".join(f"{s.name}: {source_state(s)}" for s in behind)
        return CheckResult("sources", FAILING, shown, details)
    count = ToolSource.objects.count()
    return CheckResult("sources", OK, f"{count} source(s) read within the last "
                       f"{settings.FLOWPILOT_SOURCE_STALE_HOURS:g} h", details)  # fmt: skip


CHECKS: dict[str, Callable[[], CheckResult]] = {
    "database": check_database,
    "broker": check_broker,
    "workers": check_workers,
    "beat": check_beat,
    "llm": check_llm,
    "breakers": check_breakers,
    "sources": check_sources,
}


def _run(name: str, node: str | None) -> CheckResult:
    started = time.monotonic()
    try:
        result = check_workers(node=node) if name == "workers" else CHECKS[name]()
    except Exception as exc:  # noqa: BLE001 - every failure is a report, never a crash
        result = CheckResult(name, FAILING, _reason(exc))
    return CheckResult(
        result.component,
        result.status,
        result.reason,
        result.details,
        time.monotonic() - started,
    )


def health_report(
    *, components: Iterable[str] | None = None, node: str | None = None
) -> HealthReport:
    """Run the checks (all, or those named, in ``COMPONENTS`` order) and collect them;
    ``node`` names a worker that must answer (a worker container's own healthcheck).

    Raises ``ValueError`` naming an unknown component.
    """
    wanted = list(components or COMPONENTS)
    unknown = sorted(set(wanted) - set(COMPONENTS))
    if unknown:
        raise ValueError(
            f"unknown component(s) {', '.join(unknown)}; choose from {', '.join(COMPONENTS)}"
        )
    names = [c for c in COMPONENTS if c in wanted]
    return HealthReport(tuple(_run(n, node) for n in names), timezone.now())
