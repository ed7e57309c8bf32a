"""``demo_data``: what it prints, and what it refuses (``review.demo`` has the data)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tests.review.test_demo import development  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures("output_dir")


@pytest.mark.django_db
def test_the_demo_data_command_refuses_a_negative_number_of_runs():
    with pytest.raises(CommandError, match="--runs must be 0 or more"):
        call_command("demo_data", runs=-1, stdout=io.StringIO())


@pytest.mark.django_db
def test_the_demo_data_command_refuses_a_database_not_for_development(settings, monkeypatch):
    settings.DEBUG = False
    monkeypatch.setattr(connection, "vendor", "postgresql")

    with pytest.raises(CommandError, match="does not look like a development one"):
        call_command("demo_data", stdout=io.StringIO())


@pytest.mark.django_db
def test_the_demo_data_command_says_what_it_made():
    out = io.StringIO()

    call_command("demo_data", runs=1, password="pw-for-the-demo", stdout=out)

    text = out.getvalue()
    assert "user demo_reviewer: created" in text
    assert "password of the users created" not in text  # the given one is not echoed
    assert "workflow sales_report v1: active" in text
    assert "validation run " in text
    assert text.count(": succeeded") == 2  # the validation run and one run
    assert text.count(": failed") == 1
    assert "schedule weekday-morning: created" in text
