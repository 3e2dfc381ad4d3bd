"""The model cannot choose the scope the verdict is computed on (fake server, real checks)."""

from dq_agent.config import Config
from dq_agent.inspection import inspect
from dq_agent.tools import DETECTION_TOOL_NAMES
from tests.conftest import SAMPLE_DIR
from tests.fake_ollama import FakeOllama, call, reply, verify

SAMPLE = str(SAMPLE_DIR / "sensors.parquet")
FIVE = ("null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check")
NARROWED = reply(
    calls=[
        call("null_check", column="timestamp"),
        call("duplicate_check", entity="dev-02"),
        call("outlier_check", column="humidity"),
        call("delay_check", start="2024-03-04T23:00:00"),
        call("structure_check", column="timestamp"),
        # The checks added since: called plainly, after the five.
        *[call(name) for name in DETECTION_TOOL_NAMES if name not in FIVE],
    ]
)


def test_narrowed_calls_run_on_the_whole_dataset_and_count() -> None:
    config = Config()
    config.agent.enabled = False
    direct = inspect(SAMPLE, config)
    with FakeOllama([NARROWED, verify(True), reply("All clean.")]) as fake:
        config = Config()
        config.agent.host = fake.url
        config.agent.timeout_seconds = 5
        config.agent.fallback_merge = False
        agent = inspect(SAMPLE, config)
    assert agent.audit.called_tools == [
        *FIVE,
        *[name for name in DETECTION_TOOL_NAMES if name not in FIVE],
    ]
    assert agent.audit.fallback_executed == []
    # The arguments were ignored: every result is the whole dataset's, as in a direct run.
    assert {name: (r.status, r.summary) for name, r in agent.checks.items()} == {
        name: (r.status, r.summary) for name, r in direct.checks.items()
    }
    assert agent.verdict == direct.verdict != "pass"
    sentinel_reply = next(
        m
        for r in fake.chat_requests
        for m in r["messages"]
        if m.get("tool_name") == "verify_result"
    )
    assert sentinel_reply["content"].startswith("READY")
    # Detection tools offer no arguments at all.
    tools = fake.chat_requests[0]["tools"]
    detection = [t for t in tools if t["function"]["name"] in DETECTION_TOOL_NAMES]
    assert all(t["function"]["parameters"]["properties"] == {} for t in detection)
