"""purgeruns: delete finished runs older than their workflow's retention period."""

from typing import Any

from django.conf import settings
from django.core.management.base import CommandParser
from django.utils import timezone

from runs.services import run_purge
from tools.commands import FlowpilotCommand


class Command(FlowpilotCommand):
    help = (
        "Delete finished runs past retention: the workflow's `retention_days`, else "
        "FLOWPILOT_RUN_RETENTION_DAYS (0 keeps runs forever)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, help="Default retention for this call.")
        parser.add_argument("--dry-run", action="store_true", help="Count, delete nothing.")

    def handle(
        self, *args: Any, days: int | None = None, dry_run: bool = False, **options: Any
    ) -> None:
        default = settings.FLOWPILOT_RUN_RETENTION_DAYS if days is None else days
        removed = run_purge(now=timezone.now(), default_days=default, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        for name, count in removed.items():
            self.stdout.write(f"{verb} {count} run(s) of {name}")
        self.stdout.write(f"{verb} {sum(removed.values())} run(s) in all")
