"""The planner-mistakes corpus: load it, validate it, score the validator.

``tests/data/flows/planner_mistakes/`` holds workflows as an LLM planner emits
them, each with a mistake, plus correct plans under ``valid/``. Every file says
what the validator must report (format: the folder's README.md). This module
validates every file against the example tools and the built-in tools, as
``validateflow --tools examples/tools`` does, and scores the result:

* **caught**: an expected issue is reported with its code at its path, as an
  error (or as a warning where the file says ``severity: warning``);
* **fix given**: a caught issue whose message contains every fix hint;
* **false positives**: any issue at all on a correct plan.

``python -m tests.workflows.planner_mistakes`` prints the table and the misses.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "flows" / "planner_mistakes"
EXAMPLE_TOOLS = ROOT / "examples" / "tools"
SIDECAR_SUFFIX = ".expect.yaml"
# Codes of a plan that never reaches the validator: JSON the planner cannot read
# (``workflows.planner.prompts.REPLY_INVALID``), a YAML file that does not parse.
READ_CODES = {".json": "reply_invalid", ".yaml": "workflow_file_invalid"}


class CorpusError(ValueError):
    """A corpus file whose expectation is missing or malformed."""


@dataclass(frozen=True)
class Expected:
    """One issue a mistake must draw. ``codes``: any of them counts."""

    codes: tuple[str, ...]
    path: str
    hints: tuple[str, ...]
    severity: str = "error"
    new: bool = False

    @property
    def label(self) -> str:
        return "|".join(self.codes)


@dataclass(frozen=True)
class Case:
    path: Path
    category: str
    valid: bool
    expected: tuple[Expected, ...]

    @property
    def name(self) -> str:
        return self.path.relative_to(CORPUS).as_posix()


@dataclass(frozen=True)
class Issue:
    """A reported problem, the validator's or the reader's (same fields)."""

    code: str
    path: str
    message: str
    severity: str = "error"


@dataclass(frozen=True)
class Outcome:
    """One expected issue against what was reported."""

    expected: Expected
    caught: bool
    fix_given: bool
    reason: str  # "" when caught with the fix, else why not


@dataclass(frozen=True)
class CaseResult:
    case: Case
    issues: tuple[Issue, ...]
    outcomes: tuple[Outcome, ...]

    @property
    def false_positives(self) -> tuple[Issue, ...]:
        return self.issues if self.case.valid else ()


# --- loading ----------------------------------------------------------------------


def corpus_files(root: Path = CORPUS) -> list[Path]:
    """Every plan file (sidecars and the README excluded), sorted."""
    files = [
        p
        for p in root.rglob("*")
        if p.suffix in (".yaml", ".json") and not p.name.endswith(SIDECAR_SUFFIX)
    ]
    return sorted(files)


def read_expectation(path: Path) -> dict[str, Any]:
    """The ``expect`` mapping: the header comment of a YAML file, or a JSON file's sidecar."""
    if path.suffix == ".json":
        sidecar = path.with_name(path.stem + SIDECAR_SUFFIX)
        if not sidecar.is_file():
            raise CorpusError(f"{path.name}: no sidecar {sidecar.name}")
        data = yaml.safe_load(sidecar.read_text(encoding="utf-8")) or {}
        block = data.get("expect") if isinstance(data, dict) else None
    else:
        block = _header_block(path)
    if not isinstance(block, dict):
        raise CorpusError(f"{path.name}: the expectation must be a mapping under `expect:`")
    return block


def _header_block(path: Path) -> Any:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if lines or line.startswith("# expect:"):
            lines.append(line[2:] if line.startswith("# ") else line[1:])
    if not lines:
        raise CorpusError(f"{path.name}: no `# expect:` comment block at the top")
    return yaml.safe_load("\n".join(lines)).get("expect")


def load_case(path: Path) -> Case:
    block = read_expectation(path)
    valid = bool(block.get("valid", False))
    category = block.get("category") or ("valid" if valid else None)
    if not isinstance(category, str):
        raise CorpusError(f"{path.name}: `category` is required")
    expected = tuple(_expected(path, item) for item in block.get("issues") or ())
    if valid == bool(expected):
        raise CorpusError(f"{path.name}: a file is either `valid: true` or lists `issues`")
    if valid != (path.parent.name == "valid"):
        raise CorpusError(f"{path.name}: correct plans (and only they) live in valid/")
    return Case(path, category, valid, expected)


def _expected(path: Path, item: Any) -> Expected:
    if not isinstance(item, dict) or not {"code", "path", "hint"} <= set(item):
        raise CorpusError(f"{path.name}: every issue needs `code`, `path` and `hint`: {item!r}")
    codes = item["code"] if isinstance(item["code"], list) else [item["code"]]
    hints = item["hint"] if isinstance(item["hint"], list) else [item["hint"]]
    severity = item.get("severity", "error")
    if severity not in ("error", "warning") or not all(hints) or not all(codes):
        raise CorpusError(f"{path.name}: bad issue entry {item!r}")
    return Expected(
        tuple(codes), str(item["path"]), tuple(map(str, hints)), severity, bool(item.get("new"))
    )


def load_cases(root: Path = CORPUS) -> list[Case]:
    return [load_case(path) for path in corpus_files(root)]


def read_plan(path: Path) -> tuple[Any, Issue | None]:
    """The plan's data as the planner (JSON) or ``validateflow`` (YAML) reads it."""
    from tools.errors import FlowpilotError
    from tools.llm.content import parse_json_reply
    from workflows.files import parse_workflow_text

    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            return parse_json_reply(text), None
        return parse_workflow_text(text, source=path.name, fmt="yaml"), None
    except FlowpilotError as exc:
        return None, Issue(READ_CODES[path.suffix], "", exc.message)


# --- validating and scoring ---------------------------------------------------------


@cache
def example_registry():
    """The example tools plus the built-in providers, read from files (no database)."""
    from tools.builtin import load_providers
    from tools.registry import ToolRegistry
    from tools.services import tool_load_file

    specs = [
        spec for path in sorted(EXAMPLE_TOOLS.glob("*.yaml")) for spec in tool_load_file(path=path)
    ]
    return ToolRegistry(specs, load_providers())


def known_codes() -> frozenset[str]:
    from workflows.validator import ISSUE_CODES

    return ISSUE_CODES | frozenset(READ_CODES.values())


def run_case(case: Case, registry: Any = None) -> CaseResult:
    from workflows.validator import validate_workflow

    data, read_issue = read_plan(case.path)
    if read_issue is not None:
        issues: tuple[Issue, ...] = (read_issue,)
    else:
        report = validate_workflow(data, registry=registry or example_registry())
        issues = tuple(Issue(i.code, i.path, i.message, i.severity) for i in report.issues)
    return CaseResult(case, issues, tuple(_outcome(e, issues) for e in case.expected))


def _outcome(expected: Expected, issues: Sequence[Issue]) -> Outcome:
    same_code = [i for i in issues if i.code in expected.codes]
    located = [i for i in same_code if i.path == expected.path]
    strong = [i for i in located if i.severity == "error" or expected.severity == "warning"]
    if not strong:
        if located:
            reason = "only a warning"
        elif same_code:
            reason = "elsewhere: " + ", ".join(sorted({i.path or "(workflow)" for i in same_code}))
        else:
            reason = "not reported"
        return Outcome(expected, False, False, reason)
    fix = any(all(h.lower() in i.message.lower() for h in expected.hints) for i in strong)
    return Outcome(expected, True, fix, "" if fix else "message lacks the fix")


def run_corpus(root: Path = CORPUS) -> list[CaseResult]:
    registry = example_registry()
    return [run_case(case, registry) for case in load_cases(root)]


@dataclass
class Tally:
    files: int = 0
    expected: int = 0
    caught: int = 0
    fixed: int = 0
    false_positives: int = 0


def tally(results: Iterable[CaseResult]) -> dict[str, Tally]:
    """Per category, plus ``TOTAL`` (mistakes) — correct plans are the ``valid`` row."""
    rows: dict[str, Tally] = defaultdict(Tally)
    for result in results:
        for key in (result.case.category, *(() if result.case.valid else ("TOTAL",))):
            row = rows[key]
            row.files += 1
            row.expected += len(result.outcomes)
            row.caught += sum(o.caught for o in result.outcomes)
            row.fixed += sum(o.fix_given for o in result.outcomes)
            row.false_positives += len(result.false_positives)
    return dict(rows)


def rates(row: Tally) -> tuple[float, float]:
    """(caught rate, message score) in [0, 1]; the score is over the caught issues."""
    caught = row.caught / row.expected if row.expected else 1.0
    fixed = row.fixed / row.caught if row.caught else (1.0 if not row.expected else 0.0)
    return caught, fixed


def format_table(results: Sequence[CaseResult]) -> str:
    rows = tally(results)
    head = f"{'category':<34} {'files':>5} {'issues':>6} {'caught':>13} {'fix given':>13}"
    lines = [head, "-" * len(head)]
    names = [*sorted(n for n in rows if n not in ("TOTAL", "valid")), "TOTAL"]
    for name in names:
        if name not in rows:
            continue
        row = rows[name]
        caught, fixed = rates(row)
        lines.append(
            f"{name:<34} {row.files:>5} {row.expected:>6} "
            f"{row.caught:>4} ({caught:>5.0%}) {row.fixed:>4} ({fixed:>5.0%})"
        )
    valid = rows.get("valid", Tally())
    lines.append(f"{'valid plans':<34} {valid.files:>5}  false positives: {valid.false_positives}")
    return "\n".join(lines)


def gaps(results: Iterable[CaseResult]) -> Counter:
    """(category, expected code, new?, why missed) → count, for the issues not fully met."""
    found: Counter = Counter()
    for result in results:
        for outcome in result.outcomes:
            if outcome.reason:
                reason = outcome.reason.split(":")[0]
                key = (result.case.category, outcome.expected.label, outcome.expected.new, reason)
                found[key] += 1
    return found


def format_gaps(results: Sequence[CaseResult]) -> str:
    lines = []
    for (category, code, new, reason), count in sorted(gaps(results).items()):
        lines.append(f"{category:<34} {code + (' (new)' if new else ''):<48} {reason:<22} {count}")
    for result in results:
        for issue in result.false_positives:
            lines.append(f"false positive: {result.case.name}: {issue.path} [{issue.code}]")
    return "\n".join(lines)


def plan_tool_names(data: Any) -> list[str]:
    """Every tool name a plan mentions: the allowlist, tool/foreach steps, llm step tools."""
    if not isinstance(data, dict):
        return []
    names = [t for t in data.get("tools") or [] if isinstance(t, str)]
    for step in data.get("steps") or []:
        if isinstance(step, dict):
            if isinstance(step.get("tool"), str):
                names.append(step["tool"])
            names += [t for t in step.get("tools") or [] if isinstance(t, str)]
    return names


def main() -> None:
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    results = run_corpus()
    print(format_table(results))
    missed = format_gaps(results)
    if missed:
        print("\nMissed (category, expected code, why, count):")
        print(missed)


if __name__ == "__main__":
    main()

