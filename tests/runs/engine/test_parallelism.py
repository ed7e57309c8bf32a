"""``max_parallel`` in process (``runs/engine/local.py``, ``runs/engine/kinds/foreach.py``):
the bound is read on a loopback server counting the requests in flight.

A workflow's ``max_parallel`` lowers the driver's pool (``steps_at_once``); a foreach
step's ``max_parallel`` (or its older name ``concurrency``) is the size of its items'
pool. Each test sends more work than the bound, slow enough for the calls to overlap,
and checks that the server never saw more than the bound at once — and, so that the
check means something, that the calls did overlap up to it.
"""

from __future__ import annotations

import pytest

from runs.engine.build import build_run_context
from runs.engine.local import steps_at_once
from runs.services import run_create, run_execute
from tests.celery_support import (
    Gauge,
    gauge_fan_out,
    gauge_foreach,
    import_flow,
    load_gauge_tool,
)
from tests.fakes import FakeAPI
from workflows.services import workflow_spec

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gauge():
    fake, gauge = FakeAPI().start(), Gauge()
    gauge.install(fake)
    load_gauge_tool(fake)
    yield gauge
    fake.stop()


def run_flow(data: dict, **inputs):
    run = run_create(workflow=import_flow(data), trigger="api", inputs={"tag": "t", **inputs})
    return run_execute(run=run)


def test_a_workflows_max_parallel_bounds_the_steps_in_flight(gauge, settings):
    settings.FLOWPILOT_MAX_PARALLEL_STEPS = 8
    data = {**gauge_fan_out("wide_bounded", 9, delay=0.3), "max_parallel": 3}

    run = run_flow(data)

    assert run.status == "succeeded", run.error_summary
    assert len(gauge.seen) == 9
    assert gauge.most == 3  # never more, and the calls did overlap up to it


def test_without_max_parallel_the_site_setting_bounds_the_steps(gauge, settings):
    settings.FLOWPILOT_MAX_PARALLEL_STEPS = 4
    run = run_flow(gauge_fan_out("wide_site", 8, delay=0.3))

    assert run.status == "succeeded", run.error_summary
    assert gauge.most == 4


def test_the_site_setting_stays_the_ceiling_over_a_larger_max_parallel(gauge, settings):
    settings.FLOWPILOT_MAX_PARALLEL_STEPS = 2
    run = run_flow({**gauge_fan_out("wide_ceiling", 6, delay=0.3), "max_parallel": 5})

    assert run.status == "succeeded", run.error_summary
    assert gauge.most == 2


def test_steps_at_once_is_the_lower_of_the_setting_and_the_workflows_bound(gauge, settings):
    settings.FLOWPILOT_MAX_PARALLEL_STEPS = 8
    for bound, expected in ((3, 3), (None, 8), (50, 8)):
        extra = {} if bound is None else {"max_parallel": bound}
        workflow = import_flow({**gauge_fan_out(f"at_once_{bound or 0}", 2, delay=0), **extra})
        run = run_create(workflow=workflow, trigger="api", inputs={"tag": "t"})
        with build_run_context(run_id=run.pk, spec=workflow_spec(workflow)) as ctx:
            assert steps_at_once(ctx) == expected


@pytest.mark.parametrize("bound", [{"max_parallel": 3}, {"concurrency": 3}])
def test_a_foreach_steps_bound_holds_its_items_in_flight(gauge, bound):
    items = [f"i{i:02d}" for i in range(10)]
    run = run_flow(gauge_foreach("each_bounded", delay=0.3, **bound), items=items)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"count": 10}
    assert sorted(name for _, name in gauge.seen) == items
    assert gauge.most == 3


def test_a_foreach_of_one_at_a_time_never_overlaps(gauge):
    items = [f"i{i}" for i in range(4)]
    run = run_flow(gauge_foreach("each_serial", delay=0.1, max_parallel=1), items=items)

    assert run.status == "succeeded", run.error_summary
    assert gauge.most == 1
    assert [name for _, name in gauge.seen] == items  # one after the other, in order
