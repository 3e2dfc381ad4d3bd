"""Today against the usual: key metrics compared with the median of the last good runs.

The baseline of a dataset (same configured name, else same absolute path) is the per-metric
median over its last N recorded runs whose verdict was not fail, so a past incident does not
become "normal" and hide the next one. With no such run there is no baseline, and the section
says so instead of inventing one.

What counts as a large change (`ChangeRule`): only a worsening (every key metric is "higher is
worse"), and it must be large both relatively and absolutely: today at least `min_ratio` times
the baseline, and higher by at least `min_rate_increase` (rates, as fractions: 0.005 is half a
percentage point) or `min_count_increase` (counts). The ratio alone would flag 0.01% -> 0.03%;
the absolute floor alone would flag a steady 40% -> 40.6%. A zero baseline meets any ratio, so
there the floor decides.

Maintenance windows leave readings out of the value and timing checks, so a night with many
excused readings checks fewer: its rates and counts are of the rest. The section gives the
readings excused today and the baseline runs' median (`excused_readings`), and when today
excused many more (the count rule), its message and every finding say so beside the change.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dq_agent.catalogue import CATALOGUE, spec_of
from dq_agent.history.records import RunRecord, dataset_key
from dq_agent.history.store import HistoryStore
from dq_agent.maintenance import total_excused
from dq_agent.outcome import Inspection
from dq_agent.result import Finding, Status

DEFAULT_BASELINE_RUNS = 7
_UNUSABLE_STATUSES = frozenset({str(Status.ERROR), str(Status.SKIPPED)})


@dataclass(frozen=True)
class ChangeRule:
    min_ratio: float = 2.0
    min_rate_increase: float = 0.005
    min_count_increase: float = 5.0

    def is_large(self, kind: str, today: float, baseline: float) -> bool:
        floor = self.min_rate_increase if kind == "rate" else self.min_count_increase
        return today - baseline >= floor and today >= self.min_ratio * baseline


DEFAULT_RULE = ChangeRule()


@dataclass(frozen=True, order=True)
class KeyMetric:
    tool: str
    name: str
    column: str | None
    kind: str
    """"rate" (a fraction of rows) or "count"."""
    label: str


# (tool, metrics.columns.<col>.<rate>, label suffix, metrics.columns.<col>.<count behind it>).
_PER_COLUMN_RATES = tuple(
    (spec.name, metric.key, metric.label, metric.count_key)
    for spec in CATALOGUE
    for metric in spec.baseline
    if metric.per_column
)
# (tool, metrics.<name>, label): figures for the whole dataset.
_COUNTS = tuple(
    (spec.name, metric.key, metric.label)
    for spec in CATALOGUE
    for metric in spec.baseline
    if not metric.per_column
)


def key_metrics(metrics_by_tool: Mapping[str, Mapping[str, Any]]) -> dict[KeyMetric, float]:
    """The comparable figures of one run; a metric that is absent or not a number is skipped."""
    found: dict[KeyMetric, float] = {}
    for metric, values in _column_metrics(metrics_by_tool):
        value = _number(values.get(metric.name))
        if value is not None:
            found[metric] = value
    for tool, name, label in _COUNTS:
        value = _number(metrics_by_tool.get(tool, {}).get(name))
        if value is not None:
            found[KeyMetric(tool, name, None, _kind(tool, name), label)] = value
    return found


def rate_counts(metrics_by_tool: Mapping[str, Mapping[str, Any]]) -> dict[KeyMetric, int]:
    """The count behind each per-column rate (missing_count, outlier_count) where reported."""
    count_keys = {(tool, name): count for tool, name, _, count in _PER_COLUMN_RATES}
    found: dict[KeyMetric, int] = {}
    for metric, values in _column_metrics(metrics_by_tool):
        count_key = count_keys[(metric.tool, metric.name)]
        count = _number(values.get(count_key)) if count_key is not None else None
        if count is not None:
            found[metric] = round(count)
    return found


def _kind(tool: str, name: str) -> str:
    spec = spec_of(tool)
    kinds = {m.key: m.kind for m in spec.baseline} if spec is not None else {}
    return kinds.get(name, "count")


def _column_metrics(
    metrics_by_tool: Mapping[str, Mapping[str, Any]],
) -> Iterator[tuple[KeyMetric, Mapping[str, Any]]]:
    for tool, name, suffix, _ in _PER_COLUMN_RATES:
        columns = metrics_by_tool.get(tool, {}).get("columns")
        if not isinstance(columns, Mapping):
            continue
        for column, values in columns.items():
            if isinstance(values, Mapping):
                yield KeyMetric(tool, name, str(column), "rate", f"{column} {suffix}"), values


def _usable_metrics(inspection: Inspection) -> dict[str, Mapping[str, Any]]:
    return {
        tool: result.metrics
        for tool, result in inspection.checks.items()
        if str(result.status) not in _UNUSABLE_STATUSES
    }


def record_metrics(record: RunRecord) -> dict[KeyMetric, float]:
    return key_metrics(
        {
            tool: check.metrics
            for tool, check in record.checks.items()
            if check.status not in _UNUSABLE_STATUSES
        }
    )


def compare_with_baseline(
    inspection: Inspection,
    store: HistoryStore,
    runs: int = DEFAULT_BASELINE_RUNS,
    *,
    dataset_name: str | None = None,
    rule: ChangeRule = DEFAULT_RULE,
) -> dict[str, Any]:
    """The JSON `baseline` section for `inspection`, with its `findings` (Finding dicts).

    Call it before `store.save_run` of the same run; a stored run with the same `started_at`
    is left out anyway, so a run never counts in its own baseline.
    """
    key = dataset_key(inspection.dataset.path, dataset_name)
    exclude = inspection.started_at or None
    history = store.baseline_runs(key, runs, exclude_started_at=exclude)
    total, failed = store.count_runs(key, exclude_started_at=exclude)
    usable = _usable_metrics(inspection)
    return build_baseline(
        key_metrics(usable),
        history,
        dataset=key,
        window=runs,
        earlier_runs=total,
        failed_runs=failed,
        rows=inspection.dataset.rows,
        counts=rate_counts(usable),
        rule=rule,
        excused=total_excused(inspection.maintenance),
    )


def build_baseline(
    today: Mapping[KeyMetric, float],
    history: Sequence[RunRecord],
    *,
    dataset: str,
    window: int,
    earlier_runs: int,
    failed_runs: int,
    rows: int | None,
    counts: Mapping[KeyMetric, int] | None = None,
    rule: ChangeRule = DEFAULT_RULE,
    excused: int = 0,
) -> dict[str, Any]:
    """Compare `today` with the per-metric median of `history` (the baseline runs).

    `counts` gives today's affected values behind a rate, for the finding's count; without
    it a rate finding counts `rate x rows`. `excused`: the readings maintenance windows
    excused today.
    """
    section: dict[str, Any] = {
        "dataset": dataset,
        "window": window,
        "runs": len(history),
        "run_ids": [r.id for r in history],
        "earlier_runs": earlier_runs,
        "excluded_failed_runs": failed_runs,
        "rule": asdict(rule),
        "metrics": [],
        "findings": [],
        "excused_readings": {"today": excused, "baseline": _excused_baseline(history)},
    }
    if not history:
        section["status"] = "no_baseline"
        section["message"] = _no_baseline_message(earlier_runs, failed_runs)
        return section
    past = [record_metrics(r) for r in history]
    comparisons: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    for metric in sorted(today):
        values = [m[metric] for m in past if metric in m]
        if not values:
            continue
        baseline = float(statistics.median(values))
        large = rule.is_large(metric.kind, today[metric], baseline)
        comparisons.append(_comparison(metric, today[metric], baseline, len(values), large))
        if large:
            count = (counts or {}).get(metric, _estimated_count(metric, today[metric], rows))
            findings.append(_finding(metric, today[metric], baseline, len(values), count))
    section["status"] = "compared"
    section["metrics"] = comparisons
    section["message"] = _compared_message(
        len(history), failed_runs, len(comparisons), len(findings)
    )
    note = _excused_note(excused, section["excused_readings"]["baseline"], rule)
    if note:
        section["message"] += f"; {note}"
        for finding in findings:
            finding["what"] += f" ({note})"
    section["findings"] = findings
    return section


def _excused_baseline(history: Sequence[RunRecord]) -> float | None:
    """The median of the readings the baseline runs excused (None: none of them recorded it)."""
    known = [r.excused_readings for r in history if r.excused_readings is not None]
    return float(statistics.median(known)) if known else None


def _excused_note(today: int, baseline: float | None, rule: ChangeRule) -> str:
    """Words for a run whose maintenance windows excused many more readings than usual."""
    if baseline is None:
        if not today:
            return ""
        return f"{today:,} readings excused by maintenance today; the baseline runs did not record theirs"
    if not rule.is_large("count", today, baseline):
        return ""
    return (
        f"{today:,} readings excused by maintenance today vs {_format('count', baseline)} usually"
    )


def describe_change(metric: KeyMetric, today: float, baseline: float) -> str:
    """E.g. "pressure missing rate 4.8% vs baseline 0.1%"."""
    now, usual = _format(metric.kind, today), _format(metric.kind, baseline)
    return f"{metric.label} {now} vs baseline {usual}"


def _comparison(
    metric: KeyMetric, today: float, baseline: float, runs: int, large: bool
) -> dict[str, Any]:
    return {
        "tool": metric.tool,
        "metric": metric.name,
        "column": metric.column,
        "kind": metric.kind,
        "label": metric.label,
        "today": today,
        "baseline": baseline,
        "change": today - baseline,
        "runs": runs,
        "large": large,
    }


def _estimated_count(metric: KeyMetric, today: float, rows: int | None) -> int:
    if metric.kind == "rate":
        return round(today * rows) if rows else 0
    return round(today)


def _finding(
    metric: KeyMetric, today: float, baseline: float, runs: int, count: int
) -> dict[str, Any]:
    finding = Finding(
        what=describe_change(metric, today, baseline),
        count=count,
        severity=Status.WARN,
        column=metric.column,
    )
    return {
        **finding.to_dict(),
        "source": "baseline",
        "tool": metric.tool,
        "metric": metric.name,
        "today": today,
        "baseline": baseline,
        "baseline_runs": runs,
    }


def _no_baseline_message(earlier_runs: int, failed_runs: int) -> str:
    if earlier_runs == 0:
        return "no earlier runs of this dataset in the history: no baseline yet"
    return (
        f"all {earlier_runs} earlier runs of this dataset failed and failed runs are excluded: "
        "no baseline yet"
    )


def _compared_message(runs: int, failed_runs: int, compared: int, large: int) -> str:
    excluded = f", {failed_runs} failed runs excluded" if failed_runs else ""
    plural = "s" if runs != 1 else ""
    changes = f"{large} large change{'s' if large != 1 else ''}" if large else "no large change"
    return (
        f"{compared} metrics compared with the median of the last {runs} run{plural}"
        f"{excluded}: {changes}"
    )


def format_value(kind: str, value: float) -> str:
    """A rate as a percentage, a count as a number."""
    return _format(kind, value)


def _format(kind: str, value: float) -> str:
    if kind == "rate":
        if value == 0:
            return "0%"
        # Small rates keep two significant digits: 0.04% must not print as 0.0%.
        return f"{value:.1%}" if abs(value) >= 0.001 else f"{value * 100:.2g}%"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _number(value: Any) -> float | None:
    """A finite number, else None: flags, text and NaN are not comparable figures."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
