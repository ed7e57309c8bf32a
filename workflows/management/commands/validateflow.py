"""validateflow FILE|NAME [...]: print every problem with its location; exit 1 on errors."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from tools.commands import FlowpilotCommand
from tools.registry import ToolRegistry
from workflows.cli import format_issue, is_file_target, load_tool_dirs
from workflows.files import WorkflowFileError, read_workflow_file
from workflows.models import Workflow
from workflows.validator import validate_workflow


class Command(FlowpilotCommand):
    help = "Validate workflow files or stored workflows; every problem is listed with its location."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "targets", nargs="+", help="Workflow files (.yaml/.json) or stored names."
        )
        parser.add_argument("--quiet", action="store_true", help="Print only problems.")
        parser.add_argument(
            "--tools",
            action="append",
            default=[],
            metavar="DIR",
            help="Load tool YAML files from DIR into the registry first (like loadtools).",
        )

    def handle(
        self, *args: Any, targets: list[str], quiet: bool = False, **options: Any
    ) -> None:
        load_tool_dirs(options["tools"])
        registry = ToolRegistry.from_db()
        failed = 0
        for target in targets:
            try:
                data = self._load(target)
            except (WorkflowFileError, CommandError) as exc:
                self.stdout.write(f"{target}: error   {getattr(exc, 'message', exc)}")
                failed += 1
                continue
            report = validate_workflow(data, registry=registry)
            for issue in report.issues:
                self.stdout.write(f"{target}: {format_issue(issue)}")
            errors, warnings = len(report.errors), len(report.warnings)
            if errors:
                failed += 1
            if not quiet or errors:
                verdict = "invalid" if errors else "valid"
                self.stdout.write(f"{target}: {verdict} ({errors} errors, {warnings} warnings)")
        if failed:
            raise CommandError(f"{failed} of {len(targets)} workflow(s) invalid", returncode=1)

    def _load(self, target: str) -> dict[str, Any]:
        if is_file_target(target):
            return read_workflow_file(target)
        workflow = Workflow.objects.filter(name=target).order_by("-version").first()
        if workflow is None:
            raise CommandError(f"no workflow file or stored workflow named `{target}`")
        return workflow.definition
