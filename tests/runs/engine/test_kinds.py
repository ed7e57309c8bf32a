"""runs.engine.kinds: every step kind of the schema's union is fully registered — its
engine module, its validation, the facts the engine asks it — and every other list of
kinds (the planner's prompt, the docs' schema, the admin legend) shows it. A
half-registered kind fails here."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

import runs.engine.kinds as kinds_package
from runs.engine.kinds import KINDS
from tests.factories import pending_version
from workflows.models import Step
from workflows.planner.prompts import SYSTEM_PROMPT, TEMPLATE_REUSE
from workflows.schema import AnyStep, ForeachStep, WorkflowSpec, step_kind_names
from workflows.validation.kinds import KIND_CHECKS

MODELS = typing.get_args(AnyStep)
KIND_NAMES = sorted(m.model_fields["kind"].default for m in MODELS)

EXAMPLES = {
    "tool": {"tool": "t"},
    "llm": {"prompt": "p", "tools": ["helper"]},
    "decision": {"branches": ["yes"], "conditions": {"yes": "true"}},
    "transform": {"expression": "a"},
    "foreach": {"tool": "t", "input_mapping": {"items": [1]}, "timeout": 5},
    "workflow": {"workflow": "child", "input_mapping": {"x": 1}, "timeout": 5},
    "loop": {"workflow": "child", "max_iterations": 2, "until": "output.ok", "timeout": 5},
    "approval": {"approvers": ["alice"], "timeout": 5},
}


def example(kind: str):
    data = {"id": "s", "kind": kind, **EXAMPLES[kind]}
    return WorkflowSpec.model_validate({"name": "k", "steps": [data]}).steps[0]


def test_every_kind_of_the_union_has_an_engine_module_and_validation():
    assert sorted(KINDS) == KIND_NAMES
    assert sorted(KIND_CHECKS) == KIND_NAMES
    assert sorted(EXAMPLES) == KIND_NAMES  # a new kind needs an example here too
    for name, kind in KINDS.items():
        assert kind.model.model_fields["kind"].default == name
        assert callable(kind.execute)


@pytest.mark.parametrize("name", KIND_NAMES)
def test_every_kind_answers_the_engines_questions(name):
    step = example(name)
    kind = KINDS[name]

    assert isinstance(step, kind.model)
    assert isinstance(step.needs_llm(), bool)
    assert isinstance(step.retries_per_item, bool)
    assert isinstance(step.picks_branch, bool)
    assert all(isinstance(t, str) for t in step.direct_tools() + step.model_tools())
    assert "input_mapping" in step.mappings()
    assert isinstance(dict(kind.compile(step)), dict)
    assert step.branch_of({"branch": "yes"}) == ("yes" if step.picks_branch else None)


def test_the_facts_of_each_kind():
    tool, llm, decision, transform, foreach, workflow, _, approval = (example(k) for k in EXAMPLES)

    assert [s.needs_llm() for s in (tool, llm, decision, transform, foreach, workflow)] == [
        False, True, False, False, False, False,
    ]  # fmt: skip
    assert example("decision").model_copy(update={"decision_prompt": "which?"}).needs_llm()
    assert foreach.retries_per_item
    assert not tool.retries_per_item
    assert foreach.step_time_limit() is None
    assert foreach.timeout == 5
    assert tool.direct_tools() == foreach.direct_tools() == ("t",)
    assert llm.model_tools() == ("helper",)
    assert llm.direct_tools() == ()
    assert tool.output_tool() == "t"
    assert foreach.output_tool() is None
    assert sorted(foreach.mappings()) == ["input_mapping", "item_mapping"]
    assert set(KINDS["decision"].compile(decision)) == {"yes"}
    assert set(KINDS["transform"].compile(transform)) == {"expression"}
    assert isinstance(foreach, ForeachStep)
    # a workflow step runs a child run: no tools of its own, no time limit of one try
    assert workflow.called_workflow() == "child"
    assert tool.called_workflow() is None
    assert workflow.direct_tools() == workflow.model_tools() == ()
    assert workflow.step_time_limit() is None
    assert workflow.output_tool() is None
    # a loop step runs a child run per iteration: the same, with outputs of its own
    loop = example("loop")
    assert loop.called_workflow() == "child"
    assert loop.direct_tools() == loop.model_tools() == ()
    assert loop.step_time_limit() is None
    assert loop.output_fields() == ("last", "count", "condition_held", "iterations")
    # an approval step waits without a task: no tools, no time limit of one try; its
    # output is its form's values (none declared here)
    assert approval.direct_tools() == approval.model_tools() == ()
    assert approval.step_time_limit() is None
    assert approval.timeout == 5  # how long it waits
    assert approval.output_fields() == ()
    assert set(KINDS["loop"].compile(loop)) == {"until"}


# --- every list of kinds is derived from the union -----------------------------------

REPO = Path(__file__).resolve().parents[3]


def backticked(text: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", text))


def test_the_engine_registry_is_the_module_named_after_each_kind():
    assert list(KINDS) == list(step_kind_names())
    for name, kind in KINDS.items():
        assert kind.execute.__module__ == f"runs.engine.kinds.{name}"
    with pytest.raises(ImportError, match="must declare KIND"):
        kinds_package._kind("base")  # a module of the folder that is no kind


def test_the_planner_prompt_shows_every_kind_of_the_union():
    for model in MODELS:
        name = model.model_fields["kind"].default
        assert f'"kind": "{name}"' in model.planner_hint, f"`{name}` has no planner_hint"
        shown_in = TEMPLATE_REUSE if model.planner_needs_templates else SYSTEM_PROMPT
        assert f"- {name}: {model.planner_hint}" in shown_in
    assert set(
        re.findall(r'^- ([a-z_]+): \{"id"', SYSTEM_PROMPT + "\n" + TEMPLATE_REUSE, re.M)
    ) == set(KIND_NAMES)


def test_the_docs_schema_lists_every_kind_of_the_union():
    schema = json.loads((REPO / "docs" / "workflow.schema.json").read_text(encoding="utf-8"))
    consts = {
        d["properties"]["kind"].get("const")
        for d in schema["$defs"].values()
        if "kind" in d.get("properties", {})
    }
    assert consts == set(KIND_NAMES)
    steps_md = (REPO / "docs" / "steps.md").read_text(encoding="utf-8")
    row = next(line for line in steps_md.splitlines() if line.startswith("| `kind` |"))
    assert backticked(row.split("|")[2]) == set(KIND_NAMES)
    intro = steps_md.split("\n\n")[1]
    assert backticked(intro) >= set(KIND_NAMES)
    sections = re.findall(r"^## `([a-z_]+)` — ", steps_md, re.M)
    assert sorted(sections) == KIND_NAMES
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"- \*\*Step\*\* — `id`, `kind` \(([^)]*)\)", readme)
    assert listed is not None
    assert backticked(listed.group(1)) == set(KIND_NAMES)


@pytest.mark.django_db
def test_the_admin_graph_legend_shows_every_kind_of_the_union(approver):
    version = pending_version()
    client = Client()
    client.force_login(approver)

    response = client.get(reverse("admin:workflows_workflow_change", args=[version.pk]))

    assert response.status_code == 200
    legend = re.search(r'id="fp-kind-legend">(.*?)</p>', response.content.decode(), re.S)
    assert legend is not None
    assert re.findall(r'data-kind="([a-z_]+)"', legend.group(1)) == list(step_kind_names())
    for name in KIND_NAMES:
        assert f'class="fp-node fp-kind-{name}"' in legend.group(1)


def test_the_step_table_does_not_list_the_kinds():
    """A new kind needs no migration: the rows mirror a definition the union validated."""
    field = Step._meta.get_field("kind")
    assert not field.choices
    conditions = [getattr(c, "condition", None) for c in Step._meta.constraints]
    stored = repr([field.deconstruct()[3], *conditions])
    assert not [name for name in KIND_NAMES if f"'{name}'" in stored]
