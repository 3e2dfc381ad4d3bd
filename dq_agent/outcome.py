"""The outcome of one inspection: dataset facts, every check, the audit, the agent's account.

The Rich, JSON and Markdown reports, the history and the exit code all read this one object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dq_agent.errors import EXIT_INPUT, EXIT_OK, EXIT_VERDICT
from dq_agent.result import CheckResult, Status, Verdict, jsonable, verdict_of, verdict_rank

SCHEMA_VERSION = "1.0"


@dataclass
class DatasetInfo:
    path: str
    file_format: str
    files: int
    rows: int
    columns: list[str]
    roles: dict[str, Any]
    time_start: str | None = None
    time_end: str | None = None
    entities: int | None = None
    dtypes: dict[str, str] = field(default_factory=dict)
    inferred: list[dict[str, str]] = field(default_factory=list)
    """What loading guessed (`loading.notes.Inference.to_dict`): role, value, reason, setting."""
    engine: str = "polars"
    """Where the checks of the run ran (`dq_agent.engines`, `run.engine`): "spark" for a
    Spark DataFrame."""
    on_polars: list[str] = field(default_factory=list)
    """The selected checks not yet ported to `engine`, which ran on Polars instead (the data
    was read into memory by the loader anyway)."""

    engine_reason: str | None = None
    """Why the run chose `engine` itself, when it did: the data over the memory budget."""
    made_columns: dict[str, list[str]] = field(default_factory=dict)
    """Columns of `columns` that loading made from others, not in the file: the timestamp read
    from a date and a time column ("Datum + Uhrzeit": ["Datum", "Uhrzeit"])."""

    @property
    def file_columns(self) -> int:
        """How many columns the data itself has (`columns` less the ones loading made)."""
        return len(self.columns) - len(self.made_columns)

    def column_names(self) -> list[str]:
        """`columns` for a report, each made one with what it was made from."""
        return [
            f"{c} (made from {' and '.join(self.made_columns[c])})" if c in self.made_columns else c
            for c in self.columns
        ]

    def engine_note(self) -> str | None:
        """Where the checks ran, for a report, when not all on Polars (None otherwise)."""
        if self.engine == "polars":
            return None
        parts = [self.engine]
        if self.engine_reason:
            parts.append(self.engine_reason)
        if self.on_polars:
            parts.append(f"on Polars, not yet ported there: {', '.join(self.on_polars)}")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.file_format,
            "engine": self.engine,
            "on_polars": list(self.on_polars),
            "engine_reason": self.engine_reason,
            "files": self.files,
            "rows": self.rows,
            "columns": list(self.columns),
            "made_columns": {name: list(parts) for name, parts in self.made_columns.items()},
            "dtypes": dict(self.dtypes),
            "roles": self.roles,
            "time_range": {"start": self.time_start, "end": self.time_end},
            "entities": self.entities,
            "inferred": [dict(item) for item in self.inferred],
        }


@dataclass
class Audit:
    """What the completeness guard saw: which tools were expected, called and backfilled."""

    expected_tools: list[str]
    called_tools: list[str] = field(default_factory=list)
    called_after_push: list[str] = field(default_factory=list)
    """Of `called_tools`, those the model called only after the loop ran verify_result for it."""
    fallback_executed: list[str] = field(default_factory=list)
    fallback_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "expected_tools": list(self.expected_tools),
            "called_tools": list(self.called_tools),
            "called_after_push": list(self.called_after_push),
            "fallback_executed": list(self.fallback_executed),
            "fallback_outputs": jsonable(self.fallback_outputs),
        }


@dataclass
class AgentInfo:
    """The model's part in the run. `status`: disabled | ok | unavailable | failed."""

    status: str = "disabled"
    model: str | None = None
    mode: str = "none"
    error: str | None = None
    steps: int = 0
    sentinel_rounds: int = 0
    sentinel_invocations: list[dict[str, Any]] = field(default_factory=list)
    """One entry per verify_result round: {round, by: model | loop, missing}."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    narrative: str | None = None
    narrative_checks: dict[str, Any] | None = None
    merge: str | None = None
    account_source: str | None = None
    """Whose account `narrative` is: "model" (checked) or "dq-agent" (the model's text rejected)."""
    account_reason: str | None = None
    """Why the model's text was rejected, e.g. "echoed tool output"."""
    rejected_narrative: str | None = None
    """The model's text as it was rejected (after the repair round)."""

    def account_line(self) -> str | None:
        """What the report says about the account it shows."""
        if self.account_source == "model":
            return "account: model (checked)"
        if self.account_source == "dq-agent":
            return f"account: written by dq-agent (model text rejected: {self.account_reason})"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "model": self.model,
            "mode": self.mode,
            "error": self.error,
            "steps": self.steps,
            "sentinel_rounds": self.sentinel_rounds,
            "sentinel_invocations": jsonable(self.sentinel_invocations),
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
            "narrative": self.narrative,
            "narrative_checks": self.narrative_checks,
            "merge": self.merge,
            "account": {"source": self.account_source, "reason": self.account_reason},
            "rejected_narrative": self.rejected_narrative,
        }


@dataclass
class Inspection:
    dataset: DatasetInfo
    checks: dict[str, CheckResult]
    audit: Audit
    agent: AgentInfo = field(default_factory=AgentInfo)
    timings: dict[str, float] = field(default_factory=dict)
    started_at: str = ""
    as_of: str | None = None
    baseline: dict[str, Any] | None = None
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    """The maintenance windows and the readings each excused (`maintenance.WindowCount`)."""

    @property
    def verdict(self) -> Verdict:
        return verdict_of(list(self.checks.values()))

    def nothing_checked(self) -> bool:
        """True when no dimension produced a real result (all errored or were skipped)."""
        return all(c.status in (Status.ERROR, Status.SKIPPED) for c in self.checks.values())

    def unchecked(self) -> list[str]:
        """The checks that errored: their dimension of the data was not checked."""
        return [name for name, c in self.checks.items() if c.status is Status.ERROR]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "started_at": self.started_at,
            "as_of": self.as_of,
            "dataset": self.dataset.to_dict(),
            "verdict": str(self.verdict),
            "checks": {name: result.to_dict() for name, result in self.checks.items()},
            "maintenance": jsonable(self.maintenance),
            "audit": self.audit.to_dict(),
            "agent": self.agent.to_dict(),
            "baseline": self.baseline,
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
        }


FAIL_ON_CHOICES = ("warn", "fail", "never")


def exit_code_for(inspection: Inspection, fail_on: str) -> int:
    """The exit-code contract: 3 when nothing or part of the data could not be checked (a check
    errored), 1 at or above --fail-on, else 0."""
    if inspection.nothing_checked() or inspection.unchecked():
        return EXIT_INPUT
    if fail_on == "never":
        return EXIT_OK
    threshold = Verdict(fail_on)
    return EXIT_VERDICT if verdict_rank(inspection.verdict) >= verdict_rank(threshold) else EXIT_OK
