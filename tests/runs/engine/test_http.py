"""runs.engine.http: no cookie outlives its session; a tool may opt in to a per-item one."""

from __future__ import annotations

import pytest

from runs.models import StepResult
from tests.conftest import write_flow
from tests.fakes import FakeAPI, FakeResponse

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = """
tools:
  - name: login
    base_url: "{{env.SITE}}"
    request: {url: /login}
  - name: whoami
    base_url: "{{env.SITE}}"
    request: {url: /whoami}
  - name: sticky
    base_url: "{{env.SITE}}"
    cookies: step
    request: {url: "/sticky/{{name}}"}
    inputs: {type: object, properties: {name: {type: string}}, required: [name]}
    retry: {max_attempts: 2, initial_delay: 0.01, max_delay: 0.01, jitter: 0}
"""


@pytest.fixture
def site(monkeypatch):
    fake = FakeAPI().start()
    session = {"Set-Cookie": "session=s-1f2e; Path=/"}
    fake.route("login", "GET", "/login", lambda r, m: FakeResponse.json({"ok": 1}, headers=session))
    fake.route("whoami", "GET", "/whoami", lambda r, m: FakeResponse.json({"me": None}))
    fake.route("sticky", "GET", "/sticky/[a-z]+", lambda r, m: FakeResponse.json({"ok": 1}))
    monkeypatch.setenv("SITE", fake.url)
    yield fake
    fake.stop()


def run(cli, tmp_path, flow: dict) -> None:
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "site.yaml").write_text(TOOLS, encoding="utf-8")
    result = cli("runflow", write_flow(tmp_path, flow), "--tools", str(tools))
    assert result.code == 0, result.out + result.err


def test_a_cookie_one_step_received_is_never_sent_by_another(site, cli, tmp_path):
    flow = {
        "name": "no_jar",
        "steps": [
            {"id": "signin", "kind": "tool", "tool": "login"},
            {"id": "me", "kind": "tool", "tool": "whoami"},
        ],
        "edges": [{"from": "signin", "to": "me"}],
    }
    run(cli, tmp_path, flow)

    (login,) = site.requests("login")
    (whoami,) = site.requests("whoami")
    assert login.finished_at <= whoami.received_at
    assert "cookie" not in whoami.headers  # it maps nothing, so it receives nothing


def test_a_step_session_keeps_cookies_within_one_item_only(site, cli, tmp_path):
    site.fail("sticky", status=503, times=1, headers={"Set-Cookie": "affinity=node-7; Path=/"})
    each = {"kind": "foreach", "tool": "sticky", "item_mapping": {"name": "$item"}}
    flow = {
        "name": "sticky_session",
        "steps": [
            {"id": "first", **each, "input_mapping": {"items": ["a"]}},
            {"id": "second", **each, "input_mapping": {"items": ["b"]}},
        ],
        "edges": [{"from": "first", "to": "second"}],
    }
    run(cli, tmp_path, flow)

    failed, retried, other = site.requests("sticky")
    assert (failed.status, retried.status) == (503, 200)
    assert retried.headers.get("cookie") == "affinity=node-7"  # the item's retry: same session
    assert other.path == "/sticky/b"
    assert "cookie" not in other.headers  # another step: a new session
    assert StepResult.objects.get(step_id="first").output["items"] == [{"ok": 1}]


def test_runs_in_one_process_share_its_client_and_its_connections(site, cli, tmp_path):
    """An in-process run uses the process's client (no cookies, so nothing crosses runs
    but connections): the next run's call goes out on the connection the last one kept,
    where a client of its own would have opened (and closed) one per run."""
    from runs.engine.http import process_http_client

    flow = {"name": "who", "steps": [{"id": "me", "kind": "tool", "tool": "whoami"}]}
    run(cli, tmp_path, flow)
    run(cli, tmp_path, flow)

    first, second = site.requests("whoami")
    assert first.peer is not None
    assert second.peer == first.peer  # one connection for both runs
    assert not process_http_client().is_closed  # the runs left it open


def test_the_process_client_is_shared_refuses_cookies_and_outlives_a_context_that_uses_it():
    """Celery step tasks share one client per process: a context built with it leaves it
    open; one built without it closes its own."""
    import httpx

    from runs.engine.build import build_run_context
    from runs.engine.http import process_http_client
    from workflows.schema import WorkflowSpec

    shared = process_http_client()
    assert process_http_client() is shared
    shared.cookies.extract_cookies(
        httpx.Response(
            200, headers={"set-cookie": "s=1"}, request=httpx.Request("GET", "http://a.test/")
        )
    )
    assert not shared.cookies  # its jar refuses every cookie
    spec = WorkflowSpec.model_validate(
        {"name": "noop", "steps": [{"id": "a", "kind": "transform", "expression": "`1`"}]}
    )
    with build_run_context(run_id=0, spec=spec, http=shared) as ctx:
        assert ctx.http is shared
    assert not shared.is_closed
    with build_run_context(run_id=0, spec=spec) as own:
        assert own.http is not shared
    assert own.http.is_closed
