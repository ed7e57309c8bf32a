"""``reset``: empties a development database, asks first, refuses one that is not."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from review.demo import demo_populate
from runs.models import Run
from schedules.models import Schedule
from tests.review.test_demo import development  # noqa: F401 - fixture
from workflows.models import Workflow

pytestmark = pytest.mark.usefixtures("output_dir")

User = get_user_model()


@pytest.mark.django_db
def test_reset_refuses_a_database_not_for_development(settings, monkeypatch):
    settings.DEBUG = False
    monkeypatch.setattr(connection, "vendor", "postgresql")

    with pytest.raises(CommandError, match="does not look like a development one"):
        call_command("reset", interactive=False)


@pytest.mark.django_db(transaction=True)
def test_reset_empties_the_database_and_can_add_the_demo_again():
    demo_populate(runs=1)
    out = io.StringIO()

    call_command("reset", interactive=False, stdout=out)

    assert "emptied" in out.getvalue()
    assert (User.objects.count(), Workflow.objects.count(), Run.objects.count()) == (0, 0, 0)
    assert Schedule.objects.count() == 0

    call_command("reset", interactive=False, demo=True, runs=0, stdout=out)
    assert Workflow.objects.get(name="sales_report").status == "active"
    assert Run.objects.filter(trigger="manual").count() == 1  # only the failing one


@pytest.mark.django_db
def test_reset_asks_first_and_deletes_nothing_unless_told_yes(monkeypatch):
    demo_populate(runs=0)
    monkeypatch.setattr("builtins.input", lambda prompt: "y")

    with pytest.raises(CommandError, match="nothing was deleted"):
        call_command("reset", stdout=io.StringIO())

    assert Workflow.objects.filter(name="sales_report").exists()
