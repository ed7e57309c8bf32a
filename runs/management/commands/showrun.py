"""showrun RUN_ID: what happened in a run, step by step (``--json`` for all of it)."""

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from runs.cli_runs import run_lines
from runs.models import Run
from runs.run_view import run_record, run_view
from tools.commands import FlowpilotCommand


class Command(FlowpilotCommand):
    help = (
        "Show a run: its status, then each step's status, tries, timings, error (and where "
        "it came from), a summary of its output and what its model calls cost. --json "
        "prints every stored field."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument(
            "--json",
            action="store_true",
            help="Print the run and its steps as JSON: inputs, outputs, errors and every try.",
        )

    def handle(self, *args: Any, run_id: int, **options: Any) -> None:
        run = Run.objects.filter(pk=run_id).select_related("workflow").first()
        if run is None:
            raise CommandError(f"no run {run_id} (listruns shows the recent ones)")
        view = run_view(run=run)
        if options["json"]:
            self.stdout.write(json.dumps(run_record(view), indent=2, ensure_ascii=False))
            return
        for line in run_lines(view):
            self.stdout.write(line)
