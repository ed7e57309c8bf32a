"""The tool catalog the planner shows the model: compact, bounded, relevant, secret-free.

Each entry is the MCP description of a tool (``ToolRegistry.describe()``) made
compact: name, the first line of the description, the input schema cut down to
types/enums/required/short descriptions, and the output fields. Tool specs are
never rendered, so no ``{{env.…}}`` value can reach a catalog (the planner still
masks every prompt with the registry's declared secrets: ``tools.secrets``).

A registry of up to ``CATALOG_ALL_UP_TO`` tools is shown whole. A larger one is
ranked with BM25 (``rank-bm25``) over each tool's name, description and
parameter names against the goal (and feedback), and only the ``CATALOG_TOP_K``
best, plus tools pinned by the caller or named literally in the query, are
shown — so the prompt stays bounded however large the registry grows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tools.registry import ToolRegistry

CATALOG_ALL_UP_TO = 50
CATALOG_TOP_K = 25
MAX_PINNED = 25
MAX_DESCRIPTION_CHARS = 200
MAX_PARAM_DESCRIPTION_CHARS = 100
MAX_PARAMS = 30

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORD_TEXT = (
    "a an and are as at be by for from get give i in into is it its me my of on or our "
    "please that the their then this to use using want we what when with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Lower-case words of ``text``: camelCase and snake_case split, plurals folded."""
    words = _WORD.findall(_CAMEL.sub(" ", text).lower())
    return [_fold(w) for w in words if w not in _STOPWORDS]


def _fold(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _tool_text(description: Mapping[str, Any]) -> list[str]:
    params = list((description.get("inputSchema") or {}).get("properties") or {})
    name = description["name"]
    # The name counts twice: it is the most deliberate summary a tool has.
    return tokenize(" ".join([name, name, description.get("description", ""), *params]))


@dataclass(frozen=True)
class OfferedTool:
    """One tool the planner was shown, and why: ``all`` (the registry is small enough to
    be shown whole), ``pinned`` (by the caller: a template's or the revised version's
    tool), ``named`` (its exact name is in the query) or ``matched`` (among the best
    BM25 matches); ``score`` is its BM25 score when the catalog was ranked (0 for a
    pinned or named tool the ranking found nothing in), None when it was not."""

    name: str
    why: str
    score: float | None = None

    def as_dict(self) -> dict[str, Any]:
        score = None if self.score is None else round(self.score, 4)
        return {"name": self.name, "why": self.why, "score": score}


def select_tools(
    registry: ToolRegistry,
    query: str,
    *,
    pinned: Iterable[str] = (),
    limit: int = CATALOG_TOP_K,
    all_up_to: int = CATALOG_ALL_UP_TO,
) -> list[str]:
    """The tool names the planner sees for ``query``, sorted by name (``rank_tools``)."""
    offered = rank_tools(registry, query, pinned=pinned, limit=limit, all_up_to=all_up_to)
    return sorted(tool.name for tool in offered)


def rank_tools(
    registry: ToolRegistry,
    query: str,
    *,
    pinned: Iterable[str] = (),
    limit: int = CATALOG_TOP_K,
    all_up_to: int = CATALOG_ALL_UP_TO,
    unavailable: Iterable[str] = (),
) -> list[OfferedTool]:
    """The tools the planner sees for ``query``, each with why and its score, best first.

    Every tool when there are at most ``all_up_to``; otherwise the ``limit`` best
    BM25 matches (ties by name), plus ``pinned`` tools and tools whose exact
    name appears in ``query``. Deprecated tools are never offered: a pinned or
    named one brings its replacement instead. Nor are ``unavailable`` ones (their
    source could not be read at its last refresh: ``unavailable_tools``).
    """
    names = offered_tools(registry, unavailable)
    pinned = [_successor(registry, n) for n in pinned]
    if len(names) <= all_up_to:
        return [OfferedTool(name, "all") for name in names]
    described = registry.describe(names)
    why: dict[str, str] = {}
    for name in [n for n in pinned if n in names][:MAX_PINNED]:
        why.setdefault(name, "pinned")
    words = {_successor(registry, w) for w in re.findall(r"[A-Za-z0-9_-]+", query)}
    for name in [n for n in names if n in words][:MAX_PINNED]:
        why.setdefault(name, "named")
    scores: dict[str, float] = {}
    terms = tokenize(query)
    if terms:
        from rank_bm25 import BM25Okapi  # numpy with it: loaded by the planner only

        ranked = BM25Okapi([_tool_text(d) for d in described]).get_scores(terms)
        scores = {d["name"]: float(score) for score, d in zip(ranked, described, strict=True)}
        best = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
        for name, _ in [pair for pair in best if pair[1] > 0][:limit]:
            why.setdefault(name, "matched")
    offered = [OfferedTool(name, reason, scores.get(name, 0.0)) for name, reason in why.items()]
    return sorted(offered, key=lambda tool: (-(tool.score or 0.0), tool.name))


def offered_tools(registry: ToolRegistry, unavailable: Iterable[str] = ()) -> list[str]:
    """The registry's tools the planner may offer: every one not deprecated and not
    ``unavailable`` (its source could not be read at its last refresh), by name."""
    gone = frozenset(unavailable)
    return [n for n in registry.names() if not _is_deprecated(registry, n) and n not in gone]


def unavailable_tools() -> frozenset[str]:
    """The stored tools whose source could not be read at its last refresh."""
    from tools.models import Tool  # the database, only where a plan is made

    return frozenset(Tool.objects.filter(available=False).values_list("name", flat=True))


def _is_deprecated(registry: ToolRegistry, name: str) -> bool:
    spec = registry.get(name)
    return spec is not None and spec.deprecated


def _successor(registry: ToolRegistry, name: str) -> str:
    """A deprecated tool's replacement (followed at most a few steps), else the name."""
    for _ in range(5):
        spec = registry.get(name)
        if spec is None or not spec.deprecated or not spec.replacement:
            return name
        name = spec.replacement
    return name


def compact_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An input schema with only what a planner needs: types, enums, required, short notes."""
    properties = schema.get("properties") or {}
    compact: dict[str, Any] = {}
    for name in list(properties)[:MAX_PARAMS]:
        prop = properties[name]
        compact[name] = _compact_property(prop) if isinstance(prop, Mapping) else prop
    out: dict[str, Any] = {"type": "object", "properties": compact}
    if schema.get("required"):
        out["required"] = list(schema["required"])
    if schema.get("additionalProperties") is True:
        out["additionalProperties"] = True
    return out


def _compact_property(prop: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: prop[k] for k in ("type", "enum", "default", "format") if k in prop}
    if isinstance(prop.get("items"), Mapping) and "type" in prop["items"]:
        kept["items"] = {"type": prop["items"]["type"]}
    note = _one_line(str(prop.get("description", "")), MAX_PARAM_DESCRIPTION_CHARS)
    if note:
        kept["description"] = note
    return kept


def _one_line(text: str, limit: int) -> str:
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def catalog_entries(registry: ToolRegistry, names: Iterable[str]) -> list[dict[str, Any]]:
    """Compact descriptions of ``names`` (unknown names left out), sorted by name."""
    return [
        {
            "name": d["name"],
            "description": _one_line(d.get("description", ""), MAX_DESCRIPTION_CHARS),
            "input": compact_schema(d.get("inputSchema") or {}),
            "outputs": list(d.get("outputs") or []),
        }
        for d in registry.describe(names)
    ]


def catalog_text(entries: Iterable[Mapping[str, Any]]) -> str:
    """One JSON object per line: compact for the model, readable in the audit trail."""
    lines = [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in entries]
    return "\n".join(lines) if lines else "(no tools are registered)"
