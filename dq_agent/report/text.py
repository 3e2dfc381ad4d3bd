"""Making data safe to show: no terminal escape sequence or control byte from data reaches a screen."""

from __future__ import annotations

import re
from typing import Any

# C0 controls except tab/newline, DEL, and C1 controls (ESC and CSI among them); also the
# Unicode bidirectional overrides, which can make a report line read differently from its bytes.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe(value: Any, limit: int = 200) -> str:
    """`value` as printable text: control characters shown as \\xNN, long text shortened."""
    text = _CONTROL.sub(_escaped, str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(value: Any, limit: int = 200) -> str:
    return safe(str(value).replace("\r", " ").replace("\n", " "), limit)


def format_example(example: dict[str, Any]) -> str:
    return ", ".join(f"{one_line(k, 40)}={one_line(v, 60)}" for k, v in example.items())
