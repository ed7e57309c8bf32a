"""resumeflow RUN_ID: continue a failed or cancelled run from its checkpoint."""

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from runs.cli import add_log_level_argument, configure_logging, execute_and_report
from runs.models import Run
from runs.services import run_prepare_resume
from runs.state import StepStatus
from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError


class Command(FlowpilotCommand):
    help = "Resume a failed or cancelled run; steps that succeeded are never run again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument(
            "--force",
            action="store_true",
            help="Also resume a run left 'running' by a process that died.",
        )
        parser.add_argument(
            "--async",
            action="store_true",
            dest="enqueue",
            help="Queue the resumed run on the Celery workers and return at once.",
        )
        add_log_level_argument(parser)

    def handle(self, *args: Any, run_id: int, force: bool = False, **options: Any) -> None:
        configure_logging(options["log_level"])
        run = Run.objects.filter(pk=run_id).select_related("workflow").first()
        if run is None:
            raise CommandError(f"no run {run_id}")
        try:
            run = run_prepare_resume(run=run, force=force)
        except FlowpilotError as exc:
            raise CommandError(exc.message, returncode=1) from exc
        kept = run.step_results.filter(status=StepStatus.SUCCEEDED).count()
        self.stdout.write(f"run {run.pk}: resuming {run.workflow}; {kept} succeeded step(s) kept")
        execute_and_report(self.stdout, run, enqueue=options["enqueue"], resumed_at=timezone.now())
