"""The workflow and run commands as a user types them: what they print and their exit codes.

validateflow, importflow, exportflow, listflows, runflow (file, stored name,
inputs, --dry-run) — against the shipped examples and tool files, with the
recording fake of the public APIs for any HTTP.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from django.core.management import call_command
from django.db import connection

from runs.models import Run, StepResult
from tests.conftest import EXAMPLE_TOOLS_DIR, EXAMPLES_DIR, statuses
from tests.factories import UserFactory
from workflows.files import read_workflow_file
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = ("geo_weather", "github_intel", "sales_report", "travel_briefing")
TOOLS = ("--tools", str(EXAMPLE_TOOLS_DIR))


def example(name: str) -> str:
    return str(EXAMPLES_DIR / f"{name}.yaml")


def write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    text = json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- validateflow ---------------------------------------------------------------------


def test_validateflow_passes_every_shipped_example(cli):
    result = cli("validateflow", *TOOLS, *(example(n) for n in EXAMPLES))

    assert result.code == 0, result.out + result.err
    assert result.lines == [f"{example(n)}: valid (0 errors, 0 warnings)" for n in EXAMPLES]


def test_validateflow_passes_the_examples_in_json_too(cli, tmp_path):
    paths = [write(tmp_path, f"{n}.json", read_workflow_file(example(n))) for n in EXAMPLES]

    result = cli("validateflow", *TOOLS, "--quiet", *paths)

    assert result.code == 0, result.out + result.err
    assert result.out == ""


def test_validateflow_lists_every_problem_with_its_location(cli, tmp_path):
    flow = read_workflow_file(example("geo_weather"))
    flow["steps"][0]["input_mapping"] = {"ip": "$input.address", "port": 80}
    flow["steps"][1]["tool"] = "weather_forecast"
    flow["steps"][2]["input_mapping"] = {}
    path = write(tmp_path, "broken.yaml", flow)

    result = cli("validateflow", *TOOLS, path)

    assert result.code == 1
    problems = [line for line in result.lines if line.startswith(f"{path}: error")]
    where = {re.split(r"\s+", line)[2]: line for line in problems}
    assert "[unknown_input]" in where["steps[0].input_mapping.ip"]
    assert "`address`" in where["steps[0].input_mapping.ip"]
    assert "[unknown_param]" in where["steps[0].input_mapping.port"]
    assert "[unknown_tool]" in where["steps[1].tool"]
    assert "weather_forecast" in where["steps[1].tool"]
    assert any("[missing_required_param]" in line and "code" in line for line in problems)
    assert re.search(
        rf"^{re.escape(path)}: invalid \(\d+ errors, \d+ warnings\)$", result.out, re.M
    )
    assert "1 of 1 workflow(s) invalid" in result.err


def test_validateflow_reports_schema_errors_by_json_path(cli, tmp_path):
    path = write(
        tmp_path,
        "schema.yaml",
        {"name": "Bad Name", "steps": [{"id": "a", "kind": "tool"}, {"id": "b", "kind": "nope"}]},
    )

    result = cli("validateflow", path)

    assert result.code == 1
    assert "[schema_invalid]" in result.out
    assert re.search(r"\bname\b.*\[schema_invalid\]", result.out)
    assert "steps[0].tool" in result.out
    assert "steps[1]" in result.out


def test_validateflow_reports_a_malformed_file_with_line_and_column(cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nsteps:\n  - id: [a\n", encoding="utf-8")
    good = example("sales_report")

    result = cli("validateflow", str(path), good)

    assert result.code == 1
    assert re.search(
        rf"^{re.escape(str(path))}: error .*invalid YAML at line \d+, column \d+", result.out, re.M
    )
    assert f"{good}: valid" in result.out  # the other file is still checked
    assert "1 of 2 workflow(s) invalid" in result.err


def test_validateflow_checks_a_stored_workflow_by_name(cli, example_tools):
    assert cli("importflow", example("geo_weather")).code == 0

    ok = cli("validateflow", "geo_weather")
    missing = cli("validateflow", "no_such_flow")

    assert ok.code == 0
    assert ok.lines == ["geo_weather: valid (0 errors, 0 warnings)"]
    assert missing.code == 1
    assert "no workflow file or stored workflow named `no_such_flow`" in missing.out


# --- importflow / exportflow / listflows ------------------------------------------------------


def test_importflow_stores_once_and_a_changed_file_makes_a_new_version(cli, tmp_path):
    flow = read_workflow_file(example("geo_weather"))
    path = write(tmp_path, "geo.yaml", flow)

    first = cli("importflow", path)
    again = cli("importflow", path)
    flow["description"] = "Changed."
    write(tmp_path, "geo.yaml", flow)
    changed = cli("importflow", path)

    assert first.lines == ["stored geo_weather v1 (draft)"]
    assert again.lines == ["unchanged geo_weather v1 (draft)"]
    assert changed.lines == ["stored geo_weather v2 (draft)"]
    assert list(Workflow.objects.values_list("version", flat=True)) == [2, 1]


def test_importflow_activate_refuses_an_invalid_workflow(cli, tmp_path, example_tools):
    UserFactory(username="root", superuser=True)
    flow = read_workflow_file(example("geo_weather"))
    flow["steps"][1]["input_mapping"]["latitude"] = "$input.lat"
    path = write(tmp_path, "bad.yaml", flow)

    result = cli("importflow", "--activate", "--as", "root", path, example("travel_briefing"))

    assert result.code == 1
    assert "[unknown_input]" in result.out
    assert f"{path}: not activated: it has validation errors" in result.out
    assert (
        "stored and activated travel_briefing v1 (active: activated by import, no validation run)"
        in result.out
    )
    assert "1 file(s) not imported" in result.err
    assert not Workflow.objects.filter(name="geo_weather").exists()


def test_importflow_reports_a_malformed_file_and_imports_the_rest(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "steps": [}', encoding="utf-8")

    result = cli("importflow", str(bad), example("sales_report"))

    assert result.code == 1
    assert re.search(r"bad\.json: .*invalid JSON at line 1, column \d+", result.out)
    assert "stored sales_report v1 (draft)" in result.out


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_exportflow_prints_the_stored_definition(cli, fmt):
    cli("importflow", example("travel_briefing"))

    result = cli("exportflow", "travel_briefing", "--format", fmt)

    assert result.code == 0
    parsed = json.loads(result.out) if fmt == "json" else yaml.safe_load(result.out)
    assert parsed == read_workflow_file(example("travel_briefing"))


def test_exportflow_picks_a_version_and_names_what_is_missing(cli, tmp_path):
    flow = read_workflow_file(example("geo_weather"))
    cli("importflow", write(tmp_path, "a.yaml", flow))
    flow["description"] = "second"
    cli("importflow", write(tmp_path, "a.yaml", flow))

    v1 = yaml.safe_load(cli("exportflow", "geo_weather", "--flow-version", "1").out)
    newest = yaml.safe_load(cli("exportflow", "geo_weather").out)
    missing = cli("exportflow", "geo_weather", "--flow-version", "7")
    unknown = cli("exportflow", "nope")

    assert v1["description"] != "second"
    assert newest["description"] == "second"
    assert missing.code == 1
    assert "no stored workflow `geo_weather` v7" in missing.err
    assert "no stored workflow `nope`" in unknown.err


def test_listflows_shows_versions_status_steps_and_last_run(cli, fake_api):
    assert cli("listflows").lines == [
        "no workflows stored (runflow FILE or importflow FILE stores one)"
    ]
    cli("importflow", example("sales_report"))
    assert cli("runflow", *TOOLS, example("geo_weather")).code == 0
    run = Run.objects.get()

    result = cli("listflows")

    header, *rows = result.lines
    assert header.split() == ["NAME", "VER", "STATUS", "STEPS", "RUNS", "LAST", "RUN"]
    assert [row.split() for row in rows] == [
        ["geo_weather", "1", "draft", "3", "1", f"#{run.pk}", "succeeded"],
        ["sales_report", "1", "draft", "4", "0", "-"],
    ]


# --- runflow by name ------------------------------------------------------------------------


def test_runflow_name_runs_the_active_version(cli, fake_api, example_tools, tmp_path):
    UserFactory(username="root", superuser=True)
    assert cli("importflow", "--activate", "--as", "root", example("geo_weather")).lines == [
        "stored and activated geo_weather v1 (active: activated by import, no validation run)"
    ]
    flow = read_workflow_file(example("geo_weather"))
    flow["inputs"]["ip"]["default"] = "81.2.69.142"
    cli("importflow", write(tmp_path, "v2.yaml", flow))  # a newer draft is not run by name

    result = cli("runflow", "geo_weather")

    assert result.code == 0, result.out + result.err
    run = Run.objects.get()
    assert run.workflow.version == 1
    assert run.workflow.status == "active"
    assert result.lines[0] == f"run {run.pk}: geo_weather v1, 3 steps"
    assert [r.path for r in fake_api.requests("ipapi")] == ["/json/8.8.8.8"]


def test_runflow_name_without_an_active_version_says_so(cli, example_tools):
    cli("importflow", example("geo_weather"))

    result = cli("runflow", "geo_weather")
    unknown = cli("runflow", "nothing_here")
    draft = cli("runflow", "geo_weather", "--flow-version", "1")

    assert result.code == 1
    assert (
        "workflow `geo_weather` has no active version (newest is v1, draft): v1 is draft, "
        "not active; approve it, or run the file directly"
    ) in result.err
    assert "no stored workflow named `nothing_here`" in unknown.err
    assert "workflow `geo_weather` v1 is draft, not active" in draft.err
    assert Run.objects.count() == 0


def test_runflow_file_stores_a_draft_and_reuses_it_when_unchanged(cli, fake_api):
    assert cli("runflow", *TOOLS, example("geo_weather")).code == 0
    assert cli("runflow", *TOOLS, example("geo_weather")).code == 0

    assert Workflow.objects.get().status == "draft"
    assert Run.objects.filter(workflow__version=1).count() == 2


def test_runflow_with_a_broken_tool_dir_fails_before_anything(cli, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "bad.yaml").write_text("name: bad tool\nrequest: {url: 3}\n", encoding="utf-8")

    result = cli("runflow", "--tools", str(tools), example("sales_report"))

    assert result.code == 1
    assert "tool definitions failed to load" in result.err
    assert "bad.yaml" in result.err
    assert Run.objects.count() == 0


def test_runflow_dry_run_prints_the_plan_and_calls_nothing(cli, fake_api):
    result = cli("runflow", *TOOLS, "--dry-run", example("github_intel"), "--input", "owner=x")

    assert result.code == 0, result.out + result.err
    assert result.lines[0].startswith("dry run of github_intel: 6 steps in 3 levels")
    assert 'inputs: owner="x", repo="django", per_page=10' in result.out
    assert "level 2 (in parallel)" in result.out
    assert fake_api.requests() == []
    assert Run.objects.count() == 0
    assert Workflow.objects.count() == 0


# --- inputs -----------------------------------------------------------------------------------

TYPED_NAMES = ("text", "count", "ratio", "flag", "tags", "meta", "mode")
TYPED_FLOW = {
    "name": "typed_inputs",
    "inputs": {
        "text": {"type": "string", "description": "free text"},
        "count": {"type": "integer", "default": 3},
        "ratio": {"type": "number", "default": 0.5},
        "flag": {"type": "boolean", "default": False},
        "tags": {"type": "array", "default": []},
        "meta": {"type": "object", "default": {}},
        "mode": {"type": "string", "default": "fast", "enum": ["fast", "slow"]},
    },
    "steps": [
        {
            "id": "save",
            "kind": "tool",
            "tool": "write_json",
            "input_mapping": {
                "path": "inputs.json",
                "data": {
                    k: f"$input.{k}"
                    for k in ("text", "count", "ratio", "flag", "tags", "meta", "mode")
                },
            },
        }
    ],
    "outputs": {"path": "save.path"},
}


def saved_inputs(output_dir) -> dict:
    return json.loads((output_dir / "inputs.json").read_text(encoding="utf-8"))


def test_input_values_are_coerced_to_the_declared_types(cli, tmp_path, output_dir):
    path = write(tmp_path, "typed.yaml", TYPED_FLOW)

    result = cli(
        "runflow", path,
        "--input", "text=42", "--input", "count=7", "--input", "ratio=1.25",
        "--input", "flag=yes", "--input", 'tags=["a", "b"]', "--input", 'meta={"k": 1}',
        "--input", "mode=slow",
    )  # fmt: skip

    assert result.code == 0, result.out + result.err
    expected = {
        "text": "42",
        "count": 7,
        "ratio": 1.25,
        "flag": True,
        "tags": ["a", "b"],
        "meta": {"k": 1},
        "mode": "slow",
    }
    assert saved_inputs(output_dir) == expected
    assert Run.objects.get().inputs == expected


def test_defaults_fill_the_inputs_not_given(cli, tmp_path, output_dir):
    path = write(tmp_path, "typed.yaml", TYPED_FLOW)

    assert cli("runflow", path, "--input", "text=hi").code == 0

    assert saved_inputs(output_dir) == {
        "text": "hi",
        "count": 3,
        "ratio": 0.5,
        "flag": False,
        "tags": [],
        "meta": {},
        "mode": "fast",
    }


def test_every_input_problem_is_listed_together(cli, tmp_path, output_dir):
    path = write(tmp_path, "typed.yaml", TYPED_FLOW)

    result = cli(
        "runflow", path,
        "--input", "count=many", "--input", "flag=maybe", "--input", "colour=red",
        "--input", "mode=medium",
    )  # fmt: skip

    assert result.code == 1
    message = result.err
    assert "unknown input `colour`" in message
    assert "input `text` (string) is required" in message
    assert 'input `count` must be integer, got "many"' in message
    assert 'input `flag` must be boolean, got "maybe"' in message
    assert "input `mode` must be one of" in message
    assert Run.objects.count() == 0
    assert not (output_dir / "inputs.json").exists()


def test_an_input_without_equals_sign_is_refused(cli, tmp_path):
    path = write(tmp_path, "typed.yaml", TYPED_FLOW)

    result = cli("runflow", path, "--input", "text")

    assert result.code == 1
    assert "--input expects KEY=VALUE, got 'text'" in result.err


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_inputs_file_is_read_and_input_flags_win(cli, tmp_path, output_dir, suffix):
    path = write(tmp_path, "typed.yaml", TYPED_FLOW)
    given = {"text": "from file", "count": 11, "tags": ["x"], "flag": True}
    inputs = write(tmp_path, f"inputs{suffix}", given)

    result = cli("runflow", path, "--inputs-file", inputs, "--input", "count=12")

    assert result.code == 0, result.out + result.err
    saved = saved_inputs(output_dir)
    assert saved["text"] == "from file"
    assert saved["tags"] == ["x"]
    assert saved["flag"] is True
    assert saved["count"] == 12


def test_a_malformed_inputs_file_is_reported_with_its_location(cli, tmp_path):
    path = write(tmp_path, "typed.yaml", TYPED_FLOW)
    bad = tmp_path / "inputs.json"
    bad.write_text('{"text": "a",\n  "count": }', encoding="utf-8")

    result = cli("runflow", path, "--inputs-file", str(bad))

    assert result.code == 1
    assert re.search(r"invalid JSON at line 2, column \d+", result.err)
    assert StepResult.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_database_that_was_never_migrated_is_a_clear_error(cli):
    with connection.cursor() as cursor:  # as if `migrate` had never run
        cursor.execute("DROP TABLE tools_tool")
        cursor.execute("DROP TABLE tools_breaker")
        cursor.execute("DROP TABLE tools_toolrevision")
        cursor.execute("DROP TABLE tools_credential")
        cursor.execute("DROP TABLE tools_ratelimitslot")
        cursor.execute("DROP TABLE tools_toolsource")
    try:
        result = cli("runflow", "examples/sales_report.yaml")
    finally:
        call_command("migrate", "tools", "zero", "--fake", verbosity=0)
        call_command("migrate", "tools", verbosity=0)

    assert result.code == 1
    assert "run `python manage.py migrate` first" in result.err
    assert "Traceback" not in result.err


# --- runflow --async with the broker down -----------------------------------------------


@pytest.fixture
def broker_down():
    """A configured broker that refuses connections (not the embedded eager mode)."""
    from celery import current_app

    def fresh_connections() -> None:
        # Earlier tests (real workers) leave pooled connections to the real broker.
        current_app.close()
        current_app.amqp._producer_pool = None

    conf = current_app.conf
    saved = conf.task_always_eager, conf.broker_url
    conf.task_always_eager, conf.broker_url = False, "redis://127.0.0.1:1/0"
    fresh_connections()
    yield
    conf.task_always_eager, conf.broker_url = saved
    fresh_connections()


def test_runflow_async_with_the_broker_down_says_so_instead_of_a_traceback(
    cli, output_dir, broker_down
):
    result = cli("runflow", "examples/sales_report.yaml", "--async")

    run = Run.objects.get()
    assert result.code == 1
    assert f"run {run.pk} started, but its steps could not be sent to the broker" in result.err
    assert f"cancelrun {run.pk}" in result.err
    # Committed before the publish: the sweeper sends the queued step again later.
    assert run.status == "running"
    assert statuses(run)["load"] == "queued"
