"""The API's error handler and parser, beyond what the endpoint tests reach."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.test import Client, RequestFactory
from rest_framework.exceptions import ValidationError
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from api.errors import validation_details
from api.handlers import bad_request, csrf_failure, permission_denied, server_error
from review.models import PlanRequest
from tests.api.conftest import assert_error
from tests.factories import UserFactory

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


BIG = b'{"goal": "' + b"a" * 3_000_000 + b'"}'  # past DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)


@pytest.mark.parametrize("path", ["/api/v1/plans/", "/api/v1/hooks/no-such-hook/"])
def test_a_body_over_the_upload_limit_is_a_413_in_the_error_shape(admin_client_api, path):
    response = admin_client_api.post(path, BIG, content_type="application/json")

    body = assert_error(response, 413, "request_too_large")
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in body["message"]
    assert not PlanRequest.objects.exists()


def test_an_unsupported_method_is_a_405_for_a_superuser_and_a_reader(admin_client_api, make_client):
    reader = make_client("runs.view_run")

    for client in (admin_client_api, reader):
        response = client.put("/api/v1/runs/", {}, format="json")
        assert_error(response, 405, "method_not_allowed")
    assert_error(reader.delete("/api/v1/tools/"), 405, "method_not_allowed")
    assert_error(APIClient().put("/api/v1/runs/", {}, format="json"), 401, "not_authenticated")


def test_an_unexpected_error_is_a_500_in_the_error_shape(admin_client_api, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("api.views.tools.tool_list", broken)
    admin_client_api.raise_request_exception = False

    body = assert_error(admin_client_api.get("/api/v1/tools/"), 500, "server_error")
    assert "boom" not in body["message"]
    other = Client(raise_request_exception=False)
    assert other.get("/nowhere/").status_code == 404  # outside /api/, Django's own pages


def test_a_csrf_failure_is_a_403_in_the_error_shape():
    user = UserFactory(username="browser", superuser=True)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    drf = client.post("/api/v1/runs/", {"workflow": "x"}, content_type="application/json")
    django = csrf_failure(RequestFactory().post("/api/v1/runs/"), reason="CSRF cookie not set.")

    assert_error(drf, 403, "permission_denied")
    assert django.status_code == 403
    assert json.loads(django.content) == {
        "code": "csrf_failed",
        "message": "CSRF verification failed: CSRF cookie not set.",
        "details": [],
    }
    assert csrf_failure(RequestFactory().post("/admin/"), reason="x")["Content-Type"].startswith(
        "text/html"
    )


def test_django_refusals_under_api_are_in_the_error_shape():
    request = RequestFactory().get("/api/v1/tools/")

    assert json.loads(bad_request(request, SuspiciousOperation("bad host")).content)["code"] == (
        "bad_request"
    )
    assert json.loads(permission_denied(request, PermissionDenied()).content)["code"] == (
        "permission_denied"
    )
    assert json.loads(server_error(request).content)["code"] == "server_error"


def test_unauthenticated_floods_on_the_api_are_throttled(monkeypatch, anon, admin_client_api):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "anon", "3/minute")

    answers = [anon.get("/api/v1/runs/").status_code for _ in range(3)]
    refused = anon.post("/api/v1/plans/", {"goal": "g"}, format="json")

    assert answers == [401, 401, 401]
    assert_error(refused, 429, "throttled")
    assert int(refused.headers["Retry-After"]) > 0
    assert anon.get("/api/v1/schema/").status_code == 429
    assert admin_client_api.get("/api/v1/runs/").status_code == 200  # users have their own
