import pytest

from tests.tools.conftest import Reply
from tools.builtin.data import DataToolsProvider
from tools.errors import ToolCallFailed, ToolConfigError, ToolInputError, ToolNotFound
from tools.models import Tool
from tools.registry import ToolRegistry, ToolResult
from tools.spec import ToolSpec

SCHEMA = {
    "type": "object",
    "properties": {
        "owner": {"type": "string"},
        "n": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["owner", "repo"],
    "additionalProperties": False,
}


def http_spec(name="repo", schema=SCHEMA):
    return ToolSpec(
        name=name,
        input_schema=schema,
        http={
            "base_url": "{{env.BASE}}",
            "request": {"url": "/repos/{{owner}}"},
            "response_extract": {"got": "path"},
        },
    )


def test_names_get_describe():
    registry = ToolRegistry([http_spec()], [DataToolsProvider()])
    assert registry.names() == sorted(registry.names())
    assert "repo" in registry.names()
    assert "csv_read" in registry
    assert registry.get("repo").kind == "http"
    assert registry.get("nope") is None
    described = registry.describe(["repo", "unknown"])
    assert described == [http_spec().describe()]


def test_duplicate_names_rejected():
    with pytest.raises(ToolConfigError, match="defined twice"):
        ToolRegistry([http_spec(), http_spec()])
    with pytest.raises(ToolConfigError, match="defined twice"):
        ToolRegistry([ToolSpec(name="csv_read", kind="builtin")], [DataToolsProvider()])


def test_exclude_hides_tools():
    registry = ToolRegistry([http_spec()], [DataToolsProvider()], exclude=["repo", "csv_read"])
    assert "repo" not in registry
    assert "csv_read" not in registry


def test_unknown_tool(make_ctx):
    with pytest.raises(ToolNotFound, match="nope"):
        ToolRegistry([]).call("nope", {}, make_ctx())


def test_every_argument_problem_reported_with_json_path(make_ctx):
    with pytest.raises(ToolInputError) as info:
        ToolRegistry([http_spec()]).call(
            "repo", {"owner": 5, "n": 0, "tags": ["ok", 3], "extra": 1}, make_ctx()
        )
    message = info.value.message
    assert "$: 'repo' is a required property" in message
    assert "$: Additional properties are not allowed ('extra' was unexpected)" in message
    assert "$.owner: 5 is not of type 'string'" in message
    assert "$.n: 0 is less than the minimum of 1" in message
    assert "$.tags[1]: 3 is not of type 'string'" in message
    assert info.value.retryable is False


def test_arguments_must_be_an_object(make_ctx):
    with pytest.raises(ToolInputError, match="must be an object"):
        ToolRegistry([http_spec()]).call("repo", ["x"], make_ctx())


def test_http_call_through_registry(server, make_ctx):
    server.handler = lambda req: Reply.json({"path": req.raw_path})
    schema = {"type": "object", "properties": {"owner": {"type": "string"}}}
    registry = ToolRegistry([http_spec(schema=schema)])
    result = registry.call("repo", {"owner": "a/b"}, make_ctx(env={"BASE": server.url}))
    assert isinstance(result, ToolResult)
    assert result.output == {"got": "/repos/a%2Fb"}


def test_builtin_spec_without_provider(make_ctx):
    registry = ToolRegistry([ToolSpec(name="remote", kind="builtin")])
    with pytest.raises(ToolCallFailed, match="no provider"):
        registry.call("remote", {}, make_ctx())


def test_an_mcp_spec_names_its_server():
    with pytest.raises(ValueError, match="names its MCP server"):
        ToolSpec(name="remote", kind="mcp")


@pytest.mark.django_db
def test_from_db_uses_enabled_http_rows_and_builtins():
    Tool.objects.create(name="repo", kind="http", spec=http_spec().stored())
    off = http_spec("off")
    Tool.objects.create(name="off", kind="http", spec=off.stored(), enabled=False)
    Tool.objects.create(name="broken", kind="http", spec={"name": "broken"})
    Tool.objects.create(name="json_read", kind="builtin", enabled=False)
    registry = ToolRegistry.from_db()
    assert "repo" in registry
    assert "off" not in registry
    assert "broken" not in registry
    assert "csv_read" in registry
    assert "json_read" not in registry


@pytest.mark.django_db
def test_from_db_with_explicit_providers():
    assert ToolRegistry.from_db(providers=[]).names() == []
