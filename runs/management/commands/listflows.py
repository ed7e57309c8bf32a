"""listflows: stored workflows, one line per version, with their runs."""

from typing import Any

from django.core.management.base import CommandParser

from runs.selectors import run_latest_by_workflow
from tools.commands import FlowpilotCommand


class Command(FlowpilotCommand):
    help = "List stored workflows: name, version, status, steps, runs and last run status."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="Include archived versions.")

    def handle(self, *args: Any, **options: Any) -> None:
        rows = list(run_latest_by_workflow(include_archived=options["all"]))
        if not rows:
            self.stdout.write("no workflows stored (runflow FILE or importflow FILE stores one)")
            return
        self.stdout.write(
            f"{'NAME':<28} {'VER':>4} {'STATUS':<15} {'STEPS':>5} {'RUNS':>5} LAST RUN"
        )
        for wf in rows:
            last_text = f"#{wf.last_run_id} {wf.last_run_status}" if wf.last_run_id else "-"
            self.stdout.write(
                f"{wf.name:<28} {wf.version:>4} {wf.status:<15} {wf.step_count:>5} "
                f"{wf.run_count:>5} {last_text}"
            )
