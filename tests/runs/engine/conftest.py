"""Fixtures of the engine tests.

- ``echo_api``: the Celery tests' loopback tools.
- ``tasks``: records the tasks a sub-workflow sends by name (``runs.start_run``,
  ``runs.settle_parent_step``) instead of a broker; ``settle(bus, tasks)`` delivers
  step messages and those tasks the way workers would, and ``start`` starts a parent
  run of ``tests.runs.subflows`` on the Celery driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from runs import hooks
from runs.engine.celery import children
from runs.engine.celery.run import run_start
from runs.engine.kinds import workflow as workflow_kind
from runs.models import Run
from runs.services import run_create
from tests.celery_support import Bus, install_echo, load_echo_tools
from tests.fakes import FakeAPI
from tests.runs.subflows import activate, child_flow, parent_flow


@pytest.fixture
def echo_api():
    """A loopback server with the Celery tests' routes, and their tools stored."""
    fake = FakeAPI().start()
    install_echo(fake)
    load_echo_tools(fake)
    yield fake
    fake.stop()


@dataclass
class Tasks:
    """Records tasks sent by name: ``(name, args)``, and beside them every send's
    options (``queue``: a run-level task goes to its workflow's queue)."""

    sent: list[tuple[str, list]] = field(default_factory=list)
    options: list[tuple[str, dict]] = field(default_factory=list)

    def send_task(self, name: str, args: list, **options) -> None:
        self.sent.append((name, list(args)))
        self.options.append((name, options))


@pytest.fixture
def tasks(monkeypatch):
    recorder = Tasks()
    monkeypatch.setattr(workflow_kind, "current_app", recorder)
    monkeypatch.setattr(hooks, "current_app", recorder)
    # Only the hook's view: patching ``broker.in_process`` itself would leak into
    # modules that import it by name while the patch is on (``runs.dispatch``).
    monkeypatch.setattr(hooks, "broker", SimpleNamespace(in_process=lambda: False))
    return recorder


def settle(bus: Bus, tasks: Tasks, *, limit: int = 50) -> None:
    """Deliver step messages and named tasks until nothing is left."""
    for _ in range(limit):
        bus.drain()
        if not tasks.sent:
            return
        name, args = tasks.sent.pop(0)
        if name == workflow_kind.START_TASK:
            children.child_run_start(run_id=args[0], publish=bus)
        else:
            assert name == hooks.SETTLE_PARENT_TASK
            children.parent_step_settle(child_run_id=args[0], publish=bus)
    raise AssertionError("still busy")


def start(tag: str = "t") -> tuple[Run, Bus]:
    activate(child_flow())
    parent = activate(parent_flow())
    bus = Bus()
    run = run_create(workflow=parent, trigger="api", inputs={"tag": tag})
    run_start(run=run, publish=bus)
    return run, bus
