"""The admin's OpenAPI import page in a real browser: upload the shipped petstore
spec, pick operations, import — and the tools are in the tool list."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_review_flow import log_in
from tests.factories import UserFactory
from tools.models import Tool

pytestmark = pytest.mark.django_db(transaction=True)

PETSTORE = Path(__file__).resolve().parents[1] / "data" / "openapi" / "petstore.yaml"


def test_import_the_petstore_and_see_its_tools(page, live_server, settings, tmp_path, artifacts):
    settings.FLOWPILOT_OPENAPI_IMPORT_DIR = tmp_path / "imported"
    UserFactory(username="admin", superuser=True, is_staff=True)
    log_in(page, live_server, "admin")

    page.goto(f"{live_server.url}/admin/tools/tool/")
    page.click("#fp-import-openapi")
    page.set_input_files("#id_document", str(PETSTORE))
    page.fill("#id_prefix", "petstore")
    page.click("input[name=read]")

    page.wait_for_selector(".fp-openapi[data-step=choose]")
    keys = page.eval_on_selector_all("tr.fp-operation", "rows => rows.map(r => r.dataset.key)")
    assert keys == ["GET /pets", "POST /pets", "GET /pets/{petId}", "POST /pets/{petId}/photo"]
    assert "request body types ['image/png'] not supported" in page.inner_text(
        "#fp-openapi-unsupported"
    )
    for key in ("GET /pets", "POST /pets", "GET /pets/{petId}"):
        page.check(f"tr.fp-operation[data-key='{key}'] input[type=checkbox]")
    page.click("input[name=import]")

    page.wait_for_selector(".fp-openapi[data-step=done]")
    assert "3 tools were imported." in page.inner_text("ul.messagelist")
    assert "cookie parameter 'session' not supported" in page.inner_text("#fp-openapi-unsupported")
    page.screenshot(path=str(artifacts / "openapi-import.png"), full_page=True)

    page.click("text=Back to the tools")
    page.wait_for_selector("#result_list")
    listed = page.eval_on_selector_all("#result_list tbody th a", "links => links.map(a => a.text)")
    assert listed == ["create_pets", "list_pets", "show_pet_by_id"]
    request = Tool.objects.get(name="show_pet_by_id").spec["http"]["request"]
    assert request["url"] == "/pets/{{pet_id}}"
