"""The base of flowpilot's management commands."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection


class FlowpilotCommand(BaseCommand):
    """A database that was never migrated is a clear error, not a traceback.

    Checked only when a command hits a database error, so it costs nothing otherwise.

    Django's system checks are ``manage.py check``'s (and ``runserver``'s, ``migrate``'s)
    work, not every command's: they load the URL conf, so the admin and the API with
    their services and the OpenAPI schema generator, which a command that lists runs
    never needs.
    """

    requires_system_checks: list[str] = []

    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            return super().execute(*args, **options)
        except DatabaseError as exc:
            if not _migrated():
                raise CommandError(
                    "the database has no flowpilot tables yet: run `python manage.py migrate` first"
                ) from exc
            raise


def _migrated() -> bool:
    try:
        return "tools_tool" in connection.introspection.table_names()
    except DatabaseError:
        return False
