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


_UTC_ISO = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d(?::\d\d)?)(\.\d+)?(?:\+00:00|Z)")


def compact_times(text: str) -> str:
    """ISO 8601 UTC timestamps as `2024-03-04 05:13:00` (the report says times are UTC)."""
    return _UTC_ISO.sub(lambda m: f"{m.group(1)} {m.group(2)}{m.group(3) or ''}", text)


def format_example(example: dict[str, Any]) -> str:
    """An example row as `key=value, ...`; an empty entity (a dataset without one) is left out."""
    return ", ".join(
        f"{one_line(k, 40)}={compact_times(one_line(v, 60))}"
        for k, v in example.items()
        if not (k == "entity" and v is None)
    )
