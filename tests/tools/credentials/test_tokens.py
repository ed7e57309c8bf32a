"""The refresh lock of a stored credential on both backends: Redis (a real server) and
the database row (PostgreSQL; SQLite serialises writers itself). A holder keeps others
waiting, a waiter past its wait gets an error naming the credential, and a waiter that
gets the lock reads what the holder stored."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from tests.celery_support import redis_url
from tests.tools.breaker.conftest import redis_client
from tools.credentials.crypto import unseal
from tools.credentials.store import save_credential
from tools.credentials.tokens import (
    LOCK_PREFIX,
    RefreshWaitTimeout,
    read_token,
    refresh_lock,
)
from tools.models import Credential

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def row(keys):
    return save_credential(
        Credential(
            name="crm",
            type="oauth2_client_credentials",
            client_id="app-7",
            token_url="https://auth.example/token",
        ),
        {"client_secret": "cs-9a8b7c"},
    )


def test_store_seals_the_token_with_its_expiry_and_keeps_the_other_values(row):
    with refresh_lock("crm", wait=1) as held:
        assert held.current().access_token == ""
        held.store("at-1-abc", 3600, None)
    current = read_token("crm")
    assert current.access_token == "at-1-abc"
    assert current.expires_at is not None
    stored = Credential.objects.get(name="crm")
    assert "at-1-abc" not in stored.secrets
    assert unseal(stored.secrets, "crm") == {
        "client_secret": "cs-9a8b7c",
        "access_token": "at-1-abc",
    }
    assert stored.secret_fields == ["access_token", "client_secret"]
    assert "at-1-abc" not in repr(current)


def test_a_held_redis_lock_keeps_a_refresh_waiting_then_times_out_naming_it(row, settings):
    client = redis_client()
    settings.FLOWPILOT_TOKEN_LOCK_REDIS_URL = redis_url()
    other = client.lock(LOCK_PREFIX + "crm", timeout=30)  # another worker refreshing
    assert other.acquire(blocking=False)
    try:
        started = time.monotonic()
        with pytest.raises(RefreshWaitTimeout) as caught, refresh_lock("crm", wait=0.5):
            pass
        assert 0.4 < time.monotonic() - started < 5
        assert caught.value.message.startswith("credential 'crm': waited 0.5 s for another")
    finally:
        other.release()
    with refresh_lock("crm", wait=0.5) as held:  # released: taken at once
        assert client.get(LOCK_PREFIX + "crm") is not None
        held.store("at-2", 60, None)
    assert client.get(LOCK_PREFIX + "crm") is None  # released after the write
    assert read_token("crm").access_token == "at-2"


def hold(name: str, seconds: float, token: str, holding: threading.Event) -> None:
    try:
        with refresh_lock(name, wait=5) as held:
            holding.set()
            time.sleep(seconds)
            held.store(token, 3600, None)
    finally:
        connection.close()


@pytest.mark.parametrize("backend", ["redis", "database"])
def test_a_waiter_gets_the_lock_after_the_holder_and_reads_its_token(row, settings, backend):
    if connection.vendor != "postgresql":
        pytest.skip("two connections locking one row need PostgreSQL")
    if backend == "redis":
        redis_client()
    settings.FLOWPILOT_TOKEN_LOCK_REDIS_URL = redis_url() if backend == "redis" else ""
    holding = threading.Event()
    holder = threading.Thread(target=hold, args=("crm", 1.0, "at-holder", holding))
    holder.start()
    assert holding.wait(10)
    started = time.monotonic()
    with pytest.raises(RefreshWaitTimeout) as caught, refresh_lock("crm", wait=0.2):
        pass
    assert caught.value.message.startswith("credential 'crm': waited 0.2 s for another")
    assert time.monotonic() - started < 5
    with refresh_lock("crm", wait=10) as held:  # waits for the holder's commit
        assert held.current().access_token == "at-holder"
    holder.join(10)
