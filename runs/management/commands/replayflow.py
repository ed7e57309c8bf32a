"""replayflow VERSION: re-run a version offline against its validation run's recordings."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from runs.cli import configure_logging
from runs.models import Run
from runs.replay.services import version_replay
from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError
from workflows.models import Workflow


class Command(FlowpilotCommand):
    help = (
        "Replay a workflow version offline: every HTTP, MCP and LLM call is answered from its "
        "validation run's recordings (nothing is sent, no file is written), then each step is "
        "compared with the validation run. Exit code 1 when a step differs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version", help="A workflow name (its newest version) or a version id.")
        parser.add_argument(
            "--flow-version", type=int, dest="wf_version", help="The version number of NAME."
        )
        parser.add_argument(
            "--validation-run",
            type=int,
            help="Replay against this validation run (default: the version's newest green one).",
        )
        parser.add_argument(
            "--log-level", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"]
        )

    def handle(
        self,
        *args: Any,
        version: str,
        wf_version: int | None = None,
        validation_run: int | None = None,
        **options: Any,
    ) -> None:
        configure_logging(options["log_level"])
        workflow = find_version(version, wf_version)
        source = None
        if validation_run is not None:
            source = Run.objects.filter(pk=validation_run).first()
            if source is None:
                raise CommandError(f"no run {validation_run}")
        try:
            report = version_replay(version=workflow, validation_run=source)
        except FlowpilotError as exc:
            raise CommandError(exc.message, returncode=1) from exc
        for step in report.steps:
            self.stdout.write(f"  {step.verdict:<8} {step.step_id}")
            for line in step.differences:
                self.stdout.write(f"             {line}")
        self.stdout.write(report.summary)
        if not report.matched:
            raise CommandError(report.summary, returncode=1)


def find_version(ref: str, number: int | None) -> Workflow:
    """A version by id (digits), or by name and ``--flow-version`` (default: the newest)."""
    if ref.isdigit() and number is None:
        found = Workflow.objects.filter(pk=int(ref)).first()
        if found is None:
            raise CommandError(f"no workflow version with id {ref}")
        return found
    versions = Workflow.objects.filter(name=ref).order_by("-version")
    found = versions.filter(version=number).first() if number else versions.first()
    if found is None:
        raise CommandError(f"no stored workflow `{ref}`" + (f" v{number}" if number else ""))
    return found
