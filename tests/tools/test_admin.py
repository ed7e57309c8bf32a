import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tools.models import Tool

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_logged(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-12345678")
    client.force_login(user)
    return client


@pytest.fixture
def tools():
    spec = {"name": "a", "kind": "builtin", "description": "<b>x</b>"}
    return [
        Tool.objects.create(name="a", kind="builtin", spec=spec),
        Tool.objects.create(name="b", kind="builtin", spec={}, enabled=False),
    ]


def test_changelist_search_and_filters(admin_client_logged, tools):
    url = reverse("admin:tools_tool_changelist")
    response = admin_client_logged.get(url, {"q": "a", "kind__exact": "builtin"})
    assert response.status_code == 200
    assert b">a<" in response.content


def test_change_page_shows_escaped_pretty_spec(admin_client_logged, tools):
    response = admin_client_logged.get(reverse("admin:tools_tool_change", args=[tools[0].pk]))
    assert response.status_code == 200
    assert b"&lt;b&gt;x&lt;/b&gt;" in response.content
    assert b"<b>x</b>" not in response.content


def test_no_add_from_admin(admin_client_logged):
    assert admin_client_logged.get(reverse("admin:tools_tool_add")).status_code == 403


@pytest.mark.parametrize(
    ("action", "expected", "message"),
    [("disable_tools", False, "1 tool was disabled."), ("enable_tools", True, "2 tools were")],
)
def test_enable_disable_actions(admin_client_logged, tools, action, expected, message):
    if action == "enable_tools":
        Tool.objects.update(enabled=False)
    response = admin_client_logged.post(
        reverse("admin:tools_tool_changelist"),
        {"action": action, "_selected_action": [t.pk for t in tools]},
        follow=True,
    )
    assert set(Tool.objects.values_list("enabled", flat=True)) == {expected}
    assert message in response.content.decode()


# --- versions ------------------------------------------------------------------------


@pytest.fixture
def geo_versions():
    """``geo`` at 1.0.0, then with another URL path (2.0.0), then a longer timeout."""
    from tests.tools.conftest import make_spec
    from tools.services import tool_upsert

    for spec in (
        make_spec("/a", name="geo"),
        make_spec("/b", name="geo"),
        make_spec("/b", name="geo").model_copy(update={"timeout": 60.0}),
    ):
        tool_upsert(spec=spec, source="tools/geo.yaml")
    return Tool.objects.get(name="geo")


def test_the_list_and_the_page_show_versions_and_what_changed(admin_client_logged, geo_versions):
    listing = admin_client_logged.get(reverse("admin:tools_tool_changelist")).content.decode()
    row = listing.split(f'href="/admin/tools/tool/{geo_versions.pk}/change/', 1)[1]
    assert '<td class="field-version">2.0.1</td>' in row.split("</tr>", 1)[0]

    page = admin_client_logged.get(reverse("admin:tools_tool_change", args=[geo_versions.pk]))
    body = page.content.decode()
    table = body.split('id="fp-tool-versions"', 1)[1].split("</table>", 1)[0]
    assert [cells.split("</td>", 1)[0] for cells in table.split("<tr><td>")[1:]] == ["3", "2", "1"]
    assert "major: what is called: /a → /b" in table
    assert "patch: timeout: 30.0 → 60.0" in table
    diff_url = reverse("admin:tools_tool_versions_diff", args=[geo_versions.pk])
    assert f'href="{diff_url}?a=2&amp;b=3"' in body


def test_the_diff_page_compares_any_two_versions(admin_client_logged, geo_versions):
    url = reverse("admin:tools_tool_versions_diff", args=[geo_versions.pk])

    body = admin_client_logged.get(url, {"a": "1", "b": "3"}).content.decode()

    assert "geo 1.0.0 → 2.0.1" in body
    changes = body.split('id="fp-diff-changes"', 1)[1].split("</table>", 1)[0]
    assert changes.count('class="fp-change') == 2
    assert "what is called: /a → /b" in changes
    assert "--- geo 1.0.0" in body
    default = admin_client_logged.get(url).content.decode()  # the last change by default
    assert "geo 2.0.0 → 2.0.1" in default


def test_the_diff_page_names_an_unknown_version_and_escapes_what_it_shows(
    admin_client_logged, geo_versions
):
    url = reverse("admin:tools_tool_versions_diff", args=[geo_versions.pk])

    body = admin_client_logged.get(url, {"a": "1", "b": "<script>x</script>"}).content.decode()

    assert 'id="fp-diff-error"' in body
    assert "has no version &#x27;&lt;script&gt;x&lt;/script&gt;&#x27;" in body
    assert "<script>x</script>" not in body


def test_the_diff_page_needs_the_view_permission(client, geo_versions):
    user = get_user_model().objects.create_user("staff", password="pw-12345678", is_staff=True)
    client.force_login(user)
    url = reverse("admin:tools_tool_versions_diff", args=[geo_versions.pk])
    assert client.get(url).status_code == 403


def test_a_tool_source_is_read_again_from_the_admin(admin_client_logged, tmp_path):
    from tools.models import ToolSource

    source = ToolSource.objects.create(
        kind="mcp", name="gone", location=str(tmp_path / "gone.yaml"), tools=["gone_tool"]
    )
    listing = admin_client_logged.get(reverse("admin:tools_toolsource_changelist"))
    assert "stale: never read" in listing.content.decode()

    response = admin_client_logged.post(
        reverse("admin:tools_toolsource_changelist"),
        {"action": "refresh_now", "_selected_action": [source.pk]},
        follow=True,
    )

    assert "Gone: the MCP server file" in response.content.decode()  # the message, capitalised
    source.refresh_from_db()
    assert not source.available
    assert admin_client_logged.get(reverse("admin:tools_toolsource_add")).status_code == 403
