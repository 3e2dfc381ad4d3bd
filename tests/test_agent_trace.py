"""The trace: live lines on a console (data escaped), JSON lines in a file, events in memory."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from dq_agent.errors import UsageError
from dq_agent.trace import Trace


def console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200, color_system=None, force_terminal=False), buffer


def test_events_are_written_as_json_lines_and_flushed_each_time(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    with Trace(jsonl_path=path) as trace:
        trace.emit("action", step=1, tool="null_check", arguments={"column": "temp"})
        # Readable before the trace is closed: each line is flushed.
        first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
        trace.emit("guard", expected=["a", "b"], called=["a"], missing=["b"])
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert first["event"] == "action" and first["arguments"] == {"column": "temp"}
    assert [line["event"] for line in lines] == ["action", "guard"]
    assert lines[1]["missing"] == ["b"]
    assert {"time", "elapsed"} <= lines[0].keys()


def test_verbose_lines_show_each_kind_of_step() -> None:
    out, buffer = console()
    trace = Trace(console=out)
    trace.emit(
        "model_call",
        step=1,
        seconds=0.25,
        prompt_tokens=900,
        completion_tokens=40,
        mode="tools",
        offered=["null_check", "verify_result"],
    )
    trace.emit("model_reply", step=1, content="", tool_calls=[{"name": "null_check"}])
    trace.emit("account", line="account: model (checked)", rejected_narrative=None)
    trace.emit(
        "model_call", step=2, seconds=0.1, prompt_tokens=1, completion_tokens=1, mode="react"
    )
    trace.emit("thought", step=1, text="start with nulls")
    trace.emit("action", step=1, tool="null_check", arguments={})
    trace.emit("observation", step=1, tool="null_check", kind="executed", text="3 nulls")
    trace.emit("sentinel", step=2, verdict="not_ready", missing=["structure_check"], round=1)
    trace.emit(
        "sentinel", step=3, verdict="not_ready", missing=["structure_check"], round=2, by="loop"
    )
    trace.emit("guard", expected=["a", "b"], called=["a"], missing=["b"])
    trace.emit("guard", expected=["a"], called=["a"], missing=[])
    text = buffer.getvalue()
    assert (
        "model call 0.25 s, 900 prompt + 40 completion tokens, offered null_check, verify_result"
        in text
    )
    assert "1 prompt + 1 completion tokens, text ReAct" in text
    assert "Thought: start with nulls" in text
    assert "→ null_check({})" in text
    assert "← executed: 3 nulls" in text
    assert "sentinel round 1 (called by the model): not_ready missing structure_check" in text
    assert (
        "sentinel round 2 (run by the loop: the model stopped early): not_ready missing "
        "structure_check" in text
    )
    assert "guard triggered: model skipped b, backfilled" in text
    assert "completeness check passed (called 1/1)" in text
    assert "reply: (no text) + 1 native tool calls" in text
    assert "account: model (checked)" in text


def test_data_is_never_read_as_markup() -> None:
    out, buffer = console()
    trace = Trace(console=out)
    trace.emit("thought", step=1, text="[bold red]column [x][/] drop")
    trace.emit("something_new", detail="[link=evil]x[/link]")
    text = buffer.getvalue()
    assert "[bold red]column [x][/] drop" in text
    assert "[link=evil]x[/link]" in text


def test_an_unwritable_trace_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot write the trace file"):
        Trace(jsonl_path=tmp_path / "missing-folder" / "trace.jsonl")


def test_without_console_or_file_events_are_kept_in_memory() -> None:
    trace = Trace()
    trace.emit("nudge", step=3, kind="summarise")
    assert trace.of("nudge") == [trace.events[0]]
    assert trace.events[0]["kind"] == "summarise"
