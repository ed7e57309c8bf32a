"""What the review page says of parallelism and worker routing (``review/routing.py``),
before approval: the sentences, and the page that shows them."""

from __future__ import annotations

import html
from types import SimpleNamespace

import pytest

from review.routing import routing_notes
from tests.celery_support import load_gauge_tool
from tests.factories import PASSWORD, UserFactory, pending_version
from tests.review.test_admin import login, url
from workflows.schema import WorkflowSpec


class Registry:
    def __init__(self, **queues: str | None) -> None:
        self.tools = {name: SimpleNamespace(queue=queue) for name, queue in queues.items()}

    def get(self, name: str):
        return self.tools.get(name)


def spec(**fields) -> WorkflowSpec:
    steps = fields.pop("steps", None) or [
        {"id": "one", "kind": "tool", "tool": "light", "input_mapping": {}},
    ]
    return WorkflowSpec.model_validate({"name": "notes", "steps": steps, **fields})


def texts(workflow: WorkflowSpec, registry: Registry, site: int = 8) -> list[str]:
    return [n.text for n in routing_notes(workflow, registry, in_process_steps=site)]


def each(**bound) -> dict:
    return {
        "id": "each", "kind": "foreach", "tool": "light",
        "input_mapping": {"items": "$input.rows"}, "item_mapping": {"x": "$item"}, **bound,
    }  # fmt: skip


def test_nothing_set_says_nothing():
    assert texts(spec(), Registry(light=None)) == []


def test_a_workflows_max_parallel_on_both_drivers():
    (note,) = texts(spec(max_parallel=5), Registry(light=None), site=3)
    assert "At most 5 steps of a run at once (max_parallel 5)" in note
    assert "in process, 3 at once" in note  # the site setting is the ceiling there

    (one,) = texts(spec(max_parallel=1), Registry(light=None))
    assert "At most 1 step of a run" in one


@pytest.mark.parametrize(
    ("bound", "said"),
    [
        ({"max_parallel": 5}, "5 items at a time (max_parallel 5): 100 items take at least 20 "),
        ({"concurrency": 3}, "3 items at a time (concurrency 3): 100 items take at least 34 "),
        ({}, "4 items at a time (the default; max_parallel sets it)"),
        ({"max_parallel": 1}, "1 item at a time (max_parallel 1): 100 items take at least 100 "),
    ],
)
def test_a_foreach_step_says_how_many_items_run_at_once(bound, said):
    (note,) = texts(spec(inputs={"rows": {"type": "array"}}, steps=[each(**bound)]), Registry())
    assert note.startswith("Step `each` calls `light` once per item, ")
    assert said in note


def test_a_tools_queue_names_its_steps_and_the_worker_command():
    steps = [
        {"id": "a", "kind": "tool", "tool": "heavy", "input_mapping": {}},
        {"id": "b", "kind": "tool", "tool": "light", "input_mapping": {}},
        {"id": "c", "kind": "tool", "tool": "heavy", "input_mapping": {}},
    ]
    notes = texts(spec(steps=steps, queue="team"), Registry(heavy="slow", light=None))
    assert notes == [
        "Steps `a` (heavy), `c` (heavy) run on queue `slow`, set by their tool: only a worker "
        "started with `-Q slow` (e.g. `celery -A config worker -Q slow`) runs them.",
        "The workflow names queue `team`: its other steps and its run-level tasks run there, "
        "on workers started with `-Q team`.",
    ]
    (alone,) = texts(spec(queue="team"), Registry(light=None))
    assert alone.startswith("The workflow names queue `team`: its steps and")


@pytest.mark.django_db
def test_the_review_page_shows_the_notes_before_approval():
    load_gauge_tool(SimpleNamespace(url="http://127.0.0.1:9"), "heavy_gauge", queue="heavy")
    load_gauge_tool(SimpleNamespace(url="http://127.0.0.1:9"))
    data = {
        "name": "routed_review",
        "inputs": {"tag": {"type": "string"}, "items": {"type": "array"}},
        "max_parallel": 2,
        "queue": "reports",
        "steps": [
            {
                "id": "each", "kind": "foreach", "tool": "gauge", "max_parallel": 5,
                "input_mapping": {"items": "$input.items", "tag": "$input.tag", "delay": 0},
                "item_mapping": {"name": "$item"},
            },
            {
                "id": "slow", "kind": "tool", "tool": "heavy_gauge",
                "input_mapping": {"tag": "$input.tag", "name": "x", "delay": 0},
            },
        ],
    }  # fmt: skip
    version = pending_version(data)
    approver = UserFactory(username="approver", approver=True)
    assert approver.check_password(PASSWORD)

    response = login(approver).get(url("change", version))

    assert response.status_code == 200
    body = html.unescape(response.content.decode())
    assert 'id="fp-routing"' in body
    assert "At most 2 steps of a run at once (max_parallel 2)" in body
    assert "Step `each` calls `gauge` once per item, 5 items at a time (max_parallel 5)" in body
    assert "Steps `slow` (heavy_gauge) run on queue `heavy`" in body
    assert "The workflow names queue `reports`: its other steps" in body
    assert version.status == "pending_review"  # shown before any approval


@pytest.mark.django_db
def test_a_version_without_limits_has_no_section(approver):
    response = login(approver).get(url("change", pending_version()))

    assert response.status_code == 200
    assert 'id="fp-routing"' not in response.content.decode()
