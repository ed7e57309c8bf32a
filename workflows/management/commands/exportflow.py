"""exportflow NAME: print a stored version in the file form (YAML or JSON), or a diff.

``exportflow NAME --diff A B`` prints what version B changes relative to version A
(steps added, removed and changed, edges, tools, workflow fields): text by default,
``--format json`` for the same diff as JSON.
"""

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError
from workflows.diff import diff_lines
from workflows.files import dump_workflow
from workflows.models import Workflow
from workflows.selectors import workflow_version_diff
from workflows.services import workflow_export


class Command(FlowpilotCommand):
    help = (
        "Print a stored workflow version as YAML or JSON (import → export → import is "
        "identical), or with --diff A B what version B changes relative to version A."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--flow-version", type=int, dest="wf_version", help="Default: the newest."
        )
        parser.add_argument(
            "--diff",
            nargs=2,
            type=int,
            metavar=("A", "B"),
            help="Print what version B changes relative to version A (numbers).",
        )
        parser.add_argument(
            "--format",
            choices=["yaml", "json", "text"],
            default=None,
            help="yaml (default) or json for an export; text (default) or json for a diff.",
        )

    def handle(
        self,
        *args: Any,
        name: str,
        wf_version: int | None = None,
        diff: list[int] | None = None,
        **options: Any,
    ) -> None:
        fmt = options["format"]
        if diff:
            self._diff(name, *diff, fmt=fmt or "text")
            return
        if fmt == "text":
            raise CommandError("--format text is for --diff; an export is yaml or json")
        workflow = _version(name, wf_version)
        self.stdout.write(
            dump_workflow(workflow_export(workflow=workflow), fmt=fmt or "yaml"), ending=""
        )

    def _diff(self, name: str, old_number: int, new_number: int, *, fmt: str) -> None:
        if fmt == "yaml":
            raise CommandError("a diff is printed as text or json, not yaml")
        old, new = _version(name, old_number), _version(name, new_number)
        try:
            diff = workflow_version_diff(old=old, new=new)
        except FlowpilotError as exc:
            raise CommandError(exc.message) from exc
        if fmt == "json":
            body = {"workflow": name, "old": old.version, "new": new.version, **diff.as_dict()}
            self.stdout.write(json.dumps(body, indent=2, ensure_ascii=False))
            return
        labels = {"old_label": f"{name} v{old.version}", "new_label": f"v{new.version}"}
        for line in diff_lines(diff, **labels):
            self.stdout.write(line)


def _version(name: str, number: int | None) -> Workflow:
    versions = Workflow.objects.filter(name=name).order_by("-version")
    workflow = versions.first() if number is None else versions.filter(version=number).first()
    if workflow is None:
        given = "" if number is None else f" v{number}"
        raise CommandError(f"no stored workflow `{name}`{given}")
    return workflow
