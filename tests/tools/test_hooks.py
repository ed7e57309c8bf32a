"""Hooks (``tools.hooks.hooks_announce``): called after commit, never after a rollback,
and a failing hook never fails the write that announced it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from tools.hooks import hooks_announce

pytestmark = pytest.mark.django_db(transaction=True)

SETTING = "FLOWPILOT_TEST_HOOKS"


@dataclass
class Calls:
    """What the hooks below were called with, per test (``calls`` fixture)."""

    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


CURRENT = Calls()  # reset by the fixture: import_string finds hooks by dotted path only


def first_hook(**kwargs: Any) -> None:
    CURRENT.seen.append(("first", kwargs))


def second_hook(**kwargs: Any) -> None:
    CURRENT.seen.append(("second", kwargs))


def failing_hook(**kwargs: Any) -> None:
    CURRENT.seen.append(("failing", kwargs))
    raise RuntimeError("the mail server is down")


@pytest.fixture
def calls(settings) -> Iterator[Calls]:
    CURRENT.seen.clear()
    settings.FLOWPILOT_TEST_HOOKS = [f"{__name__}.first_hook", f"{__name__}.second_hook"]
    yield CURRENT
    CURRENT.seen.clear()


def test_each_hook_is_called_with_the_kwargs_once_the_transaction_commits(calls):
    with transaction.atomic():
        hooks_announce(setting=SETTING, run_id=7, status="failed")
        assert calls.seen == []  # nothing before the commit

    assert calls.seen == [
        ("first", {"run_id": 7, "status": "failed"}),
        ("second", {"run_id": 7, "status": "failed"}),
    ]


def announce_and_roll_back() -> None:
    with transaction.atomic():
        hooks_announce(setting=SETTING, run_id=7)
        raise RuntimeError("rolled back")


def test_no_hook_is_called_when_the_transaction_rolls_back(calls):
    with pytest.raises(RuntimeError, match="rolled back"):
        announce_and_roll_back()

    assert calls.seen == []


def test_a_failing_hook_is_logged_and_the_commit_and_the_other_hooks_go_on(calls, settings, caplog):
    settings.FLOWPILOT_TEST_HOOKS = [f"{__name__}.failing_hook", f"{__name__}.second_hook"]

    with caplog.at_level(logging.ERROR, logger="django.db.backends.base"), transaction.atomic():
        Group.objects.create(name="announced")  # the write the hooks announce
        hooks_announce(setting=SETTING, run_id=8)

    assert Group.objects.filter(name="announced").exists()  # committed, and stays so
    assert calls.seen == [("failing", {"run_id": 8}), ("second", {"run_id": 8})]
    assert "Error calling failing_hook in on_commit()" in caplog.text  # named, not a partial
    assert "the mail server is down" in caplog.text


def test_an_unset_setting_announces_to_no_one(calls, settings):
    del settings.FLOWPILOT_TEST_HOOKS

    with transaction.atomic():
        hooks_announce(setting=SETTING, run_id=9)

    assert calls.seen == []
