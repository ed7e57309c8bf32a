"""Fakes for tests: real servers on loopback, never mocks of our own code."""

from tests.fakes.apis import FakeData, install
from tests.fakes.http import FakeAPI, FakeResponse, RecordedRequest

__all__ = ["FakeAPI", "FakeData", "FakeResponse", "RecordedRequest", "install"]
