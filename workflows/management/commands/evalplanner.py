"""evalplanner [GOALS_FILE] [--json] [--store] [--endpoint NAME] [--model M]: measure the
planner over a set of goals (the shipped examples/goals/planner_goals.yaml by default)."""

import json
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from tools.commands import FlowpilotCommand
from tools.llm import LLMClient, LLMEndpointError
from workflows.cli import load_tool_dirs
from workflows.planner.evaluation import (
    DEFAULT_GOALS,
    GoalResult,
    GoalsFileInvalid,
    load_goal_cases,
    planner_evaluate,
)


class Command(FlowpilotCommand):
    help = (
        "Plan every goal of GOALS_FILE (YAML or JSON; default: the shipped "
        "examples/goals/planner_goals.yaml) with the configured LLM endpoint and print, per goal "
        "and in total: valid plan, repair rounds, questions asked, tokens, time. Nothing is "
        "stored unless --store (then the plans wait for review like any other). Exit status "
        "1 when the share of valid plans is below --min-valid."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("goals_file", nargs="?", default=str(DEFAULT_GOALS))
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
        parser.add_argument(
            "--store", action="store_true", help="Keep the plans (pending review) and attempts."
        )
        parser.add_argument("--endpoint", help="A named LLM endpoint (FLOWPILOT_LLM_ENDPOINTS).")
        parser.add_argument("--model", help="The LLM model (default: the endpoint's).")
        parser.add_argument("--limit", type=int, help="Only the first N goals.")
        parser.add_argument(
            "--min-valid",
            type=float,
            default=0.0,
            metavar="RATE",
            help="Fail (exit 1) when fewer than RATE (0..1) of the goals got a valid plan.",
        )
        parser.add_argument(
            "--tools",
            action="append",
            default=[],
            metavar="DIR",
            help="Load tool YAML files from DIR first (like loadtools).",
        )

    def handle(self, *args: Any, goals_file: str, **options: Any) -> None:
        if not 0.0 <= options["min_valid"] <= 1.0:
            raise CommandError("--min-valid is a share of the goals, from 0 to 1")
        load_tool_dirs(options["tools"])
        try:
            cases = load_goal_cases(goals_file)
        except GoalsFileInvalid as exc:
            raise CommandError(exc.message) from exc
        if options["limit"] is not None:
            cases = cases[: max(options["limit"], 0)]
        endpoint = options["endpoint"] or settings.FLOWPILOT_PLANNER_ENDPOINT or None
        try:
            client = LLMClient.from_settings(model=options["model"], endpoint=endpoint)
        except LLMEndpointError as exc:
            raise CommandError(exc.message) from exc
        as_json = options["json"]
        if not as_json:
            self.stdout.write(f"evaluating {len(cases)} goal(s) with {client.model}")
        with client:
            report = planner_evaluate(
                cases=cases,
                client=client,
                store=options["store"],
                progress=None if as_json else self._print_goal,
            )
        totals = report.totals()
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
        else:
            self._print_totals(totals, stored=report.stored)
        if totals["valid_rate"] < options["min_valid"]:
            raise CommandError(
                f"{totals['valid']} of {totals['goals']} goals got a valid plan "
                f"({totals['valid_rate']:.0%}), below --min-valid {options['min_valid']:.0%}",
                returncode=1,
            )

    def _print_goal(self, result: GoalResult) -> None:
        mark = "valid  " if result.valid else "INVALID"
        line = (
            f"{mark} repairs {result.repair_rounds}  questions {result.questions:<2} "
            f"tokens {result.total_tokens:>6}  {result.seconds:>6.2f}s  {result.goal}"
        )
        self.stdout.write(line)
        if (
            result.valid
            and result.tools_expected
            and result.tools_used != sorted(result.tools_expected)
        ):
            self.stdout.write(
                f"        tools {', '.join(result.tools_used)} "
                f"(expected {', '.join(sorted(result.tools_expected))})"
            )
        if result.tools_missed:
            self.stdout.write(
                f"        not offered to the planner: {', '.join(result.tools_missed)} "
                f"(retrieval recall {result.retrieval_recall:.0%})"
            )
        if result.error:
            self.stdout.write(f"        {result.error[:300]}")

    def _print_totals(self, totals: dict, *, stored: bool) -> None:
        self.stdout.write(
            f"total: {totals['valid']}/{totals['goals']} valid ({totals['valid_rate']:.0%}), "
            f"{totals['repair_rounds']} repair round(s), {totals['questions']} question(s) in "
            f"{totals['question_rounds']} round(s), {totals['total_tokens']} tokens "
            f"({totals['prompt_tokens']} prompt, {totals['completion_tokens']} completion), "
            f"{totals['seconds']:.2f}s"
        )
        if totals["retrieval_recall"] is not None:
            self.stdout.write(
                f"retrieval: {totals['retrieval_recall']:.0%} of the "
                f"{totals['retrieval_expected']} expected tool(s) of "
                f"{totals['retrieval_goals']} goal(s) were offered to the planner"
            )
        self.stdout.write(
            "the plans are stored pending review"
            if stored
            else "nothing was stored (--store keeps the plans)"
        )
