"""exportflow NAME: print a stored version in the file form (YAML or JSON)."""

from django.core.management.base import CommandError

from tools.commands import FlowpilotCommand
from workflows.files import dump_workflow
from workflows.models import Workflow
from workflows.services import workflow_export


class Command(FlowpilotCommand):
    help = (
        "Print a stored workflow version as YAML or JSON (import → export → import is identical)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument(
            "--flow-version", type=int, dest="wf_version", help="Default: the newest."
        )
        parser.add_argument("--format", choices=["yaml", "json"], default="yaml")

    def handle(self, name, wf_version=None, **options):
        versions = Workflow.objects.filter(name=name).order_by("-version")
        workflow = versions.filter(version=wf_version).first() if wf_version else versions.first()
        if workflow is None:
            raise CommandError(
                f"no stored workflow `{name}`" + (f" v{wf_version}" if wf_version else "")
            )
        self.stdout.write(
            dump_workflow(workflow_export(workflow=workflow), fmt=options["format"]), ending=""
        )
