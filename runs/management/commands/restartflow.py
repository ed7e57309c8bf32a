"""restartflow RUN_ID [--from STEP[#K]] [--flow-version N]: run a finished run again from a
step (or a loop step's iteration K), as a new run, on its own version or onto another
active version of its workflow."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from runs.cli import configure_logging, execute_and_report
from runs.models import Run
from runs.restart import restart_version, run_restart_prepare
from runs.state import RunTrigger
from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError


class Command(FlowpilotCommand):
    help = (
        "Restart a finished run (succeeded, failed or cancelled) as a new run of the same "
        "version and inputs: the --from step and its descendants run again, every other "
        "step's result is reused; without --from, every step runs again. With "
        "--flow-version N the new run runs version N of the same workflow (active): "
        "steps changed since the run's version run again with their descendants."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument(
            "--from",
            dest="from_step",
            metavar="STEP[#K]",
            help="The step to run again, with every step downstream of it; STEP#K: a loop "
            "step from its iteration K (the iterations before K are reused).",
        )
        parser.add_argument(
            "--flow-version",
            type=int,
            metavar="N",
            help="Restart onto version N of the run's workflow (an active one): unchanged "
            "steps' results are reused, changed ones run again.",
        )
        parser.add_argument(
            "--yes",
            action="store_true",
            help="Confirm re-running steps whose tool is not idempotent.",
        )
        parser.add_argument(
            "--async",
            action="store_true",
            dest="enqueue",
            help="Queue the new run on the Celery workers and return at once.",
        )
        parser.add_argument(
            "--log-level", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"]
        )

    def handle(
        self,
        *args: Any,
        run_id: int,
        from_step: str | None = None,
        yes: bool = False,
        flow_version: int | None = None,
        **options: Any,
    ) -> None:
        configure_logging(options["log_level"])
        run = Run.objects.filter(pk=run_id).select_related("workflow").first()
        if run is None:
            raise CommandError(f"no run {run_id}")
        try:
            version = None if flow_version is None else restart_version(run, flow_version)
            again = run_restart_prepare(
                run=run,
                from_step=from_step,
                confirm_non_idempotent=yes,
                trigger=RunTrigger.CLI,
                version=version,
            )
        except FlowpilotError as exc:
            raise CommandError(exc.message, returncode=1) from exc
        self.stdout.write(describe_restart(again))
        execute_and_report(self.stdout, again, enqueue=options["enqueue"])


def describe_restart(run: Run) -> str:
    """One line: what the new run restarts, re-runs and reuses."""
    results = run.step_results.order_by("step_id")
    reused = [r.step_id for r in results if r.reused]
    rerun = [r.step_id for r in results if not r.reused]
    where = (
        f"from step `{run.restarted_from_step}`" if run.restarted_from_step else "from the trigger"
    )
    original = run.restarted_from
    of = f"of {run.workflow}"
    if original is not None and original.workflow_id != run.workflow_id:
        of = f"of {original.workflow} onto {run.workflow}"
    line = f"run {run.pk}: restarting run {run.restarted_from_id} {of} {where}; "
    line += f"running again: {', '.join(rerun) or 'none'}"
    return line + f"; reused (not executed): {', '.join(reused) or 'none'}"
