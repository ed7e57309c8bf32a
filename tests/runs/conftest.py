"""Fixtures shared by the run tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def operator(client, django_user_model):
    """The test client, logged in as a staff user who may view runs and operate them
    (``runs.view_run``, ``runs.operate_run``)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(
        "ops", "ops@example.com", "pw-ops-1", is_staff=True
    )
    user.user_permissions.add(
        Permission.objects.get(codename="view_run"),
        Permission.objects.get(codename="operate_run"),
    )
    client.force_login(user)
    return client
