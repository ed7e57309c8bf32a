"""Item-level `foreach` restart and resume (``runs.engine.kinds.foreach``, ``runs.restart``).

A failed `foreach` keeps every succeeded item's result in its checkpoint; a resume or a
restart of it calls only the items that did not succeed. Every item is a real request
to the fake ops API on loopback (``control_api``), which counts them.
"""

from __future__ import annotations

import pytest

from runs.restart import RestartNeedsConfirmation, restart_plan, run_restart
from runs.services import run_create, run_execute, run_resume
from runs.state import RunStatus, StepStatus
from tests.conftest import results_of
from tools.services import tools_load_dir
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

MISSING = {17, 500, 999}  # the items the API answers 404 for, the first time


def fan_flow(name: str = "item_fan", tool: str = "item_get", on_error: str = "fail") -> dict:
    return {
        "name": name,
        "inputs": {"ids": {"type": "array"}},
        "steps": [
            {"id": "each", "kind": "foreach", "tool": tool, "max_parallel": 8,
             "input_mapping": {"items": "$input.ids"},
             "item_mapping": {"id": "$item", "index": "$index"}, "on_error": on_error},
            {"id": "prices", "kind": "transform", "input_mapping": {"results": "each.items"},
             "expression": "{ids: results[].id, n: length(results)}"},
        ],
        "outputs": {"ids": "prices.ids", "n": "prices.n"},
    }  # fmt: skip


def failed_run(control_api, *, count: int = 1000, flow: dict | None = None):
    control_api.control.missing = set(MISSING)
    version, _ = workflow_import(data=flow or fan_flow())
    ids = list(range(1, count + 1))
    run = run_execute(run=run_create(workflow=version, trigger="cli", inputs={"ids": ids}))
    assert run.status == RunStatus.FAILED
    assert len(control_api.requests("item")) == count
    control_api.clear()
    control_api.control.missing = set()  # the API is fixed
    return run, ids


def test_a_failed_foreach_keeps_its_succeeded_items_and_names_the_failed_ones(
    control_api, control_tools
):
    run, ids = failed_run(control_api, count=30, flow=fan_flow())
    each = results_of(run)["each"]

    assert each.status == StepStatus.FAILED
    assert each.error["type"] == "foreach_items_failed"
    assert each.output["count"] == 30
    assert [e["index"] for e in each.output["errors"]] == [16]
    assert [e["item"] for e in each.output["errors"]] == [17]
    assert each.output["errors"][0]["error"]["status"] == 404
    assert each.output["items"][16] is None
    assert [i["id"] for n, i in enumerate(each.output["items"]) if n != 16] == [
        i for i in ids if i != 17
    ]


def test_a_restart_of_a_failed_foreach_calls_only_its_3_failed_items_of_1000(
    control_api, control_tools
):
    run, ids = failed_run(control_api)

    plan = restart_plan(run=run, from_step="each")
    assert plan.carried == {"each": (997, 1000)}
    again = run_restart(run=run, from_step="each")

    assert again.status == RunStatus.SUCCEEDED, again.error_summary
    sent = sorted(int(r.segments[1]) for r in control_api.requests("item"))
    assert sent == sorted(MISSING)  # exactly 3 calls
    assert again.outputs == {"ids": ids, "n": 1000}
    each = results_of(again)["each"]
    assert not each.reused
    assert each.output["errors"] == []
    assert each.inputs["carried over (not called again)"] == 997


def test_a_resume_of_a_failed_foreach_calls_only_its_3_failed_items_of_1000(
    control_api, control_tools
):
    run, ids = failed_run(control_api)

    resumed = run_resume(run=run)

    assert resumed.status == RunStatus.SUCCEEDED, resumed.error_summary
    sent = sorted(int(r.segments[1]) for r in control_api.requests("item"))
    assert sent == sorted(MISSING)
    assert resumed.outputs == {"ids": ids, "n": 1000}


def test_a_restart_of_a_foreach_under_on_error_continue_reruns_its_failed_items(
    control_api, control_tools
):
    control_api.control.missing = {2, 4}
    version, _ = workflow_import(data=fan_flow("fan_continue", on_error="continue"))
    run = run_execute(run=run_create(workflow=version, trigger="cli", inputs={"ids": [1, 2, 3, 4]}))
    assert run.status == RunStatus.SUCCEEDED
    assert [(e["index"], e["item"]) for e in results_of(run)["each"].output["errors"]] == [
        (1, 2),
        (3, 4),
    ]
    control_api.clear()
    control_api.control.missing = set()

    again = run_restart(run=run, from_step="each")

    assert sorted(int(r.segments[1]) for r in control_api.requests("item")) == [2, 4]
    assert again.outputs == {"ids": [1, 2, 3, 4], "n": 4}


def test_a_foreach_whose_every_item_succeeded_runs_every_item_again(control_api, control_tools):
    version, _ = workflow_import(data=fan_flow("fan_ok"))
    run = run_execute(run=run_create(workflow=version, trigger="cli", inputs={"ids": [1, 2, 3]}))
    assert run.status == RunStatus.SUCCEEDED
    control_api.clear()

    assert restart_plan(run=run, from_step="each").carried == {}
    run_restart(run=run, from_step="each")

    assert len(control_api.requests("item")) == 3


@pytest.fixture
def unsafe_item_tool(tmp_path, control_tools):
    """``item_take``: ``item_get`` declared not idempotent."""
    from tests.conftest import CONTROL_TOOLS_DIR

    text = (CONTROL_TOOLS_DIR / "item_get.yaml").read_text()
    text = text.replace("name: item_get", "name: item_take") + "idempotent: false\n"
    (tmp_path / "item_take.yaml").write_text(text)
    report = tools_load_dir(directory=tmp_path)
    assert report.ok, report.errors


def test_non_idempotent_items_need_the_confirmation_naming_how_many_run_again(
    control_api, unsafe_item_tool
):
    run, _ = failed_run(control_api, count=20, flow=fan_flow("fan_unsafe", tool="item_take"))

    with pytest.raises(RestartNeedsConfirmation) as refused:
        run_restart(run=run, from_step="each")
    assert "`each` (tool `item_take`; 1 of 20 items)" in refused.value.message
    assert control_api.requests() == []

    again = run_restart(run=run, from_step="each", confirm_non_idempotent=True)
    assert again.status == RunStatus.SUCCEEDED
    assert [int(r.segments[1]) for r in control_api.requests("item")] == [17]


def test_a_foreach_downstream_of_a_rerun_step_runs_every_item(control_api, control_tools):
    flow = fan_flow("fan_down")
    flow["steps"].insert(
        0,
        {"id": "ids", "kind": "transform", "input_mapping": {"ids": "$input.ids"},
         "expression": "{list: ids}"},
    )  # fmt: skip
    flow["steps"][1]["input_mapping"] = {"items": "ids.list"}
    run, _ = failed_run(control_api, count=20, flow=flow)

    assert restart_plan(run=run, from_step="ids").carried == {}
    again = run_restart(run=run, from_step="ids")

    assert again.status == RunStatus.SUCCEEDED
    assert len(control_api.requests("item")) == 20


# --- the progress itself: stored masked, carried only when it fits ----------------------


class _StoreContext:
    """What ``checkpoint.outcome_output`` reads of a run context."""

    def __init__(self, secret: str) -> None:
        from types import SimpleNamespace

        from tools.redaction import Redactor

        self.redactor = Redactor([secret])
        self.limits = SimpleNamespace(max_stored_output_bytes=1_000_000)


def test_a_failed_foreachs_progress_is_stored_masked_by_value():
    from runs.engine.attempt import StepOutcome
    from runs.engine.checkpoint import outcome_output

    secret = "sk-item-0f9e8d7c6b5a"
    progress = {
        "items": [{"token": secret, "id": 1}, None],
        "count": 2,
        "errors": [{"index": 1, "item": {"key": secret}, "error": {"type": "http_error"}}],
    }
    failed = StepOutcome(StepStatus.FAILED, output=progress, error={"type": "x"})

    stored, capped = outcome_output(_StoreContext(secret), failed)

    assert not capped
    assert secret not in str(stored)
    assert stored["items"][0] == {"token": "***", "id": 1}
    assert stored["errors"][0]["item"] == {"key": "***"}
    assert outcome_output(_StoreContext(secret), StepOutcome(StepStatus.FAILED)) == (None, False)


def test_progress_is_carried_only_for_a_list_of_the_same_length_with_failed_items():
    from runs.engine.kinds.foreach import carry_progress, foreach_progress
    from runs.engine.resolve import DONE_KEY
    from workflows.schema import ForeachStep

    step = ForeachStep(id="each", tool="item_get", input_mapping={"items": [1, 2, 3]})
    progress = {"items": [{"id": 1}, None, {"id": 3}], "count": 3,
                "errors": [{"index": 1, "item": 2, "error": {}}]}  # fmt: skip

    assert carry_progress(step, progress, {"items": [1, 2, 3]})[DONE_KEY] == [
        [{"id": 1}],
        None,
        [{"id": 3}],
    ]
    assert foreach_progress(progress) == (2, 3)
    assert DONE_KEY not in carry_progress(step, progress, {"items": [1, 2]})  # another list
    preview = {"_truncated": True, "preview": "{…"}
    assert DONE_KEY not in carry_progress(step, preview, {"items": [1, 2, 3]})
    clean = {**progress, "errors": []}
    assert DONE_KEY not in carry_progress(step, clean, {"items": [1, 2, 3]})
    assert foreach_progress(clean) is None


# --- onto another version --------------------------------------------------------------


def _active(version):
    from workflows.models import Workflow, WorkflowStatus

    Workflow.objects.filter(name=version.name).exclude(pk=version.pk).update(
        status=WorkflowStatus.ARCHIVED
    )
    Workflow.objects.filter(pk=version.pk).update(status=WorkflowStatus.ACTIVE)
    version.refresh_from_db()
    return version


def priced_flow(name: str) -> dict:
    flow = fan_flow(name)
    flow["inputs"]["currency"] = {"type": "string", "required": False}  # no default
    flow["steps"][0]["input_mapping"]["currency"] = "$input.currency"
    return flow


def test_a_restart_onto_a_version_that_fixed_a_later_step_carries_the_items(
    control_api, control_tools
):
    run, ids = failed_run(control_api, count=40, flow=priced_flow("fan_v"))
    fixed = priced_flow("fan_v")
    fixed["steps"][1]["expression"] = "{ids: results[].id, n: length(results), v: `2`}"
    v2 = _active(workflow_import(data=fixed)[0])

    plan = restart_plan(run=run, from_step="each", version=v2)
    again = run_restart(run=run, from_step="each", version=v2)

    assert plan.changed == ("prices",)
    assert plan.carried == {"each": (39, 40)}
    assert again.status == RunStatus.SUCCEEDED, again.error_summary
    assert [int(r.segments[1]) for r in control_api.requests("item")] == [17]
    assert again.outputs == {"ids": ids, "n": 40}


def test_an_input_the_new_version_gives_another_value_runs_every_item(control_api, control_tools):
    run, _ = failed_run(control_api, count=20, flow=priced_flow("fan_cur"))
    changed = priced_flow("fan_cur")
    changed["inputs"]["currency"]["default"] = "USD"  # the run had none
    v2 = _active(workflow_import(data=changed)[0])

    assert restart_plan(run=run, from_step="each", version=v2).carried == {}
    again = run_restart(run=run, from_step="each", version=v2)

    assert again.status == RunStatus.SUCCEEDED, again.error_summary
    requests = control_api.requests("item")
    assert len(requests) == 20
    assert {r.arg("currency") for r in requests} == {"USD"}
