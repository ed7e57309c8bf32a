"""planflow "GOAL" [--input k=v …] [--model M]: plan a workflow, store it pending review."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from tools.commands import FlowpilotCommand
from tools.llm import LLMClient
from workflows.cli import load_tool_dirs, parse_input_pairs
from workflows.models import PlanAttempt, Workflow
from workflows.planner import PlanError, PlanFailed, plan_create


class Command(FlowpilotCommand):
    help = (
        "Ask the planner (the LLM at OPENAI_BASE_URL) for a workflow reaching GOAL; store it "
        "as a version pending review. Prints every attempt. Exit status 1 when planning fails."
    )

    def add_arguments(self, parser):
        parser.add_argument("goal", help="What the workflow should do, in plain words.")
        parser.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="A sample input the first run will use; repeat for more.",
        )
        parser.add_argument("--model", help="The LLM model (default: PLANNER_MODEL).")
        parser.add_argument(
            "--tools",
            action="append",
            default=[],
            metavar="DIR",
            help="Load tool YAML files from DIR first (like loadtools).",
        )
        parser.add_argument("--owner", metavar="USERNAME", help="The user who owns the plan.")

    def handle(self, goal, **options):
        load_tool_dirs(options["tools"])
        sample_inputs = parse_input_pairs(options["input"], {})
        owner = self._owner(options["owner"])
        client = LLMClient.from_settings(model=options["model"])
        self.stdout.write(f"planning with {client.model}: {goal}")
        try:
            workflow = plan_create(
                goal=goal,
                sample_inputs=sample_inputs or None,
                owner=owner,
                client=client,
                observer=self._print_attempt,
            )
        except PlanFailed as exc:
            raise CommandError(f"planning failed: {exc.message}", returncode=1) from exc
        except PlanError as exc:
            raise CommandError(exc.message, returncode=1) from exc
        finally:
            client.close()
        self._print_workflow(workflow)

    def _owner(self, username):
        if not username:
            return None
        try:
            return get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"no user named {username!r}") from exc

    def _print_attempt(self, attempt: PlanAttempt) -> None:
        tokens = attempt.usage.get("total_tokens")
        tries = len(attempt.usage.get("http_attempts") or [])
        line = f"  attempt {attempt.repair_round + 1} (round {attempt.repair_round}"
        line += f" of {attempt.repair_budget}): {attempt.status}"
        if attempt.outcome:
            line += f", {attempt.get_outcome_display().lower()}"
        if tokens is not None:
            line += f", {tokens} tokens"
        if tries > 1:
            line += f", {tries} HTTP tries"
        self.stdout.write(line)
        if attempt.error:
            self.stdout.write(f"      {attempt.error}")
        for issue in attempt.validator_report:
            where = issue.get("path") or "(workflow)"
            self.stdout.write(
                f"      {issue['severity']:<7} {where}  [{issue['code']}]  {issue['message']}"
            )

    def _print_workflow(self, workflow: Workflow) -> None:
        self.stdout.write(
            f"stored {workflow.name} v{workflow.version} ({workflow.status}); "
            "review and approve it in the admin"
        )
        for step in workflow.steps.order_by("position"):
            what = step.tool or (step.config.get("expression") or "")[:60]
            self.stdout.write(f"  {step.step_id:<24} {step.kind:<10} {what}")
