"""The admin import page's source form: an upload or a URL is capped by
``FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES`` (bounded by default, whatever the command
line's cap), and the refusal names the setting."""

from __future__ import annotations

from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile

from tests.tools.conftest import Reply
from tools.openapi.forms import SourceForm

PETSTORE = Path(__file__).resolve().parents[2] / "data" / "openapi" / "petstore.yaml"


def test_the_upload_cap_is_its_own_setting(settings):
    settings.FLOWPILOT_OPENAPI_MAX_BYTES = 64 * 1024 * 1024
    settings.FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES = 100
    upload = SimpleUploadedFile("petstore.yaml", PETSTORE.read_bytes())

    form = SourceForm({"prefix": "p"}, {"document": upload})

    assert not form.is_valid()
    assert form.non_field_errors() == [
        "petstore.yaml: the document is larger than 100 bytes (9.53674e-05 MiB), "
        "the cap set by FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES"
    ]


def test_an_upload_under_the_cap_is_read(settings):
    settings.FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES = PETSTORE.stat().st_size
    upload = SimpleUploadedFile("petstore.yaml", PETSTORE.read_bytes())

    form = SourceForm({"prefix": "p"}, {"document": upload})

    assert form.is_valid(), form.errors
    assert form.cleaned_data["parsed"]["info"]["title"] == "Swagger Petstore"


def test_a_url_read_for_the_page_has_the_upload_cap(server, settings):
    settings.FLOWPILOT_OPENAPI_HOSTS = ["127.0.0.1"]
    settings.FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES = 100
    server.handler = lambda req: Reply(body=PETSTORE.read_bytes())

    form = SourceForm({"prefix": "p", "url": f"{server.url}/petstore.yaml"})

    assert not form.is_valid()
    assert "the cap set by FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES" in form.non_field_errors()[0]
