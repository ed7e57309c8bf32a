from pathlib import Path

import pytest

from tools.errors import ToolConfigError
from tools.loader import is_legacy, legacy_to_new, load_tool_file, load_tool_text

DATA = Path(__file__).resolve().parent.parent / "data" / "tools"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tools"


def _problems(text: str) -> str:
    with pytest.raises(ToolConfigError) as info:
        load_tool_text(text, source="t.yaml")
    return info.value.message


def test_legacy_flat_form_loads_into_the_same_spec():
    new = load_tool_file(DATA / "repo_new.yaml")
    legacy = load_tool_file(DATA / "repo_legacy.yaml")
    assert new == legacy
    spec = new[0]
    assert spec.http.base_url == "{{env.API_BASE:-https://api.example.com}}"
    assert spec.http.request.url == "/repos/{{owner}}/{{repo}}"
    assert spec.http.auth.token == "{{env.API_TOKEN}}"
    assert spec.timeout == spec.http.timeout == 10
    assert spec.retry.max_attempts == 3


def test_multi_tool_file():
    specs = load_tool_file(DATA / "multi.yaml")
    assert [s.name for s in specs] == ["first_tool", "second_tool"]
    assert specs[1].idempotent is False
    assert specs[1].http.request.body == {"q": "{{q}}"}


def test_top_level_list_form():
    text = "- {name: a, base_url: 'https://x.org', request: {url: /a}}\n"
    assert load_tool_text(text)[0].name == "a"


def test_every_example_tool_loads():
    names = {s.name for f in sorted(EXAMPLES.glob("*.yaml")) for s in load_tool_file(f)}
    assert {
        "ip_geolocate",
        "weather_current",
        "country_info",
        "geocode_city",
        "exchange_rate",
        "github_repo",
        "github_contributors",
        "github_issues",
        "github_releases",
        "github_languages",
        "post_json",
    } <= names


def test_example_exchange_rate_is_legacy_form():
    import yaml

    data = yaml.safe_load((EXAMPLES / "exchange_rate.yaml").read_text())
    assert is_legacy(data)
    spec = load_tool_file(EXAMPLES / "exchange_rate.yaml")[0]
    assert spec.http.response_extract == {"rates": "rates", "date": "date", "base": "base"}
    assert spec.http.request.query == {"from": "{{from}}", "to": "{{to}}"}


def test_malformed_yaml_names_file_and_line():
    with pytest.raises(ToolConfigError) as info:
        load_tool_file(DATA / "bad" / "malformed.yaml")
    assert "malformed.yaml:5: malformed YAML" in info.value.message


def test_bad_json_schema_names_file_field_and_line():
    with pytest.raises(ToolConfigError) as info:
        load_tool_file(DATA / "bad" / "bad_schema.yaml")
    message = info.value.message
    assert "bad_schema.yaml:8: tool 'bad_schema': field inputs.properties.owner.type:" in message
    assert "not a valid JSON Schema" in message


def test_all_problems_of_a_file_reported_at_once():
    with pytest.raises(ToolConfigError) as info:
        load_tool_file(DATA / "bad" / "bad_fields.yaml")
    problems = info.value.problems
    assert len(problems) == 6
    text = info.value.message
    assert "bad_fields.yaml:1: tool 'bad.name': field name:" in text
    assert "bad_fields.yaml:2: tool 'bad.name': field base_url: base_url may only use" in text
    assert "bad_fields.yaml:4: tool 'bad.name': field request.method:" in text
    assert "bad_fields.yaml:5: tool 'bad.name': field request.url: unbalanced" in text
    assert "bad_fields.yaml:6: tool 'bad.name': field request.colour: unknown key" in text
    assert "bad_fields.yaml:7: tool 'bad.name': field auth: secrets are never written" in text


def test_unknown_top_level_key_and_mixed_forms():
    text = "name: a\nbase_url: https://x.org\nrequest: {url: /a}\nauth_type: bearer\n"
    message = _problems(text)
    assert "t.yaml:4: tool 'a': field auth_type: unknown key" in message
    assert "cannot be mixed" in message


def test_legacy_unknown_key():
    assert "field colour: unknown key" in _problems("name: a\nurl: https://x.org/a\ncolour: 1\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "field (file): the file is empty"),
        ("42", "expected a mapping"),
        ("tools: []", "field tools: expected a non-empty list"),
        ("tools: [1]", "field tools.0: a tool must be a mapping"),
        ("name: a\nkind: mcp\n", "field kind: only http tools"),
        ("request: {url: /a}\nbase_url: https://x.org\n", "field name: Field required"),
        (
            "tools:\n - {name: a, base_url: 'https://x.org', request: {url: /a}}\n"
            " - {name: a, base_url: 'https://x.org', request: {url: /b}}\n",
            "t.yaml:3: field tools.1.name: tool 'a' is defined twice",
        ),
    ],
)
def test_file_shape_errors(text, expected):
    assert expected in _problems(text)


def test_unreadable_file(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"\xff\xfe\xfa")
    with pytest.raises(ToolConfigError, match="cannot read"):
        load_tool_file(path)
    with pytest.raises(ToolConfigError, match="cannot read"):
        load_tool_file(tmp_path / "missing.yaml")


LEGACY_BASE = "name: t\nurl: 'https://x.org/a'\n"


@pytest.mark.parametrize(
    ("extra", "auth"),
    [
        ("auth_type: bearer\nauth_token: '{{env.T}}'\n", {"type": "bearer", "token": "{{env.T}}"}),
        (
            "auth_type: api_key\nauth_header: X-Key\nauth_value: '{{env.K}}'\n",
            {"type": "api_key", "in": "header", "name": "X-Key", "value": "{{env.K}}"},
        ),
        (
            "auth_type: api_key\nauth_query: key\nauth_value: '{{env.K}}'\n",
            {"type": "api_key", "in": "query", "name": "key", "value": "{{env.K}}"},
        ),
        (
            "auth_type: basic\nauth_username: me\nauth_password: '{{env.P}}'\n",
            {"type": "basic", "username": "me", "password": "{{env.P}}"},
        ),
        ("", {"type": "none"}),
    ],
)
def test_legacy_auth_kinds(extra, auth):
    spec = load_tool_text(LEGACY_BASE + extra)[0]
    dumped = spec.http.auth.model_dump(by_alias=True, exclude_none=True)
    assert {k: v for k, v in dumped.items() if k != "in" or auth["type"] == "api_key"} == auth


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("auth_type: oauth\n", "field auth_type: expected one of"),
        ("auth_type: none\nauth_token: x\n", "field auth_token: does not apply"),
        (
            "auth_type: bearer\nauth_token: '{{env.A}}'\nauth_value: '{{env.B}}'\n",
            "field auth_type: give the bearer token once",
        ),
        ("auth_type: bearer\nauth_token: plain-token\n", "field auth_type: secrets are never"),
        ("body_template: '{not json'\n", "field body_template: not a JSON document"),
        ("output_fields: 3\n", "field output_fields: expected a list"),
        ("output_fields: [a.x, b.x]\n", "two paths end in 'x'"),
        ("parameters: {type: bad}\n", "field parameters.type: not a valid JSON Schema"),
        ("method: FETCH\n", "field method:"),
    ],
)
def test_legacy_errors_name_the_flat_key(extra, expected):
    assert expected in _problems(LEGACY_BASE + extra)


def test_legacy_body_forms_and_list_extract():
    spec = load_tool_text(
        "name: t\nmethod: POST\nurl: 'https://x.org/a'\n"
        'body_template: \'{"q": "{{q}}", "n": 1}\'\n'
        "output_fields: [results.0.latitude, count]\n"
    )[0]
    assert spec.http.request.body == {"q": "{{q}}", "n": 1}
    assert spec.http.response_extract == {"latitude": "results.0.latitude", "count": "count"}
    assert spec.idempotent is False
    exact = legacy_to_new({"name": "t", "url": "https://x.org", "body": "{{payload}}"})
    assert exact["request"]["body"] == "{{payload}}"


def test_legacy_relative_url_with_base_url():
    spec = load_tool_text("name: t\nbase_url: https://x.org\nurl: /a/{{b}}\nparams: {c: 1}\n")[0]
    assert (spec.http.base_url, spec.http.request.url) == ("https://x.org", "/a/{{b}}")
    assert spec.http.request.query == {"c": 1}


def test_legacy_host_placeholder_rejected():
    assert "field url: base_url may only use" in _problems("name: t\nurl: 'https://{{h}}/a'\n")


def test_a_tool_key_written_twice_is_refused_not_silently_dropped():
    text = "name: a\nkind: http\nname: b\n"
    with pytest.raises(ToolConfigError, match="duplicate key 'name'"):
        load_tool_text(text, source="dup.yaml")


# --- hostile files ---------------------------------------------------------------------


def _laughs(indent: str) -> str:
    """A 'billion laughs' YAML block: 9 anchors, each nine aliases of the previous one."""
    lines = [f"{indent}a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines)


def test_alias_bomb_in_a_tool_body_is_refused_quickly():
    text = (
        "name: t\nbase_url: https://x.org\nrequest:\n  method: POST\n  body:\n"
        + _laughs("    ")
        + "\n"
    )
    with pytest.raises(ToolConfigError, match="anchors"):
        load_tool_text(text, source="bomb.yaml")


def test_deeply_nested_tool_file_is_a_config_error():
    text = "name: t\nbase_url: https://x.org\nrequest:\n  body: " + "[" * 5000 + "]" * 5000
    with pytest.raises(ToolConfigError, match="nest"):
        load_tool_text(text, source="deep.yaml")


SECRET_MARKED = """
name: hook
secret_env: [HOOK_URL]
cookies: step
base_url: "{{env.HOOK_URL}}"
request:
  url: "/orgs/{{env.ORG}}"
  headers: {X-Session: "{{env.SESSION}}", X-Region: "{{env.REGION}}"}
  query: {sig: "{{sig}}", page: "{{env.PAGE_SIZE}}"}
  secret_headers: [x-session]
  secret_query: [sig]
auth: {type: basic, username: "{{env.USER_NAME}}", password: "{{env.PASSWORD}}"}
"""


def test_secrets_are_declared_in_the_tool_file():
    (spec,) = load_tool_text(SECRET_MARKED)
    assert spec.http.cookies == "step"
    assert spec.secret_env_names() == {"HOOK_URL", "SESSION", "PASSWORD"}
    assert spec.env_names() == {
        "HOOK_URL", "ORG", "SESSION", "REGION", "PAGE_SIZE", "USER_NAME", "PASSWORD"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("secret_headers: [x-session]", "secret_headers: [X-Token]"),
         ":6: tool 'hook': field request: secret_headers names 'X-Token', which is not in headers"),
        (("secret_query: [sig]", "secret_query: [key]"),
         "field request: secret_query names 'key', which is not in query"),
        (("secret_env: [HOOK_URL]", "secret_env: [HOOK-URL]"),
         ":3: tool 'hook': field secret_env: 'HOOK-URL' is not an environment variable name"),
        (("cookies: step", "cookies: forever"), "field cookies: Input should be 'none' or 'step'"),
    ],
)  # fmt: skip
def test_secret_markers_are_validated_with_a_located_error(change, expected):
    with pytest.raises(ToolConfigError) as info:
        load_tool_text(SECRET_MARKED.replace(*change))
    assert expected in info.value.message


HTTP_FEATURES = """\
name: feeds
base_url: https://api.example.com
request:
  method: POST
  url: /items
  body_type: form
  body: {q: "{{q}}"}
auth:
  type: oauth2
  token_url: "{{env.AUTH:-https://auth.example.com}}/token"
  client_id: app
  client_secret: "{{env.SECRET}}"
  scopes: [read]
response:
  format: json
  success: {path: status, equals: ok, message: error}
pagination: {style: cursor, items: data, cursor_path: next, cursor_param: after, max_items: 90}
follow_redirects: true
max_redirects: 3
response_extract: {items: items, remaining: $headers.X-RateLimit-Remaining, status: $status}
"""


def test_the_http_feature_keys_load_into_the_spec():
    (spec,) = load_tool_text(HTTP_FEATURES)
    http = spec.http
    assert (http.request.body_type, http.auth.type, http.auth.grant) == (
        "form",
        "oauth2",
        "client_credentials",
    )
    assert (http.pagination.style, http.pagination.max_items, http.max_redirects) == (
        "cursor",
        90,
        3,
    )
    assert http.response.success.accepts("ok")
    assert http.follow_redirects is True
    assert spec.outputs == ["items", "remaining", "status"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            'body: {q: "{{q}}"}',
            "body: [1]",
            ":3: tool 'feeds': field request: body_type 'form' needs a mapping body",
        ),
        (
            "cursor_param: after, ",
            "",
            ":17: tool 'feeds': field pagination: pagination style 'cursor' needs cursor_path",
        ),
        (
            "equals: ok, ",
            "",
            ":16: tool 'feeds': field response.success: success needs exactly one of",
        ),
        (
            "$headers.X",
            "$header.X",
            "field response_extract: response_extract 'remaining': '$header.X-RateLimit",
        ),
        (
            'token_url: "{{env.AUTH:-https://auth.example.com}}',
            'token_url: "{{host}}',
            "field auth: token_url may only use {{env.NAME}} placeholders",
        ),
        (
            'client_secret: "{{env.SECRET}}"',
            "client_secret: hunter22",
            "field auth: secrets are never written in tool files",
        ),
        ("format: json", "format: xml", "field response.format: Input should be"),
        (
            "max_redirects: 3",
            "max_redirects: 0",
            ":19: tool 'feeds': field max_redirects: Input should be greater than or equal to 1",
        ),
    ],
)
def test_http_feature_keys_are_validated_with_located_errors(old, new, expected):
    assert old in HTTP_FEATURES
    assert expected in _problems(HTTP_FEATURES.replace(old, new))


def test_breaker_key_is_read_and_checked():
    head = "name: a\nbase_url: https://x.org\nrequest: {url: /a}\n"
    text = head + "breaker: {failures: 2, cooldown: 9}\n"
    [spec] = load_tool_text(text)
    assert spec.http is not None
    assert spec.http.breaker is not None
    assert (spec.http.breaker.failures, spec.http.breaker.cooldown) == (2, 9)
    message = _problems(head + "breaker: {failures: 0, x: 1}\n")
    assert "t.yaml:4: tool 'a': field breaker.failures: Input should be greater" in message
    assert "field breaker.x: unknown key" in message
