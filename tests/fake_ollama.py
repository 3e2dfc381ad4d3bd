"""A fake Ollama server for tests: real HTTP on 127.0.0.1, the real API, scripted replies.

The product talks to it through the real `ollama` client, so tests exercise the same requests,
streams and error bodies as a real server. Every request is recorded: tests assert on exactly
what the model was offered.

    with FakeOllama([reply(calls=[call("null_check")]), reply("All good.")]) as fake:
        config.agent.host = fake.url

A script item is a `Reply` (an assistant turn) or one of the failure behaviours below; a
callable script receives each chat request body and returns an item.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl

from dq_agent.checks.base import CheckPlan, Scope
from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult, Status
from dq_agent.tools import DETECTION_TOOL_NAMES, Tool

DEFAULT_MODEL = "qwen2.5:7b"
VERSION = "0.6.5"


# -- script items ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One assistant turn: text and/or native tool calls."""

    content: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    prompt_tokens: int = 120
    completion_tokens: int = 30
    prompt_eval_ns: int = 1000
    eval_ns: int = 1000


@dataclass(frozen=True)
class Hang:
    """Answer nothing for `seconds` (past the client's timeout), then reply."""

    seconds: float
    then: Reply = field(default_factory=Reply)


@dataclass(frozen=True)
class Die:
    """Drop the connection without an answer and stop listening: later calls are refused."""


@dataclass(frozen=True)
class Garbage:
    """HTTP 200 with a body that is not JSON."""

    body: bytes = b"<html><body>502 Bad Gateway</body></html>"


@dataclass(frozen=True)
class ErrorMidStream:
    """Start streaming, then send an error line as Ollama does when its runner crashes."""

    error: str = "an error was encountered while running the model: unexpected EOF"


@dataclass(frozen=True)
class HttpError:
    status: int
    error: str


ScriptItem = Reply | Hang | Die | Garbage | ErrorMidStream | HttpError
Script = Sequence[ScriptItem] | Callable[[dict[str, Any]], ScriptItem]


def call(name: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    return (name, arguments)


def reply(content: str = "", calls: Iterable[tuple[str, dict[str, Any]]] = ()) -> Reply:
    return Reply(content=content, tool_calls=tuple(calls))


def calls_of(*names: str) -> Reply:
    """A turn calling each named tool with no arguments (native tool calls)."""
    return Reply(tool_calls=tuple((n, {}) for n in names))


def verify(is_ready: bool = True, missing: str = "") -> Reply:
    return Reply(
        tool_calls=(
            (
                "verify_result",
                {
                    "task_goal": "inspect the dataset",
                    "actual_result": "ran the tools",
                    "missing_items": missing,
                    "errors_found": "",
                    "is_ready": is_ready,
                },
            ),
        )
    )


# -- the server -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any]


class FakeOllama:
    """An Ollama look-alike on 127.0.0.1 (port 0) in a background thread."""

    def __init__(
        self,
        script: Script = (),
        *,
        models: Sequence[str] = (DEFAULT_MODEL,),
        tools_capability: bool = True,
        context_length: int = 32768,
        capabilities_known: bool = True,
    ) -> None:
        self.script = script
        self.models = list(models)
        self.tools_capability = tools_capability
        self.context_length = context_length
        self.capabilities_known = capabilities_known
        self.requests: list[Request] = []
        self._position = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits for it, and the suite starts many servers.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._stopped = False

    @property
    def url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def start(self) -> FakeOllama:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening; connections after this are refused."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what tests read ----------------------------------------------------------------------

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == "/api/chat"]

    def offered_tools(self, index: int) -> list[str]:
        """Names of the tools offered in the `index`-th chat request."""
        return [t["function"]["name"] for t in self.chat_requests[index].get("tools") or []]

    def last_message(self, index: int) -> dict[str, Any]:
        messages: list[dict[str, Any]] = self.chat_requests[index]["messages"]
        return messages[-1]

    # -- behaviour --------------------------------------------------------------------------

    def next_item(self, body: dict[str, Any]) -> ScriptItem:
        if callable(self.script):
            return self.script(body)
        with self._lock:
            position = self._position
            self._position += 1
        if position >= len(self.script):
            return HttpError(500, f"fake script exhausted after {len(self.script)} replies")
        return self.script[position]

    def model_known(self, name: str) -> bool:
        return _full_name(name) in {_full_name(m) for m in self.models}

    def show_body(self, name: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "modelfile": f"FROM {name}",
            "parameters": 'stop "<|im_end|>"',
            "template": "{{ .Prompt }}",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "qwen2",
                "families": ["qwen2"],
                "parameter_size": "7.6B",
                "quantization_level": "Q4_K_M",
            },
            "model_info": {
                "general.architecture": "qwen2",
                "qwen2.context_length": self.context_length,
            },
            "modified_at": _now(),
        }
        if self.capabilities_known:
            body["capabilities"] = (
                ["completion", "tools"] if self.tools_capability else ["completion"]
            )
        return body

    def wait(self, seconds: float) -> None:
        """Sleep, but wake up at once when the server stops (the suite stays fast)."""
        self._stopping.wait(seconds)


def _full_name(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _chunk(
    model: str, content: str, done: bool, calls: Sequence[tuple[str, dict[str, Any]]] = ()
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in calls]
    return {"model": model, "created_at": _now(), "message": message, "done": done}


def _final(
    model: str, item: Reply, content: str, calls: Sequence[tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    out = _chunk(model, content, True, calls)
    out.update(
        done_reason="stop",
        total_duration=1_000_000,
        load_duration=1000,
        prompt_eval_count=item.prompt_tokens,
        prompt_eval_duration=item.prompt_eval_ns,
        eval_count=item.completion_tokens,
        eval_duration=item.eval_ns,
    )
    return out


def _handler_for(fake: FakeOllama) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # small NDJSON chunks would wait for delayed ACKs

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            fake.requests.append(Request("GET", self.path, {}))
            if self.path == "/api/version":
                self._json(200, {"version": VERSION})
            elif self.path == "/api/tags":
                models = [
                    {
                        "name": _full_name(m),
                        "model": _full_name(m),
                        "modified_at": _now(),
                        "size": 4_683_087_332,
                        "digest": "845dbda0ea48ed749caafd9e6037047aa19acfcfd82e704d7ca97d631a0b6",
                        "details": {"format": "gguf", "family": "qwen2", "parameter_size": "7.6B"},
                    }
                    for m in fake.models
                ]
                self._json(200, {"models": models})
            else:
                self._json(404, {"error": "404 page not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            body = json.loads(raw or b"{}")
            fake.requests.append(Request("POST", self.path, body))
            name = str(body.get("model") or body.get("name") or "")
            if self.path == "/api/show":
                if not fake.model_known(name):
                    self._json(404, {"error": f"model '{name}' not found"})
                else:
                    self._json(200, fake.show_body(name))
            elif self.path == "/api/chat":
                self._chat(body, name)
            else:
                self._json(404, {"error": "404 page not found"})

        def _chat(self, body: dict[str, Any], name: str) -> None:
            if not fake.model_known(name):
                self._json(404, {"error": f"model '{name}' not found"})
                return
            if body.get("tools") and not fake.tools_capability:
                self._json(
                    400, {"error": f"registry.ollama.ai/library/{name} does not support tools"}
                )
                return
            item = fake.next_item(body)
            # The client may give up (timeout) before the answer comes, as with a real server.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer(item, body, name)

        def _answer(self, item: ScriptItem, body: dict[str, Any], name: str) -> None:
            if isinstance(item, Hang):
                fake.wait(item.seconds)
                item = item.then
            if isinstance(item, Die):
                # No answer at all: close the socket, and stop listening from another thread
                # (shutdown() waits for serve_forever, which is waiting for this handler).
                self.close_connection = True
                self.connection.shutdown(2)
                threading.Thread(target=fake.stop, daemon=True).start()
                return
            if isinstance(item, Garbage):
                self._raw(200, item.body, "text/html")
            elif isinstance(item, HttpError):
                self._json(item.status, {"error": item.error})
            elif isinstance(item, ErrorMidStream):
                self._stream([_chunk(name, "The data", False), {"error": item.error}])
            elif body.get("stream", True):
                self._stream(_stream_parts(name, item))
            else:
                self._json(200, _final(name, item, item.content, item.tool_calls))

        def _stream(self, parts: Iterable[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in parts:
                line = json.dumps(part).encode() + b"\n"
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            self._raw(status, json.dumps(payload).encode(), "application/json; charset=utf-8")

        def _raw(self, status: int, data: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    return Handler


def _stream_parts(model: str, item: Reply) -> list[dict[str, Any]]:
    """Content in a few pieces, tool calls in one chunk (as Ollama sends them), then the totals."""
    words = item.content.split(" ")
    pieces = [
        " ".join(words[i : i + 4]) + (" " if i + 4 < len(words) else "")
        for i in range(0, len(words), 4)
    ]
    parts = [_chunk(model, piece, False) for piece in pieces if piece]
    if item.tool_calls:
        parts.append(_chunk(model, "", False, item.tool_calls))
    parts.append(_final(model, item, "", ()))
    return parts


# -- fake detection tools -------------------------------------------------------------------
# Real `Tool` objects over a tiny CSV whose plan functions count their executions: the agent,
# the runner and the guard handle them exactly like the real checks.


@dataclass
class ToolBench:
    tools: list[Tool]
    dataset: Dataset
    config: Config
    executions: dict[str, int]
    failing: set[str]


def tool_bench(
    tmp_path: Path, failing: Iterable[str] = (), config: Config | None = None
) -> ToolBench:
    """Five counting tools named like the real ones; tools in `failing` raise when run."""
    path = tmp_path / "tiny.csv"
    path.write_text(
        "timestamp,device_id,temp\n"
        "2024-01-01T00:00:00,a,1.0\n2024-01-01T00:01:00,a,2.0\n2024-01-01T00:02:00,b,\n",
        encoding="utf-8",
    )
    config = config or Config()
    dataset = load(str(path), config)
    executions = dict.fromkeys(DETECTION_TOOL_NAMES, 0)
    failing_set = set(failing)
    parameters = {
        "type": "object",
        "properties": {
            "column": {
                "type": "string",
                "description": "Only this column.",
                "enum": list(dataset.columns),
            },
        },
        "required": [],
    }

    def plan_for(name: str) -> Callable[[Dataset, Config, Scope], CheckPlan]:
        def plan(ds: Dataset, cfg: Config, scope: Scope) -> CheckPlan:
            if name in failing_set:
                raise ValueError(f"{name} exploded on this data")

            def finish(frames: list[pl.DataFrame]) -> CheckResult:
                executions[name] += 1
                rows = int(frames[0].item())
                scope_text = f" in column {scope.column}" if scope.column else ""
                return CheckResult(
                    name, Status.WARN, f"{name}: 1 finding{scope_text} in {rows} rows"
                )

            return CheckPlan(name, [ds.frame.select(pl.len())], finish)

        return plan

    tools = [
        Tool(name, f"The {name} detection tool.", parameters, dataset, config, plan_for(name))
        for name in DETECTION_TOOL_NAMES
    ]
    return ToolBench(tools, dataset, config, executions, failing_set)


def wait_until(predicate: Callable[[], bool], seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# -- recorded transcripts of a real model ----------------------------------------------------
# A transcript is what a real model replied, turn by turn, with what each request offered. It is
# recorded from a `--trace` file of a real run (`transcript_from_trace`) and replayed by `Replay`,
# which also checks that each request offers the same tools and `num_predict` as when recorded:
# a change in what the agent offers fails the test instead of silently replaying another run.

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "llm"


def transcript_from_trace(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One turn per model call: the request's offer and the model's exact reply."""
    turns: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None
    for event in events:
        if event["event"] == "model_call":
            pending = {
                "offered": list(event.get("offered") or []),
                "num_predict": event.get("num_predict"),
                "prompt_tokens": event["prompt_tokens"],
                "completion_tokens": event["completion_tokens"],
                "seconds": event["seconds"],
            }
        elif event["event"] == "model_reply" and pending is not None:
            pending["content"] = event["content"]
            pending["tool_calls"] = [
                [c["name"], c["arguments"]] for c in event.get("tool_calls") or []
            ]
            turns.append(pending)
            pending = None
    return turns


def load_transcript(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


class Replay:
    """A script that answers with the recorded replies, in order, checking each request."""

    def __init__(self, turns: Sequence[dict[str, Any]]) -> None:
        self.turns = list(turns)
        self.position = 0
        self.mismatches: list[str] = []
        self.after_end: list[dict[str, Any]] = []

    @property
    def exhausted(self) -> bool:
        return self.position == len(self.turns)

    def __call__(self, body: dict[str, Any]) -> ScriptItem:
        if self.position >= len(self.turns):
            # The recording ended here (the run was stopped): the server fails from now on.
            self.after_end.append(body)
            return HttpError(500, "the recording ends here")
        turn = self.turns[self.position]
        offered = [t["function"]["name"] for t in body.get("tools") or []]
        num_predict = (body.get("options") or {}).get("num_predict")
        if offered != turn["offered"]:
            self.mismatches.append(
                f"request {self.position}: offered {offered}, recorded {turn['offered']}"
            )
        if num_predict != turn["num_predict"]:
            self.mismatches.append(
                f"request {self.position}: num_predict {num_predict}, "
                f"recorded {turn['num_predict']}"
            )
        self.position += 1
        return Reply(
            content=turn["content"],
            tool_calls=tuple((name, dict(arguments)) for name, arguments in turn["tool_calls"]),
            prompt_tokens=turn["prompt_tokens"],
            completion_tokens=turn["completion_tokens"],
        )
