"""A tolerant reader of what small models write instead of clean tool calls.

Two cases: tool calls written as JSON text in `content` (bare, fenced, or in `<tool_call>` tags,
as Qwen models do when the template slips), and the text ReAct format (Thought / Action /
Action Input / Final Answer) for models without native tool calling. Whatever a model invents
after its action (an `Observation:` or a `<tool_response>`) is cut off: only code observes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from dq_agent.agent.client import ToolCall

_FIELD = re.compile(
    r"^[ \t*#>]*(thought|action input|action|observation|final answer)\s*:[ \t]*", re.I | re.M
)
_INVENTED = re.compile(r"<tool_response>.*?(</tool_response>|\Z)", re.S | re.I)
_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.S | re.I)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_CALL_KEYS = {"name", "arguments", "parameters", "type", "id", "function"}
# `<function name="<check>" arguments={...} />`, as Qwen2.5-Coder-1.5B writes calls inside a
# `<tools>` wrapper (the arguments are often unbalanced: only the name is relied on).
_XML_FUNCTION = re.compile(r"<function\s+name\s*=\s*[\"']?([A-Za-z_][\w.-]*)[\"']?([^\n]*)", re.I)


@dataclass(frozen=True)
class ParsedTurn:
    """One assistant turn read as: tool calls to run, or a final answer, or neither."""

    calls: list[ToolCall] = field(default_factory=list)
    final_answer: str | None = None
    thought: str | None = None


def parse_content_calls(text: str) -> list[ToolCall]:
    """Tool calls written in the text: JSON `{"name": ..., "arguments": ...}` objects (bare, fenced,
    in lists, one per line in a `<tools>` wrapper), or `<function name=... arguments=...>` tags."""
    body = _THINK.sub("", _INVENTED.sub("", text))
    tagged = [_xml_call(m) for m in _XML_FUNCTION.finditer(body)]
    if tagged:
        return tagged
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    position = 0
    while position < len(body):
        match = re.compile(r"[\[{]").search(body, position)
        if match is None:
            break
        try:
            value, end = decoder.raw_decode(body, match.start())
        except json.JSONDecodeError:
            position = match.start() + 1
            continue
        calls.extend(_calls_in(value))
        position = end
    return calls


def _xml_call(match: re.Match[str]) -> ToolCall:
    rest = match.group(2)
    at = rest.find("{")
    arguments: Any = {}
    if at >= 0:
        try:
            arguments, _ = json.JSONDecoder().raw_decode(rest, at)
        except json.JSONDecodeError:
            arguments = {"arguments": rest.strip()}
    return ToolCall(match.group(1), arguments)


def parse_react(text: str) -> ParsedTurn:
    """Read the text ReAct format; the first Action wins and anything invented after it is cut."""
    body = _THINK.sub("", text)
    fields = _fields(body)
    thought = next((value for name, value in fields if name == "thought"), None)
    names = [name for name, _ in fields]
    if "action" in names and (
        "final answer" not in names or names.index("action") < names.index("final answer")
    ):
        at = names.index("action")
        action = _clean_name(fields[at][1])
        raw_input = (
            fields[at + 1][1] if at + 1 < len(fields) and names[at + 1] == "action input" else ""
        )
        return ParsedTurn(calls=[ToolCall(action, _parse_arguments(raw_input))], thought=thought)
    if "final answer" in names:
        return ParsedTurn(
            final_answer=clean_answer(fields[names.index("final answer")][1]), thought=thought
        )
    calls = parse_content_calls(body)
    if calls:
        return ParsedTurn(calls=calls, thought=thought)
    if fields:
        # Only a Thought (or an invented Observation): neither an action nor an answer.
        return ParsedTurn(thought=thought)
    return ParsedTurn(final_answer=clean_answer(body))


def clean_answer(text: str) -> str:
    """The answer without reasoning tags, invented tool responses or a `Final Answer:` label."""
    body = _THINK.sub("", _INVENTED.sub("", text)).strip()
    return re.sub(r"^\s*(\*\*)?final answer(\*\*)?\s*:\s*(\*\*)?", "", body, flags=re.I).strip()


def _fields(text: str) -> list[tuple[str, str]]:
    """(field, value) pairs in order, up to the first Observation the model wrote itself."""
    matches = list(_FIELD.finditer(text))
    out: list[tuple[str, str]] = []
    for index, match in enumerate(matches):
        name = match.group(1).lower()
        if name == "observation":
            break
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        out.append((name, text[match.end() : end].strip()))
    return out


def _clean_name(raw: str) -> str:
    first_line = raw.strip().splitlines()[0] if raw.strip() else ""
    name = first_line.strip().strip("`'\"*").strip()
    return name[:-2] if name.endswith("()") else name


def _parse_arguments(raw: str) -> Any:
    text = _FENCE.sub("", raw.strip()).strip()
    if text.lower() in ("", "none", "null", "{}", "no input", "n/a"):
        return {}
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        return text
    return value


def _calls_in(value: Any, wrapped: bool = False) -> list[ToolCall]:
    if isinstance(value, list):
        return [call for item in value for call in _calls_in(item)]
    if not isinstance(value, dict) or not set(value) <= _CALL_KEYS:
        return []
    if isinstance(value.get("function"), dict):
        return _calls_in(value["function"], wrapped=True)
    name = value.get("name")
    # A bare {"name": ...} is more likely data quoted in an answer than a call.
    has_arguments = "arguments" in value or "parameters" in value
    if not isinstance(name, str) or not name or not (has_arguments or wrapped):
        return []
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = _parse_arguments(arguments)
    return [ToolCall(name, {} if arguments is None else arguments)]


def visible_part(text: str) -> str:
    """The reply up to what the model invented as the tools' answer (kept out of the history)."""
    match = _INVENTED_START.search(text)
    return (text[: match.start()] if match else text).rstrip()


_INVENTED_START = re.compile(r"^[ \t*#>]*observation\s*:|<tool_response>", re.I | re.M)
