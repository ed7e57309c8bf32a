"""Creating the child run of a `workflow` step (``runs.engine.creation.child_run_create``).

The checks ``run_create`` makes, from inside the engine: the child's version validated
against the registry, its own pins, its inputs resolved and free of secret values; and
the link to the parent step. The child flow ``greet`` and its parent ``outer`` are those
of ``tests/runs/subflows.py``; they call the loopback ``echo`` tool.
"""

from __future__ import annotations

import pytest

from runs.engine.creation import child_run_create
from runs.models import Run, StepResult
from runs.services import run_create
from tests.runs.subflows import activate, child_flow, parent_flow
from tools.registry import ToolRegistry
from workflows.inputs import InputsInvalid
from workflows.models import Workflow
from workflows.validator import WorkflowInvalid

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("echo_tools")]


def parent_step() -> StepResult:
    """The `sub` step of a pending run of ``outer``, whose child is ``greet``."""
    child = activate(child_flow())
    assert child.name == "greet"
    run = run_create(workflow=activate(parent_flow()), trigger="api", inputs={"tag": "p"})
    return run.step_results.get(step_id="sub")


def greet() -> Workflow:
    return Workflow.objects.get(name="greet", status="active")


def test_the_child_is_a_pending_run_of_the_version_linked_to_its_parent_step():
    step = parent_step()

    child = child_run_create(
        workflow=greet(), inputs={"tag": "t"}, registry=ToolRegistry.from_db(), parent_step=step
    )

    child.refresh_from_db()
    assert (child.status, child.trigger) == ("pending", "workflow")
    assert (child.parent_run_id, child.parent_step_id) == (step.run_id, step.pk)
    assert child.definition_hash == greet().definition_hash
    assert child.replay_of is None
    assert child.inputs == {"tag": "t", "name": "kid"}  # the declared default filled in
    assert sorted(child.step_results.values_list("step_id", "status")) == [
        ("say", "pending"),
        ("shout", "pending"),
    ]


def test_inputs_the_child_does_not_accept_create_nothing():
    step = parent_step()

    with pytest.raises(InputsInvalid):
        child_run_create(
            workflow=greet(), inputs={"name": "no tag"}, registry=ToolRegistry.from_db(),
            parent_step=step,
        )  # fmt: skip

    assert not Run.objects.filter(parent_run=step.run_id).exists()


def test_an_input_holding_a_declared_secret_is_refused(example_tools, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-s3cr3t-4f5e6d")  # github_repo's credential
    step = parent_step()

    with pytest.raises(InputsInvalid) as refused:
        child_run_create(
            workflow=greet(), inputs={"tag": "token ghp-s3cr3t-4f5e6d"},
            registry=ToolRegistry.from_db(), parent_step=step,
        )  # fmt: skip

    assert [p.split("`")[1] for p in refused.value.problems] == ["tag"]
    assert not Run.objects.filter(parent_run=step.run_id).exists()


def test_a_child_that_does_not_validate_against_the_registry_is_refused():
    step = parent_step()

    with pytest.raises(WorkflowInvalid) as refused:
        child_run_create(
            workflow=greet(), inputs={"tag": "t"}, registry=ToolRegistry([]), parent_step=step
        )  # a registry without the `echo` tool the child calls

    assert "echo" in " ".join(issue.message for issue in refused.value.report.errors)
    assert not Run.objects.filter(parent_run=step.run_id).exists()


def test_the_childs_own_pins_refuse_it_but_not_its_replay():
    step = parent_step()
    Workflow.objects.filter(pk=greet().pk).update(workflow_pins={"gone": "0" * 64})

    with pytest.raises(WorkflowInvalid) as refused:
        child_run_create(
            workflow=greet(), inputs={"tag": "t"}, registry=ToolRegistry.from_db(), parent_step=step
        )
    assert [issue.code for issue in refused.value.report.errors] == ["workflow_changed"]

    recorded = Run.objects.get(pk=step.run_id)  # stands for the run whose calls answer it
    replay = child_run_create(
        workflow=greet(), inputs={"tag": "t"}, registry=ToolRegistry.from_db(),
        parent_step=step, replay_of=recorded,
    )  # fmt: skip
    assert (replay.trigger, replay.replay_of_id, replay.parent_step_id) == (
        "replay",
        recorded.pk,
        step.pk,
    )
