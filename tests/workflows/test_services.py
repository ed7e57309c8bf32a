"""Workflow services and selectors: import as versions, rows that mirror the definition,
lifecycle transitions, and which version a trigger runs."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.conftest import EXAMPLES_DIR
from tools.errors import FlowpilotError
from workflows.errors import WorkflowError, WorkflowNotFound, WorkflowTransitionError
from workflows.files import read_workflow_file
from workflows.models import Edge, Step, Workflow
from workflows.selectors import workflow_get_runnable, workflow_list
from workflows.services import (
    workflow_activate_trusted,
    workflow_import,
    workflow_parse,
    workflow_spec,
    workflow_transition,
)
from workflows.validation.report import WorkflowInvalid

pytestmark = pytest.mark.django_db


def example(name: str) -> dict:
    return read_workflow_file(EXAMPLES_DIR / f"{name}.yaml")


def variant(name: str, description: str) -> dict:
    data = example(name)
    data["description"] = description
    return data


# --- import -------------------------------------------------------------------------------


def test_import_stores_the_frozen_definition_and_its_summary_fields():
    data = example("github_intel")

    workflow, created = workflow_import(data=data)

    assert created is True
    assert (workflow.name, workflow.version, workflow.status) == ("github_intel", 1, "draft")
    assert workflow.definition == data
    assert workflow.definition_hash == workflow_spec(workflow).definition_hash()
    assert workflow.description == data["description"]
    assert workflow.goal == data["goal"]
    assert workflow.tools == data["tools"]
    assert workflow.outputs == data["outputs"]
    assert workflow.inputs == data["inputs"]
    assert workflow.schedule == ""


def test_import_mirrors_steps_and_merged_edges_as_rows():
    workflow, _ = workflow_import(data=example("github_intel"))

    steps = list(Step.objects.filter(workflow=workflow).order_by("position"))
    assert [(s.step_id, s.kind, s.tool, s.position) for s in steps] == [
        ("repo", "tool", "github_repo", 0),
        ("contributors", "tool", "github_contributors", 1),
        ("issues", "tool", "github_issues", 2),
        ("releases", "tool", "github_releases", 3),
        ("languages", "tool", "github_languages", 4),
        ("post", "tool", "post_json", 5),
    ]
    assert steps[5].input_mapping["payload"]["stars"] == "repo.stars"
    edges = {
        (e.from_step, e.to_step): e.inferred
        for e in Edge.objects.filter(workflow=workflow).order_by("from_step", "to_step")
    }
    fetches = ("contributors", "issues", "languages", "releases")
    assert edges == {
        **{("repo", f): False for f in fetches},  # written in the file
        **{(f, "post"): True for f in fetches},  # inferred from the payload references
        ("repo", "post"): True,
    }


def test_the_tool_allowlist_defaults_to_the_tools_the_steps_name():
    data = example("travel_briefing")
    del data["tools"]

    workflow, _ = workflow_import(data=data)

    assert workflow.tools == [
        "country_info",
        "exchange_rate",
        "geocode_city",
        "post_json",
        "weather_current",
    ]


def test_import_refuses_a_definition_that_fails_the_schema_naming_each_path():
    data = example("geo_weather")
    data["steps"][1]["kind"] = "teleport"
    data["inputs"]["ip"]["type"] = "ipv4"

    with pytest.raises(WorkflowError) as caught:
        workflow_import(data=data)

    message = caught.value.message
    assert message.startswith("workflow definition is invalid: ")
    assert "steps[1]" in message
    assert "inputs.ip.type" in message
    assert Workflow.objects.count() == 0


def test_a_graph_with_a_cycle_is_still_stored_for_the_validator_to_report():
    data = {
        "name": "loop",
        "steps": [
            {"id": "a", "kind": "tool", "tool": "t", "input_mapping": {"x": "b.v"}},
            {"id": "b", "kind": "tool", "tool": "t", "input_mapping": {"x": "a.v"}},
        ],
    }

    workflow, created = workflow_import(data=data)

    assert created is True
    assert Step.objects.filter(workflow=workflow).count() == 2


def test_duplicate_step_ids_are_refused_with_a_clear_error_not_a_database_crash():
    step = {"kind": "tool", "tool": "country_info", "input_mapping": {"code": "DE"}}
    data = {"name": "dups", "steps": [{"id": "a", **step}, {"id": "a", **step}]}

    with pytest.raises(FlowpilotError, match="duplicate step id `a`"):
        workflow_import(data=data)


def test_import_of_a_parsed_spec_is_the_same_as_of_its_data():
    data = example("sales_report")

    first, _ = workflow_import(data=workflow_parse(data))
    second, created = workflow_import(data=data)

    assert created is False
    assert second.pk == first.pk


def test_the_owner_is_recorded():
    user = get_user_model().objects.create_user("ann")

    workflow, _ = workflow_import(data=example("sales_report"), owner=user)

    assert workflow.owner == user


# --- lifecycle ----------------------------------------------------------------------------


def test_the_review_path_leads_to_active_and_records_the_approver():
    user = get_user_model().objects.create_user("reviewer")
    workflow, _ = workflow_import(data=example("geo_weather"))

    for status in ("pending_review", "validating", "active", "archived"):
        workflow_transition(workflow=workflow, to=status, actor=user)
        workflow.refresh_from_db()
        assert workflow.status == status
        if status == "active":
            assert workflow.approved_by == user
            assert workflow.approved_at is not None


@pytest.mark.parametrize(
    ("path", "to"),
    [((), "active"), (("pending_review",), "active"), (("archived",), "draft"), ((), "draft")],
)
def test_transitions_outside_the_table_are_refused(path, to):
    workflow, _ = workflow_import(data=example("geo_weather"))
    for status in path:
        workflow_transition(workflow=workflow, to=status)

    with pytest.raises(WorkflowTransitionError, match=f"cannot become {to}"):
        workflow_transition(workflow=workflow, to=to)
    workflow.refresh_from_db()
    assert workflow.status == (path[-1] if path else "draft")


def test_trusted_activation_takes_a_draft_straight_to_active_once(example_tools):
    workflow, _ = workflow_import(data=example("geo_weather"))

    workflow_activate_trusted(workflow=workflow)
    workflow_activate_trusted(workflow=workflow)  # already active: no change

    workflow.refresh_from_db()
    assert workflow.status == "active"
    assert workflow.approved_at is not None


def test_trusted_activation_refuses_anything_but_a_draft():
    workflow, _ = workflow_import(data=example("geo_weather"))
    workflow_transition(workflow=workflow, to="pending_review")

    with pytest.raises(WorkflowTransitionError, match="is pending_review, not draft"):
        workflow_activate_trusted(workflow=workflow)


def test_trusted_activation_still_validates_and_activates_nothing_invalid(example_tools):
    data = example("geo_weather")
    data["outputs"] = {**data["outputs"], "wind": "nowhere.speed"}  # no step `nowhere`
    workflow, _ = workflow_import(data=data)

    with pytest.raises(WorkflowInvalid, match="nowhere"):
        workflow_activate_trusted(workflow=workflow)
    workflow.refresh_from_db()
    assert (workflow.status, workflow.approved_at) == ("draft", None)


# --- selectors ----------------------------------------------------------------------------


def test_workflow_list_is_ordered_by_name_then_newest_version():
    workflow_import(data=example("sales_report"))
    workflow_import(data=example("geo_weather"))
    workflow_import(data=variant("geo_weather", "v2"))

    assert [(w.name, w.version) for w in workflow_list()] == [
        ("geo_weather", 2),
        ("geo_weather", 1),
        ("sales_report", 1),
    ]


def test_a_trigger_runs_the_newest_active_version_not_a_newer_draft(example_tools):
    v1, _ = workflow_import(data=example("geo_weather"))
    workflow_activate_trusted(workflow=v1)
    v2, _ = workflow_import(data=variant("geo_weather", "v2"))
    workflow_activate_trusted(workflow=v2)
    workflow_import(data=variant("geo_weather", "v3 draft"))

    assert workflow_get_runnable(name="geo_weather") == v2
    with pytest.raises(WorkflowNotFound, match="v1 is archived, not active"):
        workflow_get_runnable(name="geo_weather", version=1)  # replaced when v2 went active


def test_runnable_lookups_say_what_exists_instead():
    workflow_import(data=example("geo_weather"))
    workflow_import(data=variant("geo_weather", "v2"))

    with pytest.raises(WorkflowNotFound, match="no stored workflow named `nope`"):
        workflow_get_runnable(name="nope")
    with pytest.raises(WorkflowNotFound, match=r"has no active version \(newest is v2, draft\)"):
        workflow_get_runnable(name="geo_weather")
    with pytest.raises(WorkflowNotFound, match=r"has no v9 \(has v2, v1\)"):
        workflow_get_runnable(name="geo_weather", version=9)
    with pytest.raises(WorkflowNotFound, match="v1 is draft, not active"):
        workflow_get_runnable(name="geo_weather", version=1)


def test_activating_a_version_archives_the_active_one_it_replaces():
    data = example("sales_report")
    first, _ = workflow_import(data=data)
    workflow_activate_trusted(workflow=first)
    second, created = workflow_import(data={**data, "description": "v2"})
    assert created

    workflow_activate_trusted(workflow=second)

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == ("archived", "active")
    assert workflow_get_runnable(name="sales_report").pk == second.pk


def test_a_stored_definition_that_no_longer_parses_is_a_clear_error():
    workflow, _ = workflow_import(data=example("sales_report"))
    Workflow.objects.filter(pk=workflow.pk).update(definition={"name": "sales_report", "steps": 3})
    workflow.refresh_from_db()

    with pytest.raises(WorkflowError, match=r"stored definition of `sales_report v1`.*steps"):
        workflow_spec(workflow)
