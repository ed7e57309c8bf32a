"""The admin's OpenAPI import page with Django's test client: read (upload or URL),
choose operations, write and load — and every hostile input refused with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.api.conftest import grant
from tests.factories import UserFactory
from tests.fakes import FakeAPI, FakeResponse
from tests.tools.openapi.test_document import laughs
from tests.tools.test_importopenapi import DEEP_REASON, deep_document
from tools.models import Tool
from tools.openapi.admin_views import SESSION_KEY

MAX_DOCUMENT_BYTES = 5 * 1024 * 1024  # FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES by default

pytestmark = pytest.mark.django_db

PETSTORE = Path(__file__).resolve().parents[2] / "data" / "openapi" / "petstore.yaml"
URL = reverse("admin:tools_tool_import_openapi")


@pytest.fixture
def import_dir(settings, tmp_path):
    settings.FLOWPILOT_OPENAPI_IMPORT_DIR = tmp_path / "imported"
    return settings.FLOWPILOT_OPENAPI_IMPORT_DIR


@pytest.fixture
def importer(client, import_dir):
    user = UserFactory(username="importer", is_staff=True, permissions=None)
    user.user_permissions.clear()
    client.force_login(grant(user, "tools.view_tool", "tools.add_tool", "tools.change_tool"))
    return client


def upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/yaml")


def read(client, **data):
    return client.post(URL, {"read": "1", "prefix": "petstore", **data})


def test_upload_choose_import_and_the_tools_are_in_the_registry(importer, import_dir):
    changelist = importer.get(reverse("admin:tools_tool_changelist"))
    assert URL in changelist.content.decode()  # the button on the tool list

    page = read(importer, document=upload("petstore.yaml", PETSTORE.read_bytes()))

    html = page.content.decode()
    assert page.context["step"] == "choose"
    assert [op.key for op in page.context["operations"]] == [
        "GET /pets", "POST /pets", "GET /pets/{petId}", "POST /pets/{petId}/photo"
    ]  # fmt: skip
    assert "showPetById" in html
    assert "cookie parameter &#x27;session&#x27; not supported" in html

    done = importer.post(URL, {"import": "1", "operations": ["GET /pets", "GET /pets/{petId}"]})

    assert done.context["step"] == "done"
    assert sorted(p.name for p in (import_dir / "petstore").iterdir()) == [
        "list_pets.yaml", "show_pet_by_id.yaml"
    ]  # fmt: skip
    assert sorted(Tool.objects.values_list("name", flat=True)) == ["list_pets", "show_pet_by_id"]
    assert Tool.objects.get(name="list_pets").source.endswith("petstore/list_pets.yaml")
    assert "2 tools were imported." in done.content.decode()
    assert SESSION_KEY not in importer.session

    again = read(importer, document=upload("petstore.yaml", PETSTORE.read_bytes()))
    assert again.context["step"] == "choose"
    kept = importer.post(URL, {"import": "1", "operations": ["GET /pets"]})
    assert "exists; pass --overwrite to replace it" in kept.content.decode()
    replaced = importer.post(URL, {"import": "1", "operations": ["GET /pets"], "overwrite": "on"})
    assert replaced.context["report"].loaded[0].action == "unchanged"


def test_a_url_on_an_allowed_host_is_fetched(importer, settings):
    fake = FakeAPI().start()
    fake.route("spec", "GET", r"/spec.yaml", lambda r, m: FakeResponse(200, PETSTORE.read_bytes()))
    settings.FLOWPILOT_OPENAPI_HOSTS = ["127.0.0.1"]
    url = f"{fake.url}/spec.yaml"
    try:
        page = read(importer, url=url)
    finally:
        fake.stop()

    assert page.context["step"] == "choose"
    assert page.context["source"] == url


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"url": "https://evil.example/openapi.yaml"}, "host &#x27;evil.example&#x27; is not in"),
        ({"document": ("a.yaml", b"swagger: '2.0'\npaths: {}\n")}, "not an OpenAPI 3.0/3.1"),
        ({"document": ("a.txt", b"just: [text")}, "neither YAML nor JSON"),
        ({"document": ("a.bin", b"\xff\xfe\x00garbage")}, "not UTF-8 text"),
        (
            {"document": ("a.yaml", b"openapi: 3.1.0\ninfo: {}\npaths: {1: x}\n")},
            "a.yaml: #/paths/1: a path must be a string, got a number; nothing imported",
        ),
        (
            {"document": ("big.yaml", b"#" * (MAX_DOCUMENT_BYTES + 1))},
            "larger than 5242880 bytes (5 MiB), the cap set by FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES",
        ),
        ({}, "give either a document or a URL"),
    ],
)
def test_hostile_documents_are_refused_with_the_reason(importer, data, message):
    if "document" in data:
        data = {"document": upload(*data["document"])}

    page = read(importer, **data)

    assert page.status_code == 200
    assert page.context["step"] == "source"
    assert message in page.content.decode()
    assert not Tool.objects.exists()


def test_a_bad_prefix_and_an_empty_choice_are_refused(importer):
    bad = importer.post(URL, {"read": "1", "prefix": "../x", "document": upload("p.yaml", b"")})
    assert "letters, digits and _" in bad.content.decode()

    read(importer, document=upload("petstore.yaml", PETSTORE.read_bytes()))
    none = importer.post(URL, {"import": "1"})
    assert "choose at least one operation to import" in none.content.decode()
    forged = importer.post(URL, {"import": "1", "operations": ["DELETE /everything"]})
    assert "Select a valid choice" in forged.content.decode()
    assert not Tool.objects.exists()


def test_importing_without_reading_first_says_so(importer):
    page = importer.post(URL, {"import": "1", "operations": ["GET /pets"]})

    assert page.context["step"] == "source"
    assert "Read a document first." in page.content.decode()


def test_staff_without_the_tool_permissions_is_refused(client, import_dir):
    user = UserFactory(username="viewer", is_staff=True, permissions=None)
    user.user_permissions.clear()
    client.force_login(grant(user, "tools.view_tool"))

    assert client.get(URL).status_code == 403
    assert client.post(URL, {"read": "1"}).status_code == 403
    assert URL not in client.get(reverse("admin:tools_tool_changelist")).content.decode()


def test_the_page_needs_a_login_and_a_csrf_token(client, importer):
    from django.test import Client

    anonymous = Client().get(URL)
    assert anonymous.status_code == 302
    assert "/admin/login/" in anonymous["Location"]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(UserFactory(username="root", superuser=True, is_staff=True))
    assert strict.post(URL, {"read": "1", "prefix": "p"}).status_code == 403


def test_a_ref_billion_laughs_is_listed_as_not_importable_naming_the_bound(importer):
    page = read(importer, document=upload("laughs.yaml", yaml.safe_dump(laughs()).encode()))

    assert page.status_code == 200
    assert page.context["step"] == "choose"
    [skipped] = page.context["skipped"]
    assert skipped.key == "POST /laugh"
    assert "references produces more than 500000 values" in page.content.decode()

    refused = importer.post(URL, {"import": "1", "operations": ["POST /laugh"]})

    assert refused.context["step"] == "choose"
    assert "no operation of the selection can be written: POST /laugh (laugh)" in (
        refused.content.decode()
    )
    assert not Tool.objects.exists()


def test_an_operation_that_cannot_be_expanded_is_skipped_with_a_warning(importer, import_dir):
    document = yaml.safe_dump(deep_document()).encode()
    page = read(importer, document=upload("deep.yaml", document))

    assert page.context["step"] == "choose"
    assert [str(op) for op in page.context["skipped"]] == [DEEP_REASON]
    keys = [op.key for op in page.context["operations"]]
    assert keys == ["GET /a", "GET /b", "GET /c", "POST /deep"]

    done = importer.post(URL, {"import": "1", "operations": keys})

    assert done.context["step"] == "done"
    assert sorted(Tool.objects.values_list("name", flat=True)) == ["list_a", "list_b", "list_c"]
    shown = [(m.level_tag, m.message) for m in done.context["messages"]]
    assert shown == [
        ("success", "3 tools were imported."),
        ("warning", f"Skipped {DEEP_REASON}"),
    ]
    html = done.content.decode()
    assert '<li class="warning">Skipped POST /deep (makeDeep): $ref references nest more' in html
    assert "#/components/schemas/D64, reached from #/paths/~1deep/post/requestBody" in html


def test_tags_and_path_prefixes_narrow_the_list_and_a_miss_names_near_matches(importer):
    petstore = PETSTORE.read_bytes()

    page = read(importer, document=upload("petstore.yaml", petstore), tags="photos",
                path_prefixes="/pets/{petId}")  # fmt: skip

    assert page.context["step"] == "choose"
    assert [op.key for op in page.context["operations"]] == [
        "GET /pets/{petId}", "POST /pets/{petId}/photo"]  # fmt: skip
    assert page.content.decode().count('class="action-select" checked') == 2
    assert "cookie parameter" not in page.content.decode()  # GET /pets is not chosen

    missed = read(importer, document=upload("petstore.yaml", petstore), tags="pet, photos",
                  path_prefixes="/cats")  # fmt: skip

    assert missed.context["step"] == "source"
    assert missed.context["form"].non_field_errors() == [
        "petstore.yaml: no operation matches tag 'pet' (did you mean 'pets'?); "
        "path prefix '/cats' (did you mean '/pets'?)"
    ]
