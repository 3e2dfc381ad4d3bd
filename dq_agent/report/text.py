"""Making data safe to show: no terminal escape sequence or control byte from data reaches a screen."""

from __future__ import annotations

import re
from typing import Any

# C0 controls except tab/newline, DEL, and C1 controls (ESC and CSI among them).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(value: Any, limit: int = 200) -> str:
    """`value` as printable text: control characters shown as \\xNN, long text shortened."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(value: Any, limit: int = 200) -> str:
    return safe(str(value).replace("\r", " ").replace("\n", " "), limit)


def format_example(example: dict[str, Any]) -> str:
    return ", ".join(f"{one_line(k, 40)}={one_line(v, 60)}" for k, v in example.items())
