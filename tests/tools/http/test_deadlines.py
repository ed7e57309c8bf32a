"""The process's deadline thread: callbacks fire at their time, in order, never when
cancelled, and a callback that raises does not stop the thread."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tools.http.deadlines import Deadlines

WAIT = 10.0  # generous: an event that must happen, on a loaded machine


def test_a_callback_fires_at_its_deadline():
    deadlines = Deadlines()
    fired = threading.Event()
    scheduled = time.monotonic()
    deadlines.schedule(0.05, fired.set)
    assert fired.wait(WAIT)
    assert time.monotonic() - scheduled >= 0.05
    assert deadlines.pending() == 0


def test_deadlines_fire_in_order_and_an_earlier_one_wakes_the_thread():
    deadlines = Deadlines()
    order: list[str] = []
    done = threading.Event()
    deadlines.schedule(30, lambda: order.append("late"))
    deadlines.schedule(0.2, lambda: (order.append("second"), done.set()))
    deadlines.schedule(0.1, lambda: order.append("first"))
    assert done.wait(WAIT)  # not held up behind the 30 s entry
    assert order == ["first", "second"]
    assert deadlines.pending() == 1


def test_a_cancelled_deadline_never_fires():
    deadlines = Deadlines()
    fired: list[str] = []
    marker = threading.Event()
    deadlines.schedule(0.05, lambda: fired.append("cancelled")).cancel()
    deadlines.schedule(0.1, marker.set)  # fires after the cancelled one's time
    assert marker.wait(WAIT)
    assert fired == []


def test_a_raising_callback_is_logged_and_the_thread_goes_on(caplog):
    deadlines = Deadlines()
    after = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    deadlines.schedule(0.01, boom)
    deadlines.schedule(0.05, after.set)
    assert after.wait(WAIT)
    assert "deadline's callback failed" in caplog.text


def test_cancelled_entries_do_not_pile_up():
    deadlines = Deadlines()
    for _ in range(1000):
        deadlines.schedule(60, lambda: None).cancel()
    assert deadlines.pending() == 0
    assert len(deadlines._heap) <= 130  # compacted as cancelled entries outnumber live ones


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_fires_its_own_deadlines():
    deadlines = Deadlines()
    parent = threading.Event()
    deadlines.schedule(0.01, parent.set)
    assert parent.wait(WAIT)
    deadlines.schedule(30, lambda: None)  # the parent's, pending at the fork
    os.register_at_fork(after_in_child=deadlines.after_fork_in_child)
    pid = os.fork()
    if pid == 0:  # the child: a thread of its own, none of the parent's entries
        child = threading.Event()
        code = 0 if deadlines.pending() == 0 else 2
        deadlines.schedule(0.01, child.set)
        os._exit(code if child.wait(WAIT) else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
