"""The API's error handler and parser, beyond what the endpoint tests reach."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.exceptions import ValidationError

from api.errors import validation_details
from review.models import PlanRequest

pytestmark = pytest.mark.django_db


def test_validation_details_give_json_paths_of_nested_problems():
    exc = ValidationError({"inputs": {"rows": [{"x": ["bad"]}, {}]}, "non_field_errors": ["no"]})

    rows = validation_details(exc.detail)

    assert rows == [
        {"path": "inputs.rows[0].x", "code": "invalid", "message": "bad"},
        {"path": "", "code": "invalid", "message": "no"},
    ]


def test_unmatched_paths_are_json_under_api_and_django_pages_elsewhere():
    client = Client()

    api = client.get("/api/v1/no/such/thing/")
    other = client.get("/nowhere/")

    assert api.status_code == other.status_code == 404
    assert api.json() == {"code": "not_found", "message": "No such resource.", "details": []}
    assert other["Content-Type"].startswith("text/html")


def test_text_a_database_cannot_store_is_a_400_with_its_path(admin_client_api):
    for body in (
        b'{"goal": "a\\u0000b"}',
        b'{"goal": "ok", "sample_inputs": {"k\\ud800": 1}}',
    ):
        response = admin_client_api.post("/api/v1/plans/", body, content_type="application/json")

        assert response.status_code == 400, response.json()
        assert response.json()["code"] == "parse_error"
        assert response.json()["details"][0]["code"] == "text_unstorable"
    assert response.json()["details"][0]["path"] == "sample_inputs['k\\ud800']"
    assert not PlanRequest.objects.exists()
