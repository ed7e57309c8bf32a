"""The OpenAPI schema is generated once per process: the second request is served the
kept document (counted calls of drf-spectacular's generator, not a timing)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings
from drf_spectacular.generators import SchemaGenerator

from api import schema_cache

JSON = "application/vnd.oai.openapi+json"


@pytest.fixture
def generations(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each schema drf-spectacular generates (its ``public`` flag), from a clean cache."""
    made: list[bool] = []
    generate = SchemaGenerator.get_schema

    def counted(self, request=None, public=False):
        made.append(public)
        return generate(self, request=request, public=public)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    monkeypatch.setattr(schema_cache, "_SCHEMAS", {})
    return made


def test_the_second_request_is_served_the_kept_schema(admin_client_api, generations):
    first = admin_client_api.get("/api/v1/schema/", HTTP_ACCEPT=JSON)
    second = admin_client_api.get("/api/v1/schema/", HTTP_ACCEPT=JSON)
    yaml = admin_client_api.get("/api/v1/schema/")
    assert first.status_code == second.status_code == yaml.status_code == 200
    assert generations == [True]
    assert first.json() == second.json()
    assert "/api/v1/runs/" in first.json()["paths"]
    assert yaml.content.startswith(b"openapi: 3.1.0")


def test_another_user_gets_the_same_kept_schema(make_client, generations):
    one = make_client("runs.view_run").get("/api/v1/schema/", HTTP_ACCEPT=JSON)
    other = make_client().get("/api/v1/schema/", HTTP_ACCEPT=JSON)
    assert one.json() == other.json()
    assert generations == [True]


def test_each_language_has_its_own_schema(admin_client_api, generations):
    with override_settings(LANGUAGES=[("en", "English"), ("de", "German")]):
        admin_client_api.get("/api/v1/schema/?lang=de", HTTP_ACCEPT=JSON)
        admin_client_api.get("/api/v1/schema/?lang=en", HTTP_ACCEPT=JSON)
        admin_client_api.get("/api/v1/schema/?lang=de", HTTP_ACCEPT=JSON)
    assert generations == [True, True]


def test_a_private_schema_is_generated_every_time(db, generations):
    generator = schema_cache.CachedSchemaGenerator(urlconf="api.urls")
    generator.get_schema(public=False)
    generator.get_schema(public=False)
    assert generations == [False, False]


def test_a_changed_setting_forgets_the_kept_schemas(admin_client_api, generations):
    admin_client_api.get("/api/v1/schema/", HTTP_ACCEPT=JSON)
    with override_settings(REST_FRAMEWORK=dict(settings.REST_FRAMEWORK)):
        assert generations == [True]
        admin_client_api.get("/api/v1/schema/", HTTP_ACCEPT=JSON)
    assert generations == [True, True]
