"""tools.credentials.vault: credentials whose value is in HashiCorp Vault (KV v2), read
through ``hvac`` from a real HTTP server on loopback that speaks Vault's KV v2 API
(tests/fakes/vault.py; no Vault server can be installed here): a tool call sends the
value, a value changed in Vault is sent once the cache time has passed, every failure
names the credential and the path (never a value), nothing secret is in the database,
and the value is masked in what a run stores and prints."""

from __future__ import annotations

import logging
import time

import pytest

from notifications.report import report_build
from runs.models import Run
from tests.conftest import write_flow
from tests.fakes import FakeAPI, FakeResponse
from tests.fakes.vault import FakeVault
from tests.tools.conftest import make_spec
from tools.credentials import vault as vault_module
from tools.credentials.store import (
    CredentialInvalid,
    StoredCredentials,
    resolve_credential,
    save_credential,
    vault_ref,
)
from tools.credentials.vault import VaultCache, VaultError, VaultRef, VaultSettings, read_value
from tools.errors import ToolConfigError, ToolUnreachable
from tools.http_client import call_http_tool
from tools.models import Credential

ROOT_TOKEN = "hvs.root-7e6d5c4b3a"
TOKEN_VALUE = "ghp-vault-1a2b3c4d5e"
NEW_VALUE = "ghp-vault-rotated-9f8e"


@pytest.fixture
def vault():
    fake = FakeVault(ROOT_TOKEN)
    yield fake
    fake.close()


@pytest.fixture
def cache(monkeypatch) -> VaultCache:
    """A cache of this test's own (the process's one is replaced for its duration)."""
    fresh = VaultCache()
    monkeypatch.setattr(vault_module, "PROCESS_VAULT_CACHE", fresh)
    return fresh


@pytest.fixture
def vault_settings(settings, vault, cache):
    settings.FLOWPILOT_VAULT_ADDR = vault.url
    settings.FLOWPILOT_VAULT_TOKEN = ROOT_TOKEN
    settings.FLOWPILOT_VAULT_TOKEN_FILE = ""
    settings.FLOWPILOT_VAULT_NAMESPACE = ""
    settings.FLOWPILOT_VAULT_TIMEOUT = 2.0
    settings.FLOWPILOT_VAULT_CACHE_SECONDS = 60.0
    return settings


def _config(vault: FakeVault, **changes) -> VaultSettings:
    values = {"addr": vault.url, "token": ROOT_TOKEN, "timeout": 2.0, "cache_seconds": 60.0}
    return VaultSettings(**{**values, **changes})


REF = VaultRef(credential="gh", mount="secret", path="apps/github", key="token")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- Reading a value ------------------------------------------------------------


def test_a_value_is_read_through_hvac_and_kept_for_the_cache_time(vault):
    vault.put("secret", "apps/github", {"token": TOKEN_VALUE, "other": "x"})
    cache, clock = VaultCache(), Clock()
    config = _config(vault, cache_seconds=60.0)
    assert read_value(REF, config, cache=cache, clock=clock) == TOKEN_VALUE
    vault.put("secret", "apps/github", {"token": NEW_VALUE})
    clock.now += 59.0
    assert read_value(REF, config, cache=cache, clock=clock) == TOKEN_VALUE
    assert vault.read_count("secret", "apps/github") == 1
    clock.now += 1.0
    assert read_value(REF, config, cache=cache, clock=clock) == NEW_VALUE
    assert vault.read_count("secret", "apps/github") == 2


def test_a_zero_cache_time_reads_vault_every_time(vault):
    vault.put("secret", "apps/github", {"token": TOKEN_VALUE})
    config = _config(vault, cache_seconds=0)
    cache = VaultCache()
    for _ in range(3):
        read_value(REF, config, cache=cache)
    assert vault.read_count("secret", "apps/github") == 3


def test_the_token_may_come_from_a_file_read_at_each_read(vault, tmp_path):
    vault.put("secret", "apps/github", {"token": TOKEN_VALUE})
    token_file = tmp_path / "vault-token"
    token_file.write_text(ROOT_TOKEN + "\n", encoding="utf-8")
    config = _config(vault, token="", token_file=str(token_file), cache_seconds=0)
    assert read_value(REF, config, cache=VaultCache()) == TOKEN_VALUE
    token_file.write_text("hvs.revoked", encoding="utf-8")
    with pytest.raises(VaultError, match="permission denied"):
        read_value(REF, config, cache=VaultCache())


def test_a_namespace_is_sent_to_vault(vault):
    namespaced = FakeVault(ROOT_TOKEN, namespace="team-a")
    try:
        namespaced.put("secret", "apps/github", {"token": TOKEN_VALUE})
        config = _config(namespaced, namespace="team-a")
        assert read_value(REF, config, cache=VaultCache()) == TOKEN_VALUE
        with pytest.raises(VaultError, match="permission denied"):
            read_value(REF, _config(namespaced), cache=VaultCache())
    finally:
        namespaced.close()


def _error(vault, config=None, ref=REF) -> VaultError:
    with pytest.raises(VaultError) as caught:
        read_value(ref, config or _config(vault), cache=VaultCache())
    assert TOKEN_VALUE not in caught.value.message
    assert ROOT_TOKEN not in caught.value.message
    return caught.value


def test_each_failure_names_the_credential_and_the_path_never_a_value(vault, closed_port):
    vault.put("secret", "apps/github", {"token": TOKEN_VALUE, "user": "bot"})
    where = "credential 'gh' (Vault secret/apps/github)"

    missing_path = _error(vault, ref=VaultRef("gh", "secret", "apps/gitlab", "token"))
    assert missing_path.message == (
        "credential 'gh' (Vault secret/apps/gitlab): no secret at this path "
        "(or no KV v2 mount 'secret')"
    )
    missing_mount = _error(vault, ref=VaultRef("gh", "kv", "apps/github", "token"))
    assert "no KV v2 mount 'kv'" in missing_mount.message

    missing_key = _error(vault, ref=VaultRef("gh", "secret", "apps/github", "tokn"))
    assert missing_key.message == f"{where}: the secret has no key 'tokn' (its keys: token, user)"

    bad_token = _error(vault, _config(vault, token="hvs.wrong"))
    assert bad_token.message.startswith(f"{where}: permission denied")
    assert not bad_token.unreachable

    vault.add_token("hvs.limited", ("secret/apps/slack",))
    denied = _error(vault, _config(vault, token="hvs.limited"))
    assert denied.message.startswith(f"{where}: permission denied")

    down = _error(vault, _config(vault, addr=f"http://127.0.0.1:{closed_port}"))
    assert down.message == f"{where}: Vault at http://127.0.0.1:{closed_port} is unreachable"
    assert down.unreachable

    no_addr = _error(vault, _config(vault, addr=""))
    assert "no Vault address is configured: set FLOWPILOT_VAULT_ADDR" in no_addr.message
    no_token = _error(vault, _config(vault, token=""))
    assert "no Vault token is configured" in no_token.message
    no_file = _error(vault, _config(vault, token="", token_file="/nonexistent/vault-token"))
    assert "FLOWPILOT_VAULT_TOKEN_FILE '/nonexistent/vault-token' cannot be read" in (
        no_file.message
    )


def test_a_failed_read_is_not_cached_the_next_read_tries_again(vault):
    cache = VaultCache()
    with pytest.raises(VaultError, match="no secret at this path"):
        read_value(REF, _config(vault), cache=cache)
    vault.put("secret", "apps/github", {"token": TOKEN_VALUE})
    assert read_value(REF, _config(vault), cache=cache) == TOKEN_VALUE


def test_a_vault_that_does_not_answer_in_time_is_a_timeout_not_a_wait(vault):
    import socket

    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        addr = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        error = _error(vault, _config(vault, addr=addr, timeout=0.3))
    assert time.monotonic() - started < 5
    assert error.unreachable
    assert error.message.endswith("Vault did not answer within 0.3 s")


def test_the_settings_never_show_the_token():
    config = VaultSettings(addr="http://127.0.0.1:8200", token=ROOT_TOKEN)
    assert ROOT_TOKEN not in repr(config)


# --- The store ------------------------------------------------------------------


def _vault_credential(name="gh", type_="bearer", **fields) -> Credential:
    values = {"source": "vault", "vault_path": "apps/github", **fields}
    return save_credential(Credential(name=name, type=type_, **values), {})


@pytest.mark.django_db
def test_a_vault_credential_keeps_nothing_secret_in_the_database(vault_settings, vault, keys):
    row = save_credential(Credential(name="gh", type="bearer"), {"token": "ghp-was-stored"})
    assert row.secrets
    row.source, row.vault_path, row.vault_mount = "vault", "/apps/github/", ""
    save_credential(row, {})
    row.refresh_from_db()
    assert (row.secrets, row.secret_fields) == ("", [])
    assert (row.vault_mount, row.vault_path, row.vault_key) == ("secret", "apps/github", "")
    assert vault_ref(row) == VaultRef("gh", "secret", "apps/github", "token")


@pytest.mark.django_db
def test_a_vault_credential_refuses_a_typed_value_a_missing_path_and_a_consent_type():
    with pytest.raises(CredentialInvalid) as caught:
        save_credential(
            Credential(name="gh", type="bearer", source="vault", vault_path="a"), {"token": "t"}
        )
    assert "change it in Vault" in caught.value.problems["source"]
    with pytest.raises(CredentialInvalid) as caught:
        _vault_credential(vault_path="")
    assert caught.value.problems == {"vault_path": "a credential kept in Vault needs vault_path"}
    with pytest.raises(CredentialInvalid) as caught:
        _vault_credential(
            type_="oauth2_authorization_code",
            client_id="c",
            token_url="http://127.0.0.1/t",
            authorize_url="http://127.0.0.1/a",
        )
    assert "cannot be kept in Vault" in caught.value.problems["source"]
    with pytest.raises(CredentialInvalid) as caught:
        save_credential(Credential(name="gh", type="bearer", vault_path="apps/github"), {})
    assert caught.value.problems == {
        "vault_path": "vault_path applies only to a credential kept in Vault"
    }
    assert not Credential.objects.exists()


@pytest.mark.django_db
def test_resolve_reads_the_value_from_vault_with_the_key_mapping(vault_settings, vault):
    vault.put("secret", "apps/ledger", {"pw": "pw-vault-5566", "username": "ignored"})
    _vault_credential(
        name="ledger", type_="basic", username="svc", vault_path="apps/ledger", vault_key="pw"
    )
    resolved = resolve_credential("ledger")
    assert resolved.values == {"password": "pw-vault-5566"}
    assert resolved.source == "vault"
    assert resolved.missing() == []


@pytest.mark.django_db
def test_the_store_as_a_secret_source_yields_vault_values_and_skips_one_it_cannot_read(
    vault_settings, vault
):
    vault.put("secret", "apps/github", {"token": TOKEN_VALUE})
    _vault_credential()
    _vault_credential(name="gone", vault_path="apps/gone")
    found = list(StoredCredentials(names=frozenset({"gh", "gone"})).values())
    assert found == [TOKEN_VALUE]


# --- A tool call ----------------------------------------------------------------


def _spec():
    return make_spec("/api", name="t", auth={"credential": "gh"})


@pytest.mark.django_db
def test_a_tool_call_sends_the_vault_value_and_a_changed_one_after_the_cache_time(
    vault_settings, vault, server, ctx_for
):
    vault_settings.FLOWPILOT_VAULT_CACHE_SECONDS = 0.3
    vault.put("secret", "apps/github", {"token": TOKEN_VALUE})
    _vault_credential()

    ctx = ctx_for()
    result = call_http_tool(_spec(), {}, ctx)
    assert server.requests[-1].header("authorization") == f"Bearer {TOKEN_VALUE}"
    assert TOKEN_VALUE not in str(result.request)
    assert ctx.redactor.scrub_text(f"echo {TOKEN_VALUE}") == "echo ***"

    vault.put("secret", "apps/github", {"token": NEW_VALUE})
    call_http_tool(_spec(), {}, ctx_for())  # within the cache time: the value read before
    assert server.requests[-1].header("authorization") == f"Bearer {TOKEN_VALUE}"
    time.sleep(0.35)
    ctx = ctx_for()
    call_http_tool(_spec(), {}, ctx)  # no restart, no re-approval: the new value
    assert server.requests[-1].header("authorization") == f"Bearer {NEW_VALUE}"
    assert ctx.redactor.scrub_text(NEW_VALUE) == "***"
    assert vault.read_count("secret", "apps/github") == 2


@pytest.mark.django_db
def test_a_tool_call_fails_clearly_when_vault_cannot_give_the_value(
    vault_settings, vault, cache, server, ctx_for, closed_port
):
    vault_settings.FLOWPILOT_VAULT_CACHE_SECONDS = 0  # each call reads Vault
    _vault_credential()
    with pytest.raises(ToolConfigError) as caught:
        call_http_tool(_spec(), {}, ctx_for())
    assert caught.value.message == (
        "tool 't': credential 'gh' (Vault secret/apps/github): no secret at this path "
        "(or no KV v2 mount 'secret')"
    )
    vault.put("secret", "apps/github", {"value": TOKEN_VALUE})
    with pytest.raises(ToolConfigError, match="the secret has no key 'token'"):
        call_http_tool(_spec(), {}, ctx_for())
    vault_settings.FLOWPILOT_VAULT_TOKEN = "hvs.wrong"
    denied = r"'gh' \(Vault secret/apps/github\): permission denied"
    with pytest.raises(ToolConfigError, match=denied):
        call_http_tool(_spec(), {}, ctx_for())
    vault_settings.FLOWPILOT_VAULT_ADDR = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(ToolUnreachable) as down:
        call_http_tool(_spec(), {}, ctx_for())
    assert down.value.not_sent
    assert "credential 'gh' (Vault secret/apps/github): Vault at" in down.value.message
    assert server.requests == []  # nothing was sent without its credential


# --- A run ----------------------------------------------------------------------

TOOLS = """
tools:
  - name: echo_vault
    base_url: "{{env.ECHO}}"
    request: {url: /echo}
    auth: {credential: gh}
  - name: broken_vault
    base_url: "{{env.ECHO}}"
    request: {url: /broken}
    auth: {credential: gh}
    retry: {max_attempts: 1}
"""


@pytest.fixture
def echo(monkeypatch):
    fake = FakeAPI().start()
    fake.route("echo", "GET", "/echo", lambda r, m: FakeResponse.json({"headers": r.headers}))
    fake.route("broken", "GET", "/broken", lambda r, m: FakeResponse(
        500, f"refused {r.headers.get('authorization')}".encode(),
        {"Content-Type": "text/plain"}))  # fmt: skip
    monkeypatch.setenv("ECHO", fake.url)
    yield fake
    fake.stop()


@pytest.mark.django_db(transaction=True)
def test_a_run_using_a_vault_credential_stores_and_prints_no_byte_of_the_value(
    vault_settings, vault, echo, cli, tmp_path, caplog
):
    from django.db import connection

    caplog.set_level(logging.DEBUG)
    vault.put("secret", "apps/github", {"token": TOKEN_VALUE})
    _vault_credential()
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "echo.yaml").write_text(TOOLS, encoding="utf-8")
    flow = {"name": "echo", "steps": [{"id": "e", "kind": "tool", "tool": "echo_vault"}],
            "outputs": {"seen": "e.headers"}}  # fmt: skip
    ok = cli("runflow", write_flow(tmp_path, flow), "--tools", str(tools))
    assert ok.code == 0, ok.out + ok.err
    failing = {"name": "fails", "steps": [{"id": "b", "kind": "tool", "tool": "broken_vault"}]}
    failed = cli("runflow", write_flow(tmp_path, failing, "f.yaml"), "--tools", str(tools))
    assert failed.code != 0

    (sent,) = [r for r in echo.requests() if r.path == "/echo"]
    assert sent.headers["authorization"] == f"Bearer {TOKEN_VALUE}"  # it did travel
    ok_run, failed_run = Run.objects.order_by("id")
    assert ok_run.status == "succeeded"
    assert failed_run.status == "failed"
    assert "***" in str(ok_run.outputs)

    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            rows += [repr(row) for row in cursor.fetchall()]
    everything = "\n".join(
        [*rows, ok.out, ok.err, failed.out, failed.err,
         *(r.getMessage() for r in caplog.records),
         repr(report_build(run=failed_run, event="failed"))]
    )  # fmt: skip
    assert TOKEN_VALUE not in everything
    assert "apps/github" in "\n".join(rows)  # where it is, in clear: the only thing stored
