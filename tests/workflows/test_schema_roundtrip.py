"""The builder API: a workflow built in Python (``WorkflowSpec(...)``) reads back identical
from its file form — property-tested over generated workflows of every step kind, with
mappings, retries, inputs, schedules and limits drawn at random, each field either left
at its default, written with its default, or given another value."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.policy import RetryPolicy
from workflows.schema import (
    ApprovalStep,
    DecisionStep,
    Edge,
    ForeachStep,
    InputSpec,
    LLMStep,
    LoopStep,
    ToolStep,
    TransformStep,
    WorkflowSpec,
    WorkflowStep,
    step_kind_names,
)
from workflows.schema_concurrency import Concurrency
from workflows.schema_llm import LLMBudget
from workflows.schema_triggers import Notifications, ScheduleSpec

SLUG = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
NAME = st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True)
TEXT = st.text(max_size=20)
SECONDS = st.floats(min_value=0.001, max_value=86400, allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | TEXT
SCALARS |= st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


def _fields(**optional: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments of which any may be left out (the model's default then applies)."""
    return st.fixed_dictionaries({}, optional=optional)


RETRY = _fields(
    max_attempts=st.integers(1, 20),
    initial_delay=st.floats(0, 3600),
    max_delay=st.floats(0, 3600),
    multiplier=st.floats(1, 10),
    jitter=st.floats(0, 1),
).map(lambda kw: RetryPolicy(**kw))


@st.composite
def mappings(draw: st.DrawFn, ids: list[str]) -> dict[str, Any]:
    """Parameter → a reference to another step, an input, an env value or a literal."""
    reference = st.sampled_from(ids).flatmap(
        lambda step_id: st.sampled_from([f"{step_id}.out", f"$step.{step_id}", f"{step_id}.a.0"])
    )
    value = reference | st.sampled_from(["$input.city", "$env.TOKEN"]) | JSON
    value |= st.lists(reference, max_size=2) | st.dictionaries(SLUG, reference, max_size=2)
    value |= st.builds(lambda v: {"$literal": v}, JSON)
    return draw(st.dictionaries(SLUG, value, max_size=3))


def _base(ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return _fields(
        name=TEXT,
        description=TEXT,
        input_mapping=mappings(ids),
        retry=st.none() | RETRY,
        timeout=st.none() | SECONDS,
        on_error=st.sampled_from(["fail", "continue"]),
        max_output_bytes=st.none() | st.integers(1, 10**9),
    )


LLM_SETTINGS = _fields(
    endpoint=st.none() | st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True),
    model=st.none() | st.text(min_size=1, max_size=20),
    temperature=st.none() | st.floats(0, 2),
    max_output_tokens=st.none() | st.integers(1, 1_000_000),
    seed=st.none() | st.integers(0, 2**31 - 1),
)
BUDGET = _fields(
    max_tokens=st.none() | st.integers(1, 10**6),
    max_calls=st.none() | st.integers(1, 100),
    max_tool_calls=st.none() | st.integers(0, 100),
).map(lambda kw: LLMBudget(**kw))
SCHEMA = st.sampled_from(
    [{"type": "string"}, {"type": "object", "properties": {"score": {"type": "integer"}}}]
)


def _kind_fields(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """The fields a step of ``kind`` needs, and some of the optional ones."""
    if kind == "tool":
        return st.fixed_dictionaries({"tool": NAME}, optional={"kind": st.just("tool")})
    if kind == "llm":
        own = st.fixed_dictionaries(
            {"prompt": st.text(min_size=1, max_size=30)},
            optional={
                "system": TEXT,
                "tools": st.lists(NAME, max_size=2),
                "max_turns": st.integers(1, 50),
                "output_schema": st.none() | SCHEMA,
                "budget": BUDGET,
                "context_budget_chars": st.none() | st.integers(2_000, 10_000_000),
                "kind": st.just("llm"),
            },
        )
        return st.tuples(own, LLM_SETTINGS).map(lambda pair: {**pair[0], **pair[1]})
    if kind == "decision":
        return st.lists(SLUG, min_size=1, max_size=3, unique=True).flatmap(
            lambda branches: st.fixed_dictionaries(
                {"branches": st.just(branches)},
                optional={
                    "conditions": st.dictionaries(
                        st.sampled_from(branches), st.just("x > 1"), max_size=2
                    ),
                    "default": st.none() | st.sampled_from(branches),
                    "decision_prompt": st.none() | st.text(min_size=1, max_size=20),
                    "model": st.none() | st.just("m"),
                },
            )
        )
    if kind == "transform":
        return st.fixed_dictionaries(
            {"expression": st.sampled_from(["rows[0]", "{n: length(rows)}", "@"])}
        )
    if kind == "foreach":
        bound = st.sampled_from(["concurrency", "max_parallel", None]).flatmap(
            lambda which: st.just({}) if which is None else st.builds(
                lambda n: {which: n}, st.integers(1, 100)
            )
        )  # fmt: skip
        own = st.fixed_dictionaries(
            {"tool": NAME}, optional={"item_mapping": st.just({"q": "$item.name", "i": "$index"})}
        )
        return st.tuples(own, bound).map(lambda pair: {**pair[0], **pair[1]})
    if kind == "loop":
        return st.fixed_dictionaries(
            {
                "workflow": NAME,
                "max_iterations": st.integers(1, 50),
                "until": st.sampled_from(["output.passed == true", "iteration >= 2"]),
            },
            optional={
                "iteration_mapping": st.just({"draft": "$loop.previous.fixed"}),
                "on_exhausted": st.sampled_from(["fail", "continue"]),
                "kind": st.just("loop"),
            },
        )
    if kind == "approval":
        return st.fixed_dictionaries(
            {},
            optional={
                "approvers": st.lists(
                    st.sampled_from(["alice", "bob", "group:finance"]), max_size=3, unique=True
                ),
                "author_may_approve": st.booleans(),
                "form": st.none() | st.just(FORM),
                "on_timeout": st.sampled_from(["fail", "skip", "continue"]),
                "kind": st.just("approval"),
            },
        )
    return st.fixed_dictionaries({"workflow": NAME})


# An approval step's form (the values an approver gives).
FORM = {"type": "object", "properties": {"note": {"type": "string", "default": ""}}}

MODELS = {
    "tool": ToolStep,
    "llm": LLMStep,
    "decision": DecisionStep,
    "transform": TransformStep,
    "foreach": ForeachStep,
    "workflow": WorkflowStep,
    "loop": LoopStep,
    "approval": ApprovalStep,
}


@st.composite
def steps(draw: st.DrawFn) -> list[Any]:
    ids = draw(st.lists(SLUG, min_size=1, max_size=5, unique=True))
    built = []
    for index, step_id in enumerate(ids):
        kind = draw(st.sampled_from(sorted(MODELS)))
        fields = {**draw(_base(ids[:index] or ids)), **draw(_kind_fields(kind))}
        built.append(MODELS[kind](id=step_id, **fields))
    return built


INPUT = _fields(
    type=st.sampled_from(["string", "integer", "number", "boolean", "object", "array"]),
    description=TEXT,
    default=JSON,
    required=st.none() | st.booleans(),
    enum=st.none() | st.lists(SCALARS, max_size=3),
).map(lambda kw: InputSpec(**kw))
SCHEDULE = st.sampled_from(["0 9 * * 1-5", "*/5 * * * *"]) | _fields(
    timezone=st.sampled_from(["UTC", "Europe/Paris"]),
    inputs=st.dictionaries(SLUG, JSON, max_size=2),
    overlap=st.sampled_from(["skip", "buffer_one", "allow_all"]),
    catchup_window=st.integers(0, 3600),
    pause_after_failures=st.none() | st.integers(1, 10),
    jitter=st.integers(0, 60),
).map(lambda kw: ScheduleSpec(cron="0 * * * *", **kw))
NOTIFY = _fields(
    email=st.lists(st.sampled_from(["ops@example.com", "a.b@example.org"]), max_size=2),
    webhook=st.none() | st.just("https://hooks.example.com/flow"),
    webhook_secret_env=st.none() | st.just("HOOK_KEY"),
    on=st.lists(st.sampled_from(["failed", "recovered", "succeeded"]), max_size=3, unique=True),
).map(lambda kw: Notifications(**kw))
LIMIT = _fields(
    key=st.none() | st.just("$input.city") | st.just("none"),
    on_limit=st.sampled_from(["queue", "skip", "fail"]),
).flatmap(lambda kw: st.integers(1, 10_000).map(lambda n: Concurrency(max_runs=n, **kw)))


@st.composite
def workflows(draw: st.DrawFn) -> WorkflowSpec:
    built = draw(steps())
    ids = [s.id for s in built]
    edge = st.tuples(st.sampled_from(ids), st.sampled_from(ids), st.none() | SLUG).map(
        lambda e: (
            Edge(from_=e[0], to=e[1], when=e[2]) if e[2] else Edge(**{"from": e[0], "to": e[1]})
        )
    )
    fields = draw(
        _fields(
            description=TEXT,
            goal=TEXT,
            inputs=st.dictionaries(
                st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), INPUT, max_size=3
            ),
            tools=st.none() | st.lists(NAME, max_size=3),
            edges=st.lists(edge, max_size=4),
            outputs=st.dictionaries(SLUG, st.sampled_from([f"{i}.out" for i in ids]), max_size=2),
            schedule=st.none() | SCHEDULE,
            retention_days=st.none() | st.integers(0, 36500),
            notifications=NOTIFY,
            queue=st.none() | st.just("reports"),
            max_parallel=st.none() | st.integers(1, 1000),
            concurrency=st.none() | LIMIT,
        )
    )
    return WorkflowSpec(name=draw(NAME), steps=built, **fields)


@settings(max_examples=100, deadline=None)
@given(workflows())
def test_a_workflow_built_in_python_reads_back_identical(spec):
    data = spec.to_data()
    again = WorkflowSpec.model_validate(data)
    assert again == spec
    assert again.to_data() == data
    assert again.model_dump_json(by_alias=True) == spec.model_dump_json(by_alias=True)
    assert again.definition_hash() == spec.definition_hash()
    # Through JSON text too, as a file or the database holds it.
    assert WorkflowSpec.model_validate(json.loads(json.dumps(data))) == spec
    assert all("kind" in step for step in data["steps"])


def test_a_defaulted_kind_is_written_so_the_file_form_reads_back():
    spec = WorkflowSpec(
        name="built",
        steps=[ToolStep(id="fetch", tool="http_get"), TransformStep(id="shape", expression="@")],
        edges=[Edge(from_="fetch", to="shape")],
    )
    data = spec.to_data()
    assert data["steps"] == [
        {"id": "fetch", "kind": "tool", "tool": "http_get"},
        {"id": "shape", "kind": "transform", "expression": "@"},
    ]
    assert data["edges"] == [{"from": "fetch", "to": "shape"}]
    assert WorkflowSpec.model_validate(data) == spec
    # The same step read from a file (kind written) hashes the same as the built one.
    read = WorkflowSpec.model_validate(
        {"name": "built", "steps": data["steps"], "edges": [{"from": "fetch", "to": "shape"}]}
    )
    assert read.definition_hash() == spec.definition_hash()


@pytest.mark.parametrize("kind", step_kind_names())
def test_every_kind_of_the_union_is_generated(kind):
    assert kind in MODELS
