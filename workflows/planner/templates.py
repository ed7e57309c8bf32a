"""Templates: the approved workflows most similar to a goal, shown to the planner.

Every *active* version is a candidate unless a reviewer excluded it
(``Workflow.template_use``). Candidates are ranked with BM25 — the machinery the
tool catalog uses (``rank-bm25``, the catalog's tokenizer) — over each one's name,
goal, description and the tools its steps call, against the goal. ``BM25Plus`` is
used rather than the catalog's ``BM25Okapi``: with a handful of approved
workflows Okapi's idf goes negative for every shared word. A candidate must share
at least two words with the goal (one, when the goal has a single word), so an
unrelated workflow is never shown; a version marked ``preferred`` scores 1.5 times
as much. The best ``FLOWPILOT_PLANNER_TEMPLATES`` (3) are shown, in a compact form:
name, goal, description, inputs, steps (id, kind, tool, mappings) and outputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from workflows.models import TemplateUse, Workflow, WorkflowStatus
from workflows.planner.catalog import tokenize

DEFAULT_TEMPLATES = 3
MAX_CANDIDATES = 500
PREFERRED_BOOST = 1.5
MAX_TEMPLATE_CHARS = 2_500


@dataclass(frozen=True)
class TemplateMatch:
    workflow: Workflow
    score: float

    def as_record(self) -> dict[str, Any]:
        return {
            "name": self.workflow.name,
            "version": self.workflow.version,
            "score": round(self.score, 3),
        }


def template_limit() -> int:
    return int(getattr(settings, "FLOWPILOT_PLANNER_TEMPLATES", DEFAULT_TEMPLATES))


def _step_tools(definition: dict[str, Any]) -> list[str]:
    tools: list[str] = []
    for step in definition.get("steps") or []:
        if not isinstance(step, dict):
            continue
        tools += [step[key] for key in ("tool", "workflow") if isinstance(step.get(key), str)]
        tools += [t for t in step.get("tools") or [] if isinstance(t, str)]
    return tools


def _document(workflow: Workflow) -> list[str]:
    definition = workflow.definition if isinstance(workflow.definition, dict) else {}
    text = [workflow.name, workflow.goal, workflow.description, *_step_tools(definition)]
    return tokenize(" ".join(text))


def select_templates(*, query: str, limit: int | None = None) -> list[TemplateMatch]:
    """The approved workflows most similar to ``query``, best first (ties by name)."""
    limit = template_limit() if limit is None else limit
    if limit <= 0 or not tokenize(query):
        return []
    candidates = list(
        Workflow.objects.filter(status=WorkflowStatus.ACTIVE)
        .exclude(template_use=TemplateUse.EXCLUDED)
        .order_by("-approved_at", "-id")[:MAX_CANDIDATES]
    )
    if not candidates:
        return []
    matches = []
    for index, score in rank_similar(query, [_document(w) for w in candidates]):
        workflow = candidates[index]
        boost = PREFERRED_BOOST if workflow.template_use == TemplateUse.PREFERRED else 1.0
        matches.append(TemplateMatch(workflow, score * boost))
    matches.sort(key=lambda m: (-m.score, m.workflow.name, -m.workflow.version))
    return matches[:limit]


def rank_similar(query: str, documents: list[str] | list[list[str]]) -> list[tuple[int, float]]:
    """``(index, BM25Plus score)`` of the documents (texts, or their tokens) that share at
    least two words with ``query`` (one, when it has a single word), in their order."""
    terms = sorted(set(tokenize(query)))
    if not terms or not documents:
        return []
    tokens = [d if isinstance(d, list) else tokenize(d) for d in documents]
    from rank_bm25 import BM25Plus  # numpy with it: loaded by the planner only

    scores = BM25Plus(tokens).get_scores(terms)
    needed = min(2, len(terms))
    return [
        (index, float(score))
        for index, (words, score) in enumerate(zip(tokens, scores, strict=True))
        if len(set(terms) & set(words)) >= needed
    ]


# What the model sees of a template's step (a `loop` step's bound and condition too).
_TEMPLATE_STEP_KEYS = (
    "id", "kind", "tool", "workflow", "tools", "input_mapping", "item_mapping",
    "max_iterations", "until", "iteration_mapping",
)  # fmt: skip


def compact_template(workflow: Workflow) -> dict[str, Any]:
    """What the model sees of one template: enough to copy its structure or reuse it."""
    definition = workflow.definition if isinstance(workflow.definition, dict) else {}
    inputs = {
        name: (spec.get("type", "string") if isinstance(spec, dict) else "string")
        for name, spec in (definition.get("inputs") or {}).items()
    }
    steps = [
        {key: step[key] for key in _TEMPLATE_STEP_KEYS if key in step}
        for step in definition.get("steps") or []
        if isinstance(step, dict)
    ]
    entry = {
        "name": workflow.name,
        "goal": workflow.goal,
        "description": workflow.description,
        "inputs": inputs,
        "steps": steps,
        "outputs": definition.get("outputs") or {},
    }
    if len(json.dumps(entry, ensure_ascii=False)) > MAX_TEMPLATE_CHARS:
        entry["steps"] = [{k: s[k] for k in ("id", "kind", "tool") if k in s} for s in steps]
    return entry


def templates_text(matches: Iterable[TemplateMatch]) -> str:
    """One JSON object per line, best first."""
    return "\n".join(
        json.dumps(compact_template(m.workflow), ensure_ascii=False, separators=(",", ":"))
        for m in matches
    )


def template_tools(matches: Iterable[TemplateMatch]) -> list[str]:
    """The tools the templates call: pinned into the catalog so a copy can use them."""
    return sorted({t for m in matches for t in _step_tools(m.workflow.definition or {})})


def reused_templates(data: Any, shown: Iterable[str]) -> list[str]:
    """The shown templates a plan calls as ``workflow`` or ``loop`` steps (by name), sorted."""
    shown = set(shown)
    steps = data.get("steps") if isinstance(data, dict) else None
    return sorted(
        {
            s["workflow"]
            for s in steps or []
            if isinstance(s, dict)
            and s.get("kind") in ("workflow", "loop")
            and s.get("workflow") in shown
        }
    )
