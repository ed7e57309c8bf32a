"""Control flow end to end: decisions, skips and joins, foreach, error branches, the allowlist.

Named after the feature, not a module: control flow spans the validator, graph and engine kinds.

Runs go through ``runflow`` (or the run services, where a test must bypass
validation) with the ops-API tool files of ``tests/data/tools/control`` against
the fake ops API on loopback (``control_api``); the tests assert what the server
received as well as every StepResult row.
"""

from __future__ import annotations

import json

import pytest

from runs.engine.readiness import StepState, next_actions
from runs.models import Run, StepResult
from runs.run_view import run_view
from runs.services import run_create, run_execute
from runs.state import StepStatus
from tests.conftest import CONTROL_TOOLS_DIR, results_of, statuses, write_flow
from tests.fakes.control import item_record
from workflows.graph import build_graph
from workflows.models import Workflow
from workflows.schema import WorkflowSpec
from workflows.services import workflow_import
from workflows.validator import WorkflowInvalid

pytestmark = pytest.mark.django_db(transaction=True)

PENDING, SKIPPED, SUCCEEDED = StepStatus.PENDING, StepStatus.SKIPPED, StepStatus.SUCCEEDED


def runflow(cli, tmp_path, flow: str, **inputs):
    inputs_file = tmp_path / "inputs.json"
    inputs_file.write_text(json.dumps(inputs), encoding="utf-8")
    return cli(
        "runflow", flow, "--tools", str(CONTROL_TOOLS_DIR), "--inputs-file", str(inputs_file)
    )


def last_run() -> Run:
    return Run.objects.order_by("-pk").first()


# --- decisions: branch taken, branch not taken ---------------------------------------


def triage_flow() -> dict:
    """check → triage (slow | fast) → page (slow) / note (fast) → report (join)."""
    return {
        "name": "triage",
        "inputs": {"service": {"type": "string"}},
        "steps": [
            {
                "id": "check",
                "kind": "tool",
                "tool": "service_status",
                "input_mapping": {"service": "$input.service"},
            },
            {
                "id": "triage",
                "kind": "decision",
                "input_mapping": {"latency": "check.latency_ms", "state": "check.state"},
                "branches": ["slow", "fast"],
                "conditions": {"slow": 'latency > 200 or state != "ok"'},
                "default": "fast",
            },
            {
                "id": "page",
                "kind": "tool",
                "tool": "alert_send",
                "input_mapping": {
                    "level": "warning",
                    "service": "check.service",
                    "message": "check.state",
                },
            },
            {
                "id": "note",
                "kind": "transform",
                "input_mapping": {"service": "check.service", "latency": "check.latency_ms"},
                "expression": "{service: service, latency: latency}",
            },
            {
                "id": "report",
                "kind": "transform",
                "input_mapping": {
                    "alert": "page.id",
                    "latency": "note.latency",
                    "service": "check.service",
                },
                "expression": "{service: service, paged: alert != `null`, latency: latency}",
            },
        ],
        "edges": [
            {"from": "triage", "to": "page", "when": "slow"},
            {"from": "triage", "to": "note", "when": "fast"},
        ],
        "outputs": {
            "report": "report.service",
            "paged": "report.paged",
            "latency": "report.latency",
        },
    }


def test_branch_taken_calls_its_tool_and_the_other_branch_is_skipped(control_api, cli, tmp_path):
    result = runflow(cli, tmp_path, write_flow(tmp_path, triage_flow()), service="db")

    assert result.code == 0, result.out + result.err
    run = last_run()
    assert statuses(run) == {
        "check": "succeeded",
        "triage": "succeeded",
        "page": "succeeded",
        "note": "skipped",
        "report": "succeeded",
    }
    steps = results_of(run)
    assert steps["triage"].output == {
        "branch": "slow",
        "condition": 'latency > 200 or state != "ok"',
    }
    assert steps["triage"].inputs == {"latency": 850, "state": "degraded"}
    (alert,) = control_api.requests("alert")
    assert alert.method == "POST"
    assert alert.json() == {"level": "warning", "service": "db", "message": "degraded"}
    assert steps["page"].output == {"accepted": True, "id": 1}
    assert steps["note"].inputs is None  # never resolved, never started

    # Why it was skipped, on the run page and in showrun (not a bare "0 tries").
    reasons = {v.step_id: v.skip_reason for v in run_view(run=run).steps}
    assert reasons["note"] == "decision `triage` chose `slow`, not `fast`"
    assert reasons["page"] == ""
    shown = cli("showrun", str(run.pk)).out
    assert "note                     transform  never ran  decision `triage` chose `slow`" in shown
    assert steps["note"].started_at is None
    assert steps["report"].inputs == {"alert": 1, "latency": None, "service": "db"}
    assert run.outputs == {"report": "db", "paged": True, "latency": None}
    assert [r.route for r in control_api.requests()] == ["status", "alert"]
    assert "  skipped  note" in result.out


def test_branch_not_taken_sends_nothing_to_its_tool(control_api, cli, tmp_path):
    result = runflow(cli, tmp_path, write_flow(tmp_path, triage_flow()), service="api")

    assert result.code == 0, result.out + result.err
    run = last_run()
    assert statuses(run) == {
        "check": "succeeded",
        "triage": "succeeded",
        "page": "skipped",
        "note": "succeeded",
        "report": "succeeded",
    }
    assert control_api.requests("alert") == []
    assert control_api.control.alerts == []
    assert [r.route for r in control_api.requests()] == ["status"]
    assert results_of(run)["page"].attempts == 0
    assert run.outputs == {"report": "api", "paged": False, "latency": 40}


def cascade_flow() -> dict:
    """route (full | quick): full → fetch → enrich → publish; quick → summary; join → final."""
    return {
        "name": "cascade",
        "inputs": {"mode": {"type": "string"}, "service": {"type": "string"}},
        "steps": [
            {
                "id": "check",
                "kind": "tool",
                "tool": "service_status",
                "input_mapping": {"service": "$input.service"},
            },
            {
                "id": "route",
                "kind": "decision",
                "input_mapping": {"mode": "$input.mode"},
                "branches": ["full", "quick"],
                "conditions": {"full": 'mode == "full"', "quick": 'mode == "quick"'},
            },
            {
                "id": "enrich",
                "kind": "transform",
                "input_mapping": {"state": "check.state", "tags": "check.tags"},
                "expression": "{state: state, tag_count: length(tags)}",
            },
            {
                "id": "publish",
                "kind": "tool",
                "tool": "alert_send",
                # reads `check` (before the branch point) beside `enrich` (on the branch)
                "input_mapping": {
                    "level": "info",
                    "service": "check.service",
                    "message": "enrich.state",
                },
            },
            {
                "id": "summary",
                "kind": "transform",
                "input_mapping": {"service": "check.service"},
                "expression": "{line: join(' ', [service, 'checked quickly'])}",
            },
            {
                "id": "final",
                "kind": "transform",
                "input_mapping": {
                    "alert": "publish.id",
                    "line": "summary.line",
                    "service": "check.service",
                },
                "expression": "{service: service, alert: alert, line: line}",
            },
        ],
        "edges": [
            {"from": "route", "to": "enrich", "when": "full"},
            {"from": "route", "to": "summary", "when": "quick"},
        ],
        "outputs": {"alert": "final.alert", "line": "final.line"},
    }


def test_untaken_branch_and_its_exclusive_descendants_are_skipped(control_api, cli, tmp_path):
    flow = cascade_flow()

    result = runflow(cli, tmp_path, write_flow(tmp_path, flow), mode="quick", service="api")

    assert result.code == 0, result.out + result.err
    run = last_run()
    assert statuses(run) == {
        "check": "succeeded",
        "route": "succeeded",
        "enrich": "skipped",
        "publish": "skipped",  # reads check.service too, but only runs behind `enrich`
        "summary": "succeeded",
        "final": "succeeded",
    }
    assert control_api.requests("alert") == []
    assert results_of(run)["final"].inputs == {
        "alert": None,
        "line": "api checked quickly",
        "service": "api",
    }
    assert run.outputs == {"alert": None, "line": "api checked quickly"}


def test_join_after_a_branch_runs_when_the_other_side_ran(control_api, cli, tmp_path):
    flow = cascade_flow()

    result = runflow(cli, tmp_path, write_flow(tmp_path, flow), mode="full", service="db")

    assert result.code == 0, result.out + result.err
    run = last_run()
    assert statuses(run) == {
        "check": "succeeded",
        "route": "succeeded",
        "enrich": "succeeded",
        "publish": "succeeded",
        "summary": "skipped",
        "final": "succeeded",
    }
    (alert,) = control_api.requests("alert")
    assert alert.json() == {"level": "info", "service": "db", "message": "degraded"}
    assert run.outputs == {"alert": 1, "line": None}
    steps = results_of(run)
    assert steps["final"].started_at >= steps["publish"].finished_at


def test_a_decision_with_no_branch_matched_fails_the_run_and_nothing_behind_it_runs(
    control_api, cli, tmp_path
):
    result = runflow(
        cli, tmp_path, write_flow(tmp_path, cascade_flow()), mode="sideways", service="api"
    )

    assert result.code == 1
    run = last_run()
    assert run.status == "failed"
    steps = results_of(run)
    assert steps["route"].status == "failed"
    assert steps["route"].error["type"] == "no_branch_matched"
    assert "no condition held and there is no default branch" in steps["route"].error["message"]
    assert {s: steps[s].status for s in ("enrich", "publish", "summary", "final")} == {
        "enrich": "skipped",
        "publish": "skipped",
        "summary": "skipped",
        "final": "skipped",
    }
    assert "step `route` failed (no_branch_matched)" in run.error_summary
    assert control_api.requests("alert") == []


# --- the readiness rules behind the skips (pure, no I/O) -------------------------------


def test_readiness_branch_steps_reading_upstream_data_still_follow_the_branch():
    """A branch step reading `check` (before the decision) is gated by the branch.

    Before the gate, the inferred edge `check → page` was active whenever `check`
    succeeded, so `page` ran on every branch and no skip could cascade.
    """
    spec = WorkflowSpec.model_validate(triage_flow())
    graph = build_graph(spec)
    state = {s: StepState(PENDING) for s in graph.step_ids}
    state.update(check=StepState(SUCCEEDED), triage=StepState(SUCCEEDED, branch="fast"))

    actions = next_actions(graph, state)

    assert actions.start == ("note",)
    assert actions.skip == ("page",)

    state.update(note=StepState(SUCCEEDED), page=StepState(SKIPPED))
    assert next_actions(graph, state).start == ("report",)  # the join runs


# --- foreach ---------------------------------------------------------------------------


def foreach_flow(*, concurrency: int, on_error: str = "fail") -> dict:
    return {
        "name": "fan_out",
        "inputs": {"ids": {"type": "array"}, "currency": {"type": "string", "default": "EUR"}},
        "steps": [
            {
                "id": "each",
                "kind": "foreach",
                "tool": "item_get",
                "input_mapping": {"items": "$input.ids", "currency": "$input.currency"},
                "item_mapping": {"id": "$item", "index": "$index"},
                "concurrency": concurrency,
                "on_error": on_error,
            },
            {
                "id": "prices",
                "kind": "transform",
                "input_mapping": {"results": "each.items"},
                "expression": "{ids: results[].id, total: sum(results[].price)}",
            },
        ],
        "outputs": {"count": "each.count", "ids": "prices.ids", "total": "prices.total"},
    }


def test_foreach_over_100_items_keeps_at_most_10_requests_in_flight(control_api, cli, tmp_path):
    control_api.control.item_delay = 0.05
    ids = list(range(1, 101))

    result = runflow(
        cli, tmp_path, write_flow(tmp_path, foreach_flow(concurrency=10)), ids=ids, currency="USD"
    )

    assert result.code == 0, result.out + result.err
    gauge = control_api.control.in_flight
    assert gauge.total == 100
    assert 1 < gauge.peak <= 10
    assert gauge.current == 0
    requests = control_api.requests("item")
    assert sorted(int(r.segments[1]) for r in requests) == ids
    assert all(r.arg("currency") == "USD" for r in requests)  # the shared parameter
    assert {int(r.segments[1]): int(r.arg("index")) for r in requests} == {i: i - 1 for i in ids}
    run = last_run()
    each = results_of(run)["each"]
    assert each.status == "succeeded"
    assert each.attempts == 1
    assert each.output["count"] == 100
    assert each.output["errors"] == []
    assert each.output["items"] == [
        {**item_record(i, "USD"), "index": i - 1} for i in ids
    ]  # input order
    assert run.outputs["ids"] == ids
    assert run.outputs["total"] == pytest.approx(sum(i * 1.25 for i in ids))


def test_foreach_results_keep_input_order_when_answers_arrive_out_of_order(
    control_api, cli, tmp_path
):
    control_api.control.item_delays = {7: 0.3, 5: 0.2, 3: 0.1}
    ids = [7, 5, 3, 1]

    result = runflow(cli, tmp_path, write_flow(tmp_path, foreach_flow(concurrency=4)), ids=ids)

    assert result.code == 0, result.out + result.err
    control_api.wait_finished()
    finished = [
        int(r.segments[1])
        for r in sorted(control_api.requests("item"), key=lambda r: r.finished_at)
    ]
    assert finished == [1, 3, 5, 7]  # the server answered in reverse
    assert last_run().outputs["ids"] == [7, 5, 3, 1]


def test_foreach_with_on_error_continue_collects_the_failed_items(control_api, cli, tmp_path):
    control_api.control.missing = {2, 4}
    flow = foreach_flow(concurrency=3, on_error="continue")
    flow["steps"][1]["expression"] = (
        "{ids: results[?@ != `null`].id, total: sum(results[?@ != `null`].price)}"
    )

    result = runflow(cli, tmp_path, write_flow(tmp_path, flow), ids=[1, 2, 3, 4, 5])

    assert result.code == 0, result.out + result.err
    run = last_run()
    each = results_of(run)["each"]
    assert each.status == "succeeded"
    assert [i and i["id"] for i in each.output["items"]] == [1, None, 3, None, 5]
    assert [e["index"] for e in each.output["errors"]] == [1, 3]
    assert {e["error"]["type"] for e in each.output["errors"]} == {"http_error"}
    assert {e["error"]["status"] for e in each.output["errors"]} == {404}
    assert run.outputs == {"count": 5, "ids": [1, 3, 5], "total": 11.25}
    assert len(control_api.requests("item")) == 5  # 404 is fatal: no retries


def test_foreach_item_failure_fails_the_step_under_on_error_fail(control_api, cli, tmp_path):
    control_api.control.missing = {3}

    result = runflow(
        cli, tmp_path, write_flow(tmp_path, foreach_flow(concurrency=2)), ids=[1, 2, 3, 4]
    )

    assert result.code == 1
    run = last_run()
    assert statuses(run) == {"each": "failed", "prices": "skipped"}
    error = results_of(run)["each"].error
    assert error["type"] == "foreach_items_failed"
    assert "1 of 4 items failed; first, item 2: http_error" in error["message"]
    assert len(control_api.requests("item")) == 4  # the others were still called


def test_item_mapping_may_read_run_inputs_and_upstream_steps(control_api, cli, tmp_path):
    flow = foreach_flow(concurrency=2)
    catalog = {"id": "catalog", "kind": "tool", "tool": "catalog_list"}
    flow["steps"].insert(0, {**catalog, "input_mapping": {"limit": 3}})
    flow["steps"][1]["input_mapping"] = {"items": "$input.ids"}
    flow["steps"][1]["item_mapping"] = {
        "id": "$item",
        "currency": "$input.currency",
        "index": "catalog.count",
    }

    result = runflow(cli, tmp_path, write_flow(tmp_path, flow), ids=[1, 2], currency="GBP")

    assert result.code == 0, result.out + result.err
    calls = control_api.requests("item")
    assert sorted((r.arg("currency"), r.arg("index")) for r in calls) == [("GBP", "3")] * 2
    assert control_api.requests()[0].route == "catalog"  # the edge the reference infers


# --- errors routed through a decision ------------------------------------------------------


def fallback_flow() -> dict:
    """fetch (on_error: continue) → ok? → use it / 404 → alert / 5xx → retry later."""
    return {
        "name": "fallback",
        "inputs": {"service": {"type": "string"}},
        "steps": [
            {
                "id": "fetch",
                "kind": "tool",
                "tool": "service_status",
                "input_mapping": {"service": "$input.service"},
                "on_error": "continue",
                "retry": {"max_attempts": 2, "initial_delay": 0.01, "jitter": 0},
            },
            {
                "id": "outcome",
                "kind": "decision",
                "input_mapping": {"err": "fetch.error"},
                "branches": ["missing", "later", "ok"],
                "conditions": {
                    "missing": 'exists(err) and err.type == "http_error" and err.status == 404',
                    "later": "exists(err) and err.retryable",
                    "ok": "not exists(err)",
                },
            },
            {
                "id": "alert",
                "kind": "tool",
                "tool": "alert_send",
                "input_mapping": {
                    "level": "critical",
                    "service": "$input.service",
                    "message": "fetch.error.message",
                },
            },
            {
                "id": "use",
                "kind": "transform",
                "input_mapping": {"state": "fetch.state"},
                "expression": "{state: state}",
            },
            {
                "id": "later",
                "kind": "transform",
                "input_mapping": {"status": "fetch.error.status"},
                "expression": "{retry: `true`, status: status}",
            },
        ],
        "edges": [
            {"from": "outcome", "to": "alert", "when": "missing"},
            {"from": "outcome", "to": "later", "when": "later"},
            {"from": "outcome", "to": "use", "when": "ok"},
        ],
        "outputs": {"branch": "outcome.branch", "state": "use.state", "later": "later.status"},
    }


def test_an_error_is_routed_through_a_decision_to_the_alert_branch(control_api, cli, tmp_path):
    result = runflow(cli, tmp_path, write_flow(tmp_path, fallback_flow()), service="nope")

    assert result.code == 0, result.out + result.err
    run = last_run()
    assert run.status == "succeeded"
    assert statuses(run) == {
        "fetch": "failed",
        "outcome": "succeeded",
        "alert": "succeeded",
        "use": "skipped",
        "later": "skipped",
    }
    steps = results_of(run)
    assert steps["fetch"].error["type"] == "http_error"
    assert steps["fetch"].error["status"] == 404
    assert steps["fetch"].attempts == 1  # a 404 is fatal: not retried
    assert steps["outcome"].inputs["err"]["status"] == 404
    (alert,) = control_api.requests("alert")
    body = alert.json()
    assert body["level"] == "critical"
    assert body["service"] == "nope"
    assert "404" in body["message"]
    assert run.outputs == {"branch": "missing", "state": None, "later": None}
    assert "  FAILED   fetch" in result.out


def test_a_retryable_error_takes_another_branch_after_the_retries(control_api, cli, tmp_path):
    control_api.fail("status", status=503)

    result = runflow(cli, tmp_path, write_flow(tmp_path, fallback_flow()), service="api")

    assert result.code == 0, result.out + result.err
    run = last_run()
    assert statuses(run)["later"] == "succeeded"
    assert results_of(run)["fetch"].attempts == 2
    assert len(control_api.requests("status")) == 2
    assert control_api.requests("alert") == []
    assert run.outputs == {"branch": "later", "state": None, "later": 503}


def test_without_an_error_the_ok_branch_runs(control_api, cli, tmp_path):
    result = runflow(cli, tmp_path, write_flow(tmp_path, fallback_flow()), service="db")

    assert result.code == 0, result.out + result.err
    assert last_run().outputs == {"branch": "ok", "state": "degraded", "later": None}
    assert control_api.requests("alert") == []


# --- the tool allowlist ------------------------------------------------------------------


def allowlisted_flow() -> dict:
    return {
        "name": "allowlisted",
        "inputs": {"service": {"type": "string"}},
        "tools": ["service_status"],
        "steps": [
            {
                "id": "check",
                "kind": "tool",
                "tool": "service_status",
                "input_mapping": {"service": "$input.service"},
            },
            {
                "id": "again",
                "kind": "tool",
                "tool": "service_status",
                "input_mapping": {"service": "check.service"},
            },
        ],
        "outputs": {"state": "check.state"},
    }


def test_an_allowlist_violation_is_rejected_at_validation(control_api, cli, tmp_path):
    flow = allowlisted_flow()
    flow["steps"][1].update(
        tool="alert_send", input_mapping={"level": "critical", "service": "check.service"}
    )

    result = runflow(cli, tmp_path, write_flow(tmp_path, flow), service="api")

    assert result.code == 1
    assert "[tool_not_allowed]" in result.out
    assert "step `again` uses tool `alert_send`, which the workflow's `tools` do not allow" in (
        result.out
    )
    assert "1 validation error(s); not run" in result.err
    assert Run.objects.count() == 0
    assert control_api.requests() == []


@pytest.mark.parametrize("kind", ["tool", "foreach"])
def test_an_allowlist_violation_edited_into_a_stored_definition_fails_at_run_time(
    control_api, control_tools, kind
):
    workflow, _ = workflow_import(data=allowlisted_flow())
    # By hand, behind the validator's back: step `again` now calls a tool outside `tools`.
    definition = json.loads(json.dumps(workflow.definition))
    if kind == "tool":
        definition["steps"][1].update(
            tool="alert_send", input_mapping={"level": "critical", "service": "check.service"}
        )
    else:
        definition["steps"][1] = {
            "id": "again",
            "kind": "foreach",
            "tool": "item_get",
            "input_mapping": {"items": [1, 2, 3]},
            "item_mapping": {"id": "$item"},
            "concurrency": 2,
        }
        definition["outputs"] = {"state": "check.state"}
    Workflow.objects.filter(pk=workflow.pk).update(definition=definition)
    workflow.refresh_from_db()

    with pytest.raises(WorkflowInvalid) as rejected:  # the normal path validates first
        run_create(workflow=workflow, trigger="manual", inputs={"service": "api"})
    assert [i.code for i in rejected.value.report.errors] == ["tool_not_allowed"]

    # Bypass validation: record the run and its steps by hand, then execute.
    run = Run.objects.create(
        workflow=workflow,
        definition_hash=workflow.definition_hash,
        trigger="manual",
        inputs={"service": "api"},
    )
    StepResult.objects.bulk_create(
        StepResult(run=run, step_id=s["id"]) for s in definition["steps"]
    )
    run = run_execute(run=run)

    assert run.status == "failed"
    assert statuses(run) == {"check": "succeeded", "again": "failed"}
    again = results_of(run)["again"]
    assert again.error["type"] == "tool_not_allowed"  # a foreach is refused once, not per item
    message = again.error["message"]
    assert "may not call tool" in message
    assert "not in the workflow's tool allowlist (service_status)" in message
    assert [r.route for r in control_api.requests()] == ["status"]  # nothing else was sent


def test_a_per_item_argument_that_resolves_to_null_is_left_out_like_a_shared_one(
    control_api, cli, tmp_path
):
    flow = foreach_flow(concurrency=2)
    flow["steps"][0]["input_mapping"] = {"items": "$input.ids"}
    flow["steps"][0]["item_mapping"] = {"id": "$item.id", "currency": "$item.currency"}
    rows = [{"id": 1, "currency": "USD"}, {"id": 2}]

    result = runflow(cli, tmp_path, write_flow(tmp_path, flow), ids=rows)

    assert result.code == 0, result.out + result.err
    calls = sorted(control_api.requests("item"), key=lambda r: r.path)
    assert [(r.path, r.arg("currency")) for r in calls] == [("/items/1", "USD"), ("/items/2", None)]
    assert [i["currency"] for i in results_of(last_run())["each"].output["items"]] == ["USD", "EUR"]
