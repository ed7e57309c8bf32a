"""tools.llm.client: the client against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import time

import pytest

import tools.llm
import tools.llm.client
from tests.fakes.openai_server import FakeLLM, completion, tool_call
from tools.errors import FlowpilotError
from tools.llm import (
    LLMAuthFailed,
    LLMClient,
    LLMError,
    LLMRateLimited,
    LLMReplyInvalid,
    LLMTimeout,
    LLMUnavailable,
    Usage,
)


@pytest.fixture
def llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def client(llm, sleeps):
    with LLMClient(llm.base_url, "sk-test", "test-model", 5.0, 2, sleep=sleeps.append) as c:
        yield c


def test_chat_returns_content_usage_and_raw(llm, client):
    llm.reply("hello", usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9})

    reply = client.chat([{"role": "user", "content": "hi"}])

    assert reply.content == "hello"
    assert reply.tool_calls == ()
    assert reply.usage == Usage(7, 2, 9)
    assert reply.raw["choices"][0]["message"]["content"] == "hello"
    assert reply.finish_reason == "stop"
    assert [a["status"] for a in reply.attempts] == [200]
    (request,) = llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "test-model"
    assert request.messages == [{"role": "user", "content": "hi"}]
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["x-stainless-retry-count"] == "0"


def test_tools_response_format_and_model_are_sent(llm, client):
    llm.reply(tool_calls=[tool_call("geocode", {"city": "Oslo"}, call_id="c1")])
    tools = [{"type": "function", "function": {"name": "geocode", "parameters": {}}}]
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}

    reply = client.chat(
        [{"role": "user", "content": "go"}],
        tools=tools,
        response_format=fmt,
        model="other",
        temperature=0,
    )

    body = llm.requests[0].body
    assert body["tools"] == tools
    assert body["response_format"] == fmt
    assert body["model"] == "other"
    assert body["temperature"] == 0
    (call,) = reply.tool_calls
    assert (call.id, call.name, call.parsed_arguments()) == ("c1", "geocode", {"city": "Oslo"})
    assert reply.message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "geocode", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }


def test_429_then_success_is_retried_and_recorded(llm, client, sleeps):
    llm.fail(429, message="slow down", headers={"Retry-After": "0.25"}).reply("ok")

    reply = client.chat([{"role": "user", "content": "hi"}])

    assert reply.content == "ok"
    assert [a["status"] for a in reply.attempts] == [429, 200]
    assert reply.attempts[0]["error"] == "llm_rate_limited"
    assert reply.attempts[0]["retry_in"] == 0.25
    assert sleeps == [0.25]
    assert [r.headers["x-stainless-retry-count"] for r in llm.requests] == ["0", "0"]
    assert [r.status for r in llm.requests] == [429, 200]


def test_5xx_until_retries_run_out_raises_unavailable(llm, client, sleeps):
    llm.fail(500, message="boom", times=3)

    with pytest.raises(LLMUnavailable) as caught:
        client.chat([{"role": "user", "content": "hi"}])

    error = caught.value
    assert isinstance(error, FlowpilotError)
    assert error.retryable is True
    assert error.status == 500
    assert "HTTP 500: boom" in error.message
    assert [a["status"] for a in error.attempts] == [500, 500, 500]
    assert len(sleeps) == 2
    assert len(llm.requests) == 3


def test_rate_limit_exhausted_is_typed(llm, sleeps):
    llm.fail(429, times=2)
    client = LLMClient(llm.base_url, "k", "m", 5.0, 1, sleep=sleeps.append)

    with pytest.raises(LLMRateLimited) as caught:
        client.chat([{"role": "user", "content": "hi"}])

    assert caught.value.retryable is True
    assert caught.value.as_dict()["status"] == 429
    assert len(caught.value.attempts) == 2


def test_400_is_fatal_and_not_retried(llm, client, sleeps):
    llm.fail(400, message="bad schema")

    with pytest.raises(LLMError) as caught:
        client.chat([{"role": "user", "content": "hi"}])

    assert type(caught.value) is LLMError
    assert caught.value.retryable is False
    assert "bad schema" in caught.value.message
    assert sleeps == []
    assert len(llm.requests) == 1


def test_401_is_auth_failed(llm, client):
    llm.fail(401, message="invalid key")

    with pytest.raises(LLMAuthFailed) as caught:
        client.chat([{"role": "user", "content": "hi"}])

    assert caught.value.retryable is False
    assert caught.value.code == "llm_auth_failed"


def test_timeout_is_retryable_llm_timeout(llm, sleeps):
    def slow(request):
        time.sleep(1.0)
        return completion("late")

    llm.reply(handler=slow)
    client = LLMClient(llm.base_url, "k", "m", 0.2, 0, sleep=sleeps.append)

    with pytest.raises(LLMTimeout) as caught:
        client.chat([{"role": "user", "content": "hi"}])

    assert caught.value.retryable is True


def test_unreachable_endpoint(sleeps):
    server = FakeLLM().start()
    url = server.base_url
    server.stop()
    client = LLMClient(url, "k", "m", 2.0, 1, sleep=sleeps.append)

    with pytest.raises(LLMUnavailable) as caught:
        client.chat([{"role": "user", "content": "hi"}])

    assert len(caught.value.attempts) == 2


def test_a_200_that_is_not_a_completion_is_reply_invalid(llm, client):
    llm.raw(200, b"<html>gateway</html>", {"Content-Type": "text/html"})

    with pytest.raises(LLMReplyInvalid):
        client.chat([{"role": "user", "content": "hi"}])


def test_a_completion_without_choices_is_reply_invalid(llm, client):
    doc = completion("x")
    doc["choices"] = []
    llm.raw(200, json.dumps(doc).encode(), {"Content-Type": "application/json"})

    with pytest.raises(LLMReplyInvalid, match="no choices"):
        client.chat([{"role": "user", "content": "hi"}])


def test_from_settings(settings, llm):
    settings.OPENAI_BASE_URL = llm.base_url
    settings.OPENAI_API_KEY = "sk-from-settings"
    settings.PLANNER_MODEL = "vendor/model-x"
    llm.reply("fine")

    client = LLMClient.from_settings()
    client.chat([{"role": "user", "content": "hi"}])

    assert client.model == "vendor/model-x"
    assert llm.requests[0].body["model"] == "vendor/model-x"
    assert llm.requests[0].headers["authorization"] == "Bearer sk-from-settings"
    assert LLMClient.from_settings(model="m2").model == "m2"


def test_no_module_level_client():
    for module in (tools.llm, tools.llm.client):
        assert not [v for v in vars(module).values() if isinstance(v, LLMClient)]


def test_tool_call_with_bad_arguments_is_reply_invalid(llm, client):
    llm.reply(tool_calls=[tool_call("geocode", "{not json"), tool_call("x", "[1]")])

    reply = client.chat([{"role": "user", "content": "hi"}])

    with pytest.raises(LLMReplyInvalid):
        reply.tool_calls[0].parsed_arguments()
    with pytest.raises(LLMReplyInvalid, match="not an object"):
        reply.tool_calls[1].parsed_arguments()
