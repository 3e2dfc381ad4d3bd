"""The fake server speaks the API the real ollama client expects, errors included."""

from __future__ import annotations

import httpx
import ollama
import pytest

from tests.fake_ollama import FakeOllama, calls_of, reply


def test_version_tags_and_show() -> None:
    with FakeOllama(models=["qwen2.5:7b"]) as fake:
        client = ollama.Client(host=fake.url, timeout=2)
        assert httpx.get(f"{fake.url}/api/version").json() == {"version": "0.6.5"}
        assert [m.model for m in client.list().models] == ["qwen2.5:7b"]
        shown = client.show("qwen2.5:7b")
    assert shown.capabilities == ["completion", "tools"]
    assert shown.modelinfo is not None and shown.modelinfo["qwen2.context_length"] == 32768


def test_real_error_bodies() -> None:
    with FakeOllama(tools_capability=False) as fake:
        client = ollama.Client(host=fake.url, timeout=2)
        with pytest.raises(ollama.ResponseError) as missing:
            client.show("nope")
        with pytest.raises(ollama.ResponseError) as no_tools:
            client.chat("qwen2.5:7b", [{"role": "user", "content": "x"}], tools=[calls_tool()])
    assert (missing.value.status_code, missing.value.error) == (404, "model 'nope' not found")
    assert no_tools.value.status_code == 400
    assert no_tools.value.error == "registry.ollama.ai/library/qwen2.5:7b does not support tools"


def calls_tool() -> dict[str, object]:
    return {"type": "function", "function": {"name": "t", "description": "d", "parameters": {}}}


def test_chat_without_streaming_and_recorded_requests() -> None:
    with FakeOllama([calls_of("null_check"), reply("done")]) as fake:
        client = ollama.Client(host=fake.url, timeout=2)
        first = client.chat("qwen2.5:7b", [{"role": "user", "content": "go"}])
        second = client.chat("qwen2.5:7b", [{"role": "user", "content": "again"}])
    assert first.message.tool_calls is not None
    assert first.message.tool_calls[0].function.name == "null_check"
    assert second.message.content == "done"
    assert second.eval_count == 30
    assert [r["messages"][0]["content"] for r in fake.chat_requests] == ["go", "again"]


def test_streamed_chat_in_pieces() -> None:
    with FakeOllama([reply("one two three four five six")]) as fake:
        client = ollama.Client(host=fake.url, timeout=2)
        parts = list(client.chat("qwen2.5:7b", [{"role": "user", "content": "go"}], stream=True))
    assert "".join(p.message.content or "" for p in parts) == "one two three four five six"
    assert len(parts) == 3 and parts[-1].done and parts[-1].prompt_eval_count == 120


def test_callable_script_sees_each_request() -> None:
    with FakeOllama(lambda body: reply(f"{len(body['messages'])} messages")) as fake:
        client = ollama.Client(host=fake.url, timeout=2)
        answer = client.chat("qwen2.5:7b", [{"role": "user", "content": "a"}] * 3)
    assert answer.message.content == "3 messages"


def test_exhausted_script_is_a_loud_500() -> None:
    with FakeOllama([]) as fake:
        client = ollama.Client(host=fake.url, timeout=2)
        with pytest.raises(ollama.ResponseError) as raised:
            client.chat("qwen2.5:7b", [{"role": "user", "content": "a"}])
    assert raised.value.status_code == 500
    assert "script exhausted" in raised.value.error
