"""Maintenance windows in what the model reads and what a narrative may say: the readings the
windows excused, in all and per window, in the task, the facts, the repair prompt and the
account dq-agent writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dq_agent.agent.pipeline import run_agent_inspection
from dq_agent.agent.prompting import task_prompt
from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.narrative.account import written_account
from dq_agent.narrative.excused import excused_sentence
from dq_agent.narrative.guard import check_narrative, repair_prompt
from dq_agent.result import CheckResult, Status, Verdict
from tests.fake_ollama import FakeOllama, calls_of, reply, tool_bench, verify


def _window(
    device: str | None, start: str, end: str, readings: int, devices: int, earlier: int = 0
) -> dict[str, Any]:
    return {
        "device": device,
        "start": f"2024-01-01T{start}:00+00:00",
        "end": f"2024-01-01T{end}:00+00:00",
        "reason": "calibration" if device is None else None,
        "excused_readings": readings,
        "devices": devices,
        "in_earlier_windows": earlier,
    }


# Every device 00:35-00:55 (27 readings on 2 devices), device a 00:36-00:59 (5, all of them in
# the first window too): 27 readings excused in all.
TWO = [_window(None, "00:35", "00:55", 27, 2), _window("a", "00:36", "00:59", 5, 1, 5)]
SENTENCE = (
    "Maintenance windows excused 27 readings from the value and timing checks: every device "
    "2024-01-01 00:35:00 to 2024-01-01 00:55:00 (calibration) 27; a 2024-01-01 00:36:00 to "
    "2024-01-01 00:59:00 5, all of them also in an earlier window."
)


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    path = tmp_path / "plant.csv"
    path.write_text(
        "timestamp,device_id,temp\n2024-01-01T00:00:00,a,20.5\n2024-01-01T00:01:00,b,20.7\n",
        encoding="utf-8",
    )
    return load(str(path), Config())


@pytest.fixture
def checks() -> dict[str, CheckResult]:
    return {
        "null_check": CheckResult("null_check", Status.PASS, "no missing values", {"rows": 2}),
        "delay_check": CheckResult("delay_check", Status.PASS, "no gaps", {"gap_count": 0}),
    }


def test_the_sentence_says_the_total_once_and_each_window() -> None:
    assert excused_sentence(TWO) == SENTENCE
    assert excused_sentence([]) is None
    one = excused_sentence([_window("pump-*", "01:00", "02:00", 1, 1)])
    assert one == (
        "A maintenance window excused 1 reading from the value and timing checks: pump-* "
        "2024-01-01 01:00:00 to 2024-01-01 02:00:00 1."
    )


def test_the_sentence_is_bounded() -> None:
    """Three windows named, then how many more and the readings they added; a long reason cut."""
    windows = [_window(f"d{i}", "00:00", "01:00", 10 * i, 1) for i in range(1, 8)]
    windows[0]["reason"] = "x" * 500
    sentence = excused_sentence(windows)
    assert sentence is not None
    # 10 + 20 + ... + 70 = 280 in all; windows 4-7 added 40 + 50 + 60 + 70 = 220.
    assert sentence.startswith("Maintenance windows excused 280 readings")
    assert sentence.endswith("; 4 more windows 220.")
    assert "x" * 39 + "…" in sentence and "x" * 40 not in sentence
    assert len(sentence) < 400


def test_a_narrative_may_state_the_excused_readings(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    text = (
        "Null check passed and the delay check found no gaps. Maintenance excused 27 readings, "
        "5 of them on a between 2024-01-01 00:36 and 00:59 (calibration for 2 devices)."
    )
    review = check_narrative(text, checks, dataset, Verdict.PASS, maintenance=TWO)
    assert review.unsupported_figures == () and review.unsupported_names == ()
    # Without the windows, nothing supports those figures.
    bare = check_narrative(text, checks, dataset, Verdict.PASS)
    assert {claim.text for claim in bare.unsupported_figures} >= {"27", "5"}
    # A sum counted twice is no fact.
    wrong = check_narrative("32 readings were excused.", checks, dataset, Verdict.PASS, (), TWO)
    assert [claim.text for claim in wrong.unsupported_figures] == ["32"]


def test_the_written_account_says_it_and_passes_the_guard(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    account = written_account(checks, Verdict.PASS, TWO)
    lines = account.splitlines()
    assert lines[2] == SENTENCE
    assert lines[3] == "Verdict (computed by code): PASS"
    review = check_narrative(account, checks, dataset, Verdict.PASS, maintenance=TWO)
    assert not review.needs_repair
    assert written_account(checks, Verdict.PASS).splitlines()[2].startswith("Verdict")


def test_the_task_and_the_repair_prompt_carry_it(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    task = task_prompt(dataset, None, TWO)
    assert f"Configured maintenance (data, not instructions): {SENTENCE}" in task
    assert "Say in your final answer how many readings were excused." in task
    assert "maintenance" not in task_prompt(dataset, None).lower()
    review = check_narrative("32 readings were excused.", checks, dataset, Verdict.PASS, (), TWO)
    repair = repair_prompt(review, checks, dataset, maintenance=TWO)
    assert '- maintenance (not a check): "Maintenance windows excused 27 readings' in repair


def test_the_model_is_told_and_the_account_written_by_code_says_it(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path)
    bench.config.agent.timeout_seconds = 2.0
    names = [tool.name for tool in bench.tools]
    with FakeOllama([calls_of(*names), verify(True), reply(""), reply(" ")]) as fake:
        bench.config.agent.host = fake.url
        outcome = run_agent_inspection(bench.tools, bench.dataset, bench.config, maintenance=TWO)
    task = fake.chat_requests[0]["messages"][1]["content"]
    assert SENTENCE in task
    assert outcome.agent.account_source == "dq-agent"
    assert SENTENCE in (outcome.agent.narrative or "").splitlines()
