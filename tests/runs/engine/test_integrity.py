"""Data integrity in the engine: NUL characters, immutable step data, malformed results.

Steps call the test-only ``HostileProvider`` (``tests/fakes/providers.py``). Each run
goes in process, through a resume, and through the Celery driver (``Bus``: the real
``step_execute`` on this database), and every way must see the same data.
"""

from __future__ import annotations

import pytest

from runs.engine import caches
from runs.engine.celery.run import run_start
from runs.models import Run, StepResult
from runs.services import run_create, run_execute, run_resume
from runs.state import RunStatus, StepStatus
from tests.celery_support import Bus, import_flow
from tests.conftest import results_of, statuses
from tests.fakes.providers import HOSTILE_PROVIDER
from tools.jsondata import store_unescape

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def hostile_provider(settings):
    settings.FLOWPILOT_BUILTIN_PROVIDERS = [
        "tools.builtin.data.DataToolsProvider",
        HOSTILE_PROVIDER,
    ]
    caches.caches_clear()  # the providers setting is part of the cache key; start clean
    yield
    caches.caches_clear()


def step(sid: str, tool: str, **mapping) -> dict:
    return {"id": sid, "kind": "tool", "tool": tool, "input_mapping": mapping}


def mutating_flow() -> dict:
    return {
        "name": "mutating",
        "steps": [
            step("src", "emit", kind="list"),
            step("mut", "append", items="src.items", meta="src.meta"),
            step("read_items", "hold", value="src.items"),
            step("read_meta", "hold", value="src.meta"),
        ],
        "edges": [{"from": "mut", "to": "read_items"}, {"from": "mut", "to": "read_meta"}],
        "outputs": {
            "items": "src.items",
            "meta": "src.meta",
            "mut": "mut.items",
            "read_items": "read_items.value",
            "read_meta": "read_meta.value",
        },
    }


EXPECTED = {
    "items": [1, 2],
    "meta": {"tags": ["a"]},
    "mut": [1, 2, "mutated"],
    "read_items": [1, 2],
    "read_meta": {"tags": ["a"]},
}


def in_process(data: dict, inputs: dict | None = None) -> Run:
    run = run_create(workflow=import_flow(data), trigger="api", inputs=inputs or {})
    return run_execute(run=run)


def on_celery_driver(data: dict) -> Run:
    run = run_create(workflow=import_flow(data), trigger="api", inputs={})
    bus = Bus()
    run_start(run=run, publish=bus)
    bus.drain()
    run.refresh_from_db()
    return run


def test_a_step_that_mutates_its_arguments_changes_nothing_any_other_reader_sees():
    run = in_process(mutating_flow())

    assert run.status == RunStatus.SUCCEEDED, run.error_summary
    assert run.outputs == EXPECTED
    rows = results_of(run)
    assert rows["src"].output == {"items": [1, 2], "meta": {"tags": ["a"]}}
    assert rows["read_meta"].output == {"value": {"tags": ["a"]}}
    assert rows["mut"].inputs["items"] == [1, 2]  # the record is what it received


def test_a_resumed_run_and_a_celery_run_see_the_same_data_as_in_process():
    first = in_process(mutating_flow())
    # `read_meta` failed (written directly: no transition leaves `succeeded`); a resume
    # runs it again, reading `src` from the checkpoint.
    StepResult.objects.filter(run=first, step_id="read_meta").update(
        status=StepStatus.FAILED, error={"type": "lost", "message": "lost"}
    )
    Run.objects.filter(pk=first.pk).update(status=RunStatus.FAILED, outputs=None)
    first.refresh_from_db()
    resumed = run_resume(run=first)
    celery = on_celery_driver(mutating_flow())

    assert resumed.status == celery.status == RunStatus.SUCCEEDED
    assert resumed.outputs == celery.outputs == EXPECTED


def nul_flow() -> dict:
    return {
        "name": "nul_data",
        "steps": [step("src", "emit", kind="nul"), step("copy", "hold", value="src.data")],
        "outputs": {"text": "src.text", "copy": "copy.value"},
    }


NUL_VALUE = {"text": "a\x00b", "key\x00name": ["\x00", "␀0"], "plain": "␀"}


def test_nul_characters_reach_the_next_step_intact_and_are_stored_escaped():
    run = in_process(nul_flow())

    assert run.status == RunStatus.SUCCEEDED, run.error_summary
    rows = results_of(run)
    assert rows["src"].output["data"] == {
        "text": "a␀0b", "key␀0name": ["␀0", "␀␀0"], "plain": "␀␀"
    }
    assert store_unescape(rows["copy"].output) == {"value": NUL_VALUE}
    assert store_unescape(rows["copy"].inputs) == {"value": NUL_VALUE}
    assert store_unescape(run.outputs) == {"text": "a\x00b", "copy": NUL_VALUE}


def test_the_celery_driver_reads_nul_characters_back_as_the_step_produced_them():
    run = on_celery_driver(nul_flow())

    assert run.status == RunStatus.SUCCEEDED, run.error_summary
    assert statuses(run) == {"copy": "succeeded", "src": "succeeded"}
    assert store_unescape(run.outputs) == {"text": "a\x00b", "copy": NUL_VALUE}


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("set", "`set` at `output.value`"),
        ("bytes", "`bytes` at `output.value`"),
        ("nan", "`float (nan)` at `output.value`"),
        ("inf", "`float (inf)` at `output[0]`"),
        ("object", "`object` at `output.value`"),
        ("int_key", "`int (a dict key)` at `output[1]`"),
        ("top_set", "`set` at `output`"),
    ],
)
def test_a_result_that_is_not_json_is_an_output_invalid_step_failure(kind, named):
    flow = {"name": f"bad_{kind}", "steps": [step("bad", "emit", kind=kind)]}
    run = in_process(flow)

    assert run.status == RunStatus.FAILED
    bad = results_of(run)["bad"]
    assert bad.status == StepStatus.FAILED
    assert bad.error["type"] == "output_invalid"
    assert named in bad.error["message"]
    assert "step `bad` failed (output_invalid)" in run.error_summary

    again = run_resume(run=run)  # resumable: the same clear failure, no crash
    assert again.status == RunStatus.FAILED
    assert results_of(again)["bad"].error["type"] == "output_invalid"


def test_a_tuple_result_is_stored_as_a_list():
    run = in_process({"name": "tuple", "steps": [step("t", "emit", kind="tuple")]})

    assert run.status == RunStatus.SUCCEEDED
    assert results_of(run)["t"].output == {"value": [1, 2]}


def test_a_600_deep_result_runs_is_stored_and_read_back():
    flow = {
        "name": "deep_data",
        "steps": [step("src", "emit", kind="deep"), step("copy", "hold", value="src.d")],
    }
    run = in_process(flow)

    assert run.status == RunStatus.SUCCEEDED, run.error_summary
    value = store_unescape(results_of(run)["copy"].output)["value"]
    depth = 0
    while "d" in value:
        value, depth = value["d"], depth + 1
    assert (depth, value) == (599, {"leaf": "\x00end"})


def test_step_inputs_records_over_the_cap_are_stored_as_a_flagged_preview(settings):
    settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES = 2000
    settings.FLOWPILOT_MAX_RUN_INPUT_BYTES = 100_000
    flow = {
        "name": "big_inputs",
        "inputs": {"blob": {"type": "string"}},
        "steps": [step("copy", "hold", value="$input.blob")],
        "outputs": {"size": "copy.value"},
    }
    run = in_process(flow, {"blob": "x" * 50_000})

    row = results_of(run)["copy"]
    assert row.inputs_truncated is True
    assert row.inputs["_truncated"] is True
    assert len(row.inputs["preview"]) <= 4096
    assert row.output_truncated is True
