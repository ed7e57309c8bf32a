"""planflow "GOAL" [--input k=v …] [--answer id=text …] [--model M] [--endpoint NAME]:
plan a workflow, store it pending review. The planner may ask first; see --answer."""

import os
import sys
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management.base import CommandError, CommandParser

from tools.commands import FlowpilotCommand
from tools.llm import LLMClient, LLMEndpointError
from tools.registry import ToolRegistry
from tools.secrets import free_text_redactor
from tools.sources import source_state, stale_sources
from workflows.cli import load_tool_dirs, parse_input_pairs
from workflows.models import PlanAttempt, PlanAttemptStatus, Workflow
from workflows.planner import PlanError, PlanFailed, PlanQuestions
from workflows.planner.services import PlanOptions, plan_answer, plan_create

QUESTIONS_UNANSWERED = 2


class Command(FlowpilotCommand):
    help = (
        "Ask the planner (the LLM at OPENAI_BASE_URL, or a named endpoint) for a workflow "
        "reaching GOAL; store it as a version pending review. Prints every attempt. When "
        "the planner asks questions, --answer answers them (or, on a terminal, you are "
        "asked); without answers it prints them and exits with status 2. Exit status 1 "
        "when planning fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "goal", nargs="?", default="", help="What the workflow should do, in plain words."
        )
        parser.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="A sample input the first run will use; repeat for more.",
        )
        parser.add_argument(
            "--answer",
            action="append",
            default=[],
            metavar="ID=TEXT",
            help="An answer to the planner's question ID (or its number: 2=TEXT), or a bare "
            "TEXT for the next question in order; repeat for more. Answers the first "
            "question round of this run (or the one --reply-to names).",
        )
        parser.add_argument(
            "--reply-to",
            type=int,
            metavar="ATTEMPT",
            help="Answer the questions plan attempt ATTEMPT asked (printed when it asked), "
            "and plan its goal; GOAL is then not needed.",
        )
        parser.add_argument("--model", help="The LLM model (default: the endpoint's).")
        parser.add_argument(
            "--endpoint",
            help="A named LLM endpoint (FLOWPILOT_LLM_ENDPOINTS; default: "
            "FLOWPILOT_PLANNER_ENDPOINT, else OPENAI_BASE_URL).",
        )
        parser.add_argument(
            "--tools",
            action="append",
            default=[],
            metavar="DIR",
            help="Load tool YAML files from DIR first (like loadtools).",
        )
        parser.add_argument("--owner", metavar="USERNAME", help="The user who owns the plan.")

    def handle(self, *args: Any, goal: str = "", **options: Any) -> None:
        load_tool_dirs(options["tools"])
        sample_inputs = parse_input_pairs(options["input"], {})
        owner = self._owner(options["owner"])
        self._given = list(options["answer"])
        replying = self._attempt(options["reply_to"]) if options["reply_to"] else None
        if replying is None and not goal.strip():
            raise CommandError("say the GOAL (or --reply-to ATTEMPT to answer its questions)")
        endpoint = options["endpoint"] or settings.FLOWPILOT_PLANNER_ENDPOINT or None
        try:
            client = LLMClient.from_settings(model=options["model"], endpoint=endpoint)
        except LLMEndpointError as exc:
            raise CommandError(exc.message) from exc
        if replying is None:  # shown as the planner stores it: a credential in it masked
            goal = free_text_redactor(ToolRegistry.from_db(), os.environ, goal).scrub_text(goal)
        self.stdout.write(f"planning with {client.model}: {replying.goal if replying else goal}")
        for source in stale_sources():  # the catalog may be out of date (tools.sources)
            self.stderr.write(
                self.style.WARNING(
                    f"warning: the tool catalog may be out of date: {source.kind} source "
                    f"{source.name} ({source.location}) is {source_state(source)}"
                )
            )
        common: PlanOptions = {
            "owner": owner,
            "client": client,
            "observer": self._print_attempt,
        }
        try:
            if replying is not None:
                workflow = self._answer(replying, common)
            else:
                try:
                    workflow = plan_create(goal=goal, sample_inputs=sample_inputs or None, **common)
                except PlanQuestions as exc:
                    workflow = self._answer(exc.attempt, common)
        except PlanFailed as exc:
            raise CommandError(f"planning failed: {exc.message}", returncode=1) from exc
        except PlanError as exc:
            raise CommandError(exc.message, returncode=1) from exc
        finally:
            client.close()
        self._print_workflow(workflow)

    # --- questions ------------------------------------------------------------------

    def _answer(self, attempt: PlanAttempt, common: PlanOptions) -> Workflow:
        """Answer ``attempt``'s questions (and every further round) until there is a plan."""
        while True:
            self._print_questions(attempt)
            answers = self._answers_for(attempt)
            try:
                return plan_answer(attempt=attempt, answers=answers, **common)
            except PlanQuestions as exc:
                attempt = exc.attempt

    def _answers_for(self, attempt: PlanAttempt) -> list[str] | dict[str, str]:
        if self._given:
            given, self._given = self._given, []  # the command line answers one round
            return given
        if sys.stdin is not None and sys.stdin.isatty():
            return self._ask(attempt.questions)
        raise CommandError(
            f"the planner asked {len(attempt.questions)} question(s) (plan attempt "
            f"{attempt.pk}); answer them with: manage.py planflow --reply-to {attempt.pk} "
            + " ".join(f'--answer "{q["id"]}=…"' for q in attempt.questions),
            returncode=QUESTIONS_UNANSWERED,
        )

    def _ask(self, questions: list[dict]) -> dict[str, str]:
        """Each question on the terminal: a number picks a suggestion, text is taken as
        written, an empty line leaves it to the planner."""
        answers = {}
        for number, question in enumerate(questions, start=1):
            self.stdout.write(f"{number}. {question['question']} (number, text, or Enter: any)")
            self.stdout.flush()
            line = sys.stdin.readline().strip()
            options = question["options"]
            if line.isdigit() and 1 <= int(line) <= len(options):
                line = options[int(line) - 1]
            answers[question["id"]] = line
        return answers

    def _print_questions(self, attempt: PlanAttempt) -> None:
        count = len(attempt.questions)
        self.stdout.write(f"the planner asks {count} question(s) (plan attempt {attempt.pk}):")
        for number, question in enumerate(attempt.questions, start=1):
            self.stdout.write(f"  {number}. [{question['id']}] {question['question']}")
            for index, option in enumerate(question["options"], start=1):
                self.stdout.write(f"       {index}) {option}")

    def _attempt(self, pk: int) -> PlanAttempt:
        in_range = 1 <= pk < 2**63
        attempt = PlanAttempt.objects.filter(pk=pk).first() if in_range else None
        if attempt is None or attempt.status != PlanAttemptStatus.QUESTIONS:
            raise CommandError(f"plan attempt {pk} does not exist or asked no questions")
        return attempt

    # --- printing ---------------------------------------------------------------------

    def _owner(self, username: str | None) -> User | None:
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
        if attempt.templates:
            shown = ", ".join(f"{t['name']} v{t['version']}" for t in attempt.templates)
            self.stdout.write(f"      templates shown: {shown}")
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
