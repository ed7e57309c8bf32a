"""``runflow --dry-run``: the plan of a run — levels, kinds, known inputs, references,
branches — with no call made and nothing stored.

The fake ops API runs on loopback during every test, so "no call made" is what the
server saw, not an assumption.
"""

from __future__ import annotations

import pytest
import yaml

from runs.models import Run, StepResult
from tests.conftest import CONTROL_TOOLS_DIR
from workflows.models import Workflow
from workflows.services import workflow_activate_trusted, workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

CORPUS = CONTROL_TOOLS_DIR.parents[1] / "flows" / "corpus"


def dry_run(cli, target: str, *args: str):
    return cli("runflow", target, "--dry-run", "--tools", str(CONTROL_TOOLS_DIR), *args)


def assert_nothing_happened(fake) -> None:
    assert fake.requests() == []
    assert Run.objects.count() == 0
    assert StepResult.objects.count() == 0


def test_dry_run_prints_levels_kinds_inputs_references_and_branches(control_api, cli):
    result = dry_run(cli, str(CORPUS / "incident_triage.yaml"), "--input", "service=db")

    assert result.code == 0, result.out + result.err
    assert result.err == ""
    assert result.lines == [
        "dry run of incident_triage: 8 steps in 5 levels (no calls made, no run stored)",
        'inputs: service="db", limit=3',
        "  level 1 (in parallel)",
        "    catalog                tool catalog_list",
        "        limit = 3  ($input.limit)",
        "    check                  tool service_status",
        '        service = "db"  ($input.service)',
        "  level 2 (in parallel)",
        "    prices                 foreach item_get   after: catalog",
        "        items = <- catalog.items",
        '        currency = "EUR"',
        "        per item (3 at a time):",
        "          id = <- $item.id",
        "    risk                   transform   after: check",
        "        state = <- check.state",
        "        latency = <- check.latency_ms",
        "        tags = <- check.tags",
        "        expression: {critical: contains(tags, 'critical'), "
        "unhealthy: state != 'ok' || latency > `500`}",
        "  level 3",
        "    level                  decision   after: risk",
        "        critical = <- risk.critical",
        "        unhealthy = <- risk.unhealthy",
        "        branch escalate: critical and unhealthy -> escalate",
        "        branch log: (default) -> log",
        "  level 4 (in parallel)",
        "    escalate               tool alert_send   after: check, level",
        '        level = "critical"',
        "        service = <- check.service",
        "        message = <- check.state",
        "    log                    transform   after: check, level",
        "        service = <- check.service",
        "        expression: {service: service}",
        "  level 5",
        "    report                 transform   after: check, escalate, level, log, prices",
        "        service = <- check.service",
        "        branch = <- level.branch",
        "        alert = <- escalate.id",
        "        logged = <- log.service",
        "        prices = <- prices.items",
        "        expression: {service: service, branch: branch, alert: alert, logged: logged, "
        "stock_value: sum(prices[].price)}",
        "outputs: service <- report.service, branch <- report.branch, alert <- report.alert, "
        "logged <- report.logged, stock_value <- report.stock_value",
    ]
    assert_nothing_happened(control_api)
    assert Workflow.objects.count() == 0  # a file is parsed, not stored


def test_dry_run_shows_foreach_items_resolved_from_inputs(control_api, cli, tmp_path):
    inputs = tmp_path / "inputs.yaml"
    inputs.write_text(yaml.safe_dump({"ids": [7, 5, 3], "currency": "GBP"}), encoding="utf-8")

    result = dry_run(cli, str(CORPUS / "foreach_order.yaml"), "--inputs-file", str(inputs))

    assert result.code == 0, result.out + result.err
    assert result.lines[1] == 'inputs: ids=[7, 5, 3], currency="GBP"'
    assert result.lines[3:10] == [
        "    each                   foreach item_get",
        "        items = [7, 5, 3]  ($input.ids)",
        '        currency = "GBP"  ($input.currency)',
        "        per item (4 at a time):",
        "          id = <- $item",
        "          index = <- $index",
        "  level 2",
    ]
    assert_nothing_happened(control_api)


def test_dry_run_names_env_references_and_never_prints_their_values(
    control_api, cli, tmp_path, monkeypatch, settings
):
    settings.FLOWPILOT_ENV_ALLOW = ["OPS_*"]  # no tool declares it: the operator allows it
    monkeypatch.setenv("OPS_PAGER_NOTE", "s3cr3t-pager-value")
    flow = {
        "name": "env_plan",
        "inputs": {"service": {"type": "string", "default": "api"}},
        "steps": [
            {
                "id": "page",
                "kind": "tool",
                "tool": "alert_send",
                "input_mapping": {
                    "level": "info",
                    "service": "$input.service",
                    "message": "$env.OPS_PAGER_NOTE",
                },
            }
        ],
    }
    path = tmp_path / "env_plan.yaml"
    path.write_text(yaml.safe_dump(flow), encoding="utf-8")

    result = dry_run(cli, str(path))

    assert result.code == 0, result.out + result.err
    assert "        message = <$env.OPS_PAGER_NOTE>" in result.lines
    assert "s3cr3t" not in result.out + result.err
    assert_nothing_happened(control_api)


def test_dry_run_of_a_stored_workflow_by_name(control_api, cli, control_tools):
    workflow, _ = workflow_import(
        data=yaml.safe_load((CORPUS / "decision_latency.yaml").read_text())
    )
    workflow_activate_trusted(workflow=workflow)

    result = dry_run(cli, "decision_latency", "--input", "service=api")

    assert result.code == 0, result.out + result.err
    assert result.lines[:2] == [
        "dry run of decision_latency: 4 steps in 3 levels (no calls made, no run stored)",
        'inputs: service="api"',
    ]
    assert "        branch slow: latency > 200 -> page" in result.lines
    assert "        branch fast: (default) -> note" in result.lines
    assert_nothing_happened(control_api)


def test_dry_run_prints_warnings_and_still_plans(control_api, cli):
    result = dry_run(cli, str(CORPUS / "scoping_unused_input.yaml"), "--input", "service=docs")

    assert result.code == 0, result.out + result.err
    assert result.lines[0].startswith("warning inputs.verbose  [unused_input]")
    assert result.lines[1].startswith("dry run of scoping_unused_input: 1 step in 1 level")
    assert_nothing_happened(control_api)


def test_dry_run_of_an_invalid_file_lists_every_error_and_plans_nothing(control_api, cli):
    result = dry_run(cli, str(CORPUS / "allowlist_violation.yaml"), "--input", "service=api")

    assert result.code == 1
    issues = [line for line in result.lines if line.startswith("error")]
    assert len(issues) == 2
    assert all("[tool_not_allowed]" in line for line in issues)
    assert not any(line.startswith("dry run of") for line in result.lines)
    assert "allowlist_violation.yaml: 2 validation error(s)" in result.err
    assert_nothing_happened(control_api)


def test_dry_run_checks_the_inputs(control_api, cli):
    result = dry_run(cli, str(CORPUS / "decision_default.yaml"), "--input", "score=high")

    assert result.code == 1
    assert "invalid run inputs: input `score` must be integer" in result.err
    assert_nothing_happened(control_api)


def test_dry_run_output_is_deterministic(control_api, cli):
    target = str(CORPUS / "skip_cascade.yaml")

    first = dry_run(cli, target, "--input", "service=api", "--input", "mode=quick")
    second = dry_run(cli, target, "--input", "mode=quick", "--input", "service=api")

    assert first.code == second.code == 0
    assert first.out == second.out
    assert '        branch full: mode == "full" -> enrich' in first.lines
    assert "        branch quick: (default) -> summary" in first.lines
    assert_nothing_happened(control_api)


def test_dry_run_shows_the_workflows_bound_and_queue(control_api, cli, tmp_path):
    data = yaml.safe_load((CORPUS / "foreach_order.yaml").read_text(encoding="utf-8"))
    data["max_parallel"], data["queue"] = 2, "reports"
    data["steps"][0].pop("concurrency", None)
    data["steps"][0]["max_parallel"] = 6
    path = tmp_path / "bounded.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")

    result = dry_run(cli, str(path), "--input", "ids=[1, 2]")

    assert result.code == 0, result.out + result.err
    assert "max_parallel: at most 2 steps at once" in result.lines
    assert "queue: reports (on the Celery workers; a tool's own queue wins)" in result.lines
    assert "        per item (6 at a time):" in result.lines
    assert_nothing_happened(control_api)
