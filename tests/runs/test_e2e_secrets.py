"""Secrets end to end: masked in every stored or shown byte, data in flight intact.

A workflow runs through ``runflow`` against a loopback API that echoes every
credential it receives, then posts what it read to a loopback webhook whose URL
holds a token. Afterwards every column of every table, the command output, the
debug logs and the admin pages are searched for each secret; and the non-secret
configuration (an org name, a user name, a base URL with a path) must have
reached the webhook exactly as the API sent it.
"""

from __future__ import annotations

import base64
import json

import pytest
from django.db import connection
from django.urls import reverse

from runs.models import Run, StepResult
from tests.conftest import write_flow
from tests.fakes import FakeAPI, FakeResponse

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "gh-pa55word-7d1e0c9b"
SESSION = "sess-tok3n-44a1f0e2"
HOOK_TOKEN = "s3cr3tHookT0ken9x"
MISSING_TOKEN = "m1ss1ngHookT0ken2y"
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
SECRETS = (PASSWORD, SESSION, HOOK_TOKEN, MISSING_TOKEN, BASIC)

TOOLS = """
tools:
  - name: org_repo
    description: A repository of the configured org (basic auth and a session header).
    base_url: "{{env.GH_BASE}}"
    request:
      url: "/repos/{{env.GH_ORG}}/{{repo}}"
      headers: {X-Session: "{{env.SESSION_TOKEN}}", Accept: application/json}
      secret_headers: [X-Session]
    auth: {type: basic, username: "{{env.GH_USER}}", password: "{{env.GH_PASSWORD}}"}
    inputs: {type: object, properties: {repo: {type: string}}, required: [repo]}
  - name: notify
    description: POST a payload to a webhook whose URL is a credential.
    secret_env: [HOOK_URL]
    base_url: "{{env.HOOK_URL}}"
    request: {method: POST, body: "{{payload}}"}
    inputs: {type: object, properties: {payload: {}}, required: [payload]}
  - name: notify_missing
    description: The same, to a hook that no longer exists (the server echoes its path).
    secret_env: [MISSING_HOOK_URL]
    base_url: "{{env.MISSING_HOOK_URL}}"
    request: {method: POST, body: "{{payload}}"}
    inputs: {type: object, properties: {payload: {}}, required: [payload]}
"""

FLOW = {
    "name": "secret_scan",
    "inputs": {"repo": {"type": "string"}},
    "steps": [
        {
            "id": "repo",
            "kind": "tool",
            "tool": "org_repo",
            "input_mapping": {"repo": "$input.repo"},
        },
        {
            "id": "notify",
            "kind": "tool",
            "tool": "notify",
            "input_mapping": {
                "payload": {
                    "name": "repo.full_name",
                    "user": "repo.user",
                    "url": "repo.url",
                    "org": "$env.GH_ORG",
                    "seen": "repo.seen",
                }
            },
        },
        {
            "id": "missing",
            "kind": "tool",
            "tool": "notify_missing",
            "on_error": "continue",
            "input_mapping": {"payload": {"name": "repo.full_name"}},
        },
    ],
    "outputs": {"name": "repo.full_name", "received": "notify.received"},
}


@pytest.fixture
def api(monkeypatch):
    fake = FakeAPI().start()
    base = f"{fake.url}/api/v3"

    def repo(req, match):
        seen = {key: req.headers.get(key) for key in ("authorization", "x-session")}
        return FakeResponse.json(
            {
                "full_name": f"{match['org']}/{match['repo']}",
                "user": "user",
                "url": f"{base}/repos/{match['org']}/{match['repo']}",
                "seen": {**seen, "path": req.path},
            },
            headers={"Set-Cookie": f"gh_sess={SESSION}; Path=/"},
        )

    fake.route("repo", "GET", r"/api/v3/repos/(?P<org>[^/]+)/(?P<repo>[^/]+)", repo)
    fake.route(
        "hook", "POST", rf"/hooks/T0123/{HOOK_TOKEN}",
        lambda req, match: FakeResponse.json({"received": req.json(), "path": req.path}),
    )  # fmt: skip
    env = {
        "GH_BASE": base, "GH_ORG": "pallets", "GH_USER": "user", "GH_PASSWORD": PASSWORD,
        "SESSION_TOKEN": SESSION, "HOOK_URL": f"{fake.url}/hooks/T0123/{HOOK_TOKEN}",
        "MISSING_HOOK_URL": f"{fake.url}/hooks/T0999/{MISSING_TOKEN}",
    }  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield fake
    fake.stop()


def every_stored_byte() -> str:
    """Every row of every table, as text (JSON, text and binary columns alike)."""
    chunks = []
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names()):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        value = bytes(value).decode("latin-1")
                    text = value if isinstance(value, str) else json.dumps(value, default=str)
                    chunks.append(text)
    return "\n".join(chunks)


def test_a_secret_never_reaches_a_stored_or_shown_byte_and_configuration_arrives_intact(
    api, cli, tmp_path, capsys, restore_loggers, admin_client
):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "scan.yaml").write_text(TOOLS, encoding="utf-8")
    path = write_flow(tmp_path, FLOW)

    result = cli(
        "runflow", path, "--tools", str(tools), "--log-level", "DEBUG", "--input", "repo=flask"
    )
    captured = capsys.readouterr()

    assert result.code == 0, result.out + result.err
    # The secrets were really sent, and echoed back ...
    (call,) = api.requests("repo")
    assert call.headers["authorization"] == f"Basic {BASIC}"
    assert call.headers["x-session"] == SESSION
    (hook,) = api.requests("hook")
    received = hook.json()
    assert received["seen"]["x-session"] == SESSION  # data in flight is never masked
    assert received["seen"]["authorization"] == f"Basic {BASIC}"
    # ... the non-secret configuration arrived at the webhook exactly as the API sent it ...
    assert received["name"] == "pallets/flask"
    assert received["org"] == "pallets"
    assert received["user"] == "user"
    assert received["url"] == f"{api.url}/api/v3/repos/pallets/flask"
    # ... and it is stored unmasked, keys included, while the secrets are masked by value.
    repo = StepResult.objects.get(step_id="repo")
    assert repo.output["full_name"] == "pallets/flask"
    assert repo.output["user"] == "user"
    assert repo.output["url"] == f"{api.url}/api/v3/repos/pallets/flask"
    assert repo.output["seen"]["x-session"] == "***"
    notify = StepResult.objects.get(step_id="notify")
    assert notify.inputs["payload"]["org"] == "$env.GH_ORG"  # recorded by name
    missing = StepResult.objects.get(step_id="missing")
    assert missing.status == "failed"
    assert "no fake route for ***" in missing.error["message"]  # the echoed secret path
    run = Run.objects.get()
    assert run.outputs["name"] == "pallets/flask"
    assert run.outputs["received"]["seen"]["authorization"] == "Basic ***"

    pages = [
        admin_client.get(reverse("admin:runs_run_change", args=[run.pk])),
        admin_client.get(reverse("admin:runs_run_changelist")),
        admin_client.get(reverse("admin:tools_tool_changelist")),
    ]
    assert all(page.status_code == 200 for page in pages)
    shown = result.out + result.err + captured.out + captured.err
    shown += "".join(page.content.decode() for page in pages)
    assert "pallets/flask" in shown
    stored = every_stored_byte()
    for secret in SECRETS:
        assert secret not in stored, secret
        assert secret not in shown, secret


def test_a_600_deep_json_response_is_stored_without_recursion_errors(api, cli, tmp_path):
    deep: object = {"leaf": SESSION}
    for _ in range(600):
        deep = {"d": deep}
    api.respond("repo", lambda req, match: FakeResponse.json(deep))
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "scan.yaml").write_text(TOOLS, encoding="utf-8")
    flow = {**FLOW, "steps": FLOW["steps"][:1], "outputs": {}}
    result = cli("runflow", write_flow(tmp_path, flow), "--tools", str(tools), "--input", "repo=x")

    assert result.code == 0, result.out + result.err
    stored = StepResult.objects.get().output
    for _ in range(600):
        stored = stored["d"]
    assert stored == {"leaf": "***"}


STOKEN = "st0ken-value-9f8e7d6c5b"
LEAK_TOOLS = """
name: stoken_report
description: A report read with a bearer token from the environment.
base_url: "{{env.REPORT_BASE}}"
request: {url: "/reports/{{report}}"}
auth: {type: bearer, token: "{{env.STOKEN}}"}
inputs: {type: object, properties: {report: {type: string}}, required: [report]}
response_extract: {title: title}
outputs: [title]
"""
LEAK_FLOW = {
    "name": "stoken_leak",
    "steps": [
        {"id": "read", "kind": "tool", "tool": "stoken_report",
         "input_mapping": {"report": "weekly"}},
        {"id": "shape", "kind": "transform", "expression": "{token: tok, title: title}",
         "input_mapping": {"tok": "$env.STOKEN", "title": "read.title"}},
        {"id": "ask", "kind": "llm", "prompt": "Summarize {{title}} ({{token}})",
         "input_mapping": {"title": "shape.title", "token": "shape.token"}},
    ],
    "outputs": {"summary": "ask.result"},
}  # fmt: skip


def test_the_issue_s_leak_is_refused_before_anything_is_called_or_stored(
    api, cli, tmp_path, monkeypatch, planner_llm
):
    """A tool takes $env.STOKEN as its bearer token; a transform maps $env.STOKEN and an
    llm prompt reads the transform's output. The derived token would have reached the
    LLM request and two stored rows; now runflow refuses the workflow naming the step,
    the path and the fix, and neither the API nor the LLM is called."""
    monkeypatch.setenv("STOKEN", STOKEN)
    monkeypatch.setenv("REPORT_BASE", api.url)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "report.yaml").write_text(LEAK_TOOLS, encoding="utf-8")

    result = cli("runflow", write_flow(tmp_path, LEAK_FLOW), "--tools", str(tools))

    assert result.code == 1
    assert "steps[1].input_mapping.tok  [credential_leak]" in result.out
    named = "step `shape` maps `$env.STOKEN`, the credential of tool `stoken_report`"
    assert named in result.out
    assert "give the tool the credential through its auth" in result.out
    assert api.requests() == []
    assert planner_llm.requests == []
    assert not Run.objects.exists()
    assert STOKEN not in every_stored_byte() + result.out + result.err
