"""Sub-workflows in process: a `workflow` step runs an active workflow as a child run.

Nested outputs, the links both ways, a failing child named, resume resuming the same
child, cancel reaching the child, pins refusing a changed child, and the checks that
refuse recursion, depth and input mismatches. (On real Celery workers:
``test_celery_subworkflows.py``.)
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from runs.engine.creation import child_run_create
from runs.models import Run
from runs.services import run_cancel, run_create, run_execute, run_resume
from tests.conftest import statuses
from tests.runs.subflows import activate, approve, caller_flow, child_flow, parent_flow
from tools.registry import ToolRegistry
from workflows.models import Workflow
from workflows.services import workflow_archive, workflow_import
from workflows.validator import WorkflowInvalid, validate_workflow

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("echo_tools"),
]


def run_of(workflow: Workflow, tag: str = "t1") -> Run:
    return run_execute(run=run_create(workflow=workflow, trigger="api", inputs={"tag": tag}))


def child_of(run: Run) -> Run:
    return Run.objects.get(parent_run=run)


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def issues(data: dict) -> list[tuple[str, str, str]]:
    report = validate_workflow(data, registry=ToolRegistry.from_db())
    return [(i.code, i.path, i.message) for i in report.issues]


def test_a_nested_run_succeeds_with_the_childs_outputs_linked_both_ways():
    activate(child_flow())
    parent = activate(parent_flow())

    run = run_of(parent, "t1")

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"said": "t1!ann", "tag": "t1"}
    child = child_of(run)
    assert child.status == "succeeded"
    assert child.trigger == "workflow"
    assert child.workflow.name == "greet"
    assert child.parent_step == run.step_results.get(step_id="sub")
    assert child.inputs == {"tag": "t1", "name": "ann"}
    assert run.step_results.get(step_id="sub").output == {"tag": "t1", "loud": "t1!ann"}


def test_a_failing_child_fails_the_step_naming_the_childs_failing_step(echo_tools):
    activate(child_flow())
    parent = activate(parent_flow())
    echo_tools.fail("echo", status=404, times=1)

    run = run_of(parent)

    assert run.status == "failed"
    child = child_of(run)
    assert child.status == "failed"
    error = run.step_results.get(step_id="sub").error
    assert error["type"] == "subworkflow_failed"
    assert f"workflow `greet` (child run {child.pk}) failed: step `say` failed" in error["message"]
    assert "step `sub` failed (subworkflow_failed)" in run.error_summary
    assert statuses(run) == {"after": "skipped", "sub": "failed"}


def test_resuming_the_parent_resumes_the_failed_child_not_a_fresh_one(echo_tools):
    activate(child_flow())
    parent = activate(parent_flow())
    echo_tools.fail("echo", status=404, times=1)
    run = run_of(parent)
    assert run.status == "failed"

    run = run_resume(run=run)

    assert run.status == "succeeded", run.error_summary
    child = child_of(run)  # still exactly one child
    assert child.status == "succeeded"
    say = child.step_results.get(step_id="say")
    assert say.attempts == 2  # the child's own step was tried again, in the same child run


def test_cancelling_the_parent_cancels_the_running_child_and_resume_finishes_both(echo_tools):
    activate(child_flow(delay=1.5))
    parent = activate(parent_flow())
    run = run_create(workflow=parent, trigger="api", inputs={"tag": "c1"})

    def execute() -> None:
        try:
            run_execute(run=Run.objects.get(pk=run.pk))
        finally:
            connection.close()

    worker = threading.Thread(target=execute)
    worker.start()
    wait_for(lambda: echo_tools.requests("echo"))
    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True
    worker.join(timeout=15)
    assert not worker.is_alive()

    run.refresh_from_db()
    child = child_of(run)
    assert run.status == "cancelled"
    assert child.status == "cancelled"
    sub = run.step_results.get(step_id="sub")
    assert sub.status == "failed"
    assert sub.error["message"] == f"workflow `greet` (child run {child.pk}) was cancelled"

    echo_tools.heal()
    run = run_resume(run=Run.objects.get(pk=run.pk))
    assert run.status == "succeeded", run.error_summary
    assert Run.objects.filter(parent_run=run).count() == 1
    assert child_of(run).status == "succeeded"


def test_a_child_changed_since_approval_refuses_the_parent_until_reapproved(approver):
    activate(child_flow())
    parent = approve(parent_flow(), approver, {"tag": "ok"})
    assert parent.workflow_pins == {"greet": Workflow.objects.get(name="greet").definition_hash}
    activate(
        child_flow(
            description="now with more steps",
            steps=[*child_flow()["steps"]][:1],
            outputs={"tag": "say.tag", "loud": "say.name"},
        )
    )

    with pytest.raises(WorkflowInvalid) as refused:
        run_create(workflow=parent, trigger="api", inputs={"tag": "x"})

    [issue] = refused.value.report.errors
    assert issue.code == "workflow_changed"
    assert issue.message == (
        "workflow `greet`, which `outer v1` runs as a step, changed since `outer v1` was "
        "approved: v2 is active now (approved against v1); its outputs, steps changed; "
        "re-approve `outer v1` to run it with the new version"
    )


def test_a_child_with_no_active_version_at_run_time_fails_the_step():
    child = activate(child_flow())
    parent = activate(parent_flow())
    run = run_create(workflow=parent, trigger="api", inputs={"tag": "x"})
    workflow_archive(workflow=child, actor=None)

    run = run_execute(run=run)

    assert run.status == "failed"
    error = run.step_results.get(step_id="sub").error
    assert error["type"] == "subworkflow_unavailable"
    assert "runs workflow `greet`, which has no active version" in error["message"]
    activate(child_flow(description="back"))  # a resume has no child to resume: a fresh one
    run = run_resume(run=run)
    assert run.status == "succeeded", run.error_summary
    assert child_of(run).workflow.description == "back"


def test_the_admin_links_parent_and_child_runs_both_ways(admin_client):
    activate(child_flow())
    run = run_of(activate(parent_flow()), "adm")
    child = child_of(run)

    parent_page = admin_client.get(f"/admin/runs/run/{run.pk}/change/").content.decode()
    child_page = admin_client.get(f"/admin/runs/run/{child.pk}/change/").content.decode()
    listing = admin_client.get("/admin/runs/run/").content.decode()

    to_child = (
        f"<a href='/admin/runs/run/{child.pk}/change/'>run {child.pk} (greet v1, succeeded)</a>"
    )
    to_parent = f"<a href='/admin/runs/run/{run.pk}/change/'>run {run.pk} (outer v1, succeeded)</a>"
    assert (
        f"{to_child} for step <code>sub</code>" in parent_page
    )  # the child runs, and the step row
    assert parent_page.count(to_child) == 2
    assert f"{to_parent}, step <code>sub</code>" in child_page
    assert to_parent in listing


# --- validation: recursion, depth, inputs, outputs -------------------------------------


def test_a_workflow_calling_itself_is_refused():
    assert issues(parent_flow(name="greet", child="greet")) == [
        (
            "workflow_recursion",
            "steps[0].workflow",
            "step `sub` runs workflow `greet`, which comes back to `greet`: greet → greet; a "
            "workflow may not call itself, directly or through others",
        )
    ]


def test_recursion_through_a_chain_of_workflows_is_refused():
    activate(child_flow(name="a"))
    activate(caller_flow("c", "a"))
    activate(caller_flow("b", "c"))
    # a v2 would call b, which calls c, which calls a
    found = issues(caller_flow("a", "b"))
    assert [(code, path) for code, path, _ in found] == [
        ("workflow_recursion", "steps[0].workflow")
    ]
    assert "a → b → c → a" in found[0][2]


def test_nesting_deeper_than_the_limit_is_refused(settings):
    settings.FLOWPILOT_MAX_WORKFLOW_DEPTH = 2
    activate(child_flow(name="l0"))
    activate(caller_flow("l1", "l0"))
    activate(caller_flow("l2", "l1"))
    assert issues(caller_flow("l2b", "l1")) == []  # two levels: allowed

    [(code, path, message)] = issues(caller_flow("l3", "l2"))

    assert (code, path) == ("workflow_too_deep", "steps[0].workflow")
    assert message == (
        "step `sub` runs workflow `l2`, which nests workflows 3 levels deep (l3 → l2 → l1 → "
        "l0); at most 2 are allowed (FLOWPILOT_MAX_WORKFLOW_DEPTH)"
    )


def test_mapped_inputs_must_be_the_childs_declared_inputs():
    activate(child_flow())
    data = parent_flow(nmae="ann")  # a typo, and the required `tag` missing

    assert issues(data) == [
        ("unused_input", "inputs.tag", "input `tag` is declared but never read"),
        (
            "missing_workflow_input",
            "steps[0].input_mapping",
            "step `sub` does not map `tag`, a required input of workflow `greet`; map it in "
            "the step's input_mapping",
        ),
        (
            "unknown_workflow_input",
            "steps[0].input_mapping.nmae",
            "step `sub` maps `nmae`, but workflow `greet` declares no input `nmae` (did you "
            "mean `name`?); its inputs are `name`, `tag`",
        ),
    ]
    workflow, _ = workflow_import(data=data)
    with pytest.raises(WorkflowInvalid):
        run_create(workflow=workflow, trigger="api", inputs={"tag": "x"})


def test_references_to_the_childs_outputs_are_checked_like_any_steps():
    activate(child_flow())
    data = parent_flow()
    data["outputs"]["bad"] = "sub.volume"

    [(code, path, message)] = issues(data)

    assert (code, path) == ("unknown_output_field", "outputs.bad")
    assert message == (
        "the workflow outputs reads `sub.volume`, but workflow step `sub` outputs only "
        "`loud`, `tag`"
    )


def test_a_child_whose_stored_definition_no_longer_parses_counts_as_inactive():
    child = activate(child_flow())
    Workflow.objects.filter(pk=child.pk).update(definition={"name": "greet", "steps": "?"})
    assert [code for code, _, _ in issues(parent_flow())] == ["unknown_workflow"]


def test_an_unknown_or_inactive_child_workflow_is_refused():
    [(code, path, message)] = issues(parent_flow(child="nobody"))
    assert (code, path) == ("unknown_workflow", "steps[0].workflow")
    assert message == (
        "step `sub` runs workflow `nobody`, but no version of `nobody` is active; approve it "
        "first, or name an active workflow"
    )


# --- at run time: what validation cannot see ------------------------------------------


def test_a_child_changed_after_the_parent_run_was_created_fails_the_step(approver):
    activate(child_flow())
    parent = approve(parent_flow(), approver, {"tag": "ok"})
    run = run_create(workflow=parent, trigger="api", inputs={"tag": "x"})
    activate(child_flow(description="changed"))

    run = run_execute(run=run)

    error = run.step_results.get(step_id="sub").error
    assert error["type"] == "subworkflow_unavailable"
    assert error["message"] == (
        "workflow `greet` changed since `outer v1` was approved (v2 is active now); "
        "re-approve `outer v1`"
    )


def test_nesting_past_the_limit_at_run_time_fails_the_step(settings):
    activate(child_flow())
    activate(caller_flow("middle", "greet"))
    top = activate(caller_flow("top", "middle"))
    run = run_create(workflow=top, trigger="api", inputs={"tag": "x"})
    settings.FLOWPILOT_MAX_WORKFLOW_DEPTH = 1  # lowered after validation

    run = run_execute(run=run)

    middle = child_of(run)
    error = middle.step_results.get(step_id="sub").error
    assert error["message"] == (
        "step `sub` would nest workflow `greet` 2 levels deep; at most 1 are allowed "
        "(FLOWPILOT_MAX_WORKFLOW_DEPTH)"
    )
    assert "workflow `middle`" in run.step_results.get(step_id="sub").error["message"]


def test_child_outputs_stored_truncated_fail_the_step_clearly(settings):
    activate(child_flow())
    parent = activate(parent_flow())
    run = run_create(workflow=parent, trigger="api", inputs={"tag": "x" * 400})
    settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES = 300

    run = run_execute(run=run)

    child = child_of(run)
    assert child.status == "succeeded"
    assert child.outputs["_truncated"] is True
    assert run.step_results.get(step_id="sub").error["message"] == (
        f"step `sub`: the outputs of child run {child.pk} were stored truncated (over "
        "FLOWPILOT_MAX_STORED_OUTPUT_BYTES); raise the limit"
    )
    run = run_resume(run=run)  # the child succeeded: it is read again, not resumed
    assert run.status == "failed"
    assert list(Run.objects.filter(parent_run=run)) == [child]


def test_a_child_still_running_in_process_is_not_driven_twice():
    activate(child_flow())
    run = run_create(workflow=activate(parent_flow()), trigger="api", inputs={"tag": "x"})
    parent_step = run.step_results.get(step_id="sub")
    stuck = child_run_create(
        workflow=Workflow.objects.get(name="greet"),
        inputs={"tag": "x"},
        registry=ToolRegistry.from_db(),
        parent_step=parent_step,
    )
    Run.objects.filter(pk=stuck.pk).update(status="running")

    run = run_execute(run=run)

    assert run.step_results.get(step_id="sub").error["message"] == (
        f"step `sub`: its child run {stuck.pk} is still running (its process died?); resume "
        f"it with `resumeflow {stuck.pk} --force` first"
    )


def test_the_dry_run_names_the_workflow_a_step_runs(cli):
    activate(child_flow())
    activate(parent_flow())

    result = cli("runflow", "outer", "--dry-run", "--input", "tag=x")

    assert result.code == 0, result.err
    assert "        runs workflow: greet (its active version, as a child run)" in result.lines
    assert not Run.objects.exists()
