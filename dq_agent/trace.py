"""The agent's trace: every step as an event, printed live (verbose) and/or saved as JSON lines.

Events are plain dicts (`event`, `elapsed`, fields). Data (thoughts, arguments, observations)
is escaped before printing: nothing from the data or the model is read as Rich markup.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from rich.console import Console
from rich.markup import escape

from dq_agent.errors import UsageError
from dq_agent.result import jsonable

_TEXT_LIMIT = 300


class Trace:
    """Receives step events. With neither a console nor a file it only keeps them in `events`."""

    def __init__(self, console: Console | None = None, jsonl_path: Path | None = None) -> None:
        self.console = console
        self.jsonl_path = jsonl_path
        self.events: list[dict[str, Any]] = []
        self._started = time.monotonic()
        self._file: IO[str] | None = None
        if jsonl_path is not None:
            # Opened now so a bad path fails before the run, not after the model worked for minutes.
            try:
                self._file = jsonl_path.open("w", encoding="utf-8")
            except OSError as exc:
                message = f"cannot write the trace file {jsonl_path}: {exc.strerror}"
                raise UsageError(message) from exc

    def emit(self, event: str, **fields: Any) -> None:
        record: dict[str, Any] = {
            "event": event,
            "time": datetime.now(UTC).isoformat(),
            "elapsed": round(time.monotonic() - self._started, 4),
            **jsonable(fields),
        }
        self.events.append(record)
        if self._file is not None:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()
        if self.console is not None:
            self.console.print(_render(record), highlight=False, soft_wrap=True)

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return escape(text if len(text) <= _TEXT_LIMIT else text[: _TEXT_LIMIT - 3] + "...")


def _offered(record: dict[str, Any]) -> str:
    if record.get("mode") == "react":
        return "text ReAct"
    if record.get("mode") == "ask":
        return "no tools (repair or merge)"
    offered = record.get("offered") or []
    return f"offered {escape(', '.join(offered))}" if offered else "no tools offered"


def _step(record: dict[str, Any]) -> str:
    return f"[dim]step {record['step']:>2}[/] " if "step" in record else "        "


_RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "preflight": lambda r: (
        f"[bold]agent[/] {_short(r['model'])} at {_short(r['host'])}: mode {_short(r['mode'])}"
    ),
    "unavailable": lambda r: f"[yellow]model unavailable[/]: {_short(r['error'])}",
    "model_call": lambda r: (
        f"{_step(r)}[dim]model call {r['seconds']:.2f} s, "
        f"{r['prompt_tokens']} prompt + {r['completion_tokens']} completion tokens, "
        f"{_offered(r)}[/]"
    ),
    "model_error": lambda r: f"{_step(r)}[red]model call failed[/]: {_short(r['error'])}",
    "thought": lambda r: f"{_step(r)}[italic]Thought:[/] {_short(r['text'])}",
    "action": lambda r: f"{_step(r)}[bold cyan]→ {_short(r['tool'])}[/]({_short(r['arguments'])})",
    "observation": lambda r: f"{_step(r)}  [dim]← {_short(r['kind'])}:[/] {_short(r['text'])}",
    "sentinel": lambda r: (
        f"{_step(r)}[magenta]sentinel round {r['round']} "
        f"({'run by the loop: the model stopped early' if r.get('by') == 'loop' else 'called by the model'})"
        f": {_short(r['verdict'])}[/]"
        + (f" missing {_short(', '.join(r['missing']))}" if r["missing"] else "")
    ),
    "model_reply": lambda r: (
        f"{_step(r)}[dim]reply:[/] {_short(r['content']) or '(no text)'}"
        + (f" [dim]+ {len(r['tool_calls'])} native tool calls[/]" if r.get("tool_calls") else "")
    ),
    "over_budget": lambda r: (
        f"{_step(r)}[yellow]prompt over budget[/]: {r['prompt_tokens']} > {r['budget']} tokens"
    ),
    "account": lambda r: (
        f"[bold]{_short(r['line'])}[/]"
        + (
            f"\n        [dim]rejected text:[/] {_short(r['rejected_narrative'])}"
            if r.get("rejected_narrative")
            else ""
        )
    ),
    "nudge": lambda r: f"{_step(r)}[yellow]nudge[/] ({_short(r['kind'])})",
    "answer": lambda r: f"{_step(r)}[green]final answer[/] ({r['chars']} chars)",
    "loop_end": lambda r: f"[bold]loop ended[/]: {_short(r['reason'])} after {r['steps']} steps",
    "guard": lambda r: (
        f"[green]completeness check passed[/] (called {len(r['called'])}/{len(r['expected'])})"
        if not r["missing"]
        else f"[yellow]guard triggered[/]: model skipped {_short(', '.join(r['missing']))}, "
        "backfilled"
    ),
    "merge": lambda r: f"[dim]merge of backfilled results: {_short(r['outcome'])}[/]",
    "context_warning": lambda r: (
        f"[yellow]context nearly full[/]: {r['prompt_tokens']} of {r['num_ctx']} tokens"
    ),
}


def _render(record: dict[str, Any]) -> str:
    renderer = _RENDERERS.get(record["event"])
    if renderer is not None:
        return renderer(record)
    fields = {k: v for k, v in record.items() if k not in ("event", "time", "elapsed")}
    return f"[dim]{escape(record['event'])}[/] {_short(fields)}"
