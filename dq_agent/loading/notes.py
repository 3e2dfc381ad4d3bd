"""What loading tells the report: notes for the structure check, and the guesses it made.

Loading never guesses silently: each role, format or layout it inferred is an `Inference` that
names the config key to set it, shown in the report header and in the JSON (`dataset.inferred`).
What loading changed or could not use (a trailing delimiter, files with different columns, a
time column it could not read) is a `LoadNote`, which the structure check reports as a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dq_agent.result import Status


@dataclass(frozen=True)
class LoadNote:
    """A structural fact found while loading. Severity PASS is a note: shown, never a status."""

    what: str
    label: str
    count: int = 1
    severity: Status = Status.WARN
    column: str | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)
    key: str = ""
    """A short machine name (`trailing_delimiter`, `schema_differences`, ...) for the metrics."""


@dataclass(frozen=True)
class Inference:
    """A role, format or layout that loading guessed, and how to set it instead."""

    role: str
    value: str
    reason: str
    setting: str
    """The config key that sets it; empty when nothing needs setting (comment lines skipped)."""

    def to_dict(self) -> dict[str, str]:
        return {
            "role": self.role,
            "value": self.value,
            "reason": self.reason,
            "setting": self.setting,
        }
