"""What a replay found, per step: matched, or what differs from the validation run.

Built from the two runs' stored results (outputs compared unescaped, both masked the
same way) and the recorded calls the replay never made; a `workflow` step's replay
child is compared with the validation run's child the same way, its lines listed
under the step (``child.<step>.output…``). A request that differed is
in the replayed step's error (``replay_unrecorded``), which names both requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runs.models import Run, StepResult
from tools.jsondata import store_unescape
from workflows.graph import build_graph
from workflows.services import workflow_spec

MAX_LINES_PER_STEP = 20
MAX_VALUE_CHARS = 120


@dataclass(frozen=True)
class StepReplay:
    step_id: str
    differences: tuple[str, ...]

    @property
    def verdict(self) -> str:
        return "differs" if self.differences else "matched"


@dataclass(frozen=True)
class ReplayReport:
    replay_run: Run
    source_run: Run
    steps: tuple[StepReplay, ...]

    @property
    def matched(self) -> bool:
        return not any(s.differences for s in self.steps)

    @property
    def summary(self) -> str:
        head = (
            f"replay run {self.replay_run.pk} of {self.replay_run.workflow} against "
            f"validation run {self.source_run.pk}"
        )
        differing = [s.step_id for s in self.steps if s.differences]
        if not differing:
            return f"{head}: all {len(self.steps)} steps match"
        return (
            f"{head}: {len(differing)} of {len(self.steps)} steps differ ({', '.join(differing)})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "replay_run": self.replay_run.pk,
            "validation_run": self.source_run.pk,
            "matched": self.matched,
            "steps": [
                {"step": s.step_id, "verdict": s.verdict, "differences": list(s.differences)}
                for s in self.steps
            ],
        }


def replay_report(
    *,
    replay_run: Run,
    source_run: Run,
    unused: Mapping[str, list[str]] | None = None,
    unused_by_run: Mapping[int, Mapping[str, list[str]]] | None = None,
) -> ReplayReport:
    """Compare every step of ``replay_run`` with the same step of ``source_run``.

    ``unused``: the recorded calls the replay never made, by step; ``unused_by_run``
    the same for the replay's child runs (by run id). A `workflow` step's replay child
    is compared with the child it replays, and its differing steps are listed under
    the step, each line prefixed ``child.<child step>.`` (nested: ``child.a.child.b.``).
    """
    steps = _step_lines(replay_run, source_run, unused or {}, unused_by_run or {})
    return ReplayReport(
        replay_run,
        source_run,
        tuple(StepReplay(s, tuple(lines[:MAX_LINES_PER_STEP])) for s, lines in steps),
    )


def _step_lines(
    replay_run: Run,
    source_run: Run,
    unused: Mapping[str, list[str]],
    unused_by_run: Mapping[int, Mapping[str, list[str]]],
) -> list[tuple[str, list[str]]]:
    then = {r.step_id: r for r in source_run.step_results.all()}
    results = {r.step_id: r for r in replay_run.step_results.all()}
    children = {
        child.parent_step_id: child
        for child in Run.objects.filter(parent_run=replay_run, replay_of__isnull=False).order_by(
            "id"
        )
    }  # the newest child of each step last, so it wins
    steps = []
    for step_id in build_graph(workflow_spec(replay_run.workflow)).order:
        now = results[step_id]
        lines = step_differences(then.get(now.step_id), now)
        lines += [
            f"recorded call not made in the replay: {call}" for call in unused.get(now.step_id, [])
        ]
        child = children.get(now.pk)
        if child is not None and child.replay_of is not None:
            for child_step, child_lines in _step_lines(
                child, child.replay_of, unused_by_run.get(child.pk, {}), unused_by_run
            ):
                lines += [_under(child_step, line) for line in child_lines]
        steps.append((now.step_id, lines))
    return steps


def _under(child_step: str, line: str) -> str:
    """A child step's line as listed under its parent step."""
    if line.startswith(("output", "status", "error", "child.")):
        return f"child.{child_step}.{line}"
    return f"child.{child_step}: {line}"


def step_differences(then: StepResult | None, now: StepResult) -> list[str]:
    if then is None:
        return ["the validation run has no such step"]
    lines = []
    if then.status != now.status:
        lines.append(f"status: {then.status} in the validation run, {now.status} in the replay")
    if now.error and now.error != then.error:
        error = store_unescape(now.error)
        lines.append(f"error ({error.get('type')}): {error.get('message', '')}")
    if then.output_truncated or now.output_truncated:
        if then.output_truncated != now.output_truncated:
            lines.append("output: stored truncated in one run only; not compared")
        return lines
    lines += value_differences(store_unescape(then.output), store_unescape(now.output), "output")
    return lines


def value_differences(then: Any, now: Any, path: str) -> list[str]:
    """Where two JSON values differ, one line per place (``output.rows.2.total: 3 → 4``)."""
    if isinstance(then, dict) and isinstance(now, dict):
        lines = []
        for key in sorted(then.keys() | now.keys()):
            where = f"{path}.{key}"
            if key not in now:
                lines.append(f"{where}: missing in the replay (was {_short(then[key])})")
            elif key not in then:
                lines.append(f"{where}: only in the replay ({_short(now[key])})")
            else:
                lines += value_differences(then[key], now[key], where)
        return lines
    if isinstance(then, list) and isinstance(now, list):
        lines = [f"{path}: {len(then)} items → {len(now)}"] if len(then) != len(now) else []
        for index, (a, b) in enumerate(zip(then, now, strict=False)):
            lines += value_differences(a, b, f"{path}.{index}")
        return lines
    if then == now and type(then) is type(now):
        return []
    return [f"{path}: {_short(then)} → {_short(now)}"]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"
