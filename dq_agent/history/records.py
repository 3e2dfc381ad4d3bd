"""One recorded run, as the history stores it and as stats, baseline and views read it.

A `RunRecord` is built from the JSON contract (`Inspection.to_dict()`) plus the exit code, so
the history records exactly what the report said. `eval-model` can build records the same way
without a database and feed them to `stats`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dq_agent.history.fingerprint import Fingerprint, fingerprint_of, source_key
from dq_agent.maintenance import total_excused
from dq_agent.outcome import Inspection

# Agent statuses of runs in which no model took part (outcome.AgentInfo.status).
NO_AGENT_STATUSES = frozenset({"disabled", "unavailable"})


def dataset_key(path: str, name: str | None = None) -> str:
    """What identifies "the same dataset" across runs: the configured name, else the absolute
    path, so a cron job and a person in another directory share one baseline."""
    if name:
        return name
    return source_key(path)


@dataclass(frozen=True)
class CheckRecord:
    tool: str
    status: str
    source: str
    summary: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    duration_seconds: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "source": self.source,
            "summary": self.summary,
            "metrics": self.metrics,
            "duration_seconds": self.duration_seconds,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class RunRecord:
    recorded_at: str
    started_at: str | None
    as_of: str | None
    dataset_path: str
    dataset_key: str
    dataset_format: str | None
    rows: int | None
    fingerprint: Fingerprint | None
    model: str | None
    mode: str | None
    agent_status: str | None
    verdict: str
    exit_code: int
    expected_tools: list[str]
    called_tools: list[str]
    fallback_executed: list[str]
    sentinel_rounds: int = 0
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_seconds: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    narrative_checks: dict[str, Any] | None = None
    called_after_push: list[str] = field(default_factory=list)
    """Detection tools the model called only after the loop ran the sentinel for it."""
    sentinel_invocations: list[dict[str, Any]] = field(default_factory=list)
    """Every sentinel round: {round, by: model|loop, missing}."""
    excused_readings: int | None = None
    """Readings maintenance windows left out of the value and timing checks, each once (0
    without windows; None for a run recorded before the history kept it)."""
    checks: dict[str, CheckRecord] = field(default_factory=dict)
    id: int | None = None
    """Set once stored; grows with every saved run, so it orders runs without trusting clocks."""

    @property
    def agent_ran(self) -> bool:
        """Whether a model drove this run (only such runs say anything about skipping)."""
        return self.agent_status is not None and self.agent_status not in NO_AGENT_STATUSES

    @classmethod
    def from_inspection(
        cls,
        inspection: Inspection,
        exit_code: int,
        *,
        dataset_name: str | None = None,
        recorded_at: datetime | None = None,
    ) -> RunRecord:
        return cls.from_report(
            inspection.to_dict(), exit_code, dataset_name=dataset_name, recorded_at=recorded_at
        )

    @classmethod
    def from_report(
        cls,
        report: Mapping[str, Any],
        exit_code: int,
        *,
        dataset_name: str | None = None,
        recorded_at: datetime | None = None,
    ) -> RunRecord:
        """Build a record from a JSON report (`Inspection.to_dict()`); tolerant of absent keys."""
        dataset = _mapping(report.get("dataset"))
        audit = _mapping(report.get("audit"))
        agent = _mapping(report.get("agent"))
        tokens = _mapping(agent.get("tokens"))
        timings = {
            str(k): float(v) for k, v in _mapping(report.get("timings")).items() if _is_number(v)
        }
        path = str(dataset.get("path") or "")
        checks = {
            str(tool): _check_record(str(tool), _mapping(body))
            for tool, body in _mapping(report.get("checks")).items()
        }
        narrative = agent.get("narrative_checks")
        when = recorded_at or datetime.now(UTC)
        return cls(
            recorded_at=when.isoformat(timespec="seconds"),
            started_at=_optional_str(report.get("started_at")),
            as_of=_optional_str(report.get("as_of")),
            dataset_path=path,
            dataset_key=dataset_key(path, dataset_name),
            dataset_format=_optional_str(dataset.get("format")),
            rows=_optional_int(dataset.get("rows")),
            fingerprint=fingerprint_of(dataset),
            model=_optional_str(agent.get("model")),
            mode=_optional_str(agent.get("mode")),
            agent_status=_optional_str(agent.get("status")),
            verdict=str(report.get("verdict") or ""),
            exit_code=int(exit_code),
            expected_tools=_str_list(audit.get("expected_tools")),
            called_tools=_str_list(audit.get("called_tools")),
            fallback_executed=_str_list(audit.get("fallback_executed")),
            sentinel_rounds=_optional_int(agent.get("sentinel_rounds")) or 0,
            steps=_optional_int(agent.get("steps")) or 0,
            prompt_tokens=_optional_int(tokens.get("prompt")) or 0,
            completion_tokens=_optional_int(tokens.get("completion")) or 0,
            duration_seconds=total_duration(timings),
            timings=timings,
            narrative_checks=dict(narrative) if isinstance(narrative, Mapping) else None,
            called_after_push=_str_list(audit.get("called_after_push")),
            sentinel_invocations=[
                dict(item)
                for item in agent.get("sentinel_invocations") or []
                if isinstance(item, Mapping)
            ],
            excused_readings=_excused(report.get("maintenance")),
            checks=checks,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `dq-agent history --format json`: one run with its audit fields."""
        return {
            "id": self.id,
            "recorded_at": self.recorded_at,
            "started_at": self.started_at,
            "as_of": self.as_of,
            "dataset": {
                "path": self.dataset_path,
                "key": self.dataset_key,
                "format": self.dataset_format,
                "rows": self.rows,
                "fingerprint": self.fingerprint.to_dict() if self.fingerprint else None,
            },
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "agent": {
                "model": self.model,
                "mode": self.mode,
                "status": self.agent_status,
                "steps": self.steps,
                "sentinel_rounds": self.sentinel_rounds,
                "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
                "narrative_checks": self.narrative_checks,
                "sentinel_invocations": list(self.sentinel_invocations),
            },
            "audit": {
                "expected_tools": list(self.expected_tools),
                "called_tools": list(self.called_tools),
                "fallback_executed": list(self.fallback_executed),
                "called_after_push": list(self.called_after_push),
            },
            "excused_readings": self.excused_readings,
            "checks": {tool: check.to_dict() for tool, check in self.checks.items()},
            "duration_seconds": self.duration_seconds,
            "timings": dict(self.timings),
        }


# Keys under which the pipeline may record the whole run's wall time (inspection.py: total_seconds).
_TOTAL_KEYS = ("total_seconds", "total")


def total_duration(timings: Mapping[str, float]) -> float | None:
    """The run's wall time: the recorded total when there is one, else the sum of the stages."""
    for key in _TOTAL_KEYS:
        if key in timings:
            return timings[key]
    return sum(timings.values()) if timings else None


def _check_record(tool: str, body: Mapping[str, Any]) -> CheckRecord:
    return CheckRecord(
        tool=tool,
        status=str(body.get("status") or ""),
        source=str(body.get("source") or ""),
        summary=str(body.get("summary") or ""),
        metrics=dict(_mapping(body.get("metrics"))),
        duration_seconds=_optional_float(body.get("duration_seconds")),
        error=_optional_str(body.get("error")),
    )


def _excused(windows: Any) -> int | None:
    """The readings the report's maintenance windows excused in all; None when the report has
    no `maintenance` (written before it existed)."""
    if not isinstance(windows, list):
        return None
    return total_excused([w for w in windows if isinstance(w, Mapping)])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _optional_int(value: Any) -> int | None:
    return int(value) if _is_number(value) else None


def _optional_float(value: Any) -> float | None:
    return float(value) if _is_number(value) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
