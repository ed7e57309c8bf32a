"""Operator controls: the ``breakers`` command and the admin page, on both stores."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils import timezone

from tests.celery_support import redis_url
from tests.tools.breaker.conftest import redis_client
from tools.breaker.core import BreakerPolicy
from tools.breaker.services import breakers_reset
from tools.breaker.setup import breaker_store_from_settings

pytestmark = pytest.mark.django_db

POLICY = BreakerPolicy(failures=2, cooldown=60)
HOSTS = ("api.one.test:443", "api.two.test:8080", "api.three.test:443")


@pytest.fixture(params=["database", "redis"])
def store(request, settings):
    """The store the command and the admin build from settings, with three hosts:
    two open, one counting a failure."""
    settings.FLOWPILOT_BREAKER_BACKEND = request.param
    if request.param == "redis":
        redis_client()  # skip (or fail under CI) when Redis is down
        settings.FLOWPILOT_BREAKER_REDIS_URL = redis_url()
    store = breaker_store_from_settings()
    store.reset(list(HOSTS))
    now = timezone.now()
    for host, failures in zip(HOSTS, (2, 2, 1), strict=True):
        for _ in range(failures):
            store.record_failure(host, now=now, policy=POLICY)
    yield store
    store.reset(list(HOSTS))
    store.close()


def mine(states):
    return {s.host: s for s in states if s.host in HOSTS}


def test_list_shows_state_failures_and_retry_time(cli, store):
    result = cli("breakers", "list")
    assert result.code == 0
    assert result.lines[0].split() == ["HOST", "STATE", "FAILURES", "OPENED", "AT", "RETRY", "AT"]
    row = next(line.split() for line in result.lines if line.startswith("api.one.test:443"))
    state = mine(store.states())["api.one.test:443"]
    assert row == [
        "api.one.test:443",
        "open",
        "2",
        state.opened_at.isoformat(),
        (state.opened_at + timedelta(seconds=60)).isoformat(),
    ]
    listed = {e["host"]: e for e in json.loads(cli("breakers", "list", "--json").out)}
    assert listed["api.three.test:443"] == {
        "host": "api.three.test:443",
        "state": "closed",
        "failures": 1,
        "opened_at": None,
        "retry_at": None,
    }


def test_reset_by_host_and_all(cli, store):
    result = cli("breakers", "reset", "api.one.test:443", "nowhere.test:1")
    assert result.code == 0
    assert result.lines == ["Reset 1 breaker.", "Hosts without a breaker to reset were ignored."]
    assert sorted(mine(store.states())) == ["api.three.test:443", "api.two.test:8080"]
    assert cli("breakers", "reset", "--all").lines[0].startswith("Reset ")
    assert mine(store.states()) == {}


def test_reset_needs_hosts_or_all(cli, store):
    for args in ((), ("--all", "api.one.test:443")):
        result = cli("breakers", "reset", *args)
        assert result.code == 1
        assert "name the hosts to reset" in result.err


def test_an_off_backend_is_a_clear_error(cli, settings):
    settings.FLOWPILOT_BREAKER_BACKEND = "off"
    assert "circuit breakers are off" in cli("breakers", "list").err


def test_the_reset_service_checks_the_permission(store):
    viewer = get_user_model().objects.create_user("viewer", password="pw-12345678")
    with pytest.raises(PermissionDenied):
        breakers_reset(store=store, hosts=["api.one.test:443"], user=viewer)
    assert "api.one.test:443" in mine(store.states())


# --- the admin ---------------------------------------------------------------------

URL = reverse("admin:tools_breaker_changelist")


def staff(client, *codenames: str):
    user = get_user_model().objects.create_user("ops", password="pw-12345678", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def test_admin_lists_the_breakers(client, store):
    staff(client, "view_breaker")
    response = client.get(URL)
    assert response.status_code == 200
    rows = {row.host: row for row in response.context["rows"] if row.host in HOSTS}
    assert (rows["api.two.test:8080"].state, rows["api.two.test:8080"].failures) == ("open", 2)
    assert b'data-host="api.one.test:443"' in response.content
    assert b"Reset selected breakers" not in response.content  # no reset permission


def test_a_view_only_user_cannot_reset(client, store):
    staff(client, "view_breaker")
    response = client.post(URL, {"action": "reset_all"})
    assert response.status_code == 403
    assert len(mine(store.states())) == 3


def test_a_user_without_view_permission_sees_nothing(client, store):
    staff(client)
    assert client.get(URL).status_code == 403


def test_admin_reset_selected_and_all(client, store):
    staff(client, "view_breaker", "reset_breaker")
    page = client.get(URL)
    assert b"Reset selected breakers" in page.content
    hosts = ["api.one.test:443", "api.two.test:8080"]
    response = client.post(URL, {"action": "reset_selected", "host": hosts}, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["2 breakers were reset."]
    assert sorted(mine(store.states())) == ["api.three.test:443"]
    response = client.post(URL, {"action": "reset_all"}, follow=True)
    assert str(next(iter(response.context["messages"]))).endswith("reset.")
    assert mine(store.states()) == {}


def test_admin_has_no_add_change_or_delete(client, store):
    staff(client, "view_breaker", "reset_breaker")
    assert client.get(reverse("admin:tools_breaker_add")).status_code == 403


def test_admin_with_breakers_off(client, settings):
    settings.FLOWPILOT_BREAKER_BACKEND = "off"
    staff(client, "view_breaker")
    response = client.get(URL, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["Circuit breakers are off."]
