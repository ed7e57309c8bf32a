"""importflow FILE [...]: store workflow files as versions; --activate --as SUPERUSER.

It lives in ``review`` because activating records an ``Approval`` (review's model).
"""

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import CommandError, CommandParser

from review.imports import import_superuser, workflow_activate_imported
from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError
from tools.registry import ToolRegistry
from workflows.cli import format_issue
from workflows.files import read_workflow_file
from workflows.models import Workflow
from workflows.services import workflow_import
from workflows.validator import validate_workflow


class Command(FlowpilotCommand):
    help = (
        "Store workflow files as new versions (unchanged files keep their version). "
        "--activate --as SUPERUSER makes a valid version active without review or a "
        "validation run: recorded as an approval of kind import_superuser, with a warning."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+")
        parser.add_argument(
            "--activate",
            action="store_true",
            help="Make the imported version active without review (it must validate "
            "without errors); needs --as naming an active superuser.",
        )
        parser.add_argument(
            "--as",
            dest="as_user",
            metavar="USERNAME",
            help="The superuser responsible for --activate (recorded as the approver).",
        )

    def handle(
        self,
        *args: Any,
        files: list[str],
        activate: bool = False,
        as_user: str | None = None,
        **options: Any,
    ) -> None:
        superuser: User | None = None
        if activate:
            try:
                superuser = import_superuser(username=as_user)
            except FlowpilotError as exc:
                raise CommandError(exc.message) from exc
        registry = ToolRegistry.from_db()
        failures = 0
        for path in files:
            try:
                workflow, created, activated = self._import(path, registry, superuser)
            except (FlowpilotError, CommandError) as exc:
                self.stdout.write(f"{path}: {getattr(exc, 'message', exc)}")
                failures += 1
                continue
            verb = "stored" if created else "unchanged"
            state = str(workflow.status)
            if activated:
                verb = "stored and activated" if created else "activated"
                state = "active: activated by import, no validation run"
            self.stdout.write(f"{verb} {workflow.name} v{workflow.version} ({state})")
        if failures:
            raise CommandError(f"{failures} file(s) not imported", returncode=1)

    def _import(
        self, path: str, registry: ToolRegistry, superuser: User | None
    ) -> tuple[Workflow, bool, bool]:
        """The version, whether it was stored now, and whether it was activated now."""
        data = read_workflow_file(path)
        report = validate_workflow(data, registry=registry)
        if superuser is not None and report.errors:
            for issue in report.errors:
                self.stdout.write(f"{path}: {format_issue(issue)}")
            raise CommandError(f"{path}: not activated: it has validation errors")
        workflow, created = workflow_import(data=data)
        approval = None
        if superuser is not None:
            approval = workflow_activate_imported(version=workflow, superuser=superuser)
            if approval is not None:
                self.stderr.write(
                    f"WARNING: {workflow} activated by superuser {superuser.get_username()} "
                    "WITHOUT review or a validation run (recorded as approval "
                    f"{approval.pk}, kind import_superuser)"
                )
        return workflow, created, approval is not None
