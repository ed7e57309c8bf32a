"""Per-step model settings, named LLM endpoints, the step timeout over LLM calls and
history trimming, through the engine against the loopback OpenAI-compatible server(s)."""

from __future__ import annotations

import json
import time

import environ
import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic import ValidationError

from config.llm_endpoints import read_llm_endpoints
from runs.engine.kinds.llm_history import HistoryTrim, fit_history, size
from runs.models import Run
from runs.services import run_create, run_execute
from tests.fakes.openai_server import FakeLLM, completion, tool_call
from tests.runs.test_llm_steps import (
    GeoProvider,
    client,  # noqa: F401 - fixture
    decision_flow,
    execute,
    llm,  # noqa: F401 - fixture
    llm_flow,
    result,
)
from tools.llm import (
    LLMClient,
    LLMEndpointUnknown,
    LLMRateLimited,
    LLMTimeout,
    endpoint_names,
    llm_endpoint,
)
from tools.llm.prices import Price
from tools.registry import ToolRegistry
from workflows.schema import LLMStep
from workflows.services import workflow_import
from workflows.validator import validate_workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def second():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def endpoints(settings, llm, second):  # noqa: F811 - fixture
    """`default` is `llm`; `local` is the second server, with its own key and model."""
    settings.OPENAI_BASE_URL = llm.base_url
    settings.OPENAI_API_KEY = "sk-default-key"
    settings.PLANNER_MODEL = "default-model"
    settings.FLOWPILOT_LLM_ENDPOINTS = {
        "local": {"base_url": second.base_url, "api_key": "sk-local-key", "model": "local-model"}
    }
    return settings


def run_stored(flow: dict, *, registry=None, inputs=None) -> Run:
    workflow, _ = workflow_import(data=flow)
    run = run_create(
        workflow=workflow,
        trigger="manual",
        inputs=inputs or {"city": "Oslo"},
        registry=registry or ToolRegistry([]),
    )
    return run_execute(run=run)


# --- per-step settings ------------------------------------------------------------------


def test_per_step_settings_reach_the_request(llm, client):  # noqa: F811
    llm.reply("ok")

    run = execute(
        llm_flow(tools=[], temperature=0.2, max_output_tokens=300, seed=7, model="vendor/m"),
        client=client,
        registry=ToolRegistry([]),
        inputs={"city": "Oslo"},
    )

    assert run.status == "succeeded", run.error_summary
    body = llm.requests[0].body
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.2, 300, 7)
    assert body["model"] == "vendor/m"


def test_a_step_without_settings_sends_none_of_them(llm, client):  # noqa: F811
    llm.reply("ok")
    execute(llm_flow(tools=[]), client=client, registry=ToolRegistry([]), inputs={"city": "x"})
    assert not {"temperature", "max_tokens", "seed"} & set(llm.requests[0].body)


def test_an_llm_decision_sends_its_settings(llm, client):  # noqa: F811
    flow = decision_flow()
    flow["steps"][2].update(temperature=0, seed=42, max_output_tokens=50)
    llm.reply_json({"branch": "museum", "reason": "Cold."})

    run = execute(
        flow, client=client, registry=ToolRegistry([], [GeoProvider()]), inputs={"city": "Oslo"}
    )

    assert run.status == "succeeded", run.error_summary
    body = llm.requests[0].body
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0, 42, 50)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1),
        ("temperature", 2.5),
        ("max_output_tokens", 0),
        ("seed", -1),
        ("seed", 2**40),
        ("endpoint", "Not A Name"),
        ("model", ""),
        ("context_budget_chars", 10),
    ],
)
def test_out_of_range_settings_are_schema_errors(field, value):
    report = validate_workflow(llm_flow(tools=[], **{field: value}), registry=ToolRegistry([]))
    assert not report.ok
    assert any(i.code == "schema_invalid" and field in i.path for i in report.issues), [
        (i.path, i.message) for i in report.issues
    ]
    with pytest.raises(ValidationError):
        LLMStep(id="a", prompt="p", **{field: value})


# --- named endpoints ------------------------------------------------------------------------


def test_the_named_endpoint_is_chosen_per_step(endpoints, llm, second):  # noqa: F811
    flow = llm_flow(tools=[])
    flow["steps"].append(
        {
            "id": "local_ask",
            "kind": "llm",
            "endpoint": "local",
            "prompt": "Again for {{city}}",
            "input_mapping": {"city": "$input.city"},
        }
    )
    llm.reply("from the default endpoint")
    second.reply("from the local endpoint")

    run = run_stored(flow)

    assert run.status == "succeeded", run.error_summary
    assert [r.messages[1]["content"] for r in llm.requests] == ["What is the weather in Oslo?"]
    assert [r.messages[1]["content"] for r in second.requests] == ["Again for Oslo"]
    assert llm.requests[0].headers["authorization"] == "Bearer sk-default-key"
    assert second.requests[0].headers["authorization"] == "Bearer sk-local-key"
    assert llm.requests[0].body["model"] == "default-model"
    assert second.requests[0].body["model"] == "local-model"
    local = result(run, "local_ask").output
    assert local["result"] == "from the local endpoint"
    assert local["usage"]["per_call"][0]["endpoint"] == "local"
    stored = json.dumps([r.output for r in run.step_results.all()])
    assert "sk-local-key" not in stored
    assert "sk-default-key" not in stored


def test_only_named_endpoints_build_no_default_client(endpoints, second):
    flow = llm_flow(tools=[], endpoint="local")
    second.reply("only local")
    run = run_stored(flow)
    assert run.status == "succeeded", run.error_summary
    assert result(run, "ask").output["result"] == "only local"


def test_an_unknown_endpoint_is_a_validation_error(endpoints):
    report = validate_workflow(llm_flow(tools=[], endpoint="locl"), registry=ToolRegistry([]))
    issue = next(i for i in report.issues if i.code == "endpoint_unknown")
    assert issue.path == "steps[0].endpoint"
    assert "`locl`" in issue.message
    assert "did you mean `local`?" in issue.message
    flow = decision_flow()
    flow["steps"][2]["endpoint"] = "nowhere"
    report = validate_workflow(flow, registry=ToolRegistry([], [GeoProvider()]))
    assert [i.path for i in report.issues if i.code == "endpoint_unknown"] == ["steps[2].endpoint"]


def test_llm_endpoint_lookup(endpoints, llm, second):  # noqa: F811
    assert endpoint_names() == ["default", "local"]
    assert llm_endpoint(None).base_url == llm.base_url
    assert llm_endpoint("default").model == "default-model"
    local = llm_endpoint("local")
    assert (local.base_url, local.model) == (second.base_url, "local-model")
    assert "sk-local-key" not in repr(local)
    with pytest.raises(LLMEndpointUnknown, match="`elsewhere` is not configured"):
        llm_endpoint("elsewhere")
    endpoints.FLOWPILOT_LLM_ENDPOINTS = {"bare": {"base_url": second.base_url}}
    assert llm_endpoint("bare").model == "default-model"
    with LLMClient.from_settings(endpoint="bare") as c:
        assert (c.endpoint, c.base_url) == ("bare", second.base_url)


def _env(**values):
    return environ.Env(), values


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"FLOWPILOT_LLM_ENDPOINTS": "Local"}, "no endpoint name"),
        ({"FLOWPILOT_LLM_ENDPOINTS": "default"}, "reserved"),
        ({"FLOWPILOT_LLM_ENDPOINTS": "a,a", "FLOWPILOT_LLM_A_BASE_URL": "http://x"}, "twice"),
        ({"FLOWPILOT_LLM_ENDPOINTS": "local"}, "FLOWPILOT_LLM_LOCAL_BASE_URL is not set"),
        (
            {
                "FLOWPILOT_LLM_ENDPOINTS": "local",
                "FLOWPILOT_LLM_LOCAL_BASE_URL": "http://x",
                "FLOWPILOT_LLM_LOCAL_PRICES": '{"m": [1, -2]}',
            },
            r"FLOWPILOT_LLM_LOCAL_PRICES: `m`: the output price -2 must be between 0",
        ),
    ],
)
def test_endpoint_environment_mistakes_stop_start_up(monkeypatch, values, words):
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=words):
        read_llm_endpoints(environ.Env())


def test_endpoints_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("FLOWPILOT_LLM_ENDPOINTS", "local, hosted-eu")
    monkeypatch.setenv("FLOWPILOT_LLM_LOCAL_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("FLOWPILOT_LLM_HOSTED_EU_BASE_URL", "https://llm.example/v1")
    monkeypatch.setenv("FLOWPILOT_LLM_HOSTED_EU_API_KEY", "sk-eu")
    monkeypatch.setenv("FLOWPILOT_LLM_HOSTED_EU_MODEL", "big")
    monkeypatch.setenv("FLOWPILOT_LLM_LOCAL_PRICES", '{"qwen2.5:14b": [0, 0]}')
    assert read_llm_endpoints(environ.Env()) == {
        "local": {
            "base_url": "http://127.0.0.1:11434/v1",
            "api_key": "",
            "model": "",
            "prices": {"qwen2.5:14b": Price(0, 0)},
        },
        "hosted-eu": {
            "base_url": "https://llm.example/v1",
            "api_key": "sk-eu",
            "model": "big",
            "prices": {},
        },
    }
    monkeypatch.delenv("FLOWPILOT_LLM_ENDPOINTS")
    assert read_llm_endpoints(environ.Env()) == {}


# --- the step timeout bounds its LLM calls ---------------------------------------------------


def test_the_step_timeout_bounds_a_slow_model_call(llm, client):  # noqa: F811
    def slow(request):
        time.sleep(3)
        return completion("too late")

    llm.reply(handler=slow)

    started = time.monotonic()
    run = execute(
        llm_flow(tools=[], timeout=0.5),
        client=client,
        registry=ToolRegistry([]),
        inputs={"city": "Oslo"},
    )

    assert time.monotonic() - started < 2.5  # the model would take 3 s
    assert run.status == "failed"
    error = result(run, "ask").error
    assert error["type"] in {"llm_timeout", "step_timeout"}, error


def test_no_retry_starts_past_the_deadline(llm):  # noqa: F811
    llm.fail(429, headers={"Retry-After": "5"})
    retrying = LLMClient(llm.base_url, "k", "m", 5.0, 3, sleep=lambda s: None)
    with retrying as c, pytest.raises(LLMRateLimited) as caught:
        c.chat([{"role": "user", "content": "hi"}], deadline=time.monotonic() + 2)
    assert len(caught.value.attempts) == 1
    with LLMClient(llm.base_url, "k", "m", 5.0, 0) as c, pytest.raises(LLMTimeout):
        c.chat([{"role": "user", "content": "hi"}], deadline=time.monotonic() - 1)


# --- history that fits -------------------------------------------------------------------------


class BulkyProvider(GeoProvider):
    """`lookup_city` answers with a large document (a page of search results, say)."""

    def lookup(self, arguments, ctx):
        super().lookup(arguments, ctx)
        return {"lat": 59.91, "lon": 10.75, "notes": "x" * 6000}


def test_a_long_tool_loop_trims_its_history_instead_of_failing(llm, client):  # noqa: F811
    turns = 20
    for n in range(turns):
        llm.reply(tool_calls=[tool_call("lookup_city", {"city": f"c{n}"}, call_id=f"c{n}")])
    llm.reply("done")
    provider = BulkyProvider()

    run = execute(
        llm_flow(max_turns=25, context_budget_chars=8_000),
        client=client,
        registry=ToolRegistry([], [provider]),
        inputs={"city": "Oslo"},
    )

    assert run.status == "succeeded", run.error_summary
    output = result(run, "ask").output
    trimmed = output["history_trimmed"]
    assert trimmed["budget_chars"] == 8_000
    assert trimmed["truncated"] >= 1, trimmed
    assert trimmed["dropped"] >= 1, trimmed
    assert trimmed["largest_chars"] > 100_000
    sizes = [len(r.raw) for r in llm.requests]
    # Every request's messages fit (the body adds the tools and model around them).
    for request in llm.requests:
        assert size(request.messages) <= 8_000
    assert max(sizes) < 12_000
    last = llm.requests[-1].messages
    assert last[0]["role"] == "system"
    assert last[1]["content"] == "What is the weather in Oslo?"
    assert "left out to fit the context budget" in last[2]["content"]
    assert last[-1]["role"] == "tool"
    assert last[-1]["tool_call_id"] == f"c{turns - 1}"
    assert "x" * 6000 in last[-1]["content"]  # the latest result is whole
    # Every tool call in what was sent still has its answer.
    calls = {c["id"] for m in last if m.get("tool_calls") for c in m["tool_calls"]}
    answered = {m["tool_call_id"] for m in last if m["role"] == "tool"}
    assert calls == answered
    # The recorded conversation keeps every message in full.
    tool_messages = [m for m in output["conversation"] if m["role"] == "tool"]
    assert len(tool_messages) == turns
    assert all("x" * 6000 in m["content"] for m in tool_messages)


def test_a_short_loop_is_sent_whole(llm, client):  # noqa: F811
    llm.reply(tool_calls=[tool_call("lookup_city", {"city": "Oslo"})]).reply("done")
    run = execute(
        llm_flow(),
        client=client,
        registry=ToolRegistry([], [GeoProvider()]),
        inputs={"city": "Oslo"},
    )
    trimmed = result(run, "ask").output["history_trimmed"]
    assert (trimmed["truncated"], trimmed["dropped"]) == (0, 0)
    assert trimmed["budget_chars"] == 200_000


def _turn(n: int, chars: int) -> list[dict]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [{"id": f"t{n}"}]},
        {"role": "tool", "tool_call_id": f"t{n}", "content": "y" * chars},
    ]


def test_truncation_comes_before_dropping():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    messages += _turn(0, 3000) + _turn(1, 3000) + _turn(2, 3000)
    trim = HistoryTrim(budget_chars=5000)

    sent = fit_history(messages, trim)

    assert (trim.truncated, trim.dropped) == (2, 0)
    assert size(sent) <= 5000
    assert sent[-1] is messages[-1]
    assert fit_history(messages, trim) == sent  # fitting again counts nothing twice
    assert (trim.truncated, trim.dropped) == (2, 0)


def test_a_latest_turn_too_large_is_truncated_too():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    messages += _turn(0, 3000) + _turn(1, 9000)
    trim = HistoryTrim(budget_chars=2500)

    sent = fit_history(messages, trim)

    assert trim.dropped == 1
    assert trim.truncated == 2
    assert size(sent) <= 2500
    assert "9000 characters in all" in sent[-1]["content"]
