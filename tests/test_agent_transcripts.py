"""What a real small model did, replayed: its exact replies to the frozen sample, through the fake
server, which checks that every request offers what it offered when recorded.

The fixtures (tests/fixtures/llm/*.json) were recorded against the llm-lab server
(Qwen2.5-Coder-1.5B-Instruct Q4_K_M, Ollama-style tool parsing) with
`tests/fixtures/llm/record.py`; `sensors.parquet` there is the frozen copy of the sample they saw.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dq_agent.agent.budget import (
    OBSERVATION_BUDGET,
    SYSTEM_BUDGET,
    estimate_tokens,
    prompt_budget,
    request_tokens,
)
from dq_agent.config import Config
from dq_agent.inspection import inspect
from dq_agent.outcome import Inspection
from tests.fake_ollama import FIXTURES, FakeOllama, Replay, load_transcript

SAMPLE = FIXTURES / "sensors.parquet"
# The checks the recording offered (the catalogue had five then): the replay selects them, as a
# user would with `--checks`, so every request offers what the real model was offered.
ALL = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]
TRANSCRIPTS = sorted(p.stem for p in FIXTURES.glob("*.json"))


def replay(name: str) -> tuple[Inspection, Replay, list[dict[str, Any]]]:
    transcript = load_transcript(name)
    script = Replay(transcript["turns"])
    with FakeOllama(script, models=[transcript["model"]]) as fake:
        config = Config()
        config.agent.host = fake.url
        config.agent.model = transcript["model"]
        config.agent.timeout_seconds = 10
        config.history.enabled = False
        config.run.checks = ALL
        inspection = inspect(str(SAMPLE), config)
    return inspection, script, fake.chat_requests


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_the_replay_offers_what_the_real_run_offered(name: str) -> None:
    _, script, _ = replay(name)
    assert script.mismatches == []
    assert script.exhausted


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_the_prompts_stay_within_their_budgets(name: str) -> None:
    _, _, requests = replay(name)
    first = requests[0]
    system = first["messages"][0]["content"]
    assert estimate_tokens(system + json.dumps(first["tools"])) <= SYSTEM_BUDGET
    for request in requests:
        assert request_tokens(request["messages"], request.get("tools") or []) <= prompt_budget(5)
        for message in request["messages"]:
            if message["role"] == "tool":
                assert estimate_tokens(message["content"]) <= OBSERVATION_BUDGET


def test_qwen_coder_on_the_sample_whole_dataset_calls_count() -> None:
    """Its first reply: five `<function name=... arguments={"columns": [...]}>` tags in a
    `<tools>` wrapper, in the content (Ollama-style parsing turns none into a native call)."""
    transcript = load_transcript("qwen2.5-coder-1.5b_sample")
    first = transcript["turns"][0]
    assert first["tool_calls"] == [] and first["content"].startswith("<tools>")
    inspection, script, requests = replay("qwen2.5-coder-1.5b_sample")
    # Every call carried invented arguments; each ran on the whole dataset and counted.
    assert inspection.audit.called_tools == ALL
    assert inspection.audit.called_after_push == []
    assert inspection.audit.fallback_executed == []
    observations = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_name"] for m in observations] == ALL
    assert all(m["content"].startswith("Note: arguments ignored (columns): ") for m in observations)
    # Once all five ran: the sentinel and drill_down, and room for the account.
    assert [t["function"]["name"] for t in requests[1]["tools"]] == [
        "verify_result",
        "drill_down",
    ]
    assert requests[1]["options"]["num_predict"] == 900
    assert len(requests) == len(transcript["turns"]) + len(script.after_end)


def test_qwen_coder_repeating_the_same_five_calls_gets_pointers_then_no_tools() -> None:
    """Its second reply repeated the five calls word for word (the issue's 12-step loop)."""
    transcript = load_transcript("qwen2.5-coder-1.5b_sample")
    first, second = (turn["content"] for turn in transcript["turns"][:2])
    assert first == second
    inspection, script, requests = replay("qwen2.5-coder-1.5b_sample")
    pointers = [m for m in requests[2]["messages"][-5:] if m["role"] == "tool"]
    assert len(pointers) == 5
    assert all(
        m["content"].endswith("Every detection tool has run: give your final answer now.")
        for m in pointers
    )
    # A turn of nothing but repeats with nothing missing: no tools offered, room for the account.
    assert requests[2]["tools"] == [] and requests[2]["options"]["num_predict"] == 900
    # Its answer came in an <answer> wrapper: the tags are removed before the review. (The review
    # itself depends on today's check summaries, which have changed since the recording: a repair
    # request may follow, which the recording does not hold.)
    assert transcript["turns"][2]["content"].startswith("<answer>")
    assert all(r["tools"] == [] for r in script.after_end)
    checks = inspection.agent.narrative_checks or {}
    assert checks["removed_markup"] is True
    shown = inspection.agent.rejected_narrative or inspection.agent.narrative or ""
    assert "<answer>" not in shown and "</answer>" not in shown
    assert inspection.agent.sentinel_invocations == []
