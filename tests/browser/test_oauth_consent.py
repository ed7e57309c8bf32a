"""Connecting an OAuth2 account in a real browser: the admin's Connect opens the
loopback authorization server's consent page, Approve comes back to the callback and
the credential is connected; a wrong state and a denied consent are shown on the
credential's page and store nothing. Then a run uses the connected credential against
the loopback API (and refreshes its expired token). No page, log line or table row
holds a token, a code or a verifier."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs.models import Run
from tests.browser.test_review_flow import log_in
from tests.conftest import write_flow
from tests.factories import UserFactory
from tests.fakes.oauth_provider import OAuthProvider
from tests.tools.credentials.conftest import KEY_A, consent_credential
from tools.credentials.store import resolve_credential
from tools.models import Credential

pytestmark = pytest.mark.django_db(transaction=True)

CALLBACK = "/admin/tools/credential/oauth2/callback/"
TOOLS = """
tools:
  - name: whoami
    base_url: "{{env.PROVIDER}}"
    request: {url: /api/me}
    auth: {credential: gh}
"""


@pytest.fixture
def provider(settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [KEY_A]
    found = OAuthProvider().start()
    yield found
    found.stop()


def _message(page) -> str:
    return page.inner_text("ul.messagelist")


def _every_row_as_text() -> str:
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            rows += [repr(row) for row in cursor.fetchall()]
    return "\n".join(rows)


def test_connect_an_account_through_the_consent_page_then_run_with_it(
    live_server, page, provider, artifacts, cli, tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.DEBUG)
    row = consent_credential(provider, revocation_url=f"{provider.url}/revoke")
    change = f"{live_server.url}/admin/tools/credential/{row.pk}/change/"
    UserFactory(username="root", superuser=True)
    log_in(page, live_server, "root")
    shown: list[str] = []

    # Denied at the provider: shown on the credential's page, nothing stored.
    page.goto(change)
    page.click("#fp-oauth2-connect")
    page.wait_for_selector("#consent")
    assert page.url.startswith(f"{provider.url}/authorize?")
    assert page.inner_text("#scope") == "repo read:user"
    page.click("#deny")
    page.wait_for_url(change)
    assert "the consent was denied at the provider (access_denied)" in _message(page)
    assert "access_token: not set" in page.inner_text("body")
    shown.append(page.content())

    # Approved: connected, the granted scopes shown.
    page.click("#fp-oauth2-connect")
    page.click("#approve")
    page.wait_for_url(change)
    assert "'gh' is connected: scopes granted: repo read:user" in _message(page)
    body = page.inner_text("body")
    assert "access_token: set" in body
    assert "refresh_token: set" in body
    assert page.text_content("#fp-oauth2-connect") == "Connect again"
    page.screenshot(path=str(artifacts / "oauth_connected.png"), full_page=True)
    shown.append(page.content())
    (exchange,) = provider.token_requests
    assert exchange["grant_type"] == "authorization_code"
    assert exchange["redirect_uri"] == f"{live_server.url}{CALLBACK}"

    # A wrong state (not the one this session was given): refused, nothing changes.
    stored = Credential.objects.get(pk=row.pk).secrets
    page.goto(f"{live_server.url}{CALLBACK}?code=code-forged&state={row.pk}.forged")
    page.wait_for_url(change)
    assert "state is unknown or already used" in _message(page)
    shown.append(page.content())
    assert Credential.objects.get(pk=row.pk).secrets == stored
    assert len(provider.token_requests) == 1

    # A run uses it against the loopback API; then again once the token has expired.
    monkeypatch.setenv("PROVIDER", provider.url)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "whoami.yaml").write_text(TOOLS, encoding="utf-8")
    flow = {
        "name": "whoami",
        "steps": [{"id": "me", "kind": "tool", "tool": "whoami"}],
        "outputs": {"user": "me.user"},
    }
    path = write_flow(tmp_path, flow)
    first = resolve_credential("gh")
    ran = cli("runflow", path, "--tools", str(tools))
    assert ran.code == 0, ran.out + ran.err
    assert provider.api_calls == [f"Bearer {first.secret('access_token')}"]
    Credential.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    provider.expire_access_tokens()
    again = cli("runflow", path, "--tools", str(tools))
    assert again.code == 0, again.out + again.err
    second = resolve_credential("gh")
    assert provider.token_requests[-1]["refresh_token"] == first.secret("refresh_token")
    assert provider.api_calls[-1] == f"Bearer {second.secret('access_token')}"
    assert second.secret("refresh_token") in provider.refresh_tokens  # the rotated one
    assert [r.status for r in Run.objects.order_by("id")] == ["succeeded", "succeeded"]
    assert [r.outputs for r in Run.objects.order_by("id")] == [{"user": "octo"}] * 2

    # Disconnect: revoked at the provider, the tokens gone.
    page.goto(change)
    page.click("#fp-oauth2-disconnect")
    page.click("#fp-oauth2-disconnect-confirm")
    page.wait_for_url(change)
    assert "the refresh token was revoked at the provider" in _message(page)
    assert provider.revoked == [second.secret("refresh_token")]
    assert "access_token: not set" in page.inner_text("body")
    shown.append(page.content())

    secrets = [
        *provider.issued,
        provider.client_secret,
        *(r.get("code_verifier", "") for r in provider.token_requests),
    ]
    everything = {
        "an admin page": "\n".join(shown),
        "a log line": "\n".join(r.getMessage() for r in caplog.records),
        "the command output": ran.out + ran.err + again.out + again.err,
        "a table row": _every_row_as_text(),
    }
    for where, text in everything.items():
        for secret in filter(None, secrets):
            assert secret not in text, f"{where} holds a secret value"
