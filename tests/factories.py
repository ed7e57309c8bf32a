"""Test data: factories (factory_boy) for users, workflow versions, runs, step results,
model calls (the cost ledger), approvals, tools, schedules and their fires,
notifications, planning attempts and approval policies, and the workflow definitions
the review tests plan and approve."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone
from factory.django import DjangoModelFactory

from notifications.models import Delivery
from review.models import Approval, ApprovalPolicy, ApprovalStatus
from runs.models import LLMCall, LLMCallState, Run, RunStatus, RunTrigger, StepResult, StepStatus
from schedules.models import FireOutcome, Schedule, ScheduleFire
from schedules.services import schedule_create
from tests.conftest import EXAMPLES_DIR
from tools.llm.prices import PICO
from tools.loader import load_tool_text
from tools.models import Tool
from tools.services import tool_upsert
from workflows.files import read_workflow_file
from workflows.models import PlanAttempt, PlanAttemptStatus, Workflow, WorkflowStatus
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
APPROVE = ("workflows", "approve_workflow")


class UserFactory(DjangoModelFactory):
    """A staff user with the reviewer permissions; ``approver=True`` adds approving.

    ``UserFactory(username="root", superuser=True)`` makes a superuser instead. The
    password is ``PASSWORD``. The permissions are added after the save and the
    instance is read afresh, so no stale permission cache hides them.
    """

    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    class Params:
        approver = factory.Trait(permissions__approve=True)
        superuser = factory.Trait(is_superuser=True)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    is_staff = True
    password = factory.django.Password(PASSWORD)

    @factory.post_generation
    def permissions(user, create, extracted, approve=False, **kwargs):
        if not create or user.is_superuser:
            return
        wanted = list(REVIEWER_PERMISSIONS) + ([APPROVE] if approve else [])
        for app_label, codename in wanted:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )

    @classmethod
    def _after_postgeneration(cls, instance, create, results=None):
        if create:
            for cache in ("_perm_cache", "_user_perm_cache", "_group_perm_cache"):
                instance.__dict__.pop(cache, None)


def sales_report_data(**changes: Any) -> dict[str, Any]:
    """The offline example (built-in tools only) as a dict, with top-level changes."""
    data = read_workflow_file(EXAMPLES_DIR / "sales_report.yaml")
    data.update(copy.deepcopy(changes))
    return data


def pending_version(data: dict[str, Any] | None = None, *, owner=None, **changes: Any) -> Workflow:
    """The offline example (with top-level changes), stored as a version pending review."""
    return WorkflowFactory(
        data=data or sales_report_data(**changes),
        status=WorkflowStatus.PENDING_REVIEW,
        owner=owner,
    )


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


class WorkflowFactory(factory.Factory):
    """A stored version of ``data`` (the offline example unless given), via ``workflow_import``.

    Going through the service keeps the version's Step and Edge rows and its hash
    true to the definition. ``WorkflowFactory(data={..., "name": "x"})`` stores another.
    """

    class Meta:
        model = Workflow

    data = factory.LazyFunction(sales_report_data)
    status = WorkflowStatus.DRAFT
    owner = None

    @classmethod
    def _create(cls, model_class, *, data, status, owner):
        workflow, _ = workflow_import(data=data, status=status, owner=owner)
        return workflow


class RunFactory(DjangoModelFactory):
    """A finished run of a version, recorded directly (nothing executes).

    ``finished_at`` is ``age`` ago (default: now); pass ``status=RunStatus.RUNNING``
    for a run still in flight (no finish time).
    """

    class Meta:
        model = Run

    class Params:
        age = timedelta(0)

    workflow = factory.SubFactory(WorkflowFactory)
    definition_hash = factory.SelfAttribute("workflow.definition_hash")
    trigger = RunTrigger.CLI
    status = RunStatus.SUCCEEDED
    finished_at = factory.LazyAttribute(
        lambda run: None if run.status == RunStatus.RUNNING else timezone.now() - run.age
    )


class StepResultFactory(DjangoModelFactory):
    class Meta:
        model = StepResult

    run = factory.SubFactory(RunFactory)
    step_id = factory.Sequence(lambda n: f"step_{n}")
    status = StepStatus.SUCCEEDED
    attempts = 1


class LLMCallFactory(DjangoModelFactory):
    """An answered model call of a run's step, made now: 100 prompt and 10 completion
    tokens for $0.01 (``PICO // 100`` pico-dollars)."""

    class Meta:
        model = LLMCall

    run = factory.SubFactory(RunFactory)
    workflow_name = factory.LazyAttribute(
        lambda call: call.run.workflow.name if call.run is not None else "sales_report"
    )
    step_id = "summarise"
    kind = "llm"
    endpoint = "default"
    model = "gpt-4o-mini"
    state = LLMCallState.ANSWERED
    prompt_tokens = 100
    completion_tokens = 10
    cost_pico = PICO // 100
    estimate_pico = PICO // 100
    created_at = factory.LazyFunction(timezone.now)
    settled_at = factory.LazyFunction(timezone.now)


class ApprovalFactory(DjangoModelFactory):
    """An approval of a version by an approver, with its (validation-trigger) run."""

    class Meta:
        model = Approval

    workflow = factory.SubFactory(WorkflowFactory, status=WorkflowStatus.ACTIVE)
    definition_hash = factory.SelfAttribute("workflow.definition_hash")
    approved_by = factory.SubFactory(UserFactory, approver=True)
    status = ApprovalStatus.PASSED
    validation_run = factory.SubFactory(
        RunFactory, workflow=factory.SelfAttribute("..workflow"), trigger=RunTrigger.VALIDATION
    )


class ToolFactory(factory.Factory):
    """A stored tool (and its first revision) via ``tool_upsert``: an HTTP tool named
    ``name`` on a loopback address nothing listens on (nothing calls it)."""

    class Meta:
        model = Tool

    name = factory.Sequence(lambda n: f"made_tool_{n}")

    @classmethod
    def _create(cls, model_class, *, name):
        text = TOOL_TEXT.format(name=name)
        for spec in load_tool_text(text, source="tests/factories.py"):
            tool_upsert(spec=spec, source="tests/factories.py")
        return Tool.objects.get(name=name)


TOOL_TEXT = """
- name: {name}
  kind: http
  description: A tool made by the tests' factory.
  base_url: "http://127.0.0.1:9"
  request:
    method: GET
    url: /things
  inputs:
    type: object
    properties: {{}}
"""


class DeliveryFactory(DjangoModelFactory):
    """A notification of a run (nothing is sent)."""

    class Meta:
        model = Delivery

    run = factory.SubFactory(RunFactory)
    channel = "webhook"
    event = "failed"
    target = "http://127.0.0.1:9/hook"


class ScheduleFactory(factory.Factory):
    """A schedule of a stored version via ``schedule_create`` (with its beat task)."""

    class Meta:
        model = Schedule

    workflow = factory.SubFactory(WorkflowFactory, status=WorkflowStatus.ACTIVE)
    name = factory.Sequence(lambda n: f"every_{n}")
    cron = "0 6 * * *"

    @classmethod
    def _create(cls, model_class, *, workflow, name, cron):
        return schedule_create(workflow_name=workflow.name, name=name, cron=cron)


class ScheduleFireFactory(DjangoModelFactory):
    """A fire of a schedule that started a run."""

    class Meta:
        model = ScheduleFire

    schedule = factory.SubFactory(ScheduleFactory)
    fire_time = factory.LazyFunction(timezone.now)
    outcome = FireOutcome.STARTED
    run = factory.SubFactory(RunFactory, trigger=RunTrigger.SCHEDULE)


class PlanAttemptFactory(DjangoModelFactory):
    """A finished planning attempt that made a version, asked by a user."""

    class Meta:
        model = PlanAttempt

    goal = factory.Sequence(lambda n: f"Report the sales of region {n}")
    model = "fake-planner"
    status = PlanAttemptStatus.VALID
    workflow = factory.SubFactory(WorkflowFactory)
    created_by = factory.SubFactory(UserFactory, username=factory.Sequence(lambda n: f"planner{n}"))


class ApprovalPolicyFactory(DjangoModelFactory):
    """A workflow's approval policy, last changed by a user."""

    class Meta:
        model = ApprovalPolicy

    workflow_name = factory.Sequence(lambda n: f"policy_flow_{n}")
    approvals_required = 2
    updated_by = factory.SubFactory(UserFactory, username=factory.Sequence(lambda n: f"policy{n}"))


def wide_definition(steps: int, *, name: str = "wide_flow") -> dict[str, Any]:
    """A workflow of ``steps`` independent transform steps (``s0000``, ``s0001``, …)."""
    return {
        "name": name,
        "description": f"{steps} independent transform steps.",
        "inputs": {"n": {"type": "integer", "default": 1}},
        "steps": [
            {
                "id": f"s{i:04d}",
                "kind": "transform",
                "expression": "n + 1",
                "input_mapping": {"n": "$input.n"},
            }
            for i in range(steps)
        ],
    }


def finished_run(steps: int, *, name: str = "wide_flow") -> Run:
    """A succeeded run of ``wide_definition(steps)``, one result per step (each took
    5 ms, one after another, on its first try), written in one batch."""
    workflow = WorkflowFactory(data=wide_definition(steps, name=name))
    started = timezone.now() - timedelta(seconds=steps)
    run = RunFactory(workflow=workflow, started_at=started, inputs={"n": 1}, outputs={})
    StepResult.objects.bulk_create(
        StepResult(
            run=run,
            step_id=f"s{i:04d}",
            status=StepStatus.SUCCEEDED,
            attempts=1,
            attempt_log=[],
            inputs={"n": 1},
            output=2,
            output_bytes=1,
            started_at=started + timedelta(milliseconds=5 * i),
            finished_at=started + timedelta(milliseconds=5 * i + 5),
        )
        for i in range(steps)
    )
    return run
