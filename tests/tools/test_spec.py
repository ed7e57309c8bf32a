import pytest
from pydantic import ValidationError

from tools.spec import HttpAuth, HttpConfig, ToolSpec, split_origin


def _http(**request):
    return {"base_url": "https://api.example.com", "request": {"url": "/x", **request}}


def test_defaults_for_http_tools():
    spec = ToolSpec(name="t", http={**_http(), "response_extract": {"a": "b.0"}})
    assert spec.kind == "http"
    assert spec.outputs == ["a"]
    assert spec.idempotent is True
    assert spec.input_schema == {"type": "object", "properties": {}}
    assert ToolSpec(name="p", http=_http(method="post")).idempotent is False
    assert ToolSpec(name="p", http=_http(method="PATCH")).idempotent is False
    assert ToolSpec(name="p", http=_http(method="DELETE")).idempotent is True
    assert ToolSpec(name="p", http=_http(method="POST"), idempotent=True).idempotent is True


def test_stored_round_trip():
    spec = ToolSpec(
        name="t",
        http={
            **_http(),
            "auth": {"type": "api_key", "in": "query", "name": "k", "value": "{{env.K}}"},
        },
    )
    again = ToolSpec.model_validate(spec.stored())
    assert again == spec
    assert spec.stored()["http"]["auth"]["in"] == "query"


def test_absolute_url_is_split_into_base_url():
    config = HttpConfig(request={"url": "{{env.B:-https://x.org}}/latest?a={{a}}"})
    assert config.base_url == "{{env.B:-https://x.org}}"
    assert config.request.url == "/latest?a={{a}}"
    assert split_origin("https://{{env.H}}:8080/x") == ("https://{{env.H}}:8080", "/x")
    assert split_origin("/a/b") == ("", "/a/b")
    assert split_origin("http://x.org") == ("http://x.org", "")


@pytest.mark.parametrize(
    "base_url",
    ["https://{{host}}.example.com", "{{base}}", "https://a/{{env.X}}{{y}}"],
)
def test_non_env_placeholder_in_base_url_rejected(base_url):
    with pytest.raises(ValidationError, match="only use"):
        HttpConfig(base_url=base_url, request={"url": "/x"})


def test_host_part_of_absolute_url_rejected():
    with pytest.raises(ValidationError, match="only use"):
        HttpConfig(request={"url": "https://{{tenant}}.example.com/x"})


def test_base_url_required_and_must_be_http():
    with pytest.raises(ValidationError, match="required"):
        HttpConfig(request={"url": "/x"})
    with pytest.raises(ValidationError, match="http"):
        HttpConfig(base_url="ftp://x", request={"url": "/x"})


@pytest.mark.parametrize("name", ["a.b", "", "x" * 65, "sp ace"])
def test_bad_names(name):
    with pytest.raises(ValidationError):
        ToolSpec(name=name, http=_http())


def test_auth_rules():
    assert HttpAuth(type="bearer", token="{{env.T}}").token == "{{env.T}}"
    with pytest.raises(ValidationError, match="needs 'token'"):
        HttpAuth(type="bearer")
    with pytest.raises(ValidationError, match="does not apply"):
        HttpAuth(type="none", token="{{env.T}}")
    with pytest.raises(ValidationError, match="never written"):
        HttpAuth(type="api_key", name="X-Key", value="plain-secret")
    with pytest.raises(ValidationError, match="never written"):
        HttpAuth(type="basic", username="u", password="hunter2")
    assert HttpAuth(type="basic", username="u", password="{{env.P}}").username == "u"


def test_input_schema_checked():
    with pytest.raises(ValidationError, match="not a valid JSON Schema"):
        ToolSpec(name="t", http=_http(), input_schema={"type": "nope"})
    with pytest.raises(ValidationError, match="object"):
        ToolSpec(name="t", http=_http(), input_schema={"type": "string"})


def test_kind_and_outputs_consistency():
    with pytest.raises(ValidationError, match="needs its http"):
        ToolSpec(name="t", kind="http")
    with pytest.raises(ValidationError, match="no http"):
        ToolSpec(name="t", kind="builtin", http=_http())
    with pytest.raises(ValidationError, match="not keys"):
        ToolSpec(name="t", http={**_http(), "response_extract": {"a": "a"}}, outputs=["b"])
    with pytest.raises(ValidationError, match="dot-path"):
        HttpConfig(base_url="https://a.b", response_extract={"a": " "})


def test_malformed_request_templates_rejected():
    with pytest.raises(ValidationError, match="unbalanced"):
        HttpConfig(base_url="https://a.b", request={"query": {"q": "{{q"}})


def test_describe_and_required_inputs():
    schema = {"type": "object", "properties": {"a": {}}, "required": ["a"]}
    spec = ToolSpec(name="b", kind="builtin", description="d", input_schema=schema)
    assert spec.required_inputs == ["a"]
    assert spec.describe() == {
        "name": "b",
        "description": "d",
        "inputSchema": schema,
        "outputs": [],
    }


def test_header_numbers_coerced_to_text():
    config = HttpConfig(base_url="https://a.b", request={"headers": {"X-Version": 2}})
    assert config.request.headers == {"X-Version": "2"}
