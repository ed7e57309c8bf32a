"""Reading an API's rate headers into a pause."""

from __future__ import annotations

from email.utils import formatdate

import httpx
import pytest

from tools.ratelimit.headers import pause_seconds

NOW = 1_800_000_000.0


def pause(status: int = 200, **headers: str) -> float | None:
    named = {k.replace("_", "-"): v for k, v in headers.items()}
    return pause_seconds(status, httpx.Headers(named), now=NOW, max_pause=600)


def test_retry_after_of_a_429_in_seconds_or_as_a_date():
    assert pause(429, retry_after="7") == 7
    assert pause(429, retry_after=formatdate(NOW + 30, usegmt=True)) == 30
    assert pause(503, retry_after="2") == 2
    assert pause(200, retry_after="7") is None  # only a refusal's Retry-After pauses


def test_x_ratelimit_reset_as_epoch_or_delta():
    assert pause(x_ratelimit_remaining="0", x_ratelimit_reset=str(int(NOW) + 42)) == 42
    assert pause(x_ratelimit_remaining="0", x_ratelimit_reset="12") == 12
    assert pause(x_ratelimit_remaining="3", x_ratelimit_reset="12") is None


def test_ietf_draft_fields():
    assert pause(ratelimit_remaining="0", ratelimit_reset="9") == 9
    assert pause(ratelimit='"default";r=0;t=30') == 30
    assert pause(ratelimit="limit=100, remaining=0, reset=15") == 15
    assert pause(ratelimit='"default";r=4;t=30') is None
    assert pause(ratelimit_remaining="0", ratelimit_policy='"default";q=100;w=60') == 60


@pytest.mark.parametrize(
    "headers",
    [
        {"x_ratelimit_remaining": "zero", "x_ratelimit_reset": "5"},
        {"x_ratelimit_remaining": "0", "x_ratelimit_reset": "-5"},
        {"x_ratelimit_remaining": "0", "x_ratelimit_reset": "soon"},
        {"x_ratelimit_remaining": "0"},
        {"ratelimit": "garbage"},
        {"x_ratelimit_remaining": "nan", "x_ratelimit_reset": "inf"},
    ],
)
def test_broken_headers_pause_nothing(headers):
    assert pause(**headers) is None


def test_a_pause_is_capped():
    assert pause(429, retry_after="86400") == 600
