"""A scripted planner for the loopback OpenAI-compatible server: plausible answers per goal.

``ScriptedPlanner(cases)`` answers a planner request (``FakeLLM.always(planner)``) the
way a competent model would, from the request alone and the goals file's ``tools``
for that goal:

- it finds the goal (the ``Goal:`` line) and the tool catalog in the user message;
- a goal with ``answers`` in the file gets questions first (one per answer key, its
  value the suggestion), when the prompt offers questions;
- every ``REPAIR_EVERY``-th goal's first plan leaves out a required parameter, so a
  repair round happens and is measured; the repair is the complete plan;
- the plan calls the goal's tools in order, mapping each required parameter from an
  earlier step's output of that name (or its usual alias: ``latitude`` ← ``lat``),
  the whole previous output for ``payload``/``data``, and otherwise a declared input.

A goal it does not know gets a reply naming no tool, which the validator refuses:
the evaluation then reports it as not planned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from tests.fakes.openai_server import ChatRequest, completion

REPAIR_EVERY = 4
ALIASES = {"latitude": "lat", "longitude": "lon", "code": "country_code"}
WHOLE_OUTPUT = {"payload", "data"}


class ScriptedPlanner:
    def __init__(self, cases: Iterable[Any]) -> None:
        self.cases = {case.goal: (index, case) for index, case in enumerate(cases)}

    def __call__(self, request: ChatRequest) -> dict:
        text = request.messages[1]["content"]
        goal = re.search(r"^Goal: (.*)$", text, re.M).group(1)
        index, case = self.cases.get(goal, (None, None))
        usage = {"prompt_tokens": len(request.raw) // 4, "completion_tokens": 120}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if case is None:
            return completion(json.dumps({"name": "unknown", "steps": []}), usage=usage)
        if case.answers and "clarifying questions" in text and "earlier questions" not in text:
            questions = [
                {"id": key, "question": f"Which {key}?", "options": [value]}
                for key, value in case.answers.items()
            ]
            return completion(
                json.dumps({"answer": "questions", "questions": questions}), usage=usage
            )
        plan = plausible_plan(goal, case.tools, _catalog(text))
        first_try = len(request.messages) == 2
        if first_try and index % REPAIR_EVERY == REPAIR_EVERY - 1:
            first = plan["steps"][0]["input_mapping"]
            first.pop(next(iter(first)), None)
        return completion(json.dumps(plan), usage=usage)


def _catalog(text: str) -> dict[str, dict[str, Any]]:
    block = text.split("Tool catalog (one JSON object per tool):\n", 1)[1]
    entries = {}
    for line in block.split("\n"):
        if not line.startswith("{"):
            break
        entry = json.loads(line)
        entries[entry["name"]] = entry
    return entries


def plausible_plan(goal: str, tools: Iterable[str], catalog: dict[str, dict]) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    steps: list[dict[str, Any]] = []
    produced: dict[str, str] = {}
    for tool in tools:
        entry = catalog[tool]
        schema = entry["input"]
        mapping = {}
        for param in schema.get("required", []):
            source = produced.get(param) or produced.get(ALIASES.get(param, ""))
            if source is None and param in WHOLE_OUTPUT and steps:
                source = f"$step.{steps[-1]['id']}"
            if source is None:
                name = param if param not in inputs else f"{tool}_{param}"
                kind = schema["properties"].get(param, {}).get("type", "string")
                inputs[name] = {"type": kind if isinstance(kind, str) else "string"}
                source = f"$input.{name}"
            mapping[param] = source
        steps.append({"id": tool, "kind": "tool", "tool": tool, "input_mapping": mapping})
        produced.update({field: f"{tool}.{field}" for field in entry["outputs"]})
    slug = re.sub(r"[^a-z0-9]+", "_", goal.lower()).strip("_")[:50]
    return {"name": slug, "description": goal, "inputs": inputs, "steps": steps}
