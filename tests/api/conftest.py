"""API test fixtures: users with chosen permissions, and clients holding their tokens."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import UserFactory


def grant(user, *perms: str):
    """Add ``app_label.codename`` permissions to ``user``; return it read afresh."""
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return type(user).objects.get(pk=user.pk)


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def make_client(db):
    """``make_client("runs.view_run", staff=False)`` → a token client of a new user."""
    counter = iter(range(1000))

    def make(*perms: str, staff: bool = False, superuser: bool = False) -> APIClient:
        user = UserFactory(
            username=f"api{next(counter)}", is_staff=staff, superuser=superuser, permissions=None
        )
        user.user_permissions.clear()
        client = client_for(grant(user, *perms))
        client.user = user
        return client

    return make


@pytest.fixture
def admin_client_api(make_client):
    """A superuser's token client: every permission."""
    return make_client(superuser=True, staff=True)


@pytest.fixture
def anon():
    return APIClient()


def assert_error(response, status: int, code: str):
    """The one error shape, with the status and stable code expected."""
    body = response.json()
    assert response.status_code == status, body
    assert set(body) == {"code", "message", "details"}, body
    assert body["code"] == code, body
    return body


@pytest.fixture(autouse=True)
def fresh_throttles():
    """Throttle history lives in the cache: each test starts with none."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()
