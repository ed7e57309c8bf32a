"""A stored OAuth2 credential's token, shared by every caller: used from the row while it
lasts, refreshed once when it has expired or the API answers 401, the rotated refresh
token stored, a refused refresh marking the credential ``needs_reconnect``. A real
loopback authorization server; SQLite and PostgreSQL (the threaded races need
PostgreSQL's row locks or Redis; tests/tools/credentials/test_tokens.py)."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.celery_support import redis_url
from tests.fakes.oauth import OAuthServer
from tests.tools.conftest import make_spec
from tests.tools.credentials.conftest import KEY_A
from tools.credentials.crypto import unseal
from tools.credentials.store import save_credential
from tools.errors import ToolAuthFailed
from tools.http_client import call_http_tool
from tools.models import Credential


@pytest.fixture
def keys(settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [KEY_A]
    settings.FLOWPILOT_TOKEN_LOCK_REDIS_URL = ""  # the database lock unless a test says
    return settings


@pytest.fixture
def oauth():
    server = OAuthServer().start()
    yield server
    server.stop()


@pytest.fixture
def spec():
    return make_spec("/api/t1", name="crm", auth={"credential": "crm"})


def store(oauth: OAuthServer, *, access: str = "", expires_in: float | None = None) -> Credential:
    values = {"client_secret": oauth.secret, "refresh_token": oauth.refresh_token}
    if access:
        values["access_token"] = access
    row = Credential(
        name="crm",
        type="oauth2_authorization_code",
        client_id=oauth.client_id,
        token_url=oauth.token_url,
        authorize_url=f"{oauth.url}/authorize",
        scopes="crm.read",
    )
    if expires_in is not None:
        row.expires_at = timezone.now() + timedelta(seconds=expires_in)
    return save_credential(row, values)


def stored_values(name: str = "crm") -> dict[str, str]:
    row = Credential.objects.get(name=name)
    return unseal(row.secrets, row.name)


def call(make_ctx, oauth, spec):
    ctx = make_ctx(env={"BASE": oauth.url})
    return call_http_tool(spec, {}, ctx), ctx


pytestmark = pytest.mark.django_db(transaction=True)


def test_an_expired_token_is_refreshed_once_and_the_rotated_refresh_token_stored(
    keys, oauth, spec, make_ctx
):
    store(oauth, access="at-old-expired", expires_in=-60)
    result, ctx = call(make_ctx, oauth, spec)
    assert result.output == {"ok": True}
    assert [g["grant_type"] for g in oauth.grants] == ["refresh_token"]
    assert oauth.grants[0]["refresh_token"] == "rt-0-initial"
    values = stored_values()
    assert values["access_token"] == "at-1-issued"
    assert values["refresh_token"] == "rt-1-rotated" == oauth.refresh_token
    row = Credential.objects.get(name="crm")
    assert row.expires_at is not None
    assert row.expires_at > timezone.now() + timedelta(minutes=50)
    assert "at-1-issued" not in row.secrets
    assert "rt-1-rotated" not in row.secrets
    for secret in ("at-1-issued", "rt-1-rotated", "rt-0-initial", oauth.secret):
        assert ctx.redactor.scrub_text(secret) == "***"

    call(make_ctx, oauth, spec)  # the stored token is used: no token request
    assert len(oauth.grants) == 1
    assert oauth.api_calls == ["at-1-issued", "at-1-issued"]


def test_a_401_refreshes_once_and_the_call_is_retried_with_the_new_token(
    keys, oauth, spec, make_ctx
):
    store(oauth)
    call(make_ctx, oauth, spec)  # no access token stored: one refresh
    oauth.revoke_access()  # the provider expires it before expires_at
    result, _ = call(make_ctx, oauth, spec)
    assert result.output == {"ok": True}
    assert [g["refresh_token"] for g in oauth.grants] == ["rt-0-initial", "rt-1-rotated"]
    assert oauth.api_calls == ["at-1-issued", "at-1-issued", "at-2-issued"]
    assert stored_values()["refresh_token"] == "rt-2-rotated"


def test_a_401_to_a_token_another_caller_already_replaced_uses_the_stored_one(
    keys, oauth, spec, make_ctx
):
    """The refused token is not the row's any more: no second refresh."""
    store(oauth)
    call(make_ctx, oauth, spec)
    oauth.revoke_access()
    from tools.credentials.tokens import refresh_lock  # another worker refreshed meanwhile

    with refresh_lock("crm") as held:
        held.store("at-by-other", 3600, None)
    oauth.access_token = "at-by-other"
    spec_ctx = make_ctx(env={"BASE": oauth.url})
    result = call_http_tool(spec, {}, spec_ctx)
    assert result.output == {"ok": True}
    assert len(oauth.grants) == 1
    assert oauth.api_calls[-1] == "at-by-other"


def test_a_refused_refresh_marks_the_credential_and_fails_naming_it(keys, oauth, spec, make_ctx):
    store(oauth, access="at-old-expired", expires_in=-60)
    oauth.refresh_token = "rt-revoked-by-user"  # the person revoked the grant
    with pytest.raises(ToolAuthFailed) as caught:
        call(make_ctx, oauth, spec)
    error = caught.value
    assert error.retryable is False
    assert error.message.startswith("tool 'crm': credential 'crm' needs to be reconnected")
    assert "invalid_grant" in error.message
    assert "HTTP 400" in error.message
    for secret in ("rt-0-initial", "at-old-expired", oauth.secret):
        assert secret not in error.message
    assert Credential.objects.get(name="crm").needs_reconnect is True
    assert len(oauth.grants) == 1

    with pytest.raises(ToolAuthFailed, match="credential 'crm' needs to be reconnected"):
        call(make_ctx, oauth, spec)  # refused before anything is sent
    assert len(oauth.grants) == 1
    assert oauth.api_calls == []

    row = Credential.objects.get(name="crm")  # a person connects it again
    oauth.refresh_token = "rt-new-grant"
    save_credential(row, {"refresh_token": "rt-new-grant"})
    assert call(make_ctx, oauth, spec)[0].output == {"ok": True}


def test_a_token_endpoint_error_that_is_not_a_refusal_leaves_the_credential_alone(
    keys, oauth, spec, make_ctx
):
    from tests.fakes.http import FakeResponse

    store(oauth)
    oauth.respond("token", lambda request, match: FakeResponse.json({"error": "down"}, 503))
    with pytest.raises(ToolAuthFailed) as caught:
        call(make_ctx, oauth, spec)
    assert caught.value.status == 503  # the provider failed: the credential is not blamed
    assert Credential.objects.get(name="crm").needs_reconnect is False


def test_client_credentials_tokens_are_shared_through_the_row(keys, oauth, make_ctx):
    save_credential(
        Credential(
            name="svc",
            type="oauth2_client_credentials",
            client_id=oauth.client_id,
            token_url=oauth.token_url,
        ),
        {"client_secret": oauth.secret},
    )
    spec = make_spec("/api/t2", name="svc_tool", auth={"credential": "svc"})
    for _ in range(3):
        assert call(make_ctx, oauth, spec)[0].output == {"ok": True}
    assert [g["grant_type"] for g in oauth.grants] == ["client_credentials"]
    assert stored_values("svc")["access_token"] == "at-1-issued"


@pytest.mark.parametrize("backend", ["redis", "database"])
def test_concurrent_callers_with_an_expired_token_make_one_token_request(
    keys, oauth, spec, make_ctx, settings, backend
):
    if connection.vendor != "postgresql":
        pytest.skip("threads racing on one row need PostgreSQL (the SQLite test db is shared)")
    settings.FLOWPILOT_TOKEN_LOCK_REDIS_URL = redis_url() if backend == "redis" else ""
    oauth.delay = 0.3  # a slow provider: every caller finds the token expired
    store(oauth, access="at-old-expired", expires_in=-60)
    outputs: list[object] = []
    start = threading.Barrier(8)

    def one() -> None:
        start.wait()
        try:
            outputs.append(call(make_ctx, oauth, spec)[0].output)
        except Exception as exc:
            outputs.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert outputs == [{"ok": True}] * 8
    assert len(oauth.grants) == 1
    assert stored_values()["refresh_token"] == oauth.refresh_token == "rt-1-rotated"


CRM_TOOL = """
- name: crm_ping
  kind: http
  description: A call with the stored OAuth2 credential crm (loopback fake).
  base_url: "{base}"
  auth: {{credential: crm}}
  request: {{method: GET, url: "/api/{{{{tag}}}}"}}
  inputs: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
  timeout: 10
"""


def test_the_failure_report_of_a_run_whose_refresh_was_refused_names_the_credential(keys, oauth):
    from notifications.report import report_build
    from runs.services import run_create, run_execute
    from tools.loader import load_tool_text
    from tools.services import tool_upsert
    from workflows.services import workflow_import

    for tool in load_tool_text(CRM_TOOL.format(base=oauth.url), source="tests"):
        tool_upsert(spec=tool, source="tests")
    flow = {
        "name": "crm_check",
        "steps": [
            {"id": "ping", "kind": "tool", "tool": "crm_ping", "input_mapping": {"tag": "t"}}
        ],
    }
    workflow, _ = workflow_import(data=flow)
    store(oauth, access="at-old-expired", expires_in=-60)
    oauth.refresh_token = "rt-revoked-by-user"
    run = run_execute(run=run_create(workflow=workflow, trigger="api"))
    assert run.status == "failed"
    step = run.step_results.get(step_id="ping")
    assert step.error["retryable"] is False
    assert step.attempts == 1  # not retried: a person must reconnect it
    report = json.dumps(report_build(run=run, event="failed"))
    assert "tool 'crm_ping': credential 'crm' needs to be reconnected" in report
    for secret in ("rt-0-initial", "rt-revoked-by-user", "at-old-expired", oauth.secret):
        assert secret not in report
    assert Credential.objects.get(name="crm").needs_reconnect is True
