"""`dq-agent doctor` against the fake server: each problem named, with its fix and exit code."""

from __future__ import annotations

import io

from rich.console import Console

from dq_agent.agent.doctor import OK, PROBLEM, WARN, render_doctor, run_doctor
from dq_agent.config import Config
from dq_agent.errors import EXIT_AGENT, EXIT_OK
from tests.fake_ollama import FakeOllama, Reply, reply


def config_for(fake: FakeOllama, **agent: object) -> Config:
    config = Config()
    config.agent.host = fake.url
    config.agent.timeout_seconds = 2.0
    for key, value in agent.items():
        setattr(config.agent, key, value)
    return config


def rendered(report: object) -> str:
    buffer = io.StringIO()
    render_doctor(report, Console(file=buffer, width=200, color_system=None))  # type: ignore[arg-type]
    return buffer.getvalue()


# 50 prompt tokens/s and 10 generated tokens/s, as the 1.5B model on 2 CPU cores.
CPU_SPEED = Reply(
    "Missing values.",
    prompt_tokens=100,
    completion_tokens=20,
    prompt_eval_ns=2 * 10**9,
    eval_ns=2 * 10**9,
)


def test_all_good_exits_0() -> None:
    with FakeOllama([reply("OK"), CPU_SPEED]) as fake:
        report = run_doctor(config_for(fake, timeout_seconds=300.0))
    assert [(c.name, c.status) for c in report.checks] == [
        ("server reachable", OK),
        ("model pulled", OK),
        ("tools capability", OK),
        ("num_ctx", OK),
        ("speed", OK),
    ]
    # 6,000 prompt tokens / 50 + 650 generated / 10 = 185 s; a first call 1,500 / 50 + 200 / 10.
    assert report.checks[-1].detail == (
        "50 prompt tokens/s, 10.0 generated tokens/s: a run on the sample takes about 3.1 min, "
        "a first call about 50 s (--model-timeout 300 s)"
    )
    # A warm-up call (a cold model loads first), then the measured one.
    assert [r["options"]["num_predict"] for r in fake.chat_requests] == [1, 24]
    assert report.checks[0].detail == f"Ollama 0.6.5 at {fake.url}"
    assert report.exit_code == EXIT_OK
    assert "The model can be used." in rendered(report)


def test_a_model_too_slow_for_the_timeout_is_a_warning_with_the_timeout_to_set() -> None:
    with FakeOllama([reply("OK"), CPU_SPEED]) as fake:
        report = run_doctor(config_for(fake, timeout_seconds=30.0))
    speed = report.checks[-1]
    assert (speed.name, speed.status) == ("speed", WARN)
    assert speed.detail.endswith("beyond --model-timeout 30 s")
    assert speed.fix == "raise --model-timeout to 80 or use a faster model"
    assert report.exit_code == EXIT_OK


def test_model_not_pulled_exits_4_with_the_pull_command() -> None:
    with FakeOllama(models=["llama3.2"]) as fake:
        report = run_doctor(config_for(fake, model="qwen2.5:7b"))
    pulled = report.checks[-1]
    assert (pulled.name, pulled.status) == ("model pulled", PROBLEM)
    assert pulled.detail == "model qwen2.5:7b is not pulled (pulled: llama3.2:latest)"
    assert pulled.fix is not None and "`ollama pull qwen2.5:7b`" in pulled.fix
    assert report.exit_code == EXIT_AGENT
    assert "fix: run `ollama pull qwen2.5:7b`" in rendered(report)


def test_untagged_model_name_matches_latest() -> None:
    with FakeOllama(models=["llama3.2:latest"]) as fake:
        assert run_doctor(config_for(fake, model="llama3.2")).exit_code == EXIT_OK


def test_server_down_exits_4() -> None:
    fake = FakeOllama().start()
    fake.stop()
    report = run_doctor(config_for(fake))
    assert [(c.name, c.status) for c in report.checks] == [("server reachable", PROBLEM)]
    assert report.exit_code == EXIT_AGENT
    assert "cannot be used" in rendered(report)


def test_no_tools_capability_and_a_too_large_num_ctx_are_warnings() -> None:
    with FakeOllama(tools_capability=False, context_length=4096) as fake:
        report = run_doctor(config_for(fake, num_ctx=8192))
    checks = {c.name: c for c in report.checks}
    assert checks["tools capability"].status == WARN
    assert "text ReAct" in checks["tools capability"].detail
    assert checks["num_ctx"].status == WARN
    assert checks["num_ctx"].fix == "set agent.num_ctx to 4096 or less"
    assert report.exit_code == EXIT_OK


def test_a_small_num_ctx_is_a_warning() -> None:
    with FakeOllama() as fake:
        report = run_doctor(config_for(fake, num_ctx=2048))
    num_ctx = {c.name: c for c in report.checks}["num_ctx"]
    assert num_ctx.status == WARN
    assert "silently drops" in num_ctx.detail
