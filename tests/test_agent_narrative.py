"""The narrative guard inside a real agent run: fake Ollama server, real client, real checks."""

from pathlib import Path

import pytest

from dq_agent.config import Config
from dq_agent.inspection import inspect
from dq_agent.load import load
from dq_agent.runner import run_tools
from dq_agent.tools import DETECTION_TOOL_NAMES, register_detection_tools
from tests.conftest import SAMPLE_DIR
from tests.fake_ollama import FakeOllama, calls_of, reply, verify

SAMPLE = SAMPLE_DIR / "sensors.parquet"
HALLUCINATION = (
    "Null Check: 998 missing values found in column1. Duplicate Check: 199 duplicate rows. "
    "Outlier Check: 690 temperature outliers. Delay Check: 3 gaps and 99 late rows observed. "
    "Based on these findings, the data quality of sensors.parquet is **VERIFIED**."
)


@pytest.fixture(scope="module")
def faithful() -> str:
    """A narrative made of the checks' own summaries: every name and figure is grounded."""
    config = Config()
    dataset = load(str(SAMPLE), config)
    results = run_tools(register_detection_tools(dataset, config))
    return "\n".join(f"{name}: {result.summary}." for name, result in results.items())


def run(fake: FakeOllama) -> dict:
    config = Config()
    config.agent.host = fake.url
    config.agent.timeout_seconds = 5
    inspection = inspect(str(SAMPLE), config)
    assert inspection.audit.fallback_executed == []
    return inspection.agent.to_dict()


AGENT_TURNS = [calls_of(*DETECTION_TOOL_NAMES), verify(True)]


def test_faithful_narrative_needs_no_repair_and_no_extra_call(faithful: str) -> None:
    with FakeOllama([*AGENT_TURNS, reply(faithful)]) as fake:
        agent = run(fake)
    assert len(fake.chat_requests) == 3
    checks = agent["narrative_checks"]
    assert checks["repair_outcome"] == "not_needed"
    assert checks["repair_attempted"] is False
    assert "UNSUPPORTED" not in agent["narrative"]


def test_hallucination_fixed_by_the_repair_round(faithful: str) -> None:
    with FakeOllama([*AGENT_TURNS, reply(HALLUCINATION), reply(faithful)]) as fake:
        agent = run(fake)
    assert len(fake.chat_requests) == 4
    repair_request = fake.last_message(3)["content"]
    assert "column1" in repair_request
    checks = agent["narrative_checks"]
    assert checks["repair_attempted"] is True
    assert checks["repair_outcome"] == "fixed"
    assert "column1" not in agent["narrative"]


def test_hallucination_that_survives_the_repair_is_replaced_by_the_code_written_account() -> None:
    with FakeOllama([*AGENT_TURNS, reply(HALLUCINATION), reply(HALLUCINATION)]) as fake:
        agent = run(fake)
    assert len(fake.chat_requests) == 4
    checks = agent["narrative_checks"]
    assert checks["repair_outcome"] == "still_unsupported"
    # The rejected text stays in the JSON, marked; the report shows dq-agent's own account.
    assert "[UNSUPPORTED NAME: column1]" in agent["rejected_narrative"]
    assert "[VERDICT CONFLICT" in agent["rejected_narrative"]
    assert "[ADDED BY GUARD] structure_check" in agent["rejected_narrative"]
    assert checks["rejection_reasons"] == [
        "unsupported name",
        "unsupported figure",
        "verdict conflict",
        # Four named checks: fewer than half the catalogue's dimensions.
        f"covers 4 of {len(DETECTION_TOOL_NAMES)} dimensions",
    ]
    assert agent["account"] == {
        "source": "dq-agent",
        "reason": "unsupported name, unsupported figure, verdict conflict, "
        f"covers 4 of {len(DETECTION_TOOL_NAMES)} dimensions",
    }
    lines = agent["narrative"].splitlines()
    assert [line.split(":")[0] for line in lines] == [
        *DETECTION_TOOL_NAMES,
        "Verdict (computed by code)",
    ]


def test_verdict_stays_the_codes_whatever_the_model_says(tmp_path: Path) -> None:
    with FakeOllama([*AGENT_TURNS, reply(HALLUCINATION), reply(HALLUCINATION)]) as fake:
        config = Config()
        config.agent.host = fake.url
        config.agent.timeout_seconds = 5
        with_model = inspect(str(SAMPLE), config)
    config = Config()
    config.agent.enabled = False
    without_model = inspect(str(SAMPLE), config)
    assert with_model.verdict == without_model.verdict
    assert with_model.verdict != "pass"


def test_the_report_says_which_account_it_shows(tmp_path: Path) -> None:
    from dq_agent.report.markdown import render_markdown
    from dq_agent.report.terminal import render_plain

    with FakeOllama([*AGENT_TURNS, reply(HALLUCINATION), reply(HALLUCINATION)]) as fake:
        config = Config()
        config.agent.host = fake.url
        config.agent.timeout_seconds = 5
        inspection = inspect(str(SAMPLE), config)
    line = (
        "account: written by dq-agent (model text rejected: unsupported name, unsupported figure, "
        f"verdict conflict, covers 4 of {len(DETECTION_TOOL_NAMES)} dimensions)"
    )
    assert f"_{line}_" in render_markdown(inspection)
    assert line in render_plain(inspection, width=200)
