"""How a queued step reaches a worker (``runs.engine.celery.broker``): the step task sent
by its fixed name, a step's ``timeout`` as its task's soft time limit with the hard one
after it, and whether runs execute in process (no broker).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from runs.engine.celery import broker
from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import started

pytestmark = pytest.mark.django_db(transaction=True)


def test_steps_with_a_timeout_are_published_with_it_as_their_time_limit(echo_api):
    _, bus = started(fan_out_flow("fan", 1, timeout=2.5))

    assert [m.time_limit for m in bus.messages] == [2.5]


@dataclass
class App:
    """Stands in for the Celery app: records ``send_task``."""

    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    conf: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(task_always_eager=False))

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append((name, options))


def test_publish_step_sends_the_step_task_with_its_countdown_and_both_time_limits(monkeypatch):
    app = App()
    monkeypatch.setattr(broker, "current_app", app)

    broker.publish_step(41)
    broker.publish_step(42, countdown=0.5, time_limit=2.5)

    assert app.sent == [
        ("runs.execute_step", {"args": [41]}),  # no countdown, no limit: the task's defaults
        (
            "runs.execute_step",
            {"args": [42], "countdown": 0.5, "soft_time_limit": 2.5, "time_limit": 12.5},
        ),
    ]


def test_runs_execute_in_process_only_when_celery_is_eager(monkeypatch):
    app = App()
    monkeypatch.setattr(broker, "current_app", app)
    assert broker.in_process() is False
    app.conf.task_always_eager = True
    assert broker.in_process() is True
