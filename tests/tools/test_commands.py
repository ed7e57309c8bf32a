"""tools.commands: a command that hits a database error on a database never migrated says
to run ``migrate``; on a migrated one the error itself is raised."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.db import DatabaseError

import tools.commands
from tools.commands import FlowpilotCommand


class Broken(FlowpilotCommand):
    def handle(self, *args, **options):
        raise DatabaseError("no such table: tools_tool")


class Fine(FlowpilotCommand):
    def handle(self, *args, **options):
        return "done"


def run(command: FlowpilotCommand):
    return command.execute(
        no_color=True, force_color=False, skip_checks=True, stdout=None, stderr=None
    )


@pytest.mark.django_db
def test_a_database_error_on_a_migrated_database_is_raised_as_it_is():
    with pytest.raises(DatabaseError, match="no such table"):
        run(Broken())
    assert run(Fine()) == "done"


def test_a_database_never_migrated_is_told_to_migrate(monkeypatch):
    monkeypatch.setattr(tools.commands, "_migrated", lambda: False)
    with pytest.raises(CommandError, match=r"run `python manage.py migrate` first"):
        run(Broken())


@pytest.mark.django_db
def test_the_migrated_check_reads_the_tables():
    assert tools.commands._migrated()
