"""The one result shape shared by every check, the report, JSON, history, guard and exit code."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"
    SKIPPED = "skipped"


class Source(StrEnum):
    """Who ran a check: the model (`agent`), the guard after the model skipped it
    (`backfilled`), or plain code with no agent in the run (`direct`)."""

    DIRECT = "direct"
    AGENT = "agent"
    BACKFILLED = "backfilled"


class Verdict(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


# A dimension that could not be checked is not a pass: an error counts as a warning.
_VERDICT_OF_STATUS = {
    Status.PASS: Verdict.PASS,
    Status.SKIPPED: Verdict.PASS,
    Status.WARN: Verdict.WARN,
    Status.ERROR: Verdict.WARN,
    Status.FAIL: Verdict.FAIL,
}
_VERDICT_RANK = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2}

# Bounds for what a model sees: long observations make small models stop early.
OBSERVATION_MAX_CHARS = 700
_MAX_FINDINGS_IN_OBSERVATION = 4
_MAX_EXAMPLES_PER_FINDING = 5


def jsonable(value: Any) -> Any:
    """Turn metric values (numpy-free: Python scalars, datetimes, nested containers) into JSON."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


@dataclass(frozen=True)
class Finding:
    """One problem: what, where (column / entity / time range), how many, a few example rows."""

    what: str
    count: int
    severity: Status = Status.WARN
    column: str | None = None
    entity: str | None = None
    start: str | None = None
    end: str | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "count": self.count,
            "severity": str(self.severity),
            "column": self.column,
            "entity": self.entity,
            "start": self.start,
            "end": self.end,
            "examples": jsonable(self.examples[:_MAX_EXAMPLES_PER_FINDING]),
        }

    def where(self) -> str:
        parts = []
        if self.column:
            parts.append(f"column {self.column}")
        if self.entity:
            parts.append(f"entity {self.entity}")
        if self.start and self.end and self.start != self.end:
            parts.append(f"{self.start} .. {self.end}")
        elif self.start:
            parts.append(f"at {self.start}")
        return ", ".join(parts)


# The metric keys each check's result always holds (README "JSON report"), by tool: each
# check's spec registers its own (`checks.spec.CheckSpec`), and every result gets them, null when
# the check did not evaluate them, also when it was skipped or could not run.
_METRIC_KEYS: dict[str, tuple[str, ...]] = {}
# Every check's result says how many findings it left out of its list.
COMMON_METRIC_KEYS = ("findings_left_out",)


def register_metric_keys(tool: str, keys: Iterable[str]) -> None:
    _METRIC_KEYS[tool] = (*dict.fromkeys(keys), *COMMON_METRIC_KEYS)


def metric_keys(tool: str) -> tuple[str, ...]:
    """The metric keys every result of `tool` holds."""
    return _METRIC_KEYS.get(tool, COMMON_METRIC_KEYS)


def left_out(findings: list[Finding], limit: int) -> tuple[list[Finding], int]:
    """The first `limit` findings and how many were left out."""
    return findings[:limit], max(0, len(findings) - limit)


@dataclass(frozen=True)
class Event:
    """Problem rows of one kind on one entity (and column) within one time bucket, or one span
    (a gap). The report builds its incidents and device-by-time grid from these; a check's
    `events` are bounded (`events_complete` is False when some were left out)."""

    kind: str
    entity: str | None
    column: str | None
    start: datetime
    end: datetime
    count: int


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one detection tool."""

    tool: str
    status: Status
    summary: str
    metrics: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    source: Source = Source.DIRECT
    duration_seconds: float = 0.0
    error: str | None = None
    suggestion: str | None = None
    events: list[Event] = field(default_factory=list)
    events_complete: bool = True

    def __post_init__(self) -> None:
        # Every documented key in every result, whichever path built it.
        missing = [k for k in metric_keys(self.tool) if k not in self.metrics]
        if missing:
            object.__setattr__(self, "metrics", {**self.metrics, **dict.fromkeys(missing)})

    @classmethod
    def failed(cls, tool: str, error: str, suggestion: str) -> CheckResult:
        """The structured placeholder for a tool that raised: the dimension stays in the report."""
        return cls(
            tool=tool,
            status=Status.ERROR,
            summary=f"{tool} could not run: {error}",
            error=error,
            suggestion=suggestion,
        )

    def with_source(self, source: Source) -> CheckResult:
        return replace(self, source=source)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": str(self.status),
            "source": str(self.source),
            "summary": self.summary,
            "metrics": jsonable(self.metrics),
            "findings": [f.to_dict() for f in self.findings],
            "duration_seconds": round(self.duration_seconds, 4),
        }
        if self.error is not None:
            out["error"] = self.error
            out["suggestion"] = self.suggestion
        return out

    def observation(self) -> str:
        """A compact, bounded text for the model.

        Data values and names are quoted and fenced so they read as data, never as instructions.
        """
        if self.status is Status.ERROR:
            payload: dict[str, Any] = {"error": self.error, "suggestion": self.suggestion}
        else:
            payload = {
                "status": str(self.status),
                "summary": self.summary,
                "findings": [
                    {
                        "what": f.what,
                        "count": f.count,
                        **({"column": f.column} if f.column else {}),
                        **({"entity": f.entity} if f.entity else {}),
                        **({"start": f.start} if f.start else {}),
                    }
                    for f in self.findings[:_MAX_FINDINGS_IN_OBSERVATION]
                ],
            }
            if len(self.findings) > _MAX_FINDINGS_IN_OBSERVATION:
                payload["more_findings"] = len(self.findings) - _MAX_FINDINGS_IN_OBSERVATION
        text = json.dumps(jsonable(payload), ensure_ascii=True)
        # Data may not close or open a fence: < and > as JSON escapes (still valid JSON).
        text = text.replace("<", "\\u003c").replace(">", "\\u003e")
        if len(text) > OBSERVATION_MAX_CHARS:
            text = text[: OBSERVATION_MAX_CHARS - 15] + " ...(truncated)"
        return f"<tool_result name={self.tool}>\n{text}\n</tool_result>"


def verdict_of(results: list[CheckResult]) -> Verdict:
    """The overall verdict: the worst status among the checks. Code decides it, never a model."""
    worst = Verdict.PASS
    for result in results:
        verdict = _VERDICT_OF_STATUS[result.status]
        if _VERDICT_RANK[verdict] > _VERDICT_RANK[worst]:
            worst = verdict
    return worst


def verdict_rank(verdict: Verdict) -> int:
    return _VERDICT_RANK[verdict]


# A rate threshold is reached only when the count is evidence that the rate is at or above it:
# 1 missing value in 10 rows is 10%, but a process missing 1% of its values shows that 1 time
# in 10.
RATE_SIGNIFICANCE = 0.05


def binomial_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space from k upwards."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    if k <= n * p:
        # At or below the mean the tail is at least about a half: no evidence either way.
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    first = (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * log_p
        + (n - k) * log_q
    )
    total, term, i = 1.0, 1.0, k
    # Terms fall geometrically above the mean; relative to the first one.
    while i < n:
        term *= (n - i) / (i + 1) * (p / (1 - p))
        i += 1
        total += term
        if term < 1e-17 * total:
            break
    return min(1.0, math.exp(first) * total)


_STATUS_RANK = {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2}


def status_rank(status: Status) -> int:
    """Severity of a check status among pass < warn < fail (skipped and error rank as pass)."""
    return _STATUS_RANK.get(status, 0)


def worst_status(statuses: Iterable[Status]) -> Status:
    """The most severe of `statuses` (pass < warn < fail); pass when there are none."""
    return max(statuses, key=status_rank, default=Status.PASS)


def at_least_warn(status: Status) -> Status:
    """A finding's severity: fail stays fail, anything else is a warning."""
    return Status.FAIL if status is Status.FAIL else Status.WARN


def status_from_thresholds(
    value: float, total: int, warn_at: float | None, fail_at: float | None
) -> Status:
    """Pointblank-style threshold: a number below 1 is a fraction of `total`, 1 or more a count.

    A count reaches a count threshold at or above it. A fraction is reached when `value` of
    `total` is at or above it and that is evidence beyond chance: a process whose true rate is
    just the threshold would give so many with a chance of at most RATE_SIGNIFICANCE (a one-sided
    binomial test), so a small file is not failed on one bad row. `None` disables that level; 0
    means any. A zero count always passes.
    """
    if value <= 0:
        return Status.PASS

    def reached(threshold: float | None) -> bool:
        if threshold is None:
            return False
        if threshold < 1:
            if total <= 0 or value / total < threshold:
                return False
            return binomial_sf(math.ceil(value), total, threshold) <= RATE_SIGNIFICANCE
        return value >= threshold

    if reached(fail_at):
        return Status.FAIL
    if reached(warn_at):
        return Status.WARN
    return Status.PASS
