"""tools.secrets: what is secret (declared credentials and values resolved from them),
the same before a call (``redactor_for``) and while it is made (``register_tool_secrets``)."""

from __future__ import annotations

import pytest

from tools.credentials.crypto import generate_key
from tools.credentials.store import StoredCredentials, save_credential
from tools.loader import load_tool_text
from tools.mcp.config import McpServer
from tools.models import Credential
from tools.redaction import Redactor
from tools.registry import ToolRegistry
from tools.secrets import (
    TOKEN_PATTERNS,
    DeclaredSecrets,
    basic_token,
    credential_env_names,
    credential_names,
    credential_params,
    free_text_redactor,
    redactor_for,
    register_tool_secrets,
    secret_env_names,
    secret_sources,
    secret_values,
    server_secret_values,
    token_values,
    tool_secret_values,
)

ORDERS = """
name: orders
base_url: "{{env.ORDERS_BASE}}"
request:
  url: /orders/{{region}}
  headers: {X-Session: "session {{env.ORDERS_SESSION}}", X-Trace: "{{trace}}", X-Org: "{{env.ORG}}"}
  secret_headers: [X-Session, X-Trace]
auth: {type: bearer, token: "{{env.ORDERS_TOKEN}}"}
inputs: {type: object, properties: {region: {type: string}, trace: {type: string}}}
"""
LEDGER = """
name: ledger
base_url: https://ledger.example
request: {url: /entries}
auth: {type: basic, username: "{{env.LEDGER_USER}}", password: "{{env.LEDGER_PASSWORD}}"}
"""
PAYOUTS = """
name: payouts
base_url: https://payouts.example
request: {url: /payouts}
auth:
  type: oauth2
  token_url: "{{env.PAYOUTS_TOKEN_URL}}"
  client_id: "{{env.PAYOUTS_CLIENT_ID}}"
  client_secret: "{{env.PAYOUTS_CLIENT_SECRET}}"
"""
ENV = {
    "ORDERS_BASE": "https://orders.example/api/v2",
    "ORDERS_TOKEN": "tok-0123456789",
    "ORDERS_SESSION": "sess-abcdef",
    "ORG": "acme-corp",
    "LEDGER_USER": "ledger-bot",
    "LEDGER_PASSWORD": "hunter2-hunter2",
    "PAYOUTS_TOKEN_URL": "https://auth.payouts.example/token",
    "PAYOUTS_CLIENT_ID": "payouts-client",
    "PAYOUTS_CLIENT_SECRET": "cs-9876543210",
}


def _spec(text: str):
    (spec,) = load_tool_text(text)
    return spec


def _registry() -> ToolRegistry:
    return ToolRegistry([_spec(ORDERS), _spec(LEDGER), _spec(PAYOUTS)])


def test_credentials_and_declared_secret_templates_name_the_secret_env():
    assert secret_env_names(_spec(ORDERS)) == {"ORDERS_TOKEN", "ORDERS_SESSION"}
    assert secret_env_names(_spec(LEDGER)) == {"LEDGER_PASSWORD"}
    # An OAuth2 client secret is a credential like a password; the client id and the
    # token URL are configuration.
    assert secret_env_names(_spec(PAYOUTS)) == {"PAYOUTS_CLIENT_SECRET"}
    assert _spec(PAYOUTS).secret_env_names() == secret_env_names(_spec(PAYOUTS))


def test_values_resolved_from_declared_secrets_are_secret_configuration_is_not():
    values = tool_secret_values(_spec(ORDERS), ENV)

    assert sorted(set(values)) == ["sess-abcdef", "session sess-abcdef", "tok-0123456789"]
    # The X-Trace header reads a call argument: resolved (and registered) when called.
    ledger = tool_secret_values(_spec(LEDGER), ENV)
    assert basic_token("ledger-bot", "hunter2-hunter2") in ledger
    assert "ledger-bot" not in ledger
    payouts = tool_secret_values(_spec(PAYOUTS), ENV)
    assert set(payouts) == {"cs-9876543210", basic_token("payouts-client", "cs-9876543210")}


def test_secret_values_of_a_registry_are_sorted_unique_and_skip_unset_variables():
    env = {k: v for k, v in ENV.items() if k != "LEDGER_PASSWORD"}

    values = secret_values(_registry(), env)

    assert values == sorted(set(values))
    assert "hunter2-hunter2" not in values
    assert not any(basic_token("ledger-bot", "") == v for v in values)
    assert {"tok-0123456789", "cs-9876543210"} <= set(values)


def test_the_redactor_masks_declared_secrets_and_leaves_configuration_in_clear():
    redactor = redactor_for(_registry(), ENV)
    text = (
        "GET https://orders.example/api/v2/orders/eu as acme-corp with tok-0123456789, "
        "session sess-abcdef, Basic " + basic_token("ledger-bot", "hunter2-hunter2")
    )

    assert redactor.scrub_text(text) == (
        "GET https://orders.example/api/v2/orders/eu as acme-corp with ***, ***, Basic ***"
    )


def test_a_call_registers_exactly_what_the_rule_knows_before_it():
    before = redactor_for(ToolRegistry([_spec(ORDERS)]), ENV)
    during = Redactor()

    register_tool_secrets(during, _spec(ORDERS), ENV)

    text = " ".join([*ENV.values(), "session sess-abcdef"])
    assert during.scrub_text(text) == before.scrub_text(text)
    assert len(during) == len(before)


def test_an_mcp_server_secret_headers_and_env_are_secret():
    server = McpServer(
        name="docs",
        url="{{env.DOCS_URL}}",
        headers={"Authorization": "Bearer {{env.DOCS_KEY}}", "X-Team": "{{env.TEAM}}"},
        secret_headers=["authorization"],
        secret_env=["DOCS_SIGNING"],
    )
    env = {"DOCS_URL": "https://docs.example/mcp", "DOCS_KEY": "dk-123456", "TEAM": "blue-team",
           "DOCS_SIGNING": "sign-987654"}  # fmt: skip

    assert server_secret_values(server, env) == ["Bearer dk-123456", "sign-987654"]


def test_the_sources_of_secrets_are_pluggable_values_providers():
    sources = secret_sources(_registry(), ENV)

    assert [type(s) for s in sources] == [DeclaredSecrets, StoredCredentials]
    assert sources[1] == StoredCredentials(names=frozenset())
    assert list(sources[1].values()) == []  # no tool names a credential: no statement
    assert sorted(set(sources[0].values())) == secret_values(_registry(), ENV)


GITHUB = """
name: github
base_url: https://api.github.example
request: {url: /user}
auth: {credential: github_app}
"""


@pytest.mark.django_db
def test_the_stored_credentials_the_registered_tools_name_are_secret(settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [generate_key()]
    save_credential(Credential(name="github_app", type="bearer"), {"token": "ghp-named-1234"})
    save_credential(Credential(name="unused", type="bearer"), {"token": "ghp-unused-5678"})
    registry = ToolRegistry([_spec(ORDERS), _spec(GITHUB)])

    assert credential_names(registry) == frozenset({"github_app"})
    assert "ghp-named-1234" in secret_values(registry, ENV)
    assert "ghp-unused-5678" not in secret_values(registry, ENV)  # no tool can send it
    redactor = redactor_for(registry, ENV)
    assert redactor.scrub_text("echo ghp-named-1234") == "echo ***"


def test_a_credential_resolves_as_the_call_would_send_it_default_and_spacing_included():
    spec = _spec(
        """
name: search
base_url: https://search.example
request:
  url: /q
  headers: {X-Key: "{{ env.SEARCH_KEY }}", X-Sig: "{{env.SEARCH_SIG:-sig-fallback-1}}"}
  secret_headers: [X-Key, X-Sig]
"""
    )

    assert set(tool_secret_values(spec, {"SEARCH_KEY": "key-abcdef"})) == {
        "key-abcdef",
        "sig-fallback-1",  # the variable is unset: the call sends (and masks) the default
    }
    assert set(tool_secret_values(spec, {"SEARCH_SIG": "sig-live-2"})) == {"sig-live-2"}


# --- where a credential may go ------------------------------------------------------


def test_the_credential_slot_is_the_arguments_secret_templates_read():
    orders = _spec(ORDERS)
    signed = _spec(
        """
name: signed
base_url: https://signed.example
request: {url: "/{{path}}", headers: {X-Sig: "sig {{sig.value}}"}, secret_headers: [X-Sig]}
auth: {type: bearer, token: "{{token}}"}
"""
    )
    assert orders.credential_params() == frozenset({"trace"})
    assert credential_params(signed) == frozenset({"sig", "token"})
    assert signed.credential_params() == frozenset({"sig", "token"})
    assert _spec(LEDGER).credential_params() == frozenset()


def test_the_credentials_of_a_registry_are_every_tool_s_secret_env():
    assert credential_env_names(_registry()) == frozenset(
        {"ORDERS_TOKEN", "ORDERS_SESSION", "LEDGER_PASSWORD", "PAYOUTS_CLIENT_SECRET"}
    )


# --- free text: token shapes ----------------------------------------------------------

# `sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX` with every letter in its full-width form
FULL_WIDTH = "".join(
    chr(ord(c) + 0xFEE0) if c.isalpha() else c for c in "sk-proj-" + "ABCDEFGHIJKLMNOPQRSTUVWX"
)
TOKENS = {
    "openai": "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8t",
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "github": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "github_pat": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "slack": "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl",
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "google": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "jwt": "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N",
}


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_each_token_shape_is_found_inside_text(name):
    token = TOKENS[name]
    text = f"use ({token}) please, and again:{token}\n"
    assert token_values(text) == [token]
    assert name in TOKEN_PATTERNS


@pytest.mark.django_db
def test_a_bearer_header_masks_the_token_only():
    text = "curl -H 'Authorization: Bearer abcdefghij0123456789.KLMN' https://api.example"
    assert token_values(text) == ["abcdefghij0123456789.KLMN"]
    redactor = free_text_redactor(ToolRegistry([]), {}, text)
    assert redactor.scrub_text(text) == ("curl -H 'Authorization: Bearer ***' https://api.example")


@pytest.mark.parametrize(
    "text",
    [
        "the bearer of bad news, sk-learn and scikit-learn, ask-me-anything",
        "task-0123456789abcdefghijklmnop",  # `sk-` inside a word
        "ghp_short and ghp-0123456789012345678901234567890123",  # too short, wrong separator
        "xoxb and xox-1234567890 and xoxz-1234567890abc",
        "AKIAIOSFODNN7EXAMPL and AKIAIOSFODNN7EXAMPLEX and XAKIAIOSFODNN7EXAMPLE",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIi (two parts) and eyJ.abc.def",
        "Bearer short-token and Bearer: abcdefghijklmnopqrstuvwxyz0123",
        "an ordinary sentence about tokens, secrets, keys and passwords",
        FULL_WIDTH,  # look-alikes of `sk-proj-...` in full-width letters
        "sk-ŁódźŁódźŁódźŁódźŁódźŁódź (not ASCII)",
    ],
)
def test_near_misses_and_ordinary_words_are_not_tokens(text):
    assert token_values(text) == []


@pytest.mark.django_db
def test_unicode_around_a_token_keeps_it_found_and_the_rest_intact():
    token = TOKENS["github"]
    text = f"clé→{token}←ключ 🔑"
    redactor = free_text_redactor(ToolRegistry([]), {}, text)
    assert redactor.scrub_text(text) == "clé→***←ключ 🔑"


def test_huge_and_pathological_text_is_searched_in_linear_time():
    token = TOKENS["jwt"]
    cases = [
        "a" * 5_000_000 + " " + token,
        "eyJ" * 400_000 + " " + token,  # a JWT start at every third character
        "sk-" * 400_000 + " " + token,
        "Bearer " * 300_000 + token,
        ("eyJabcdefghij." * 200_000) + " " + token,
    ]
    for text in cases:  # quadratic work here would not finish: hours per case
        assert token in token_values(text)


@pytest.mark.django_db
def test_the_free_text_redactor_masks_known_values_and_found_tokens_by_value():
    registry = _registry()
    token = TOKENS["slack"]
    goal = f"post to slack with {token}, the orders token is {ENV['ORDERS_TOKEN']}"
    inputs = {"again": f"x{token}", token: 1}
    redactor = free_text_redactor(registry, ENV, goal, inputs)
    assert redactor.scrub_text(goal) == "post to slack with ***, the orders token is ***"
    assert redactor.scrub(inputs) == {"again": "x***", "***": 1}
    assert redactor.scrub_text(f"later: {token}") == "later: ***"  # by value, anywhere
    assert redactor.scrub_text(f"org {ENV['ORG']}") == f"org {ENV['ORG']}"


@pytest.mark.django_db
def test_the_free_text_redactor_masks_every_stored_credential_even_one_no_tool_names(settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [generate_key()]
    save_credential(Credential(name="crm", type="bearer"), {"token": "plain-crm-key-4821"})
    goal = "sync contacts, the CRM key is plain-crm-key-4821"
    redactor = free_text_redactor(ToolRegistry([]), {}, goal)
    assert redactor.scrub_text(goal) == "sync contacts, the CRM key is ***"
