"""Tool markup in a model's prose: removed before the prose is checked, echoes remembered.

Small models write their tool calls into the text (`<tool_call>`, `<tools>` wrappers, JSON call
objects) and echo the observations back (`<tool_result>` blocks, the observation JSON). None of it
is prose a person can read. The calls are dropped silently; an echo is remembered, because a
model that pastes tool output instead of writing an account has not written one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# Blocks whose content is an echo of tool output.
_ECHO_BLOCKS = re.compile(r"<(tool_result|tool_response)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.S | re.I)
# Blocks whose content is the model's own tool calls (or the offered schemas).
_CALL_BLOCKS = re.compile(
    r"<(tool_call|tools|function_call)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.S | re.I
)
_STRAY_TAGS = re.compile(
    r"</?(?:tool_call|tools|tool_result|tool_response|function_call|answer)\b[^>]*>", re.I
)
_OBSERVATION_KEYS = ({"status", "summary"}, {"status", "findings"}, {"error", "suggestion"})
_CALL_KEYS = ({"name", "arguments"}, {"name", "parameters"}, {"function"})


@dataclass(frozen=True)
class CleanedText:
    text: str
    echoed: bool
    """Tool output was pasted into the prose."""
    removed_markup: bool


def clean_markup(text: str) -> CleanedText:
    echoed = bool(_ECHO_BLOCKS.search(text))
    body = _ECHO_BLOCKS.sub(" ", text)
    body = _CALL_BLOCKS.sub(" ", body)
    body, json_echo = _drop_tool_json(body)
    body = _STRAY_TAGS.sub(" ", body)
    body = re.sub(r"```(?:json)?\s*```", " ", body)
    body = re.sub(r"[ \t]+\n", "\n", body)
    body = re.sub(r"\n{3,}", "\n\n", body).strip()
    return CleanedText(body, echoed or json_echo, body != text.strip())


def _drop_tool_json(text: str) -> tuple[str, bool]:
    """Remove JSON objects that are tool calls or observations; True if an observation was one."""
    decoder = json.JSONDecoder()
    out: list[str] = []
    position = 0
    echoed = False
    while True:
        start = text.find("{", position)
        if start < 0:
            out.append(text[position:])
            break
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            out.append(text[position : start + 1])
            position = start + 1
            continue
        keys = set(value) if isinstance(value, dict) else set()
        if any(k <= keys for k in _OBSERVATION_KEYS):
            echoed = True
            out.append(text[position:start])
        elif any(k <= keys for k in _CALL_KEYS):
            out.append(text[position:start])
        else:
            out.append(text[position:end])
        position = end
    return "".join(out), echoed
