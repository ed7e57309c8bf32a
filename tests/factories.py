"""Users and workflow versions for the review and approval tests (admin, services, browser)."""

from __future__ import annotations

import copy
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from tests.conftest import EXAMPLES_DIR
from workflows.files import read_workflow_file
from workflows.models import Workflow, WorkflowStatus
from workflows.services import workflow_import

PASSWORD = "correct horse battery staple"

# Everything a reviewer does in the admin, except approving.
REVIEWER_PERMISSIONS = (
    ("workflows", "view_workflow"),
    ("workflows", "change_workflow"),
    ("workflows", "add_workflow"),
    ("workflows", "view_planattempt"),
    ("runs", "view_run"),
    ("runs", "add_run"),
)


def make_user(username: str, *, approver: bool = False, superuser: bool = False, **perms):
    """A staff user with the reviewer permissions, plus ``approve_workflow`` when asked."""
    User = get_user_model()
    if superuser:
        return User.objects.create_superuser(username, f"{username}@example.com", PASSWORD)
    user = User.objects.create_user(username, f"{username}@example.com", PASSWORD, is_staff=True)
    wanted = list(REVIEWER_PERMISSIONS) + ([("workflows", "approve_workflow")] if approver else [])
    for app_label, codename in wanted:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return User.objects.get(pk=user.pk)  # a fresh instance: no stale permission cache


def sales_report_data(**changes: Any) -> dict[str, Any]:
    """The offline example (built-in tools only) as a dict, with top-level changes."""
    data = read_workflow_file(EXAMPLES_DIR / "sales_report.yaml")
    data.update(copy.deepcopy(changes))
    return data


def pending_version(data: dict[str, Any] | None = None, **changes: Any) -> Workflow:
    workflow, _ = workflow_import(
        data=data or sales_report_data(**changes), status=WorkflowStatus.PENDING_REVIEW
    )
    return workflow


HOSTILE_ID = "evil_step"
HOSTILE_TEXT = "<script>window.__pwned=1</script>\"'><img src=x onerror=alert(1)>"


def hostile_data() -> dict[str, Any]:
    """A valid workflow whose names, descriptions and branch labels carry markup."""
    return {
        "name": "hostile",
        "description": HOSTILE_TEXT,
        "goal": f"Goal {HOSTILE_TEXT}",
        "inputs": {"region": {"type": "string", "default": "north"}},
        "steps": [
            {
                "id": "load",
                "kind": "tool",
                "tool": "csv_read",
                "name": HOSTILE_TEXT,
                "description": HOSTILE_TEXT,
                "input_mapping": {"path": "data/sales.csv"},
            },
            {
                "id": "pick",
                "kind": "decision",
                "input_mapping": {"region": "$input.region"},
                "branches": ["<b>north</b>", "\"'south'\""],
                "conditions": {"<b>north</b>": "region == 'north'"},
                "default": "\"'south'\"",
            },
            {
                "id": HOSTILE_ID,
                "kind": "transform",
                "description": HOSTILE_TEXT,
                "input_mapping": {"rows": "load.rows"},
                "expression": "length(rows)",
            },
            {
                "id": "other",
                "kind": "transform",
                "input_mapping": {"rows": "load.rows"},
                "expression": "rows[0]",
            },
        ],
        "edges": [
            {"from": "pick", "to": HOSTILE_ID, "when": "<b>north</b>"},
            {"from": "pick", "to": "other", "when": "\"'south'\""},
        ],
    }


def digest_plan(*, with_products: bool = False) -> dict[str, Any]:
    """What the fake LLM answers: a branching plan on the built-in data tools (offline)."""
    steps: list[dict[str, Any]] = [
        {
            "id": "load",
            "kind": "tool",
            "tool": "csv_read",
            "input_mapping": {"path": "$input.csv_path"},
        },
        {
            "id": "by_region",
            "kind": "tool",
            "tool": "aggregate",
            "input_mapping": {"rows": "load.rows", "group_by": "region", "sum": "amount"},
        },
        {
            "id": "size",
            "kind": "decision",
            "branches": ["large", "small"],
            "input_mapping": {"total": "by_region.total", "threshold": "$input.threshold"},
            "conditions": {"large": "total >= threshold"},
            "default": "small",
        },
        {
            "id": "report",
            "kind": "tool",
            "tool": "write_report",
            "input_mapping": {
                "path": "digest.html",
                "title": "Sales digest",
                "sections": [{"heading": "By region", "rows": "by_region.groups"}],
            },
        },
        {
            "id": "note",
            "kind": "tool",
            "tool": "write_json",
            "input_mapping": {"path": "digest.json", "data": "by_region.total"},
        },
    ]
    if with_products:
        steps.insert(
            2,
            {
                "id": "by_product",
                "kind": "tool",
                "tool": "aggregate",
                "input_mapping": {"rows": "load.rows", "group_by": "product", "sum": "amount"},
            },
        )
        steps[-2]["input_mapping"]["sections"].append(
            {"heading": "By product", "rows": "by_product.groups"}
        )
    return {
        "name": "sales_digest",
        "description": "Total sales by region; a report when revenue is large, else a note.",
        "inputs": {
            "csv_path": {"type": "string", "default": "data/sales.csv"},
            "threshold": {"type": "number", "default": 1000},
        },
        "steps": steps,
        "edges": [
            {"from": "size", "to": "report", "when": "large"},
            {"from": "size", "to": "note", "when": "small"},
        ],
    }


DIGEST_GOAL = "Total our sales by region and write a digest when revenue is large"


def start_fake_llm(settings):
    """The loopback OpenAI-compatible server, with the planner's settings pointed at it."""
    from tests.fakes.openai_server import FakeLLM

    llm = FakeLLM().start()
    settings.OPENAI_BASE_URL = llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.PLANNER_MODEL = "fake-planner"
    settings.LLM_MAX_RETRIES = 0
    return llm
