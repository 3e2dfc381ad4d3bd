"""The Ollama client wrapper against the fake server: pinned options, streams, named failures."""

from __future__ import annotations

import logging

import pytest

from dq_agent.agent.client import ModelClient, ToolCall, normalise_host
from dq_agent.config import AgentConfig
from dq_agent.errors import ModelCallError, ModelUnavailableError
from tests.fake_ollama import (
    Die,
    ErrorMidStream,
    FakeOllama,
    Garbage,
    Hang,
    HttpError,
    Reply,
    ScriptItem,
    call,
    reply,
)

HELLO = [{"role": "user", "content": "hello"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "null_check",
        "description": "d",
        "parameters": {"type": "object", "properties": {}},
    },
}


def client(fake: FakeOllama, **settings: object) -> ModelClient:
    config = AgentConfig(host=fake.url, timeout_seconds=2.0)
    for key, value in settings.items():
        setattr(config, key, value)
    return ModelClient(config)


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:11434"),
        ("localhost:8080", "http://localhost:8080"),
        ("http://gpu-box:11434/", "http://gpu-box:11434"),
        ("https://ollama.example.com/api-proxy", "https://ollama.example.com:443/api-proxy"),
        ("http://[::1]:5000", "http://[::1]:5000"),
    ],
)
def test_hosts_are_normalised_like_the_ollama_client(host: str, url: str) -> None:
    assert normalise_host(host) == url


def test_an_unparseable_host_is_an_unavailable_model() -> None:
    with pytest.raises(ModelUnavailableError, match="not a valid URL"):
        normalise_host("http://host:port")


def test_preflight_reports_capabilities_and_context_length() -> None:
    with FakeOllama(context_length=4096) as fake, client(fake) as model:
        facts = model.preflight()
    assert facts.supports_tools is True
    assert facts.context_length == 4096
    assert facts.capabilities == ["completion", "tools"]
    assert [r.path for r in fake.requests] == ["/api/show"]


def test_preflight_without_tools_or_without_capabilities() -> None:
    with FakeOllama(tools_capability=False) as fake, client(fake) as model:
        assert model.preflight().supports_tools is False
    with FakeOllama(capabilities_known=False) as fake, client(fake) as model:
        assert model.preflight().supports_tools is None


def test_preflight_model_not_pulled() -> None:
    with (
        FakeOllama() as fake,
        client(fake, model="mistral") as model,
        pytest.raises(ModelUnavailableError) as raised,
    ):
        model.preflight()
    assert raised.value.kind == "not_pulled"
    assert raised.value.message == "model mistral is not pulled: run `ollama pull mistral`"


def test_preflight_server_down() -> None:
    fake = FakeOllama().start()
    fake.stop()
    with client(fake) as model, pytest.raises(ModelUnavailableError) as raised:
        model.preflight()
    assert raised.value.kind == "unreachable"
    assert "`ollama serve`" in raised.value.message


def test_chat_streams_content_and_tool_calls_with_pinned_options() -> None:
    script = [
        reply("Let me look at the nulls first, then the rest.", [call("null_check", column="t")])
    ]
    with FakeOllama(script) as fake, client(fake, num_ctx=4096, seed=7) as model:
        answer = model.chat(HELLO, [TOOL], stop=["\nObservation:"])
    assert answer.content == "Let me look at the nulls first, then the rest."
    assert answer.tool_calls == [ToolCall("null_check", {"column": "t"})]
    assert (answer.prompt_tokens, answer.completion_tokens) == (120, 30)
    request = fake.chat_requests[0]
    assert request["stream"] is True
    assert request["options"] == {
        "num_ctx": 4096,
        "temperature": 0.0,
        "seed": 7,
        "num_predict": 900,  # every call is bounded: the account length unless told
        "stop": ["\nObservation:"],
    }
    assert request["tools"] == [TOOL]
    assert request["messages"] == HELLO


@pytest.mark.parametrize(
    ("item", "kind", "text"),
    [
        (Garbage(), "bad_response", "could not be read"),
        (ErrorMidStream(), "server_error", "unexpected EOF"),
        (HttpError(500, "CUDA out of memory"), "server_error", "(HTTP 500): CUDA out of memory"),
        (
            HttpError(400, "registry.ollama.ai/library/x does not support tools"),
            "no_tools",
            "tools",
        ),
        (Die(), "connection_lost", "connection to Ollama"),
    ],
)
def test_chat_failures_are_named(item: ScriptItem, kind: str, text: str) -> None:
    with (
        FakeOllama([item]) as fake,
        client(fake) as model,
        pytest.raises(ModelCallError) as raised,
    ):
        model.chat(HELLO)
    assert raised.value.kind == kind
    assert text in raised.value.message


def test_chat_times_out_within_the_configured_seconds() -> None:
    with (
        FakeOllama([Hang(5.0)]) as fake,
        client(fake, timeout_seconds=0.2) as model,
        pytest.raises(ModelCallError) as raised,
    ):
        model.chat(HELLO)
    assert raised.value.kind == "timeout"
    assert "within 0.2 s" in raised.value.message


def test_a_prompt_near_num_ctx_is_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    big = Reply("ok", prompt_tokens=7500)
    with FakeOllama([big, big, Reply("ok", prompt_tokens=100)]) as fake, client(fake) as model:
        model.chat(HELLO)
        model.chat(HELLO)
        assert model.context_warned
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        "the prompt uses 7500 of num_ctx 8192 tokens: Ollama drops the oldest messages beyond "
        "it; raise agent.num_ctx"
    ]


def test_ask_returns_the_stripped_text() -> None:
    with FakeOllama([reply("  merged report \n")]) as fake, client(fake) as model:
        assert model.ask("merge this") == "merged report"
    assert fake.chat_requests[0]["tools"] == []


def test_server_version_and_pulled_models() -> None:
    with FakeOllama(models=["qwen2.5:7b", "llama3.2"]) as fake, client(fake) as model:
        assert model.server_version() == "0.6.5"
        assert model.pulled_models() == ["qwen2.5:7b", "llama3.2:latest"]
