"""Evaluating the planner: a set of goals planned against the configured endpoint,
measured per goal and in total (``manage.py evalplanner``).

A goals file (YAML or JSON) is a list of goals, or ``{"goals": [...]}``; each goal is
a string or ``{goal, sample_inputs?, answers?, tools?}`` (``tools``: what a good plan
calls, reported beside what the plan called). When the planner asks questions, the
goal's ``answers`` reply (by question id; any other question gets its first
suggestion), round after round until it plans — so a question round is measured, not
fatal.

Per goal: whether a valid plan came out, the repair rounds it took, the questions
asked (and their rounds), tokens (prompt + completion, every attempt of every round)
and wall time; and retrieval: the tools the planner was shown (its last attempt's
catalog) and, for a goal that lists ``tools``, how many of them were among those
shown (``retrieval_recall``; in total, the expected tools shown over all expected).
Retrieval is measured whatever the model made of the catalog: a goal whose plan
failed still says whether its tools were offered.

Nothing is stored unless ``store`` is set: each goal is planned in a transaction
rolled back at its end (its ``PlanAttempt`` rows included), so an evaluation leaves no
plan pending review and no template influences the next goal.
With ``store`` the plans are stored pending review like any other.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.db import transaction

from tools.errors import FlowpilotError
from tools.llm import LLMClient
from tools.registry import ToolRegistry
from tools.secrets import free_text_redactor
from workflows.models import PlanAttempt, Workflow
from workflows.planner.errors import PlanError, PlanQuestions
from workflows.planner.services import PlanOptions, plan_answer, plan_create

DEFAULT_GOALS = Path(__file__).resolve().parents[2] / "examples" / "goals" / "planner_goals.yaml"
MAX_GOALS = 1_000


@dataclass(frozen=True)
class GoalCase:
    goal: str
    sample_inputs: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ()


@dataclass
class GoalResult:
    goal: str
    valid: bool = False
    workflow: str = ""
    tools_expected: list[str] = field(default_factory=list)
    tools_used: list[str] = field(default_factory=list)
    # The catalog the planner was shown (its last attempt's), and how many of the
    # expected tools were in it: retrieval, measured whatever the model made of it.
    tools_offered: list[str] = field(default_factory=list)
    tools_missed: list[str] = field(default_factory=list)  # expected, never shown
    retrieval_recall: float | None = None  # None: the goal expects no tools
    attempts: int = 0
    repair_rounds: int = 0
    question_rounds: int = 0
    questions: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    seconds: float = 0.0
    error: str = ""


@dataclass
class EvaluationReport:
    results: list[GoalResult]
    model: str
    stored: bool

    def totals(self) -> dict[str, Any]:
        count = len(self.results)
        valid = sum(r.valid for r in self.results)
        sums = {
            key: sum(getattr(r, key) for r in self.results)
            for key in (
                "attempts",
                "repair_rounds",
                "question_rounds",
                "questions",
                "prompt_tokens",
                "completion_tokens",
                "total_tokens",
            )
        }
        expecting = [r for r in self.results if r.tools_expected]
        expected = sum(len(set(r.tools_expected)) for r in expecting)
        missed = sum(len(r.tools_missed) for r in expecting)
        return {
            "goals": count,
            "valid": valid,
            "valid_rate": round(valid / count, 3) if count else 0.0,
            **sums,
            "seconds": round(sum(r.seconds for r in self.results), 3),
            # Expected tools the catalog showed, over every goal that names some.
            "retrieval_goals": len(expecting),
            "retrieval_expected": expected,
            "retrieval_recall": round((expected - missed) / expected, 3) if expected else None,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "stored": self.stored,
            "goals": [asdict(r) for r in self.results],
            "totals": self.totals(),
        }


class GoalsFileInvalid(PlanError):
    code = "goals_file_invalid"


def load_goal_cases(path: Path | str) -> list[GoalCase]:
    """The goals of a YAML or JSON file; ``GoalsFileInvalid`` naming the entry otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise GoalsFileInvalid(f"cannot read goals from {path}: {exc}") from exc
    entries = data.get("goals") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise GoalsFileInvalid(f"{path}: expected a non-empty list of goals (or {{goals: [...]}})")
    if len(entries) > MAX_GOALS:
        raise GoalsFileInvalid(f"{path}: {len(entries)} goals, over the limit of {MAX_GOALS}")
    return [_case(entry, f"{path}: goals[{index}]") for index, entry in enumerate(entries)]


def _case(entry: Any, where: str) -> GoalCase:
    if isinstance(entry, str):
        entry = {"goal": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("goal"), str):
        raise GoalsFileInvalid(f"{where}: each goal is a text or an object with `goal`")
    unknown = set(entry) - {"goal", "sample_inputs", "answers", "tools"}
    if unknown:
        raise GoalsFileInvalid(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    checks = {"sample_inputs": dict, "answers": dict, "tools": list}
    for key, kind in checks.items():
        if key in entry and not isinstance(entry[key], kind):
            raise GoalsFileInvalid(f"{where}: `{key}` must be a {kind.__name__}")
    if not entry["goal"].strip():
        raise GoalsFileInvalid(f"{where}: the goal is empty")
    return GoalCase(
        goal=entry["goal"].strip(),
        sample_inputs=dict(entry.get("sample_inputs") or {}),
        answers={str(k): str(v) for k, v in (entry.get("answers") or {}).items()},
        tools=tuple(str(t) for t in entry.get("tools") or ()),
    )


def planner_evaluate(
    *,
    cases: list[GoalCase],
    client: LLMClient,
    registry: ToolRegistry | None = None,
    store: bool = False,
    progress: Callable[[GoalResult], None] | None = None,
) -> EvaluationReport:
    """Plan every case with ``client`` and measure it (see the module docstring)."""
    registry = registry if registry is not None else ToolRegistry.from_db()
    results = []
    for case in cases:
        result = _evaluate_one(case, client=client, registry=registry, store=store)
        results.append(result)
        if progress is not None:
            progress(result)
    return EvaluationReport(results=results, model=client.model, stored=store)


def _evaluate_one(
    case: GoalCase, *, client: LLMClient, registry: ToolRegistry, store: bool
) -> GoalResult:
    shown = free_text_redactor(registry, os.environ, case.goal).scrub_text(case.goal)
    result = GoalResult(goal=shown, tools_expected=list(case.tools))  # printed: masked
    seen: list[PlanAttempt] = []
    started = time.perf_counter()
    with transaction.atomic():
        try:
            workflow = _plan(case, client=client, registry=registry, observer=seen.append)
        except FlowpilotError as exc:
            result.error = exc.message
        else:
            result.valid, result.workflow = True, f"{workflow.name} v{workflow.version}"
            result.tools_used = sorted({s.tool for s in workflow.steps.all() if s.tool})
        if not store:
            transaction.set_rollback(True)
    result.seconds = round(time.perf_counter() - started, 3)
    _measure(result, seen)
    return result


def _plan(
    case: GoalCase,
    *,
    client: LLMClient,
    registry: ToolRegistry,
    observer: Callable[[PlanAttempt], None],
) -> Workflow:
    common: PlanOptions = {"registry": registry, "client": client, "observer": observer}
    try:
        return plan_create(goal=case.goal, sample_inputs=case.sample_inputs or None, **common)
    except PlanQuestions as exc:
        asked = exc.attempt
    while True:  # bounded: after the question rounds the planner must plan
        answers = {
            q["id"]: case.answers.get(q["id"], q["options"][0] if q["options"] else "")
            for q in asked.questions
        }
        try:
            return plan_answer(attempt=asked, answers=answers, **common)
        except PlanQuestions as exc:
            asked = exc.attempt


def _measure(result: GoalResult, attempts: list[PlanAttempt]) -> None:
    result.attempts = len(attempts)
    asked = [a for a in attempts if a.questions]
    result.question_rounds = len(asked)
    result.questions = sum(len(a.questions) for a in asked)
    result.repair_rounds = sum(1 for a in attempts if a.repair_round > 0)
    if attempts:
        offered = attempts[-1].offered_tools or []
        result.tools_offered = sorted(t["name"] for t in offered if isinstance(t, dict))
    if result.tools_expected:
        expected = set(result.tools_expected)
        result.tools_missed = sorted(expected - set(result.tools_offered))
        result.retrieval_recall = round(1 - len(result.tools_missed) / len(expected), 3)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        setattr(result, key, sum(int(a.usage.get(key) or 0) for a in attempts))
