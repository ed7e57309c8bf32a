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
