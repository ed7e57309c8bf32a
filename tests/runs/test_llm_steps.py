"""`llm` steps and LLM decisions at run time, through the engine, against a real fake LLM.

Named after the feature, not a module: the engine's llm kind and tools/llm work together here.

Runs are stored and executed with the real services; the model is the
OpenAI-compatible server on loopback (tests/fakes/openai_server.py), called through
the real openai SDK; tools are an in-process provider and an http tool behind the
recording fake API.
"""

from __future__ import annotations

import json
import random
import threading

import pytest

from runs.engine.build import build_run_context
from runs.models import Run, StepResult
from runs.services import run_create, run_execute
from tests.fakes import FakeAPI, FakeResponse
from tests.fakes.openai_server import FakeLLM, tool_call
from tools.builtin.base import BuiltinProvider, BuiltinTool
from tools.llm import LLMClient
from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.services import workflow_import, workflow_spec

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-step-secret-9f8e7d6c5b4a"


class GeoProvider(BuiltinProvider):
    """Two offline tools; remembers what it was called with."""

    tools = (
        BuiltinTool(
            name="lookup_city",
            description="Latitude and longitude of a city.",
            input_schema={
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            outputs=("lat", "lon"),
            handler="lookup",
        ),
        BuiltinTool(
            name="forecast",
            description="Temperature at a latitude/longitude.",
            input_schema={
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"],
            },
            outputs=("temperature",),
            handler="forecast",
        ),
    )

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self._lock = threading.Lock()

    def lookup(self, arguments, ctx):
        with self._lock:
            self.calls.append(("lookup_city", arguments))
        return {"lat": 59.91, "lon": 10.75}

    def forecast(self, arguments, ctx):
        with self._lock:
            self.calls.append(("forecast", arguments))
        return {"temperature": 21.5}


@pytest.fixture
def llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def client(llm):
    with LLMClient(llm.base_url, "sk-test", "step-model", 5.0, 2, sleep=lambda s: None) as c:
        yield c


@pytest.fixture
def provider():
    return GeoProvider()


@pytest.fixture
def echo_api():
    """An API that (carelessly) echoes the credential it received."""
    with FakeAPI() as api:

        def echo(request, match):
            auth = request.headers.get("authorization", "")
            return FakeResponse.json({"auth": auth, "message": f"hello, {auth}"})

        api.route("echo", "GET", r"/echo(\?.*)?", echo)
        yield api


def echo_spec(api: FakeAPI) -> ToolSpec:
    return ToolSpec.model_validate(
        {
            "name": "echo",
            "kind": "http",
            "description": "Say hello.",
            "input_schema": {"type": "object", "properties": {}},
            "http": {
                "base_url": api.url,
                "request": {"url": "/echo"},
                "auth": {"type": "bearer", "token": "{{env.LLM_STEP_TOKEN}}"},
                "response_extract": {"auth": "auth", "message": "message"},
            },
        }
    )


def execute(flow: dict, *, client, registry, inputs=None, env=None) -> Run:
    workflow, _ = workflow_import(data=flow)
    run = run_create(workflow=workflow, trigger="manual", inputs=inputs or {}, registry=registry)
    ctx = build_run_context(
        run_id=run.pk,
        run_uuid=str(run.uuid),
        spec=workflow_spec(workflow),
        registry=registry,
        env=env or {},
        llm=client,
        sleep=lambda s: None,
        rand=random.Random(0),
    )
    with ctx:
        return run_execute(run=run, context=ctx)


def result(run: Run, step_id: str) -> StepResult:
    return run.step_results.get(step_id=step_id)


def llm_flow(**step) -> dict:
    return {
        "name": "ask",
        "inputs": {"city": {"type": "string"}},
        "steps": [
            {
                "id": "ask",
                "kind": "llm",
                "prompt": "What is the weather in {{city}}?",
                "input_mapping": {"city": "$input.city"},
                "tools": ["lookup_city", "forecast"],
                **step,
            }
        ],
    }


# --- the tool-calling loop ----------------------------------------------------------------


def test_two_tool_calls_then_a_final_answer(llm, client, provider):
    llm.reply(tool_calls=[tool_call("lookup_city", {"city": "Oslo"}, call_id="c1")])
    llm.reply(tool_calls=[tool_call("forecast", {"lat": 59.91, "lon": 10.75}, call_id="c2")])
    llm.reply("It is 21.5 °C in Oslo.")

    run = execute(
        llm_flow(), client=client, registry=ToolRegistry([], [provider]), inputs={"city": "Oslo"}
    )

    assert run.status == "succeeded", run.error_summary
    step = result(run, "ask")
    output = step.output
    assert output["result"] == "It is 21.5 °C in Oslo."
    assert [m["role"] for m in output["conversation"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert output["conversation"][1]["content"] == "What is the weather in Oslo?"
    assert output["conversation"][3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": json.dumps({"lat": 59.91, "lon": 10.75}),
    }
    assert output["usage"]["calls"] == 3
    assert output["usage"]["tool_calls"] == 2
    assert output["usage"]["total_tokens"] == 45
    assert [c["http_tries"] for c in output["usage"]["per_call"]] == [1, 1, 1]
    assert provider.calls == [
        ("lookup_city", {"city": "Oslo"}),
        ("forecast", {"lat": 59.91, "lon": 10.75}),
    ]
    first, second, third = llm.requests
    assert [t["function"]["name"] for t in first.body["tools"]] == ["forecast", "lookup_city"]
    assert first.body["tools"][1]["function"]["parameters"]["required"] == ["city"]
    assert first.body["model"] == "step-model"
    assert "response_format" not in first.body
    # Append-only: each request starts with everything the previous one sent.
    assert second.messages[: len(first.messages)] == first.messages
    assert third.messages[: len(second.messages)] == second.messages
    assert third.messages == output["conversation"][:-1]


class KeyRecordingProvider(GeoProvider):
    """Records the Idempotency-Key each call was given."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str | None] = []

    def lookup(self, arguments, ctx):
        self.keys.append(ctx.idempotency_key)
        return super().lookup(arguments, ctx)

    def forecast(self, arguments, ctx):
        self.keys.append(ctx.idempotency_key)
        return super().forecast(arguments, ctx)


def test_each_tool_call_of_an_llm_step_gets_its_own_idempotency_key(llm, client):
    provider = KeyRecordingProvider()
    llm.reply(tool_calls=[tool_call("lookup_city", {"city": "Oslo"}, call_id="c1")])
    llm.reply(tool_calls=[tool_call("lookup_city", {"city": "Bergen"}, call_id="c2")])
    llm.reply("Done.")

    run = execute(
        llm_flow(), client=client, registry=ToolRegistry([], [provider]), inputs={"city": "Oslo"}
    )

    assert run.status == "succeeded", run.error_summary
    assert provider.keys == [f"{run.uuid}:ask:1", f"{run.uuid}:ask:2"]


def test_a_call_to_a_tool_outside_the_step_allowlist_is_refused(llm, client, provider):
    llm.reply(tool_calls=[tool_call("forecast", {"lat": 1, "lon": 2}, call_id="x")])
    llm.reply("I cannot check the forecast.")
    flow = llm_flow(tools=["lookup_city"])
    flow["tools"] = ["lookup_city", "forecast"]

    run = execute(
        flow, client=client, registry=ToolRegistry([], [provider]), inputs={"city": "Oslo"}
    )

    assert run.status == "succeeded", run.error_summary
    assert provider.calls == []
    refusal = json.loads(result(run, "ask").output["conversation"][3]["content"])
    assert refusal["error"]["type"] == "tool_not_allowed"
    assert "allowed: lookup_city" in refusal["error"]["message"]
    assert [t["function"]["name"] for t in llm.requests[0].body["tools"]] == ["lookup_city"]


def test_bad_tool_arguments_are_answered_with_the_error(llm, client, provider):
    llm.reply(tool_calls=[tool_call("lookup_city", {"town": "Oslo"}, call_id="c1")])
    llm.reply("Sorry.")

    run = execute(
        llm_flow(), client=client, registry=ToolRegistry([], [provider]), inputs={"city": "Oslo"}
    )

    assert run.status == "succeeded"
    answer = json.loads(result(run, "ask").output["conversation"][3]["content"])
    assert answer["error"]["type"] == "tool_input_invalid"
    assert "'city' is a required property" in answer["error"]["message"]
    assert provider.calls == []


def test_max_turns_stops_a_model_that_keeps_calling_tools(llm, client, provider):
    for _ in range(3):
        llm.reply(tool_calls=[tool_call("lookup_city", {"city": "Oslo"})])

    run = execute(
        llm_flow(max_turns=2),
        client=client,
        registry=ToolRegistry([], [provider]),
        inputs={"city": "Oslo"},
    )

    assert run.status == "failed"
    error = result(run, "ask").error
    assert error["type"] == "max_turns_exceeded"
    assert "2 turn(s)" in error["message"]
    assert error["retryable"] is False
    assert len(llm.requests) == 2
    assert len(provider.calls) == 2


# --- budgets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "requests", "tool_calls", "words"),
    [
        ({"max_tokens": 20}, 2, 1, "30 tokens, over its budget of 20"),
        ({"max_calls": 1}, 1, 1, "allows 1 (max_calls)"),
        ({"max_tool_calls": 1}, 1, 1, "allows 1 tool call(s)"),
    ],
)
def test_budget_exceeded_is_fatal(llm, client, provider, budget, requests, tool_calls, words):
    llm.reply(
        tool_calls=[
            tool_call("lookup_city", {"city": "Oslo"}, call_id="a"),
            tool_call("lookup_city", {"city": "Bergen"}, call_id="b"),
        ]
        if "max_tool_calls" in budget
        else [tool_call("lookup_city", {"city": "Oslo"})]
    )
    llm.reply(tool_calls=[tool_call("forecast", {"lat": 1, "lon": 2})])
    llm.reply("done")

    run = execute(
        llm_flow(budget=budget, retry={"max_attempts": 3, "initial_delay": 0}),
        client=client,
        registry=ToolRegistry([], [provider]),
        inputs={"city": "Oslo"},
    )

    assert run.status == "failed"
    step = result(run, "ask")
    assert step.error["type"] == "budget_exceeded"
    assert step.error["retryable"] is False
    assert step.attempts == 1  # fatal: the retry policy does not apply
    assert words in step.error["message"]
    assert len(llm.requests) == requests
    assert len(provider.calls) == tool_calls


# --- structured output ----------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"enum": ["bug", "feature", "question"]},
        "confidence": {"type": "number"},
    },
    "required": ["label", "confidence"],
    "additionalProperties": False,
}


def classify_flow() -> dict:
    return {
        "name": "classify",
        "inputs": {"text": {"type": "string"}},
        "steps": [
            {
                "id": "classify",
                "kind": "llm",
                "prompt": "Classify this issue: {{text}}",
                "input_mapping": {"text": "$input.text"},
                "output_schema": SCHEMA,
            }
        ],
        "outputs": {"label": "classify.result.label"},
    }


def test_structured_output_that_fits_the_schema(llm, client):
    llm.reply_json({"label": "bug", "confidence": 0.9})

    run = execute(
        classify_flow(), client=client, registry=ToolRegistry([]), inputs={"text": "It crashes"}
    )

    assert run.status == "succeeded", run.error_summary
    assert result(run, "classify").output["result"] == {"label": "bug", "confidence": 0.9}
    assert run.outputs == {"label": "bug"}
    fmt = llm.requests[0].body["response_format"]
    assert fmt == {
        "type": "json_schema",
        "json_schema": {"name": "classify_output", "schema": SCHEMA, "strict": False},
    }
    assert "tools" not in llm.requests[0].body


def test_structured_output_in_a_fence_is_accepted(llm, client):
    llm.reply('```json\n{"label": "question", "confidence": 0.4}\n```')

    run = execute(
        classify_flow(), client=client, registry=ToolRegistry([]), inputs={"text": "How?"}
    )

    assert result(run, "classify").output["result"]["label"] == "question"


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        ({"label": "bug", "confidence": "high"}, "$.confidence: 'high' is not of type 'number'"),
        ({"label": "rant", "confidence": 1}, "$.label: 'rant' is not one of"),
        ({"label": "bug"}, "'confidence' is a required property"),
        ("I think it is a bug.", "not valid JSON"),
    ],
)
def test_structured_output_that_does_not_fit_fails_the_step(llm, client, reply, words):
    llm.reply(reply if isinstance(reply, str) else json.dumps(reply))

    run = execute(
        classify_flow(), client=client, registry=ToolRegistry([]), inputs={"text": "It crashes"}
    )

    assert run.status == "failed"
    error = result(run, "classify").error
    assert error["type"] == "llm_output_invalid"
    assert error["retryable"] is False
    assert words in error["message"]
    assert "step `classify`" in error["message"]


# --- transport ---------------------------------------------------------------------------


def test_a_429_is_retried_by_the_client_and_recorded(llm, client):
    llm.fail(429, headers={"Retry-After": "0"})
    llm.reply("ok")

    run = execute(
        llm_flow(tools=[]), client=client, registry=ToolRegistry([]), inputs={"city": "Oslo"}
    )

    assert run.status == "succeeded"
    assert result(run, "ask").output["usage"]["per_call"][0]["http_tries"] == 2


def test_an_unavailable_llm_is_a_retryable_step_error(llm, client):
    llm.fail(503, times=6)

    run = execute(
        llm_flow(tools=[], retry={"max_attempts": 2, "initial_delay": 0}),
        client=client,
        registry=ToolRegistry([]),
        inputs={"city": "Oslo"},
    )

    step = result(run, "ask")
    assert step.error["type"] == "llm_unavailable"
    assert step.error["retryable"] is True
    assert step.attempts == 2
    assert len(llm.requests) == 6  # 2 step attempts x 3 HTTP tries


def test_run_execute_builds_the_llm_client_from_settings(llm, settings):
    settings.OPENAI_BASE_URL = llm.base_url
    settings.OPENAI_API_KEY = "sk-settings"
    settings.PLANNER_MODEL = "settings-model"
    llm.reply("fine")
    workflow, _ = workflow_import(data=llm_flow(tools=[]))
    run = run_create(
        workflow=workflow, trigger="manual", inputs={"city": "Oslo"}, registry=ToolRegistry([])
    )

    run = run_execute(run=run)

    assert run.status == "succeeded", run.error_summary
    assert llm.requests[0].body["model"] == "settings-model"
    assert llm.requests[0].headers["authorization"] == "Bearer sk-settings"


def test_without_an_llm_the_step_fails_saying_what_to_set_and_sends_nothing(no_llm):
    workflow, _ = workflow_import(data=llm_flow(tools=[]))
    run = run_create(
        workflow=workflow, trigger="manual", inputs={"city": "Oslo"}, registry=ToolRegistry([])
    )

    run = run_execute(run=run)

    assert run.status == "failed"
    step = result(run, "ask")
    assert step.error["type"] == "llm_not_configured"
    assert "set OPENAI_API_KEY" in step.error["message"]
    assert step.error["retryable"] is False


def test_the_step_model_overrides_the_client_default(llm, client):
    llm.reply("ok")

    execute(
        llm_flow(tools=[], model="vendor/special"),
        client=client,
        registry=ToolRegistry([]),
        inputs={"city": "Oslo"},
    )

    assert llm.requests[0].body["model"] == "vendor/special"


# --- LLM decisions ----------------------------------------------------------------------------


def decision_flow() -> dict:
    return {
        "name": "route",
        "inputs": {"city": {"type": "string"}},
        "steps": [
            {
                "id": "geo",
                "kind": "tool",
                "tool": "lookup_city",
                "input_mapping": {"city": "$input.city"},
            },
            {
                "id": "weather",
                "kind": "tool",
                "tool": "forecast",
                "input_mapping": {"lat": "geo.lat", "lon": "geo.lon"},
            },
            {
                "id": "pick",
                "kind": "decision",
                "branches": ["picnic", "museum"],
                "decision_prompt": "It is {{temp}} °C in {{city}}. Picnic or museum?",
                "input_mapping": {"temp": "weather.temperature", "city": "$input.city"},
            },
            {
                "id": "park",
                "kind": "tool",
                "tool": "lookup_city",
                "input_mapping": {"city": "Frogner park"},
            },
            {
                "id": "indoors",
                "kind": "tool",
                "tool": "lookup_city",
                "input_mapping": {"city": "Munch museum"},
            },
        ],
        "edges": [
            {"from": "pick", "to": "park", "when": "picnic"},
            {"from": "pick", "to": "indoors", "when": "museum"},
        ],
    }


def test_an_llm_decision_takes_the_branch_the_model_chose(llm, client, provider):
    llm.reply_json({"branch": "picnic", "reason": "It is warm."})

    run = execute(
        decision_flow(),
        client=client,
        registry=ToolRegistry([], [provider]),
        inputs={"city": "Oslo"},
    )

    assert run.status == "succeeded", run.error_summary
    pick = result(run, "pick")
    assert pick.output["branch"] == "picnic"
    assert pick.output["reason"] == "It is warm."
    assert pick.output["usage"]["calls"] == 1
    assert result(run, "park").status == "succeeded"
    assert result(run, "indoors").status == "skipped"
    (request,) = llm.requests
    fmt = request.body["response_format"]
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["properties"]["branch"]["enum"] == ["picnic", "museum"]
    question = request.messages[1]["content"]
    assert question.startswith("It is 21.5 °C in Oslo. Picnic or museum?")
    assert '"temp": 21.5' in question
    assert "picnic, museum" in question


def test_an_llm_decision_outside_the_branches_fails(llm, client, provider):
    llm.reply_json({"branch": "beach", "reason": "Why not."})

    run = execute(
        decision_flow(),
        client=client,
        registry=ToolRegistry([], [provider]),
        inputs={"city": "Oslo"},
    )

    assert run.status == "failed"
    error = result(run, "pick").error
    assert error["type"] == "llm_output_invalid"
    assert "'beach', which is not one of its branches (picnic, museum)" in error["message"]
    assert result(run, "park").status == "skipped"


# --- secrets ------------------------------------------------------------------------------------


def test_no_env_secret_reaches_the_llm_from_steps_or_tools(llm, client, provider, echo_api):
    flow = {
        "name": "secretive",
        "steps": [
            {"id": "hello", "kind": "tool", "tool": "echo"},
            {
                "id": "summarize",
                "kind": "llm",
                "prompt": "Summarize {{greeting}} and {{all}}",
                "input_mapping": {"greeting": "hello.message", "all": "$step.hello"},
                "tools": ["echo"],
            },
            {
                "id": "pick",
                "kind": "decision",
                "branches": ["yes", "no"],
                "decision_prompt": "Was this friendly? {{summary}}",
                "input_mapping": {"summary": "summarize.result", "raw": "$step.hello"},
            },
            {
                "id": "yes_step",
                "kind": "tool",
                "tool": "lookup_city",
                "input_mapping": {"city": "Oslo"},
            },
            {
                "id": "no_step",
                "kind": "tool",
                "tool": "lookup_city",
                "input_mapping": {"city": "Bergen"},
            },
        ],
        "edges": [
            {"from": "pick", "to": "yes_step", "when": "yes"},
            {"from": "pick", "to": "no_step", "when": "no"},
        ],
    }
    llm.reply(tool_calls=[tool_call("echo", {}, call_id="e1")])
    llm.reply(f"The API said hello and leaked {SECRET}.")  # the model repeats what it saw
    llm.reply_json({"branch": "yes", "reason": "polite"})
    registry = ToolRegistry([echo_spec(echo_api)], [provider])

    run = execute(flow, client=client, registry=registry, env={"LLM_STEP_TOKEN": SECRET})

    assert run.status == "succeeded", run.error_summary
    assert [r.headers["authorization"] for r in echo_api.requests("echo")] == [
        f"Bearer {SECRET}",
        f"Bearer {SECRET}",
    ]
    assert len(llm.requests) == 3
    assert SECRET not in llm.all_text()
    assert "***" in llm.all_text()
    for row in run.step_results.all():
        stored = json.dumps([row.inputs, row.output, row.error, row.attempt_log])
        assert SECRET not in stored, row.step_id
    assert "Bearer ***" in result(run, "summarize").output["conversation"][1]["content"]
