"""Eight real Celery worker processes and 100 runs finding a stored OAuth2 token expired
at once: exactly one token request reaches the loopback authorization server, every run
succeeds, and the refresh token the provider rotated is the one stored. The workers
lock the refresh in Redis (their broker); PostgreSQL holds the credential."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run
from runs.services import run_create, run_enqueue
from tests.celery_support import import_flow, wait_until
from tests.fakes.oauth import OAuthServer
from tests.tools.credentials.conftest import KEY_A
from tools.credentials.crypto import unseal
from tools.credentials.store import save_credential
from tools.loader import load_tool_text
from tools.models import Credential
from tools.services import tool_upsert

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
]

WORKERS = 8
RUNS = 100

TOOL = """
- name: crm_ping
  kind: http
  description: A call with the stored OAuth2 credential crm (loopback fake).
  base_url: "{base}"
  auth: {{credential: crm}}
  request: {{method: GET, url: "/api/{{{{tag}}}}"}}
  inputs: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
  timeout: 30
"""

FLOW = {
    "name": "crm_refresh",
    "inputs": {"tag": {"type": "string"}},
    "steps": [
        {"id": "ping", "kind": "tool", "tool": "crm_ping", "input_mapping": {"tag": "$input.tag"}}
    ],
    "outputs": {"ok": "ping.ok"},
}


@pytest.fixture(scope="module")
def eight_workers(django_db_setup, tmp_path_factory):
    from tests.celery_support import start_cluster

    names = tuple(f"r{i}" for i in range(1, WORKERS + 1))
    env = {"FLOWPILOT_CREDENTIAL_KEYS": KEY_A}
    with start_cluster(
        tmp_path_factory.mktemp("refresh"), names, concurrency=1, env=env
    ) as cluster:
        yield cluster


@pytest.fixture
def oauth():
    server = OAuthServer(delay=0.5).start()  # slow: every worker finds the token expired
    yield server
    server.stop()


def test_one_token_request_for_100_runs_on_8_workers(eight_workers, oauth, settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [KEY_A]
    for spec in load_tool_text(TOOL.format(base=oauth.url), source="test_refresh_workers"):
        tool_upsert(spec=spec, source="test_refresh_workers")
    save_credential(
        Credential(
            name="crm",
            type="oauth2_authorization_code",
            client_id=oauth.client_id,
            token_url=oauth.token_url,
            authorize_url=f"{oauth.url}/authorize",
            expires_at=timezone.now() - timedelta(minutes=5),
        ),
        {
            "client_secret": oauth.secret,
            "refresh_token": "rt-0-initial",
            "access_token": "at-0-expired",
        },
    )
    workflow = import_flow(FLOW)
    runs = [
        run_create(workflow=workflow, trigger="api", inputs={"tag": f"t{i}"}) for i in range(RUNS)
    ]
    for run in runs:  # published together: the first eight find the token expired at once
        run_enqueue(run=run)

    def all_finished() -> bool:
        done = Run.objects.filter(
            pk__in=[r.pk for r in runs], status__in=["succeeded", "failed", "cancelled"]
        )
        return done.count() == RUNS

    try:
        wait_until(all_finished, timeout=300, what=f"{RUNS} runs to finish")
    except AssertionError:
        raise AssertionError(eight_workers.logs()) from None
    by_status = dict.fromkeys(["succeeded"], 0)
    for run in Run.objects.filter(pk__in=[r.pk for r in runs]):
        by_status[run.status] = by_status.get(run.status, 0) + 1
    assert by_status == {"succeeded": RUNS}, eight_workers.logs()
    assert len(oauth.grants) == 1, oauth.grants
    assert oauth.grants[0]["refresh_token"] == "rt-0-initial"
    assert oauth.api_calls == ["at-1-issued"] * RUNS
    row = Credential.objects.get(name="crm")
    values = unseal(row.secrets, "crm")
    assert values["refresh_token"] == oauth.refresh_token == "rt-1-rotated"
    assert values["access_token"] == "at-1-issued"
    assert row.needs_reconnect is False
