"""listruns: recent runs, newest first, one line each, with filters."""

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from runs.cli_runs import parse_since, run_list_lines
from runs.selectors import run_list
from runs.state import RunStatus, RunTrigger
from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise CommandError(f"--limit {text!r} is not a whole number of 1 or more")
    return number


class Command(FlowpilotCommand):
    help = "List runs, newest first: id, workflow, version, status, trigger, created, duration."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workflow", metavar="NAME", help="Runs of this workflow only.")
        parser.add_argument("--status", choices=[s.value for s in RunStatus])
        parser.add_argument("--trigger", choices=[t.value for t in RunTrigger])
        parser.add_argument(
            "--since",
            metavar="WHEN",
            help="Created since: a duration back (30m, 6h, 2d, 1w), a date or an ISO 8601 time.",
        )
        parser.add_argument("--limit", default="20", help="At most this many runs (default 20).")

    def handle(self, *args: Any, **options: Any) -> None:
        limit = _positive(options["limit"])
        try:
            since = parse_since(options["since"], now=timezone.now()) if options["since"] else None
        except FlowpilotError as exc:
            raise CommandError(exc.message) from exc
        runs = list(
            run_list(
                workflow=options["workflow"],
                status=options["status"],
                trigger=options["trigger"],
                since=since,
                limit=limit,
            )
        )
        if not runs:
            self.stdout.write("no runs match")
            return
        for line in run_list_lines(runs):
            self.stdout.write(line)
