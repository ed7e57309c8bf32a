"""After runs that used every credential type — one succeeding with the secrets echoed
back in its responses, one failing with them in its error — no table row, no line of a
PostgreSQL dump, no DEBUG log line and no failure report holds a byte of a secret value;
the credentials' values are in the database as ciphertext only."""

from __future__ import annotations

import base64
import logging
import subprocess

import pytest
from django.db import connection

from notifications.report import report_build
from runs.models import Run
from tests.conftest import write_flow
from tests.fakes import FakeAPI, FakeResponse
from tools.credentials.store import save_credential
from tools.http import oauth2
from tools.http.oauth2 import TokenCache
from tools.models import Credential

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "ghp-atrest-0f1e2d3c4b5a"
PASSWORD = "pw-atrest-9a8b7c6d"
API_KEY = "key-atrest-55aa66bb"
HEADER = "hdr-atrest-77cc88dd"
CLIENT_SECRET = "cs-atrest-99ee00ff"
ACCESS_TOKEN = "at-atrest-1122334455"
SECRETS = [
    TOKEN,
    PASSWORD,
    base64.b64encode(f"svc-ledger:{PASSWORD}".encode()).decode(),
    API_KEY,
    HEADER,
    CLIENT_SECRET,
    base64.b64encode(f"crm-app:{CLIENT_SECRET}".encode()).decode(),
    ACCESS_TOKEN,
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
  - name: echo_oauth
    base_url: "{{env.ECHO}}"
    request: {url: /echo/oauth}
    auth: {credential: crm}
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
    save_credential(
        Credential(
            name="crm",
            type="oauth2_client_credentials",
            client_id="crm-app",
            token_url=f"{api.url}/token",
        ),
        {"client_secret": CLIENT_SECRET},
    )
    return list(Credential.objects.values_list("secrets", flat=True))


def _runs(cli, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "echo.yaml").write_text(TOOLS, encoding="utf-8")
    steps = [
        {"id": name, "kind": "tool", "tool": f"echo_{name}"}
        for name in ("bearer", "basic", "key", "header", "oauth")
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
