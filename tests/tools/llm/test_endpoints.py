"""tools.llm.endpoints: which OpenAI-compatible server, model and key a step or the
planner uses — the default from the settings, named ones declared, unknown ones refused."""

from __future__ import annotations

import pytest

from tools.llm import LLMClient
from tools.llm.endpoints import (
    PUBLIC_BASE_URL,
    LLMEndpointUnknown,
    LLMNotConfigured,
    endpoint_names,
    llm_endpoint,
    llm_endpoint_ready,
)


@pytest.fixture
def configured(settings):
    settings.OPENAI_BASE_URL = "http://default.test/v1"
    settings.OPENAI_API_KEY = "sk-default"
    settings.PLANNER_MODEL = "big"
    settings.FLOWPILOT_LLM_ENDPOINTS = {
        "local": {"base_url": "http://127.0.0.1:9/v1", "model": "small", "api_key": "sk-l"},
        "bare": {"base_url": "http://bare.test/v1"},
    }
    return settings


def test_no_name_and_default_are_the_settings_endpoint(configured):
    for name in (None, "", "default"):
        endpoint = llm_endpoint(name)
        assert (endpoint.name, endpoint.base_url, endpoint.model, endpoint.api_key) == (
            "default", "http://default.test/v1", "big", "sk-default",
        )  # fmt: skip


def test_a_named_endpoint_falls_back_to_the_planner_model_and_no_key(configured):
    assert llm_endpoint("local").model == "small"
    bare = llm_endpoint("bare")
    assert (bare.model, bare.api_key) == ("big", "")


def test_an_unknown_name_is_refused_listing_the_known_ones(configured):
    assert endpoint_names() == ["default", "local", "bare"]
    with pytest.raises(
        LLMEndpointUnknown, match=r"`cloud` is not configured \(known: default, local, bare\)"
    ):
        llm_endpoint("cloud")


def test_the_key_never_shows_in_a_repr(configured):
    assert "sk-l" not in repr(llm_endpoint("local"))


def test_the_public_default_without_a_key_is_not_configured_and_says_what_to_set(settings):
    settings.OPENAI_BASE_URL = PUBLIC_BASE_URL
    settings.OPENAI_API_KEY = ""
    with pytest.raises(LLMNotConfigured) as caught:
        llm_endpoint_ready(None)
    for needed in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FLOWPILOT_PLANNER_ENDPOINT=local"):
        assert needed in caught.value.message
    with pytest.raises(LLMNotConfigured):
        LLMClient.from_settings()  # no client: nothing can be sent


def test_a_key_an_explicit_server_or_a_named_endpoint_may_be_used(settings):
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = PUBLIC_BASE_URL, "sk-real"
    assert llm_endpoint_ready(None).api_key == "sk-real"
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = "http://127.0.0.1:11434/v1", ""
    assert llm_endpoint_ready("default").base_url == "http://127.0.0.1:11434/v1"
    settings.OPENAI_BASE_URL = PUBLIC_BASE_URL
    settings.FLOWPILOT_LLM_ENDPOINTS = {"local": {"base_url": "http://127.0.0.1:9/v1"}}
    assert llm_endpoint_ready("local").api_key == ""
