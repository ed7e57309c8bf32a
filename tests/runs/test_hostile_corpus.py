"""The hostile-input corpus: every case in ``tests/data/hostile/`` meets its expectation.

Named after its data, not a module: the cases cross files, inputs, responses, the
admin and database faults (format in that directory's README). Run on SQLite and on
PostgreSQL, so a value one database would store and the other refuse shows up here.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import InterfaceError, OperationalError
from django.urls import reverse

from runs.engine import caches, checkpoint
from runs.engine.celery import settle as celery_settle
from runs.engine.celery.run import run_start
from runs.models import Run, StepResult
from runs.services import run_create, run_execute
from tests.celery_support import Bus, import_flow
from tests.fakes import FakeAPI, FakeResponse
from tests.fakes.providers import HOSTILE_OUTPUTS, HOSTILE_PROVIDER
from tests.review.test_admin import login
from tools.errors import ToolConfigError
from tools.jsondata import storage_problem, store_unescape
from tools.loader import load_tool_file, load_tool_text
from tools.services import tool_upsert
from workflows.cli import read_inputs_file
from workflows.files import WorkflowFileError, read_workflow_file
from workflows.inputs import InputsInvalid, resolve_inputs
from workflows.models import Workflow
from workflows.schema import InputSpec

CORPUS = Path(__file__).resolve().parent.parent / "data" / "hostile"


def cases(name: str) -> list[dict[str, Any]]:
    return yaml.safe_load((CORPUS / name).read_text(encoding="utf-8"))


FILES, TOOLS, INPUTS = cases("files.yaml"), cases("tools.yaml"), cases("inputs.yaml")
EDITS, RESPONSES, FAULTS = cases("edits.yaml"), cases("responses.yaml"), cases("faults.yaml")
ALL = [*FILES, *TOOLS, *INPUTS, *EDITS, *RESPONSES, *FAULTS]


def ids(found: list[dict]) -> list[str]:
    return [case["id"] for case in found]


def test_the_corpus_holds_over_100_cases_each_with_an_expectation():
    assert len(ALL) >= 100
    assert len(set(ids(ALL))) == len(ALL), "case ids must be unique"
    for case in ALL:
        assert case.get("expect"), case["id"]


def assert_outcome(case: dict, *, accepted: bool, message: str) -> None:
    expect = case["expect"]
    if "refused" in expect:
        assert not accepted, f"{case['id']}: accepted, expected a refusal"
        assert re.search(expect["refused"], message), f"{case['id']}: {message!r}"
        assert "Traceback" not in message
    else:
        assert expect == {"accepted": True}, case["id"]
        assert accepted, f"{case['id']}: refused: {message}"


# --- generated content ----------------------------------------------------------------


def content(case: dict, *, yaml_doc: bool = False) -> bytes:
    """The bytes of a file case: its ``text``, or what ``generate`` asks for."""
    generate = case.get("generate")
    if not generate:
        return case["text"].encode("utf-8", errors="surrogatepass")
    if "raw" in generate:
        return generate["raw"].encode("latin-1").decode("unicode_escape").encode("latin-1")
    if "bytes" in generate:
        return b"#" * generate["bytes"]
    depth = generate["deep"]
    if yaml_doc:
        return f"name: x\nd: {'[' * depth}{']' * depth}\n".encode()
    return f'{{"name": "sales_report", "steps": [], "x": {"[" * depth}{"]" * depth}}}'.encode()


# --- files ----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", FILES, ids=ids(FILES))
def test_workflow_files(case, tmp_path, cli):
    path = tmp_path / f"flow.{case['format']}"
    path.write_bytes(content(case))
    if case.get("via") == "validateflow":
        result = cli("validateflow", str(path))
        assert_outcome(case, accepted=result.code == 0, message=result.out + result.err)
        return
    try:
        read_workflow_file(path)
    except WorkflowFileError as exc:
        assert_outcome(case, accepted=False, message=exc.message)
    else:
        assert_outcome(case, accepted=True, message="")


@pytest.mark.parametrize("case", TOOLS, ids=ids(TOOLS))
def test_tool_files(case, tmp_path):
    path = tmp_path / "tool.yaml"
    path.write_bytes(content(case, yaml_doc=True))
    try:
        specs = load_tool_file(path)
    except ToolConfigError as exc:
        assert_outcome(case, accepted=False, message=exc.message)
    else:
        assert_outcome(case, accepted=bool(specs), message="")


# --- run inputs -----------------------------------------------------------------------


def given_inputs(case: dict) -> dict[str, Any]:
    generate = case.get("generate") or {}
    if "input_bytes" in generate:
        return {"q": "x" * (generate["input_bytes"] - len('{"q": ""}'))}
    if "deep_input" in generate:
        value: dict[str, Any] = {"leaf": True}
        for _ in range(generate["deep_input"]):
            value = {"d": value}
        return {"o": value}
    return case["given"]


@pytest.mark.parametrize("case", INPUTS, ids=ids(INPUTS))
def test_run_inputs(case, tmp_path):
    try:
        if "inputs_file" in case:
            path = tmp_path / "inputs.json"
            path.write_bytes(content({"text": case["inputs_file"]}))
            read_inputs_file(str(path))
        else:
            declared = {k: InputSpec.model_validate(v) for k, v in case["declared"].items()}
            resolve_inputs(declared, given_inputs(case))
    except InputsInvalid as exc:
        assert_outcome(case, accepted=False, message="; ".join(exc.problems))
    except Exception as exc:  # the command's CommandError
        assert_outcome(case, accepted=False, message=str(exc))
    else:
        assert_outcome(case, accepted=True, message="")


# --- admin posts ----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", EDITS, ids=ids(EDITS))
def test_admin_posts(case, reviewer, planner_llm):
    from tests.factories import pending_version

    version = pending_version()
    client = login(reviewer)
    text = content(case).decode("utf-8", errors="surrogatepass")
    before = Workflow.objects.count()
    if case["view"] == "edit":
        path = reverse("admin:workflows_workflow_edit", args=[version.pk])
        response = client.post(path, {"definition": text})
    else:
        path = reverse("admin:workflows_workflow_plan")
        response = client.post(path, {"goal": "a report", "sample_inputs": text})
    page = html.unescape(response.content.decode())
    if "refused" in case["expect"]:
        assert response.status_code == 200, case["id"]
        assert Workflow.objects.count() == before
        assert_outcome(case, accepted=False, message=page)
    else:
        assert response.status_code == 302, page
        assert Workflow.objects.count() == before + 1


# --- step results ---------------------------------------------------------------------


@pytest.fixture
def hostile_provider(settings):
    settings.FLOWPILOT_BUILTIN_PROVIDERS = [
        "tools.builtin.data.DataToolsProvider",
        HOSTILE_PROVIDER,
    ]
    caches.caches_clear()
    yield
    caches.caches_clear()


RAW_TOOL = """
name: raw
kind: http
description: Answer the body of a corpus case (loopback fake).
base_url: "{base}"
request: {{method: GET, url: "/raw/{{{{case}}}}"}}
inputs: {{type: object, properties: {{case: {{type: string}}}}, required: [case]}}
idempotent: false
timeout: 10
"""


@pytest.fixture
def raw_api(db):
    bodies: dict[str, FakeResponse] = {}
    fake = FakeAPI().start()
    fake.route("raw", "GET", r"/raw/(?P<case>[^/]+)", lambda request, m: bodies[m["case"]])
    for spec in load_tool_text(RAW_TOOL.format(base=fake.url), source="corpus"):
        tool_upsert(spec=spec, source="corpus")
    fake.bodies = bodies
    yield fake
    fake.stop()


def body_of(case: dict) -> FakeResponse:
    generate = case.get("generate") or {}
    if "body_bytes" in generate:
        return FakeResponse.json({"t": "x" * generate["body_bytes"]})
    kind = case.get("content_type", "application/json")
    return FakeResponse(200, case["body"].encode("utf-8", "surrogatepass"), {"Content-Type": kind})


def raw_flow(name: str, case_id: str) -> dict:
    return {
        "name": name,
        "steps": [
            {"id": "fetch", "kind": "tool", "tool": "raw", "input_mapping": {"case": case_id}},
            {
                "id": "copy",
                "kind": "transform",
                "expression": "{t: t}",
                "input_mapping": {"t": "fetch.t"},
            },
        ],
    }


def assert_nothing_unstorable_stored(run: Run) -> None:
    """No stored column of the run or its steps holds what a database cannot store."""
    run.refresh_from_db()
    for value in (run.inputs, run.outputs, run.error_summary):
        assert storage_problem(value) is None, value
    for row in run.step_results.order_by("step_id"):
        assert row.status not in {"running", "queued"}, row
        for value in (row.inputs, row.output, row.error, row.attempt_log):
            assert storage_problem(value) is None, (row.step_id, value)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("hostile_provider")
@pytest.mark.parametrize("case", RESPONSES, ids=ids(RESPONSES))
def test_step_results(case, raw_api):
    expect = case["expect"]
    name = case["id"].replace("-", "_")
    if "emit" in case:
        data = {"name": name, "steps": [{"id": "src", "kind": "tool", "tool": "emit",
                                         "input_mapping": {"kind": case["emit"]}}]}  # fmt: skip
        first = "src"
    else:
        raw_api.bodies[case["id"]] = body_of(case)
        data, first = raw_flow(name, case["id"]), "fetch"
    run = run_execute(run=run_create(workflow=import_flow(data), trigger="api", inputs={}))

    assert run.status == expect["status"], run.error_summary
    row = StepResult.objects.get(run=run, step_id=first)
    assert (row.error or {}).get("type") == expect["error"], row.error
    if "message" in expect:
        assert re.search(expect["message"], row.error["message"]), row.error["message"]
    if "stored" in expect:
        assert row.output == expect["stored"]
    if expect.get("read_back"):
        assert store_unescape(run.outputs) == {"src": HOSTILE_OUTPUTS[case["emit"]]()}
    if "copied" in expect:
        copy = StepResult.objects.get(run=run, step_id="copy")
        assert store_unescape(copy.output) == {"t": expect["copied"]}
    if expect.get("truncated"):
        assert row.output_truncated is True
        assert row.output["_truncated"] is True
    assert_nothing_unstorable_stored(run)


# --- faults ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", FAULTS, ids=ids(FAULTS))
def test_database_faults(case, raw_api, settings, monkeypatch):
    settings.FLOWPILOT_OUTCOME_WRITE_TRIES = 4
    expect = case["expect"]
    error = {"OperationalError": OperationalError, "InterfaceError": InterfaceError}[
        case.get("error", "OperationalError")
    ]
    module, name = (celery_settle, "_write_outcome")
    if case["driver"] == "local":
        module, name = (checkpoint, "mark_finished")
    real, failures = getattr(module, name), [case["failures"]]

    def flaky(*args, **kwargs):
        if failures[0] > 0:
            failures[0] -= 1
            raise error("the connection was cut")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    raw_api.bodies[case["id"]] = FakeResponse.json({"t": "done"})
    run = run_create(workflow=import_flow(raw_flow(case["id"], case["id"])), trigger="api")
    if case["driver"] == "local":
        run = run_execute(run=run)
    else:
        bus = Bus()
        run_start(run=run, publish=bus)
        if "raises" in expect:
            with pytest.raises(error):
                bus.drain()
        else:
            bus.drain()
    run.refresh_from_db()

    assert run.status == expect["status"], run.error_summary
    assert len(raw_api.requests("raw")) == expect["calls"]
    fetch = StepResult.objects.get(run=run, step_id="fetch")
    if "step" in expect:
        assert fetch.status == expect["step"]
        assert fetch.claim_token  # still claimed: the sweeper's rule applies from here
    else:
        assert [e["status"] for e in fetch.attempt_log] == ["succeeded"]
        assert store_unescape(run.outputs) == {"copy": {"t": "done"}}
