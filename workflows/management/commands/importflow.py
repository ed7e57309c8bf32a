"""importflow FILE [...]: store workflow files as versions."""

from django.core.management.base import CommandError

from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError
from tools.registry import ToolRegistry
from workflows.cli import format_issue
from workflows.files import read_workflow_file
from workflows.services import workflow_activate_trusted, workflow_import
from workflows.validator import validate_workflow


class Command(FlowpilotCommand):
    help = (
        "Store workflow files as new versions (unchanged files keep their version). "
        "--activate makes a valid version active without review (operator shortcut)."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+")
        parser.add_argument(
            "--activate",
            action="store_true",
            help="Make the imported version active (it must validate without errors).",
        )

    def handle(self, *args, files, activate=False, **options):
        registry = ToolRegistry.from_db()
        failures = 0
        for path in files:
            try:
                data = read_workflow_file(path)
                report = validate_workflow(data, registry=registry)
                if activate and report.errors:
                    for issue in report.errors:
                        self.stdout.write(f"{path}: {format_issue(issue)}")
                    raise CommandError(f"{path}: not activated: it has validation errors")
                workflow, created = workflow_import(data=data)
                if activate:
                    workflow_activate_trusted(workflow=workflow)
            except (FlowpilotError, CommandError) as exc:
                self.stdout.write(f"{path}: {getattr(exc, 'message', exc)}")
                failures += 1
                continue
            verb = "stored" if created else "unchanged"
            self.stdout.write(f"{verb} {workflow.name} v{workflow.version} ({workflow.status})")
        if failures:
            raise CommandError(f"{failures} file(s) not imported", returncode=1)
