"""api.parsers: a JSON body too deep, with a key twice or with unstorable text is a 400
in the one error shape, before any view reads it."""

from __future__ import annotations

import pytest

from review.models import PlanRequest
from runs.models import Run
from tests.api.conftest import assert_error
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

DEEP = b'{"goal": "g", "sample_inputs": {"x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}}"


@pytest.mark.parametrize(
    "path", ["/api/v1/plans/", "/api/v1/workflows/", "/api/v1/workflows/validate/", "/api/v1/runs/"]
)
def test_a_body_nested_ten_thousand_levels_is_a_400_not_a_500(admin_client_api, path):
    response = admin_client_api.post(path, DEEP, content_type="application/json")

    body = assert_error(response, 400, "parse_error")
    assert "100 levels" in body["message"]


def test_a_body_nested_past_one_hundred_levels_is_refused_and_one_within_is_read(
    admin_client_api,
):
    def nested(levels: int) -> bytes:  # the body object is level 1, `inputs` level 2
        inner = b"[" * (levels - 2) + b"]" * (levels - 2)
        return b'{"workflow": "nope", "inputs": {"x": ' + inner + b"}}"

    refused = admin_client_api.post("/api/v1/runs/", nested(101), content_type="application/json")
    read = admin_client_api.post("/api/v1/runs/", nested(100), content_type="application/json")

    assert_error(refused, 400, "parse_error")
    assert_error(read, 404, "workflow_not_found")  # the view read it


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/plans/", b'{"goal": "one", "goal": "two"}'),
        ("/api/v1/plans/", b'{"goal": "g", "sample_inputs": {"a": 1, "a": 2}}'),
        ("/api/v1/workflows/", b'{"definition": {"name": "x", "name": "y", "steps": []}}'),
        ("/api/v1/runs/", b'{"workflow": "w", "inputs": {"n": 1, "n": 2}}'),
    ],
)
def test_a_key_written_twice_in_an_api_body_is_refused_with_its_place(admin_client_api, path, body):
    response = admin_client_api.post(path, body, content_type="application/json")

    error = assert_error(response, 400, "parse_error")
    assert error["details"][0]["code"] == "duplicate_key"
    assert "twice" in error["message"]
    assert "line 1, column" in error["message"]
    assert not PlanRequest.objects.exists()
    assert not Workflow.objects.exists()
    assert not Run.objects.exists()


def test_a_body_that_is_not_json_is_a_parse_error(admin_client_api):
    response = admin_client_api.post("/api/v1/plans/", b"{nope", content_type="application/json")

    assert_error(response, 400, "parse_error")
