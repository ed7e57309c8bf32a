"""Request bodies and header values, as the server received them."""

from urllib.parse import parse_qsl

import pytest

from tests.tools.conftest import make_spec
from tools.errors import TemplateError, ToolInputError
from tools.http_client import call_http_tool


def test_a_non_ascii_header_value_is_a_template_error_naming_the_header(server, ctx_for):
    spec = make_spec(headers={"X-Customer": "{{name}}"})
    with pytest.raises(TemplateError, match="header 'X-Customer' renders to non-ASCII"):
        call_http_tool(spec, {"name": "Zoë"}, ctx_for())
    assert server.requests == []


def test_a_form_body_is_urlencoded(server, ctx_for):
    spec = make_spec(
        method="POST", body_type="form", body={"q": "{{q}}", "tag": "{{tags}}", "skip": None}
    )
    call_http_tool(spec, {"q": "a&b=c ü", "tags": ["x", "y"]}, ctx_for())
    received = server.requests[-1]
    assert received.header("content-type") == "application/x-www-form-urlencoded"
    assert parse_qsl(received.body.decode()) == [("q", "a&b=c ü"), ("tag", "x"), ("tag", "y")]


def test_a_text_body_is_sent_as_written_with_its_content_type(server, ctx_for):
    spec = make_spec(method="POST", body_type="text", body="n={{n}}\n", content_type="text/csv")
    call_http_tool(spec, {"n": 3}, ctx_for())
    received = server.requests[-1]
    assert (received.body, received.header("content-type")) == (b"n=3\n", "text/csv")


def test_httpbin_receives_form_and_multipart_bodies(httpbin, make_ctx, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "report.csv").write_text("a,b\n1,2\n")
    ctx = make_ctx(env={"BASE": httpbin}, data_dirs=(data,))
    form = make_spec("/post", method="POST", body_type="form", body={"city": "{{city}}"})
    assert call_http_tool(form, {"city": "Köln"}, ctx).output["form"] == {"city": "Köln"}
    upload = make_spec(
        "/post",
        method="POST",
        body_type="multipart",
        body={"title": "{{title}}"},
        files={"report": "{{path}}"},
    )
    echoed = call_http_tool(upload, {"title": "Q3", "path": "report.csv"}, ctx).output
    assert echoed["form"] == {"title": "Q3"}
    assert echoed["files"] == {"report": "a,b\n1,2\n"}
    assert echoed["headers"]["Content-Type"].startswith("multipart/form-data; boundary=")


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "link.txt"])
def test_multipart_files_never_leave_the_data_directories(server, ctx_for, tmp_path, path):
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "secret.txt").write_text("s3cret")
    (data / "link.txt").symlink_to(tmp_path / "secret.txt")
    spec = make_spec(method="POST", body_type="multipart", files={"f": "{{path}}"})
    with pytest.raises(ToolInputError, match="outside the allowed data directories"):
        call_http_tool(spec, {"path": path}, ctx_for(data_dirs=(data,)))
    assert server.requests == []


def test_multipart_files_are_not_read_from_the_output_directory(server, ctx_for, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "written.txt").write_text("x")
    spec = make_spec(method="POST", body_type="multipart", files={"f": "{{path}}"})
    with pytest.raises(ToolInputError, match="outside the allowed data directories"):
        call_http_tool(spec, {"path": str(out / "written.txt")}, ctx_for(output_dir=out))
