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

    registry = ToolRegistry.from_db(providers=[])
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
