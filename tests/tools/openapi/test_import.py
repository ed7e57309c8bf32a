"""The OpenAPI import on two shipped specs (a GitHub subset, the petstore): the
generated files load and validate, and their tools call a loopback server correctly
(path encoding, query, headers, body, auth)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.tools.conftest import Reply
from tools.errors import ToolConfigError
from tools.openapi.document import OpenAPIError, openapi_read
from tools.registry import ToolRegistry
from tools.services import tools_load_dir

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[2] / "data" / "openapi"


def _import(cli, spec: str, out: Path, *args: str):
    result = cli("importopenapi", str(SPECS / spec), "--out", str(out), *args)
    assert result.code == 0, result.out + result.err
    return result


def test_the_petstore_imports_loads_and_calls_a_loopback_server(cli, tmp_path, server, make_ctx):
    result = _import(cli, "petstore.yaml", tmp_path, "--prefix", "petstore")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "create_pets.yaml", "list_pets.yaml", "show_pet_by_id.yaml"
    ]  # fmt: skip
    assert "unsupported GET /pets: cookie parameter 'session' not supported" in result.out
    assert "unsupported POST /pets/{petId}/photo: request body types ['image/png']" in result.out
    report = tools_load_dir(directory=tmp_path, sync_builtin=False)
    assert report.ok, report.errors
    assert report.created == 3
    show = yaml.safe_load((tmp_path / "show_pet_by_id.yaml").read_text())
    assert show["base_url"] == "{{env.PETSTORE_BASE_URL:-https://petstore.swagger.io/v1}}"
    assert show["response_extract"] == {"id": "id", "name": "name", "tag": "tag"}
    # Each extracted property's schema, from the 2xx response, is the field's type.
    assert show["output_types"] == {
        "id": {"type": "integer", "format": "int64"},
        "name": {"type": "string"},
        "tag": {"type": ["string", "null"]},
    }
    listed_file = yaml.safe_load((tmp_path / "list_pets.yaml").read_text())
    assert listed_file["output_types"]["count"] == {"type": "integer", "minimum": 0}
    pets = listed_file["output_types"]["items"]  # the $ref to Pet resolved
    assert pets["type"] == "array"
    assert pets["items"]["properties"]["id"] == {"type": "integer", "format": "int64"}

    registry = ToolRegistry.from_db(providers=[])
    assert registry.get("show_pet_by_id").output_type("id") == show["output_types"]["id"]
    env = {"PETSTORE_BASE_URL": server.url, "PETSTORE_API_KEY": "pet-key-123456"}
    server.handler = lambda req: Reply.json({"id": 7, "name": "Rex", "tag": None})
    got = registry.call(
        "show_pet_by_id", {"pet_id": "a/b c", "x_request_id": "r-1"}, make_ctx(env=env)
    )
    assert got.output == {"id": 7, "name": "Rex", "tag": None}
    sent = server.requests[-1]
    assert sent.raw_path == "/pets/a%2Fb%20c"
    assert sent.header("X-API-Key") == "pet-key-123456"
    assert sent.header("X-Request-Id") == "r-1"

    server.handler = lambda req: Reply.json([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}])
    listed = registry.call("list_pets", {"limit": 5}, make_ctx(env=env))
    assert listed.output == {"items": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}], "count": 2}
    assert server.requests[-1].query == [("limit", "5")]

    server.handler = lambda req: Reply.json({"id": 3, "name": "Tom"}, status=201)
    made = registry.call("create_pets", {"body": {"id": 3, "name": "Tom"}}, make_ctx(env=env))
    assert made.output["name"] == "Tom"
    assert server.requests[-1].json() == {"id": 3, "name": "Tom"}
    assert server.requests[-1].method == "POST"


def test_the_github_subset_by_tag_with_bearer_auth_and_a_json_body(
    cli, tmp_path, server, make_ctx
):
    _import(cli, "github_subset.yaml", tmp_path, "--prefix", "github", "--tag", "issues")
    names = sorted(p.stem for p in tmp_path.iterdir())
    assert names == ["issues_create", "issues_list_for_repo", "issues_lock"]
    assert tools_load_dir(directory=tmp_path, sync_builtin=False).ok
    registry = ToolRegistry.from_db(providers=[])
    spec = registry.get("issues_list_for_repo")
    assert spec.required_inputs == ["owner", "repo"]
    assert spec.input_schema["properties"]["state"]["enum"] == ["open", "closed", "all"]
    env = {"GITHUB_BASE_URL": server.url, "GITHUB_TOKEN": "ghp_fake_token_0001"}
    server.handler = lambda req: Reply.json({"number": 42, "title": "Bug", "id": 1}, status=201)
    created = registry.call(
        "issues_create",
        {"owner": "octo-org", "repo": "wid gets", "body": {"title": "Bug", "labels": ["x"]}},
        make_ctx(env=env),
    )
    assert created.output["number"] == 42
    sent = server.requests[-1]
    assert sent.raw_path == "/repos/octo-org/wid%20gets/issues"
    assert sent.header("Authorization") == "Bearer ghp_fake_token_0001"
    assert sent.json() == {"title": "Bug", "labels": ["x"]}

    server.handler = lambda req: Reply.json([])
    registry.call(
        "issues_list_for_repo",
        {"owner": "o", "repo": "r", "state": "closed", "per_page": 10},
        make_ctx(env=env),
    )
    assert sorted(server.requests[-1].query) == [("per_page", "10"), ("state", "closed")]


def test_selection_by_operation_id_and_refusals(cli, tmp_path, settings):
    _import(cli, "github_subset.yaml", tmp_path, "--prefix", "gh", "--operation", "repos/get")
    assert [p.name for p in tmp_path.iterdir()] == ["repos_get.yaml"]
    again = cli(
        "importopenapi", str(SPECS / "github_subset.yaml"), "--out", str(tmp_path),
        "--prefix", "gh", "--operation", "repos/get",
    )  # fmt: skip
    assert again.code == 1
    assert "repos_get.yaml exists; pass --overwrite" in again.err
    nothing = cli(
        "importopenapi", str(SPECS / "petstore.yaml"), "--out", str(tmp_path), "--prefix", "p",
        "--tag", "nope",
    )  # fmt: skip
    assert "no operation matches" in nothing.err

    settings.FLOWPILOT_OPENAPI_HOSTS = ["specs.example.com"]
    with pytest.raises(OpenAPIError) as refused:
        openapi_read("https://evil.example.net/openapi.yaml")
    assert "host 'evil.example.net' is not in FLOWPILOT_OPENAPI_HOSTS" in refused.value.message
    swagger = tmp_path / "swagger.yaml"
    swagger.write_text("swagger: '2.0'\npaths: {}\n")
    with pytest.raises(ToolConfigError, match=r"not an OpenAPI 3\.0/3\.1 document"):
        openapi_read(str(swagger))


def test_a_document_on_an_allowed_host_is_fetched(server, settings, tmp_path):
    settings.FLOWPILOT_OPENAPI_HOSTS = ["127.0.0.1"]
    text = (SPECS / "petstore.yaml").read_bytes()
    server.handler = lambda req: Reply(body=text, headers={"Content-Type": "application/yaml"})
    document = openapi_read(f"{server.url}/openapi.yaml")
    assert document["info"]["title"] == "Swagger Petstore"


def test_an_operation_is_chosen_by_method_and_path_too(cli, tmp_path):
    result = _import(
        cli, "petstore.yaml", tmp_path, "--prefix", "p", "--operation", "GET /pets/{petId}"
    )

    assert [p.name for p in tmp_path.iterdir()] == ["show_pet_by_id.yaml"]
    assert "imported 1 operation, skipped 0;" in result.out


def test_a_file_larger_than_the_cap_is_not_read_naming_the_setting(tmp_path, settings):
    settings.FLOWPILOT_OPENAPI_MAX_BYTES = 1000
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * 1001)

    with pytest.raises(OpenAPIError) as refused:
        openapi_read(str(big))
    assert refused.value.message == (
        f"{big}: the document is larger than 1000 bytes (0.000953674 MiB), "
        "the cap set by FLOWPILOT_OPENAPI_MAX_BYTES"
    )


def test_operations_are_listed_for_choosing_whatever_their_tags_say():
    from tools.openapi.document import openapi_parse
    from tools.openapi.generate import openapi_operations, openapi_tools

    document = openapi_parse(
        """
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /a:
    get: {tags: notalist, description: " Only a description "}
    head: {tags: [x]}
  /b:
    post: {operationId: makeB, tags: [x, {odd: tag}]}
""",
        source="inline",
    )

    listed = openapi_operations(document)

    assert [(o.key, o.tags, o.summary, o.tool_name) for o in listed] == [
        ("GET /a", (), "Only a description", "get_a"),
        ("POST /b", ("x", "{'odd': 'tag'}"), "", "make_b"),
    ]
    chosen = openapi_tools(document, prefix="p", tags=["x"])
    assert [t["name"] for t in chosen.tools] == ["make_b"]
    assert chosen.unsupported == [
        "HEAD /a: method not supported",
        "POST /b: server URL '' is not absolute; set P_BASE_URL",
    ]


MINIMAL = "openapi: 3.1.0\ninfo: {}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("openapi: 3.1.0\n", "the document has no 'paths'"),
        ("openapi: 3.1.0\npaths: {}\n", r"#/info: expected an object, got null; nothing imported"),
        ("openapi: 3.1.0\ninfo: x\npaths: {}\n", r"#/info: expected an object, got a string"),
        ("openapi: 3.1.0\ninfo: {}\npaths: []\n", r"#/paths: expected an object, got an array"),
        (f"{MINIMAL}paths: {{/a: [1]}}\n", r"#/paths/~1a: expected an object, got an array"),
        (f"{MINIMAL}paths: {{}}\nservers: {{url: x}}\n", r"#/servers: expected an array"),
        (f"{MINIMAL}paths: {{}}\nservers: [x]\n", r"#/servers/0: expected an object"),
        (f"{MINIMAL}paths: {{}}\nservers: [{{url: 1}}]\n", r"#/servers/0/url: expected a string"),
        (f"{MINIMAL}paths: {{}}\ncomponents: []\n", r"#/components: expected an object"),
        (
            f"{MINIMAL}paths: {{}}\ncomponents: {{securitySchemes: {{a: 1}}}}\n",
            r"#/components/securitySchemes/a: expected an object, got a number",
        ),
        (f"{MINIMAL}paths: {{}}\nsecurity: [{{a: x}}]\n", r"#/security/0/a: expected an array"),
        ("- a list\n", "no 'openapi' field"),
    ],
)
def test_a_document_that_is_not_usable_is_refused_naming_why(text, message):
    from tools.openapi.document import openapi_parse

    with pytest.raises(OpenAPIError, match=message):
        openapi_parse(text, source="inline")


def test_the_admin_service_checks_the_permissions_and_the_choice(tmp_path, settings):
    from tests.factories import UserFactory
    from tools.openapi.document import openapi_parse
    from tools.openapi.services import openapi_import_load
    from tools.permissions import PermissionRefused

    settings.FLOWPILOT_OPENAPI_IMPORT_DIR = tmp_path
    document = openapi_parse((SPECS / "petstore.yaml").read_text(), source="petstore.yaml")
    args = {"document": document, "source": "petstore.yaml", "prefix": "p", "overwrite": False}

    with pytest.raises(PermissionRefused, match=r"needs the `tools\.add_tool` permission"):
        openapi_import_load(**args, operations=["GET /pets"], actor=UserFactory(username="x"))
    with pytest.raises(OpenAPIError, match="choose at least one operation"):
        openapi_import_load(**args, operations=[], actor=None)
    assert list(tmp_path.iterdir()) == []
