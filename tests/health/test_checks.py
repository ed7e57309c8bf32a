"""manage.py health, /healthz and the staff page, without real workers.

Each component up and then down: the broker pointed at a closed port, an LLM
endpoint that refuses (the loopback OpenAI-compatible fake), a breaker opened,
beat's last tick too old. The real-worker checks are in test_checks_celery.py.
"""

from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest
from celery import current_app
from django.core.management import call_command
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from health.checks import check_beat, health_report
from tests.factories import PASSWORD, UserFactory
from tools.breaker.core import BreakerPolicy
from tools.breaker.db_store import DatabaseBreakerStore

pytestmark = [pytest.mark.django_db(transaction=True)]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends


@pytest.fixture
def broker_at(settings):
    """Point the Celery app at a broker URL (not eager) for the test; restore it after."""
    keys = ("broker_url", "task_always_eager")
    saved = {key: current_app.conf[key] for key in keys}

    def point(url: str) -> str:
        current_app.conf.update(broker_url=url, task_always_eager=False)
        return url

    yield point
    current_app.conf.update(saved)


def open_breaker(host: str = "api.example.com:443") -> None:
    DatabaseBreakerStore().record_failure(
        host, now=timezone.now(), policy=BreakerPolicy(failures=1, cooldown=60)
    )


def statuses(report) -> dict[str, str]:
    return {c.component: c.status for c in report.checks}


def test_in_process_everything_needed_is_up(cli):
    result = cli("health")

    assert result.code == 0, result.out + result.err
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in result.lines}
    assert rows["database"][0] == "ok"
    assert "migrations applied" in rows["database"][1]
    assert rows["broker"] == ["not_configured", "no broker: runs execute in process"]
    assert rows["workers"][0] == rows["beat"][0] == rows["llm"][0] == "not_configured"
    assert rows["breakers"] == ["ok", "none open (database)"]
    assert rows["sources"] == ["not_configured", "no MCP server or OpenAPI source recorded"]
    assert list(rows) == ["database", "broker", "workers", "beat", "llm", "breakers", "sources"]


def test_an_open_breaker_fails_with_its_host_in_text_and_json(cli):
    open_breaker()

    text = cli("health", "breakers")
    body = json.loads(cli("health", "--json").out)

    assert text.code == 1
    assert text.lines == ["breakers  failing         open: api.example.com:443"]
    assert "failing: breakers" in text.err
    assert body["status"] == "failing"
    breakers = body["components"][-2]
    assert breakers["component"] == "breakers"
    assert breakers["details"]["breakers"][0]["host"] == "api.example.com:443"
    assert breakers["details"]["breakers"][0]["state"] == "open"
    assert breakers["details"]["breakers"][0]["retry_at"]


def test_a_stale_or_unreadable_tool_source_fails_sources_naming_it(cli, settings):
    from tools.models import ToolSource

    now = timezone.now()
    ToolSource.objects.create(kind="mcp", name="time", location="/srv/time.yaml", refreshed_at=now)
    assert cli("health", "sources").lines[0].split(None, 2)[1:] == [
        "ok", f"1 source(s) read within the last {settings.FLOWPILOT_SOURCE_STALE_HOURS:g} h"
    ]  # fmt: skip

    ToolSource.objects.update(refreshed_at=now - timedelta(days=2))
    ToolSource.objects.create(
        kind="openapi", name="cat", location="https://x.example.com/openapi.json",
        refreshed_at=now, available=False, error="HTTP 404",
    )  # fmt: skip
    result = cli("health", "sources")
    body = json.loads(cli("health", "sources", "--json").out)

    assert result.code == 1
    assert "cat: unavailable: HTTP 404" in result.lines[0]
    assert "time: stale: last read " in result.lines[0]
    names = [s["name"] for s in body["components"][0]["details"]["sources"]]
    assert names == ["time", "cat"]


def test_a_broker_at_a_closed_port_fails_broker_workers_and_beat(cli, broker_at, settings):
    settings.FLOWPILOT_HEALTH_TIMEOUT = 0.5
    url = broker_at(f"redis://:hunter2@127.0.0.1:{closed_port()}/0")

    result = cli("health", "--json")

    body = json.loads(result.out)
    assert result.code == 1
    got = {c["component"]: c for c in body["components"]}
    assert got["broker"]["status"] == "failing"
    assert "Error" in got["broker"]["reason"]
    assert got["workers"]["status"] == "failing"
    assert got["beat"] == {**got["beat"], "status": "failing"}
    assert got["beat"]["reason"] == "beat has never sent a task"
    assert "hunter2" not in result.out
    assert url not in result.out


def test_beat_is_judged_by_its_last_tick(broker_at, settings):
    broker_at("redis://127.0.0.1:6379/0")  # configured; the beat check reads the database
    settings.FLOWPILOT_SWEEP_INTERVAL = 30
    every = IntervalSchedule.objects.create(every=30, period=IntervalSchedule.SECONDS)
    now = timezone.now()
    task = PeriodicTask.objects.create(
        name="tick", task="runs.sweep_steps", interval=every, last_run_at=now
    )

    fresh = check_beat(now=now + timedelta(seconds=20))
    stale = check_beat(now=now + timedelta(seconds=91))
    settings.FLOWPILOT_HEALTH_BEAT_MAX_AGE = 300
    tolerated = check_beat(now=now + timedelta(seconds=91))
    task.enabled = False
    task.save()
    disabled = check_beat(now=now)

    assert (fresh.status, fresh.reason) == ("ok", "last tick 20 s ago")
    assert (stale.status, stale.reason) == ("failing", "last tick 91 s ago (more than 90 s)")
    assert tolerated.status == "ok"
    assert disabled.status == "failing"


def test_the_llm_endpoint_is_asked_for_its_models(planner_llm, settings, cli):
    up = health_report(components=["llm"]).checks[0]
    planner_llm.models_status = 401
    refused = health_report(components=["llm"]).checks[0]

    assert (up.status, up.details["status"]) == ("ok", 200)
    assert up.reason == f"{planner_llm.base_url}/models answered 200"
    assert planner_llm.model_listings[0].headers["authorization"] == "Bearer test-key"
    assert (refused.status, refused.reason) == (
        "failing",
        f"{planner_llm.base_url}/models answered 401",
    )
    assert planner_llm.requests == []  # no chat completion: no tokens spent
    assert "test-key" not in cli("health", "llm", "--json").out


def test_an_unreachable_or_required_llm_fails(settings):
    settings.OPENAI_API_KEY = "k"
    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{closed_port()}/v1"
    settings.FLOWPILOT_HEALTH_TIMEOUT = 0.5
    down = health_report(components=["llm"]).checks[0]
    settings.OPENAI_API_KEY = ""
    settings.FLOWPILOT_HEALTH_REQUIRE_LLM = True
    required = health_report(components=["llm"]).checks[0]

    assert down.status == "failing"
    assert down.reason.startswith("ConnectError")
    assert required.status == "failing"
    assert "FLOWPILOT_HEALTH_REQUIRE_LLM" in required.reason


def test_breakers_off_and_an_unknown_component(settings, cli):
    settings.FLOWPILOT_BREAKER_BACKEND = "off"

    assert statuses(health_report(components=["breakers"])) == {"breakers": "not_configured"}
    unknown = cli("health", "disk")
    assert unknown.code == 1
    assert "unknown component(s) disk; choose from database, broker" in unknown.err


# --- /healthz and the staff page -----------------------------------------------------------


def test_healthz_answers_status_words_only(client, broker_at, settings):
    ok = client.get("/healthz")
    open_breaker()
    settings.FLOWPILOT_HEALTH_TIMEOUT = 0.5
    broker_at(f"redis://:hunter2@127.0.0.1:{closed_port()}/0")
    failing = client.get("/healthz")

    assert ok.status_code == 200
    assert ok.json()["status"] == "ok"
    assert ok.json()["components"]["broker"] == "not_configured"
    assert failing.status_code == 503
    assert failing.json() == {
        "status": "failing",
        "components": {
            "database": "ok",
            "broker": "failing",
            "workers": "failing",
            "beat": "failing",
            "llm": "not_configured",
            "breakers": "failing",
            "sources": "not_configured",
        },
    }
    body = failing.content.decode()
    for secret_or_internal in ("hunter2", "127.0.0.1", "api.example.com", "Error", "sqlite"):
        assert secret_or_internal not in body
    assert "no-cache" in failing["Cache-Control"]
    assert client.post("/healthz").status_code == 405


def test_the_staff_page_shows_reasons_to_staff_only(client):
    UserFactory(username="staffer")
    UserFactory(username="outsider", is_staff=False)
    open_breaker()

    anonymous = client.get("/healthz/details/")
    client.login(username="outsider", password=PASSWORD)
    outsider = client.get("/healthz/details/")
    client.login(username="staffer", password=PASSWORD)
    page = client.get("/healthz/details/")
    as_json = client.get("/healthz/details/?format=json")

    assert anonymous.status_code == 302
    assert "/admin/login/" in anonymous["Location"]
    assert outsider.status_code == 302
    assert page.status_code == 503
    html = page.content.decode()
    assert 'data-component="breakers" data-status="failing"' in html
    assert "open: api.example.com:443" in html
    reasons = {c["component"]: c["reason"] for c in as_json.json()["components"]}
    assert reasons["breakers"] == "open: api.example.com:443"


def test_unapplied_migrations_fail_the_database_check(cli):
    call_command("migrate", "review", "0001", verbosity=0)
    try:
        result = cli("health", "database")
    finally:
        call_command("migrate", "review", verbosity=0)

    assert result.code == 1
    unapplied = len(review_migrations_after_0001())
    assert unapplied >= 1
    assert result.lines == [
        f"database  failing         {unapplied} migration(s) not applied; run `manage.py migrate`"
    ]


def review_migrations_after_0001() -> list[str]:
    """The review app's migrations past its first (what migrating back to 0001 unapplies)."""
    names = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    return sorted(name for app, name in names if app == "review" and not name.startswith("0001"))


# --- the queues active workflows route to ------------------------------------------------


def test_routed_queues_are_those_of_active_workflows_and_of_the_tools_they_call():
    from types import SimpleNamespace

    from health.checks import routed_queues
    from tests.celery_support import gauge_fan_out, load_gauge_tool
    from tests.factories import WorkflowFactory
    from workflows.models import WorkflowStatus

    fake = SimpleNamespace(url="http://127.0.0.1:9")
    load_gauge_tool(fake)
    load_gauge_tool(fake, "heavy_gauge", queue="heavy")
    load_gauge_tool(fake, "idle_gauge", queue="idle")  # no active workflow calls it
    assert routed_queues() == {}

    routed = gauge_fan_out("routed_active", 2, delay=0)
    routed["steps"][0]["tool"] = "heavy_gauge"
    WorkflowFactory(data={**routed, "queue": "reports"}, status=WorkflowStatus.ACTIVE)
    draft = {**gauge_fan_out("routed_draft", 1, delay=0), "queue": "drafts"}
    WorkflowFactory(data=draft, status=WorkflowStatus.DRAFT)

    assert routed_queues() == {
        "heavy": ["tool heavy_gauge"],
        "reports": ["workflow routed_active"],
    }
