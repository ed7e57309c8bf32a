"""Schemathesis against the live schema on a live server: every endpoint, generated input.

No answer may be a 500, and every answer must conform to the schema (status code,
content type, body, headers). The server runs on loopback (pytest-django's
live_server) with a superuser's token, an active workflow to run and a webhook of
it, the planner pointed at the loopback fake LLM, and long polls capped at half a
second. Examples are few per operation so the whole module takes a minute or two.

Generated path parameters almost never name a stored object, so the operations on one
object (restart a run, replay a version) also get cases whose path names the fixture's
finished run and its validated version, with generated bodies: their 2xx answers are
checked against the schema too.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from runs.services import run_create, run_execute
from tests.factories import UserFactory, WorkflowFactory

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture
def api_schema(live_server, transactional_db, planner_llm, output_dir, settings_override):
    user = UserFactory(username="fuzzer", superuser=True)
    token = Token.objects.create(user=user).key
    workflow = WorkflowFactory(status="active")
    validation = run_execute(run=run_create(workflow=workflow, trigger="validation", inputs={}))
    assert validation.status == "succeeded", validation.error_summary
    headers = {"Authorization": f"Token {token}"}
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/v1/schema/", headers=headers)
    schema.config.update(base_url=live_server.url, headers=headers)
    schema.pinned = {  # operation → path parameters naming stored objects
        "POST /api/v1/runs/{id}/restart/": {"id": validation.pk},
        "POST /api/v1/workflows/{name}/versions/{version}/replay/": {
            "name": workflow.name,
            "version": workflow.version,
        },
    }
    return schema


@pytest.fixture
def settings_override(settings, fast_passwords):
    settings.FLOWPILOT_API_MAX_WAIT = 0.5


def pin(case, parameters: dict):
    case.path_parameters = {**(case.path_parameters or {}), **parameters}
    return case


def fuzz(operation, statuses: list[int], pinned: dict | None = None) -> None:
    """Generated requests for one operation, each checked against the schema; with
    ``pinned`` path parameters, half of them name those objects."""
    strategy = operation.as_strategy()
    if pinned:
        strategy = st.one_of(strategy, strategy.map(lambda case: pin(case, pinned)))

    @given(case=strategy)
    @settings(
        max_examples=6,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case):
        statuses.append(case.call_and_validate(checks=CHECKS).status_code)

    check()


def test_every_endpoint_answers_within_its_schema(api_schema):
    # One test over every operation (schemathesis' own pytest plugin does not support
    # this pytest); a failure names the operation and keeps the others running.
    failures, labels, statuses = [], [], []
    answered: dict[str, list[int]] = {}
    for result in api_schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)
        answered[operation.label] = []
        try:
            fuzz(operation, answered[operation.label], api_schema.pinned.get(operation.label))
        except Exception as exc:
            failures.append(f"{operation.label}: {exc}")
        statuses += answered[operation.label]

    assert len(labels) >= 25, labels
    assert set(api_schema.pinned) <= set(labels)
    assert failures == []
    # The generated requests reached the views, not only the refusals in front of them.
    assert len(statuses) >= 5 * len(labels)
    assert sum(200 <= s < 300 for s in statuses) >= len(labels), sorted(set(statuses))
    assert {400, 404} <= set(statuses)
    for label in api_schema.pinned:  # a success of each, checked against its schema
        assert any(200 <= s < 300 for s in answered[label]), (label, answered[label])
