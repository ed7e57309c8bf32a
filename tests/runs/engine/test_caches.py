"""The per-process caches (runs/engine/caches.py): shared, immutable, bounded, and
invalidated by a change of the tool table."""

from __future__ import annotations

import pytest

from runs.engine import caches
from runs.engine.caches import LRU
from runs.services import run_create, run_execute
from tests.conftest import import_example
from tools.models import Tool
from tools.services import tools_set_enabled
from workflows.models import Workflow
from workflows.services import workflow_import
from workflows.validator import WorkflowInvalid

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("example_tools")]


def test_a_definition_is_compiled_once_and_shared_read_only():
    workflow = import_example("sales_report")

    first, second = caches.plan_for(workflow), caches.plan_for(Workflow.objects.get(pk=workflow.pk))

    assert first is second
    with pytest.raises(TypeError):
        first.parsed["x"] = {}  # type: ignore[index]


def test_a_definition_edited_in_place_is_a_new_key():
    workflow = import_example("sales_report")
    before = caches.plan_for(workflow)
    definition = dict(workflow.definition, description="edited behind the hash's back")
    Workflow.objects.filter(pk=workflow.pk).update(definition=definition)
    workflow.refresh_from_db()

    assert caches.plan_for(workflow) is not before
    assert caches.plan_for(workflow).spec.description == "edited behind the hash's back"


def test_the_registry_is_rebuilt_only_when_the_tool_table_changes():
    state = caches.tools_state()
    registry = caches.registry_for(state)
    assert caches.registry_for(caches.tools_state()) is registry

    name = Tool.objects.order_by("name").values_list("name", flat=True)[0]
    tools_set_enabled(tools=Tool.objects.filter(name=name), enabled=False)

    assert caches.tools_state() != state
    assert name not in caches.registry_for(caches.tools_state())


def test_the_validation_report_follows_the_tools():
    workflow = import_example("geo_weather")
    run_create(workflow=workflow, trigger="validation")  # valid, and now cached
    Tool.objects.filter(name="ip_geolocate").delete()

    with pytest.raises(WorkflowInvalid, match="ip_geolocate"):
        run_create(workflow=workflow, trigger="validation")


def test_a_run_sees_a_tool_changed_since_the_last_run(fake_api, output_dir):
    workflow = import_example("geo_weather")
    run = run_execute(run=run_create(workflow=workflow, trigger="validation"))
    assert run.status == "succeeded", run.error_summary
    tools_set_enabled(tools=Tool.objects.filter(name="ip_geolocate"), enabled=False)

    with pytest.raises(WorkflowInvalid, match="ip_geolocate"):
        run_create(workflow=workflow, trigger="validation")


def test_the_caches_are_bounded_and_keep_the_newest():
    cache: LRU[int] = LRU(2)
    built = []

    def build(value: int):
        def make() -> int:
            built.append(value)
            return value

        return make

    cache.get("a", build(1))
    cache.get("b", build(2))
    cache.get("a", build(99))  # a hit: "a" is now the newest
    cache.get("c", build(3))  # evicts "b"

    assert len(cache) == 2
    assert cache.get("b", build(4)) == 4
    assert built == [1, 2, 3, 4]
    cache.clear()
    assert len(cache) == 0


def test_a_definition_that_does_not_compile_is_never_cached():
    workflow, _ = workflow_import(
        data={"name": "w", "steps": [{"id": "a", "kind": "transform", "expression": "{n: `1`}"}]}
    )
    Workflow.objects.filter(pk=workflow.pk).update(definition={"name": "w", "steps": 3})
    workflow.refresh_from_db()

    for _ in range(2):
        with pytest.raises(Exception, match="does not fit the workflow format"):
            caches.plan_for(workflow)
