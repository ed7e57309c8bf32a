"""After runs that used every credential type — one succeeding with the secrets echoed
back in its responses, one failing with them in its error — no table row, no line of a
PostgreSQL dump, no DEBUG log line, no failure report, no admin page of the credential,
tool and run models and no API answer (credentials, runs, their steps) holds a byte of a
secret value; the credentials' values are in the database as ciphertext only. Every
type is used: api_key both in a query parameter and in a header."""

from __future__ import annotations

import base64
import logging
import subprocess
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from notifications.report import report_build
from runs.models import Run
from tests.conftest import write_flow
from tests.fakes import FakeAPI, FakeResponse
from tools.credentials.store import save_credential, store_oauth2_tokens
from tools.http import oauth2
from tools.http.oauth2 import TokenCache
from tools.models import Credential

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "ghp-atrest-0f1e2d3c4b5a"
PASSWORD = "pw-atrest-9a8b7c6d"
API_KEY = "key-atrest-55aa66bb"
HEADER = "hdr-atrest-77cc88dd"
QUERY = "qry-atrest-33dd44ee"
HEADER_KEY = "hkey-atrest-66ff77aa"
CLIENT_SECRET = "cs-atrest-99ee00ff"
ACCESS_TOKEN = "at-atrest-1122334455"
CONSENT_SECRET = "cs-atrest-consent-a1b2"
CONSENT_ACCESS = "at-atrest-consent-c3d4"
CONSENT_REFRESH = "rt-atrest-consent-e5f6"
SECRETS = [
    TOKEN,
    PASSWORD,
    base64.b64encode(f"svc-ledger:{PASSWORD}".encode()).decode(),
    API_KEY,
    HEADER,
    QUERY,
    HEADER_KEY,
    CLIENT_SECRET,
    base64.b64encode(f"crm-app:{CLIENT_SECRET}".encode()).decode(),
    ACCESS_TOKEN,
    CONSENT_SECRET,
    CONSENT_ACCESS,
    CONSENT_REFRESH,
    base64.b64encode(f"crm-consent:{CONSENT_SECRET}".encode()).decode(),
]

TOOLS = """
tools:
  - name: echo_bearer
    base_url: "{{env.ECHO}}"
    request: {url: /echo/bearer}
    auth: {credential: gh}
  - name: echo_basic
    base_url: "{{env.ECHO}}"
    request: {url: /echo/basic}
    auth: {credential: ledger}
  - name: echo_key
    base_url: "{{env.ECHO}}"
    request: {url: /echo/key}
    auth: {credential: search}
  - name: echo_header
    base_url: "{{env.ECHO}}"
    request: {url: /echo/header}
    auth: {credential: custom}
  - name: echo_query
    base_url: "{{env.ECHO}}"
    request: {url: /echo/query}
    auth: {credential: signed}
  - name: echo_hkey
    base_url: "{{env.ECHO}}"
    request: {url: /echo/hkey}
    auth: {credential: keyed}
  - name: echo_oauth
    base_url: "{{env.ECHO}}"
    request: {url: /echo/oauth}
    auth: {credential: crm}
  - name: echo_consent
    base_url: "{{env.ECHO}}"
    request: {url: /echo/consent}
    auth: {credential: connected}
  - name: broken
    base_url: "{{env.ECHO}}"
    request: {url: /broken}
    auth: {credential: gh}
    retry: {max_attempts: 1}
"""


def _echo(req, match):
    """Everything the request carried, sent back: the secrets reach the step output."""
    return FakeResponse.json({"headers": req.headers, "query": req.query, "path": req.path})


def _broken(req, match):
    text = f"refused {req.headers.get('authorization')} for {req.path}"
    return FakeResponse(500, text.encode(), {"Content-Type": "text/plain"})


@pytest.fixture
def api(monkeypatch):
    fake = FakeAPI().start()
    fake.route("token", "POST", "/token", lambda r, m: FakeResponse.json(
        {"access_token": ACCESS_TOKEN, "expires_in": 3600}))  # fmt: skip
    fake.route("echo", "GET", "/echo/.*", _echo)
    fake.route("broken", "GET", "/broken", _broken)
    monkeypatch.setenv("ECHO", fake.url)
    monkeypatch.setattr(oauth2, "PROCESS_TOKENS", TokenCache())
    yield fake
    fake.stop()


@pytest.fixture
def credentials(keys, api):
    save_credential(Credential(name="gh", type="bearer"), {"token": TOKEN})
    save_credential(
        Credential(name="ledger", type="basic", username="svc-ledger"), {"password": PASSWORD}
    )
    save_credential(
        Credential(name="search", type="api_key", key_name="key", location="query"),
        {"value": API_KEY},
    )
    save_credential(
        Credential(name="custom", type="header", key_name="X-Custom-Auth"), {"value": HEADER}
    )
    save_credential(Credential(name="signed", type="query", key_name="sig"), {"value": QUERY})
    save_credential(
        Credential(name="keyed", type="api_key", key_name="X-Api-Key", location="header"),
        {"value": HEADER_KEY},
    )
    save_credential(
        Credential(
            name="crm",
            type="oauth2_client_credentials",
            client_id="crm-app",
            token_url=f"{api.url}/token",
        ),
        {"client_secret": CLIENT_SECRET},
    )
    connected = save_credential(
        Credential(
            name="connected",
            type="oauth2_authorization_code",
            client_id="crm-consent",
            token_url=f"{api.url}/token",
            authorize_url=f"{api.url}/authorize",
            revocation_url=f"{api.url}/revoke",
        ),
        {"client_secret": CONSENT_SECRET},
    )
    store_oauth2_tokens(
        connected, CONSENT_ACCESS, CONSENT_REFRESH, timezone.now() + timedelta(hours=1)
    )
    return list(Credential.objects.values_list("secrets", flat=True))


def _runs(cli, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "echo.yaml").write_text(TOOLS, encoding="utf-8")
    steps = [
        {"id": name, "kind": "tool", "tool": f"echo_{name}"}
        for name in ("bearer", "basic", "key", "header", "query", "hkey", "oauth", "consent")
    ]
    flow = {"name": "echoes", "steps": steps, "outputs": {"seen": "bearer.headers"}}
    ok = cli("runflow", write_flow(tmp_path, flow), "--tools", str(tools))
    assert ok.code == 0, ok.out + ok.err
    failing = {"name": "fails", "steps": [{"id": "b", "kind": "tool", "tool": "broken"}]}
    failed = cli("runflow", write_flow(tmp_path, failing, "f.yaml"), "--tools", str(tools))
    assert failed.code != 0
    return ok.out + ok.err + failed.out + failed.err


def _every_row_as_text() -> str:
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            rows += [repr(row) for row in cursor.fetchall()]
    return "\n".join(rows)


def _admin_pages() -> dict[str, bytes]:
    """Every changelist and change page of the credential, tool and run models, and the
    Disconnect confirmation of the connected credential, as a superuser sees them."""
    user = get_user_model().objects.create_superuser("sweep", "s@example.com", "pw-sweep-123")
    client = Client()
    client.force_login(user)
    pages = {}
    admin.autodiscover()  # the site registers the apps' admins on first use
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        if opts.app_label not in {"tools", "runs"}:
            continue
        prefix = f"admin:{opts.app_label}_{opts.model_name}"
        urls = [reverse(f"{prefix}_changelist")]
        urls += [reverse(f"{prefix}_change", args=[pk]) for pk in model_admin.get_queryset(
            _request(user)).values_list("pk", flat=True)]  # fmt: skip
        for url in urls:
            pages[url] = client.get(url).content
    connected = Credential.objects.get(name="connected")
    url = reverse("admin:tools_credential_oauth2_disconnect", args=[connected.pk])
    pages[url] = client.get(url).content
    assert all(page for page in pages.values())
    return pages


def _request(user):
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def _api_answers() -> dict[str, bytes]:
    """The credentials, the runs and each run with its steps, through the REST API."""
    client = APIClient()
    client.force_authenticate(get_user_model().objects.get(username="sweep"))
    urls = ["/api/v1/credentials/", "/api/v1/runs/"]
    urls += [f"/api/v1/credentials/{n}/" for n in Credential.objects.values_list("name", flat=True)]
    urls += [f"/api/v1/runs/{pk}/" for pk in Run.objects.values_list("pk", flat=True)]
    answers = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, (url, response.content[:300])
        answers[url] = response.content
    return answers


def _assert_holds_none(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} holds a secret value"


def test_no_stored_or_shown_copy_holds_a_secret_only_ciphertext(
    credentials, api, cli, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG)
    printed = _runs(cli, tmp_path)

    sent = {r.path: r for r in api.requests()}  # the secrets did travel, and came back
    assert sent["/echo/bearer"].headers["authorization"] == f"Bearer {TOKEN}"
    assert sent["/echo/key"].query == {"key": [API_KEY]}
    assert sent["/echo/oauth"].headers["authorization"] == f"Bearer {ACCESS_TOKEN}"
    assert sent["/echo/consent"].headers["authorization"] == f"Bearer {CONSENT_ACCESS}"

    ok, failed = Run.objects.order_by("id")
    assert ok.status == "succeeded"
    assert failed.status == "failed"
    assert "***" in str(ok.outputs)

    rows = _every_row_as_text()
    _assert_holds_none(rows, "a table row")
    stored = list(Credential.objects.values_list("secrets", flat=True))
    assert len(set(stored) - set(credentials)) == 1  # the OAuth2 one holds its token now
    for ciphertext in stored:
        assert ciphertext in rows  # the values are stored, as ciphertext
    _assert_holds_none(printed, "the command output")
    _assert_holds_none("\n".join(r.getMessage() for r in caplog.records), "a log line")
    _assert_holds_none(repr(report_build(run=failed, event="failed")), "the failure report")

    pages = _admin_pages()
    credential_pages = [u for u in pages if "/tools/credential/" in u]
    run_pages = [u for u in pages if "/runs/run/" in u]
    assert len(credential_pages) == 1 + Credential.objects.count() + 1
    assert len(run_pages) >= 1 + 2
    assert b"token: set" in pages[reverse("admin:tools_credential_change", args=[
        Credential.objects.get(name="gh").pk])]  # fmt: skip
    for url, page in pages.items():
        _assert_holds_none(page.decode(), f"the admin page {url}")
    answers = _api_answers()
    assert b"***" in answers[f"/api/v1/runs/{ok.pk}/"]  # the echoed secrets, masked
    assert b'"steps"' in answers[f"/api/v1/runs/{failed.pk}/"]
    for url, answer in answers.items():
        _assert_holds_none(answer.decode(), f"the API answer {url}")

    if connection.vendor != "postgresql":
        return
    db = connection.settings_dict
    dump = subprocess.run(
        ["pg_dump", "--host", db["HOST"] or "127.0.0.1", "--port", str(db["PORT"] or 5432),
         "--username", db["USER"] or "postgres", "--no-password", db["NAME"]],
        capture_output=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    for secret in SECRETS:
        assert secret.encode() not in dump, "the PostgreSQL dump holds a secret value"
    for ciphertext in stored:
        assert ciphertext.encode() in dump
