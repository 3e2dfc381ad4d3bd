"""eval-model through the fake Ollama server: a model that skips structure_check unless the
sentinel sends it back."""

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from dq_agent.catalogue import CHECK_NAMES
from dq_agent.cli import app
from dq_agent.config import Config
from dq_agent.errors import AgentUnavailableError
from dq_agent.evaluate import evaluate_model
from dq_agent.inspection import inspect
from tests.conftest import SAMPLE_DIR
from tests.fake_ollama import FakeOllama, calls_of, reply, verify

SAMPLE = str(SAMPLE_DIR / "sensors.parquet")
# Every check but the last one of the catalogue (structure_check).
FOUR = [name for name in CHECK_NAMES if name != "structure_check"]


def lazy_model(body: dict[str, Any]) -> Any:
    """Calls every tool but structure_check, skips it, and obeys a "not ready" verdict."""
    offered = [t["function"]["name"] for t in body.get("tools") or []]
    messages = body["messages"]
    called = {m.get("tool_name") for m in messages if m.get("role") == "tool"}
    if not offered:
        return reply("Inspection done: see the figures per check.")
    if "null_check" not in called:
        return calls_of(*FOUR)
    last = messages[-1]
    if last.get("tool_name") == "verify_result" and "structure_check" in offered:
        return calls_of("structure_check")
    if "verify_result" in offered and "verify_result" not in called:
        return verify(True)
    if "verify_result" in offered and last.get("tool_name") == "structure_check":
        return verify(True)
    return reply("Inspection done: see the figures per check.")


def config_for(fake: FakeOllama) -> Config:
    config = Config()
    config.agent.host = fake.url
    config.agent.timeout_seconds = 5
    config.history.enabled = False
    return config


def test_sentinel_turns_a_skipped_tool_into_a_called_one() -> None:
    with FakeOllama(lazy_model) as fake:
        evaluations = evaluate_model(SAMPLE, config_for(fake), runs=2, without_sentinel=True)
    with_sentinel, without = evaluations
    assert with_sentinel.sentinel is True and without.sentinel is False
    assert [r.fallback_executed for r in with_sentinel.records] == [[], []]
    assert [r.fallback_executed for r in without.records] == [
        ["structure_check"],
        ["structure_check"],
    ]
    skip = {
        (e.sentinel, t["tool"]): t["skip_rate"] for e in evaluations for t in e.to_dict()["tools"]
    }
    assert skip[(True, "structure_check")] == 0.0
    assert skip[(False, "structure_check")] == 1.0
    assert skip[(False, "null_check")] == 0.0


def test_without_sentinel_the_model_is_never_offered_verify_result() -> None:
    with FakeOllama(lazy_model) as fake:
        config = config_for(fake)
        config.agent.sentinel = False
        inspection = inspect(SAMPLE, config)
        offered = {n for i in range(len(fake.chat_requests)) for n in fake.offered_tools(i)}
    assert "verify_result" not in offered
    assert "structure_check" in offered
    assert "verify_result" not in fake.chat_requests[0]["messages"][0]["content"]
    assert inspection.audit.fallback_executed == ["structure_check"]


def test_no_model_is_an_error_not_a_measurement() -> None:
    config = Config()
    config.agent.host = "http://127.0.0.1:9"
    config.agent.timeout_seconds = 1
    with pytest.raises(AgentUnavailableError):
        evaluate_model(SAMPLE, config, runs=1)


def test_cli_json() -> None:
    with FakeOllama(lazy_model) as fake:
        result = CliRunner().invoke(
            app,
            [
                "eval-model",
                SAMPLE,
                "--runs",
                "1",
                "--no-sentinel",
                "--format",
                "json",
                "--host",
                fake.url,
            ],
            env={"COLUMNS": "100", "NO_COLOR": "1"},
        )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [e["sentinel"] for e in report["evaluations"]] == [True, False]
    assert [e["runs_with_backfill"] for e in report["evaluations"]] == [0, 1]


def stopper(body: dict[str, Any]) -> Any:
    """Calls four tools, then answers; calls what is offered only when the loop pushes it."""
    offered = [t["function"]["name"] for t in body.get("tools") or []]
    messages = body["messages"]
    if len(messages) == 2:
        return calls_of(*FOUR)
    if messages[-1]["content"].startswith("verify_result (run by dq-agent"):
        return calls_of(*offered)
    return reply("Inspection done: see the figures per check.")


def test_runs_sample_the_model_and_tell_pushed_calls_from_unprompted_ones() -> None:
    with FakeOllama(stopper) as fake:
        config = config_for(fake)
        config.agent.seed = 100
        (evaluation,) = evaluate_model(SAMPLE, config, runs=2)
        options = [r["options"] for r in fake.chat_requests]
    # A new seed per run, the eval temperature on every call (inspect keeps 0 and one seed).
    assert sorted({o["seed"] for o in options}) == [100, 101]
    assert {o["temperature"] for o in options} == {0.7}
    assert [(r.seed, r.unprompted, r.after_push, r.backfilled) for r in evaluation.rows] == [
        (100, len(FOUR), 1, 0),
        (101, len(FOUR), 1, 0),
    ]
    assert [(r.rounds_by_model, r.rounds_by_loop) for r in evaluation.rows] == [(0, 1), (0, 1)]
    report = evaluation.to_dict()
    assert report["temperature"] == 0.7
    assert report["means"]["unprompted"] == float(len(FOUR))
    assert all(r.prompt_tokens > 0 for r in evaluation.rows)
