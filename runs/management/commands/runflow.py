"""runflow FILE|NAME: run a workflow and print one progress line per step."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from runs.cli import add_log_level_argument, configure_logging, execute_and_report
from runs.dryrun import plan_lines
from runs.models import RunTrigger
from runs.services import run_create
from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError
from tools.registry import ToolRegistry
from workflows.cli import (
    format_issue,
    is_file_target,
    load_tool_dirs,
    parse_input_pairs,
    read_inputs_file,
)
from workflows.files import read_workflow_file
from workflows.inputs import resolve_inputs
from workflows.models import Workflow
from workflows.selectors import workflow_get_runnable
from workflows.services import workflow_import, workflow_parse, workflow_spec
from workflows.validator import WorkflowInvalid, validate_workflow


class Command(FlowpilotCommand):
    help = (
        "Run a workflow file (stored as a draft version of its name) or the active version "
        "of a stored workflow. Exit status 1 when the run fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "target", help="A workflow file (.yaml/.json) or a stored workflow name."
        )
        parser.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="A run input; repeat for more. Typed by the declared input.",
        )
        parser.add_argument("--inputs-file", help="YAML or JSON file of inputs (--input wins).")
        parser.add_argument(
            "--flow-version", type=int, help="Run this version of a stored workflow."
        )
        parser.add_argument(
            "--tools",
            action="append",
            default=[],
            metavar="DIR",
            help="Load tool YAML files from DIR first (like loadtools).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Validate and print the plan; make no call, store nothing.",
        )
        parser.add_argument(
            "--async",
            action="store_true",
            dest="enqueue",
            help="Queue the run on the Celery workers and return at once (without a broker "
            "configured it runs here, as without --async).",
        )
        add_log_level_argument(parser)

    def handle(self, *args: Any, target: str, **options: Any) -> None:
        configure_logging(options["log_level"])
        load_tool_dirs(options["tools"])
        if options["dry_run"]:
            self._dry_run(target, options)
            return
        try:
            registry = ToolRegistry.from_db()
            workflow = self._workflow(target, options, registry)
            spec = workflow_spec(workflow)
            inputs = read_inputs_file(options["inputs_file"]) if options["inputs_file"] else {}
            inputs.update(parse_input_pairs(options["input"], dict(spec.inputs)))
            run = run_create(
                workflow=workflow, trigger=RunTrigger.CLI, inputs=inputs, registry=registry
            )
        except WorkflowInvalid as exc:
            for issue in exc.report.errors:
                self.stdout.write(format_issue(issue))
            raise CommandError(
                f"{target}: {len(exc.report.errors)} validation error(s); not run", returncode=1
            ) from exc
        except FlowpilotError as exc:
            raise CommandError(exc.message, returncode=1) from exc
        self.stdout.write(
            f"run {run.pk}: {workflow.name} v{workflow.version}, {len(spec.steps)} steps"
        )
        execute_and_report(self.stdout, run, enqueue=options["enqueue"])

    def _workflow(
        self, target: str, options: dict[str, Any], registry: ToolRegistry
    ) -> Workflow:
        if is_file_target(target):
            data = read_workflow_file(target)
            # Validate before storing: a file with errors never becomes a version.
            validate_workflow(data, registry=registry).raise_for_errors()
            workflow, _ = workflow_import(data=data)
            return workflow
        return workflow_get_runnable(name=target, version=options["flow_version"])

    def _dry_run(self, target: str, options: dict[str, Any]) -> None:
        try:
            if is_file_target(target):
                spec = workflow_parse(read_workflow_file(target))
            else:
                spec = workflow_spec(
                    workflow_get_runnable(name=target, version=options["flow_version"])
                )
            report = validate_workflow(spec, registry=ToolRegistry.from_db())
            for issue in report.issues:
                self.stdout.write(format_issue(issue))
            report.raise_for_errors()
            given = read_inputs_file(options["inputs_file"]) if options["inputs_file"] else {}
            given.update(parse_input_pairs(options["input"], dict(spec.inputs)))
            inputs = resolve_inputs(spec.inputs, given)
        except WorkflowInvalid as exc:
            raise CommandError(
                f"{target}: {len(exc.report.errors)} validation error(s)", returncode=1
            ) from exc
        except FlowpilotError as exc:
            raise CommandError(exc.message, returncode=1) from exc
        assert report.graph is not None  # a valid workflow's steps form a DAG
        for line in plan_lines(spec, report.graph, inputs):
            self.stdout.write(line)
