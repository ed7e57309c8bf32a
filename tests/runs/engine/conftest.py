"""Fixtures of the engine tests."""

from __future__ import annotations

import pytest

from tests.celery_support import install_echo, load_echo_tools
from tests.fakes import FakeAPI


@pytest.fixture
def echo_api():
    """A loopback server with the Celery tests' routes, and their tools stored."""
    fake = FakeAPI().start()
    install_echo(fake)
    load_echo_tools(fake)
    yield fake
    fake.stop()
