"""tools/logcontext.py: the ids a log line is about, set for a block."""

from __future__ import annotations

import threading

from tools.logcontext import current_log_fields, log_fields


def test_a_block_adds_its_ids_and_takes_them_away_when_it_ends():
    assert current_log_fields() == {}
    with log_fields(run_id=7, trace_id="ab" * 16):
        assert current_log_fields() == {"run_id": 7, "trace_id": "ab" * 16}
        with log_fields(step_id="fetch", attempt=2, item=None):  # None is left out
            assert current_log_fields() == {
                "run_id": 7,
                "trace_id": "ab" * 16,
                "step_id": "fetch",
                "attempt": 2,
            }
        assert current_log_fields() == {"run_id": 7, "trace_id": "ab" * 16}
    assert current_log_fields() == {}


def test_an_inner_block_overrides_and_an_exception_still_resets():
    with log_fields(run_id=7):
        try:
            with log_fields(run_id=8):
                assert current_log_fields()["run_id"] == 8
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        assert current_log_fields() == {"run_id": 7}


def test_each_thread_has_its_own():
    seen = []
    with log_fields(run_id=7):
        thread = threading.Thread(target=lambda: seen.append(dict(current_log_fields())))
        thread.start()
        thread.join()
    assert seen == [{}]
