"""The base of flowpilot's management commands."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection


class FlowpilotCommand(BaseCommand):
    """A database that was never migrated is a clear error, not a traceback.

    Checked only when a command hits a database error, so it costs nothing otherwise.
    """

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
