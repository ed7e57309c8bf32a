"""The control-flow corpus: every file validates to its expected codes, and runs as expected.

Named after its data (the corpus), not a module: it drives the validator, runflow and docs/.

Files live in ``tests/data/flows/corpus/``; each carries its expectation in a leading
``# expect:`` comment block (format in that directory's README). Runnable files go
through ``runflow`` with the ops-API tools (``tests/data/tools/control``) against the
fake ops API on loopback; the run's row, every StepResult and the requests the
server received are compared with the expectation.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth import get_user_model

from runs.models import Run
from tests.conftest import CONTROL_TOOLS_DIR
from tools.registry import ToolRegistry
from workflows.files import read_workflow_file
from workflows.schema import step_kind_names
from workflows.validator import validate_workflow

CORPUS = Path(__file__).resolve().parent.parent / "data" / "flows" / "corpus"
FILES = sorted(CORPUS.glob("*.yaml"))
RUN_KEYS = {"inputs", "setup", "status", "steps", "errors", "outputs", "requests"}


def expectation(path: Path) -> dict[str, Any]:
    """The YAML of the leading comment block, from its ``# expect:`` line on."""
    block: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if block or line.rstrip() == "# expect:":
            block.append(line[2:] if line.startswith("# ") else line[1:])
    assert block, f"{path.name} has no `# expect:` comment block"
    expect = yaml.safe_load("\n".join(block))["expect"]
    assert set(expect) <= {"codes", "messages", "runs"}, f"{path.name}: {sorted(expect)}"
    for case in expect.get("runs") or []:
        assert set(case) <= RUN_KEYS, f"{path.name}: unknown run keys {set(case) - RUN_KEYS}"
    return expect


def _ids(paths):
    return [p.stem for p in paths]


RUNNABLE = [p for p in FILES if expectation(p).get("runs")]


def test_the_corpus_is_large_and_covers_valid_invalid_and_runnable_files():
    expects = {p.stem: expectation(p) for p in FILES}
    invalid = [n for n, e in expects.items() if e["codes"] and not e.get("runs")]
    runnable = [n for n, e in expects.items() if e.get("runs")]
    assert len(FILES) >= 25
    assert len(invalid) >= 8
    assert len(runnable) >= 15


@pytest.fixture
def registry(db, control_tools):
    return ToolRegistry.from_db()


@pytest.mark.parametrize("path", FILES, ids=_ids(FILES))
def test_validator_reports_the_expected_codes(path, registry):
    expect = expectation(path)

    report = validate_workflow(read_workflow_file(path), registry=registry)

    found = sorted(issue.code for issue in report.issues)
    assert found == sorted(expect["codes"]), "\n".join(
        f"{i.code} {i.path}: {i.message}" for i in report.issues
    )
    messages = [issue.message for issue in report.issues]
    for text in expect.get("messages") or []:
        assert any(text in message for message in messages), (text, messages)
    if expect.get("runs"):
        assert report.ok, "a runnable corpus file must have no errors"


@pytest.mark.django_db(transaction=True)
def test_validateflow_gives_each_file_its_verdict(cli, control_tools):
    result = cli("validateflow", *map(str, FILES), "--tools", str(CONTROL_TOOLS_DIR))

    expected_invalid = 0
    for path in FILES:
        expect = expectation(path)
        has_errors = bool(expect["codes"]) and not expect.get("runs")
        expected_invalid += has_errors
        verdict = [line for line in result.lines if line.startswith(f"{path}: ")][-1]
        assert verdict.split(": ", 1)[1].startswith("invalid" if has_errors else "valid"), verdict
    assert expected_invalid
    assert result.code == 1
    assert f"{expected_invalid} of {len(FILES)} workflow(s) invalid" in result.err


def _apply_setup(fake, setup: dict[str, Any]) -> None:
    data = fake.control
    for key, value in setup.items():
        if key == "fail":
            fake.fail(value["route"], status=value["status"], times=value.get("times"))
        elif key == "missing":
            data.missing = set(value)
        elif key == "item_delay":
            data.item_delay = value
        elif key == "item_delays":
            data.item_delays = {int(k): v for k, v in value.items()}
        else:
            raise AssertionError(f"unknown setup key {key!r}")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", RUNNABLE, ids=_ids(RUNNABLE))
def test_runnable_file_runs_to_its_expected_outcome(path, cli, control_api, tmp_path):
    for number, case in enumerate(expectation(path)["runs"], start=1):
        control_api.clear()
        control_api.heal()
        control_api.control.alerts.clear()
        _apply_setup(control_api, case.get("setup") or {})
        inputs = tmp_path / f"inputs{number}.json"
        inputs.write_text(json.dumps(case.get("inputs") or {}), encoding="utf-8")
        where = f"{path.name} run {number} ({case.get('inputs')})"

        result = cli(
            "runflow", str(path), "--tools", str(CONTROL_TOOLS_DIR), "--inputs-file", str(inputs)
        )

        run = Run.objects.order_by("-pk").first()
        assert run is not None, f"{where}: no run\n{result.out}{result.err}"
        results = {r.step_id: r for r in run.step_results.order_by("step_id")}
        detail = f"{where}\n{result.out}{result.err}"
        assert run.status == case["status"], detail
        assert result.code == (0 if case["status"] == "succeeded" else 1), detail
        assert {s: r.status for s, r in results.items()} == case["steps"], detail
        errors = {s: (r.error or {}).get("type") for s, r in results.items() if r.error}
        assert errors == (case.get("errors") or {}), detail
        if "outputs" in case:
            assert run.outputs == case["outputs"], detail
        control_api.wait_finished()
        received = Counter(r.route for r in control_api.requests())
        for route, count in (case.get("requests") or {}).items():
            assert received[route] == count, f"{where}: {route} {dict(received)}"


# --- docs/examples: one worked example per step kind ---------------------------------

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
EXAMPLES = sorted((DOCS / "examples").glob("*.yaml"))


def test_there_is_one_documented_example_per_step_kind():
    assert {p.stem for p in EXAMPLES} == set(step_kind_names())
    for path in EXAMPLES:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert path.stem in {step["kind"] for step in data["steps"]}, path.name


def test_steps_md_shows_every_example_file_verbatim():
    text = (DOCS / "steps.md").read_text(encoding="utf-8")
    for path in EXAMPLES:
        body = path.read_text(encoding="utf-8").strip()
        assert f"```yaml\n{body}\n```" in text, f"docs/steps.md does not show {path.name}"
        assert f"examples/{path.name}" in text


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_validateflow_accepts_each_documented_example(path, cli):
    from tests.conftest import EXAMPLE_TOOLS_DIR
    from workflows.validator import UNSUPPORTED_KINDS

    if path.stem in ("workflow", "loop"):  # they run the shipped geo_weather: active
        _activate_geo_weather(cli)
    result = cli("validateflow", str(path), "--tools", str(EXAMPLE_TOOLS_DIR))

    if path.stem in UNSUPPORTED_KINDS:  # a kind whose runtime is not in this checkout
        assert result.code == 1
        assert [line.split("[")[1].split("]")[0] for line in result.lines if "[" in line] == [
            "kind_not_supported"
        ]
        return
    assert result.code == 0, result.out + result.err
    assert result.lines == [f"{path}: valid (0 errors, 0 warnings)"]


def _activate_geo_weather(cli) -> None:
    from tests.conftest import EXAMPLE_TOOLS_DIR, EXAMPLES_DIR

    assert cli("loadtools", str(EXAMPLE_TOOLS_DIR)).code == 0
    get_user_model().objects.create_superuser("corpus-admin", "admin@example.com", "x")
    result = cli(
        "importflow", str(EXAMPLES_DIR / "geo_weather.yaml"), "--activate", "--as", "corpus-admin"
    )
    assert result.code == 0, result.out + result.err


@pytest.mark.django_db(transaction=True)
def test_the_workflow_example_runs_geo_weather_as_a_child_run(fake_api, cli):
    _activate_geo_weather(cli)

    run = _run_example(cli, "workflow", "ip=8.8.8.8")

    assert run.status == "succeeded", run.error_summary
    child = Run.objects.get(parent_run=run)
    assert child.workflow.name == "geo_weather"
    assert child.inputs == {"ip": "8.8.8.8"}
    assert run.outputs["city"] == child.outputs["city"]
    assert run.outputs["report"] == (
        f"{child.outputs['city']} ( {child.outputs['country']} ): "
        f"{child.outputs['temperature_c']} C"
    )


@pytest.mark.django_db(transaction=True)
def test_the_loop_example_reads_the_weather_until_max_iterations(fake_api, cli):
    from tests.fakes.apis import current_reading

    _activate_geo_weather(cli)

    run = _run_example(cli, "loop", "ip=8.8.8.8")

    assert run.status == "succeeded", run.error_summary
    children = list(Run.objects.filter(parent_run=run).order_by("pk"))
    assert [c.workflow.name for c in children] == ["geo_weather"] * 3
    last = children[-1].outputs
    temperature, _, _ = current_reading(last["latitude"], last["longitude"])
    assert temperature < 15  # the fake's reading there: never warm enough, so 3 readings
    assert run.outputs == {
        "city": last["city"],
        "temperature_c": temperature,
        "readings": 3,
        "warm": False,
    }
    assert [r.route for r in fake_api.requests()].count("weather") == 3


def _run_example(cli, name: str, *inputs: str):
    from tests.conftest import EXAMPLE_TOOLS_DIR

    args = ["runflow", str(DOCS / "examples" / f"{name}.yaml"), "--tools", str(EXAMPLE_TOOLS_DIR)]
    for pair in inputs:
        args += ["--input", pair]
    result = cli(*args)
    assert result.code == 0, result.out + result.err
    return Run.objects.filter(parent_run__isnull=True).order_by("-pk").first()


@pytest.mark.django_db(transaction=True)
def test_the_tool_example_runs(fake_api, cli):
    from tests.fakes.apis import current_reading

    run = _run_example(cli, "tool", "city=Paris")

    temperature, windspeed, _ = current_reading(48.85341, 2.3488)
    assert run.outputs == {
        "city": "Paris",
        "country": "FR",
        "temperature_c": temperature,
        "windspeed_kmh": windspeed,
    }
    assert [r.route for r in fake_api.requests()] == ["geocoding", "weather"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("city", "branch", "posts"),
    [("Berlin", "freezing", 1), ("Tokyo", "mild", 0)],
)
def test_the_decision_example_takes_one_branch(fake_api, cli, city, branch, posts):
    run = _run_example(cli, "decision", f"city={city}")

    statuses = {r.step_id: r.status for r in run.step_results.all()}
    assert statuses["warn"] == ("succeeded" if posts else "skipped")
    assert statuses["all_clear"] == ("skipped" if posts else "succeeded")
    assert run.outputs == {
        "branch": branch,
        "warned": bool(posts),
        "message": None if posts else f"{city} is fine",
    }
    sent = fake_api.requests("post")
    assert len(sent) == posts
    if posts:
        assert sent[0].json() == {
            "city": city,
            "temperature": run.step_results.get(step_id="weather").output["temperature"],
            "branch": branch,
        }


@pytest.mark.django_db(transaction=True)
def test_the_transform_example_runs_offline(cli):
    import csv

    with (REPO / "examples" / "data" / "sales.csv").open(encoding="utf-8") as handle:
        north = [row for row in csv.DictReader(handle) if row["region"] == "North"]

    run = _run_example(cli, "transform")

    amounts = [float(row["amount"]) for row in north]
    assert run.outputs["orders"] == len(north)
    assert run.outputs["total"] == pytest.approx(sum(amounts))
    assert run.outputs["best_product"] == max(north, key=lambda r: float(r["amount"]))["product"]
    assert [s["amount"] for s in run.outputs["big_sales"]] == [a for a in amounts if a >= 150]
    assert run.outputs["source"] == "data/sales.csv"


@pytest.mark.django_db(transaction=True)
def test_the_foreach_example_lists_unknown_codes_instead_of_failing(fake_api, cli):
    from tests.fakes.apis import COUNTRIES

    run = _run_example(cli, "foreach", 'codes=["DE", "JP", "XX"]')

    assert run.outputs == {
        "countries": [
            {
                "name": COUNTRIES[code]["name"]["common"],
                "capital": COUNTRIES[code]["capital"][0],
                "population": COUNTRIES[code]["population"],
            }
            for code in ("DE", "JP")
        ],
        "population": COUNTRIES["DE"]["population"] + COUNTRIES["JP"]["population"],
        "failed_indexes": [2],
    }
    assert sorted(r.path for r in fake_api.requests("restcountries")) == [
        "/v3.1/alpha/DE",
        "/v3.1/alpha/JP",
        "/v3.1/alpha/XX",
    ]
