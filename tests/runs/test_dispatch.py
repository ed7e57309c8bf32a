"""task_send: in process without a broker (no producer opened), to the broker with one."""

from celery import shared_task

from runs.dispatch import task_send

CALLS: list = []


@shared_task(name="tests.record")
def record(value):
    CALLS.append(value)


def test_without_a_broker_the_task_runs_here_and_opens_no_producer(monkeypatch):
    from config.celery_app import app

    monkeypatch.setattr(app.amqp, "_producer_pool", None)
    CALLS.clear()
    task_send(record, 1)
    task_send(record, 2, countdown=5)
    assert CALLS == [1, 2]
    assert app.amqp._producer_pool is None


def test_with_a_broker_the_task_is_published(monkeypatch):
    sent = []
    monkeypatch.setattr("runs.dispatch.in_process", lambda: False)
    monkeypatch.setattr(record, "apply_async", lambda **kw: sent.append(kw))
    task_send(record, 1)
    task_send(record, 2, countdown=1.5)
    assert sent == [{"args": (1,)}, {"args": (2,), "countdown": 1.5}]
