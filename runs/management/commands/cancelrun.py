"""cancelrun RUN_ID …: cancel queued, pending or running runs; queued steps never start."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from runs.models import Run
from runs.services import run_cancel
from tools.commands import FlowpilotCommand


class Command(FlowpilotCommand):
    help = (
        "Cancel queued, pending or running runs. Steps in flight finish their current attempt; "
        "queued and pending steps never start. Exit status 1 if any run could not be cancelled."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_ids", nargs="+", type=int, metavar="RUN_ID")

    def handle(self, *args: Any, run_ids: list[int], **options: Any) -> None:
        refused = []
        for run_id in run_ids:
            run = Run.objects.filter(pk=run_id).first()
            if run is None:
                refused.append(f"no run {run_id}")
            elif run_cancel(run=run):
                self.stdout.write(
                    f"run {run.pk} cancelled: queued steps will not start; "
                    "steps in flight finish their current attempt"
                )
            else:
                run.refresh_from_db()
                refused.append(
                    f"run {run.pk} is {run.status}; "
                    "only queued, pending or running runs can be cancelled"
                )
        if refused:
            raise CommandError("; ".join(refused), returncode=1)
