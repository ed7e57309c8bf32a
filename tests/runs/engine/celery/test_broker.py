"""How a queued step reaches a worker (``runs.engine.celery.broker``): a step's ``timeout``
is its task's time limit.
"""

from __future__ import annotations

import pytest

from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import started

pytestmark = pytest.mark.django_db(transaction=True)


def test_steps_with_a_timeout_are_published_with_it_as_their_time_limit(echo_api):
    _, bus = started(fan_out_flow("fan", 1, timeout=2.5))

    assert [m.time_limit for m in bus.messages] == [2.5]
