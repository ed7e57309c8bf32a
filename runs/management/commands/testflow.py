"""testflow VERSION: run a version's test scenarios (``tests:``) offline, against the
recorded calls of a validation run (``runs.scenarios``)."""

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from runs.management.commands.replayflow import find_version
from runs.models import Run, RunTrigger
from runs.scenarios import scenarios_run
from tools.commands import FlowpilotCommand
from tools.errors import FlowpilotError
from workflows.services import workflow_spec


class Command(FlowpilotCommand):
    help = (
        "Run a workflow version's test scenarios (its `tests:`) offline: each is a replay "
        "with the scenario's inputs, answered from a validation run's recorded calls (the "
        "version's own, else its predecessor's), then its expectations on the outputs are "
        "checked. Exit code 1 when one fails, errs or could not run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version", help="A workflow name (its newest version) or a version id.")
        parser.add_argument(
            "--flow-version", type=int, dest="wf_version", help="The version number of NAME."
        )
        parser.add_argument(
            "--validation-run", type=int,
            help="Answer from this validation run of the workflow (default: the newest green one).",
        )  # fmt: skip
        parser.add_argument(
            "--scenario", action="append", default=[], help="Only this scenario (repeatable)."
        )
        parser.add_argument("--json", action="store_true", help="Print JSON.")

    def handle(
        self, *args: Any, version: str, wf_version: int | None = None, **options: Any
    ) -> None:
        workflow = find_version(version, wf_version)
        declared = [s.name for s in workflow_spec(workflow).tests]
        if not declared:
            raise CommandError(f"`{workflow}` declares no test scenarios (`tests:`)")
        unknown = sorted(set(options["scenario"]) - set(declared))
        if unknown:
            raise CommandError(
                f"`{workflow}` has no scenario {', '.join(unknown)}; it has {', '.join(declared)}"
            )
        source = self._source(workflow.name, options["validation_run"])
        try:
            results = scenarios_run(
                version=workflow, validation_run=source, names=options["scenario"] or None
            )
        except FlowpilotError as exc:
            raise CommandError(exc.message, returncode=1) from exc
        if options["json"]:
            rows = [
                {"scenario": r.scenario, "status": r.status, "failures": r.failures,
                 "run": r.run_id, "validation_run": r.validation_run_id}
                for r in results
            ]  # fmt: skip
            self.stdout.write(json.dumps(rows, indent=2))
        else:
            for result in results:
                self.stdout.write(f"  {result.status:<8} {result.scenario}")
                for failure in result.failures:
                    self.stdout.write(f"             {failure}")
        passed = sum(r.status == "passed" for r in results)
        summary = f"{workflow}: {passed} of {len(results)} test scenario(s) passed"
        if not options["json"]:
            self.stdout.write(summary)
        if passed != len(results):
            raise CommandError(summary, returncode=1)

    def _source(self, name: str, run_id: int | None) -> Run | None:
        if run_id is None:
            return None
        source = Run.objects.filter(pk=run_id, trigger=RunTrigger.VALIDATION).first()
        if source is None or source.workflow.name != name:
            raise CommandError(f"run {run_id} is not a validation run of `{name}`")
        return source
