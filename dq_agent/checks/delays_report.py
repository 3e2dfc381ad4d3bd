"""delay_check, the finish: the collected frames as the check's result.

Pure Python over the small frames the queries of `delays` collect: the metrics, the findings and
the summary. The column names below are the contract between those queries and this finish.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from dq_agent.checks.base import FILE_ROW, human_duration, iso, plural
from dq_agent.checks.dst import offset_cause, repeat_cause, skip_cause
from dq_agent.checks.evidence import MAD_TO_SIGMA
from dq_agent.result import (
    CheckResult,
    Event,
    Finding,
    Status,
    at_least_warn,
    left_out,
    status_from_thresholds,
    status_rank,
    worst_status,
)
from dq_agent.settings import fraction, iso_time, non_negative, positive, setting

TOOL = "delay_check"


@dataclass
class DelayCheckConfig:
    expected_interval_seconds: float | None = setting(None, rule=positive)
    gap_factor: float = setting(3.0, rule=positive)
    late_threshold_seconds: float = setting(300.0, rule=non_negative)
    max_age_seconds: float | None = setting(None, rule=positive)
    future_tolerance_seconds: float = setting(300.0, rule=non_negative)
    as_of: str | None = setting(None, rule=iso_time)
    # Chance that clean data shows a gap anywhere (the step tail's bound, see delays.step_tail).
    significance: float = setting(0.001, rule=fraction)
    # A device whose newest reading is more than this many of its own intervals (its gap bound
    # at least) before the fleet's newest, and beyond the fleet's spread of ends (of fewer than
    # STOPPED_MIN_FLEET devices: beyond this share of the data's span), has stopped.
    stopped_intervals: float = setting(5.0, rule=positive)
    stopped_share: float = setting(0.05, rule=fraction)
    warn_at: float | None = setting(0.0, rule=non_negative)
    fail_at: float | None = setting(0.01, rule=non_negative)


# Columns of the collected frames; the double underscore keeps them clear of real data columns.
ENTITY = "__entity"
TS = "__ts"
INGEST = "__ingest"
PREV_IN_FILE = "__prev_in_file"
FILE = "__file"
PREV = "__prev"
STEP = "__step"
EXPECTED = "__expected"
OUT_OF_ORDER_TS = "__out_of_order_ts"
LATENCY = "__latency"
IRREGULAR = "__irregular"
BOUND = "__bound"
LONGEST_STEP = "__longest_step"

MAX_GAP_FINDINGS = 10
# The step tail: series with fewer positive steps than this are scaled by the fleet's typical
# step too (their own median is noisy), and the tail is fitted on the longest eighth of all
# steps (of few steps, up to half of them and SMALL_TAIL), at most TAIL_MAX of them.
SHORT_SERIES_STEPS = 30
FLEET_SERIES = 20
TAIL_MAX, SMALL_TAIL, TAIL_TRIM = 200, 10, 3
# A regular logger's step between these many typical steps has lost exactly one reading
# (steps come in whole intervals): how often that happens is its chance to lose one (`_regular`).
LOST_ONE = (1.5, 2.5)
# With this many entities or more, a stopped one must also lag beyond the fleet's own spread
# of ends: more than this many robust sigmas above the median lag.
STOPPED_MIN_FLEET = 5
STOPPED_LAG_Z = 4.0
# A device silent for more than k times its longest silence in the data has stopped, however
# far its gap bound reaches: a fleet offline every night has its steps' tail fitted to the
# nights, and a bound of days (a vehicle silent for its last 56 hours among 20 that each paused
# 13 hours a night at most passed). For a device of n steps at random (exponential) times, its
# silence at the end exceeds k times its longest step with chance 1 / C(n + k, k): k is the
# least, from STOPPED_LONGEST, that makes this `significance` over the fleet's devices
# (`_longest_multiples`): of 3,000 devices of 9 steps each, 33 stopped by chance at k = 2.
STOPPED_LONGEST = 2
# A stopped device's longest silence before its stop is said when longer than this many of
# its intervals.
STOPPED_INTERVALS_SAID = 10
_LONGEST_MAX = 64
MAX_EXAMPLES = 5
MAX_FINDINGS = 20

NOT_EVALUATED = "not evaluated"
_REQUIRED_METRICS = ("gap_count", "max_gap_seconds", "late_rows", "out_of_order_rows")


def skipped(reason: str) -> CheckResult:
    return CheckResult(TOOL, Status.SKIPPED, reason, metrics=dict.fromkeys(_REQUIRED_METRICS))


def _longest_multiples(entities: pl.DataFrame, significance: float) -> pl.Expr:
    """Per series, the k of STOPPED_LONGEST from its steps between distinct times (its timed
    rows less its repeated timestamps, less one: a repeat is no step, and counted as one it
    would make k too small): null (no such rule) with fewer than two steps, or where no k up
    to _LONGEST_MAX is rare enough."""
    times = pl.col("rows") - pl.col("duplicates")
    if significance <= 0 or entities.height == 0:
        return pl.lit(None, dtype=pl.Float64)
    wanted = math.log(entities.height / significance)
    multiples: dict[int, float | None] = {}
    for distinct in entities.select(times.drop_nulls().unique()).to_series():
        n, found = int(distinct) - 1, None
        for k in range(STOPPED_LONGEST, _LONGEST_MAX + 1) if n >= 2 else ():
            if math.lgamma(n + k + 1) - math.lgamma(k + 1) - math.lgamma(n + 1) >= wanted:
                found = float(k)
                break
        multiples[int(distinct)] = found
    return times.replace_strict(multiples, default=None, return_dtype=pl.Float64)


class DelayFinisher:
    """Turns the collected frames into the result: pure Python over small frames."""

    def __init__(
        self,
        settings: DelayCheckConfig,
        as_of: datetime,
        has_ingest: bool,
        frames: list[pl.DataFrame],
        naive: bool = False,
        order_basis: str | None = "file rows",
    ):
        self.settings = settings
        # What out-of-order rows were judged against; None: not evaluated (no order known).
        self.order_basis = order_basis
        # Times that may be local wall-clock times read as UTC: findings name DST and offsets.
        self.naive = naive
        self.as_of = as_of
        self.has_ingest = has_ingest
        overall, entities, longest, out_of_order, future = frames[:5]
        self.overall: dict[str, Any] = overall.row(0, named=True)
        self.entities = entities.sort(
            ["max_gap", ENTITY], descending=[True, False], nulls_last=True
        )
        # A join does not keep row order: sort again, longest first.
        self.longest = longest.sort(
            [STEP, ENTITY, TS], descending=[True, False, False], nulls_last=True
        )
        self.out_of_order = out_of_order
        self.future = future
        self.late = frames[5] if has_ingest else None
        self.rows: int = self.overall["rows"]

    def result(self) -> CheckResult:
        timed_rows = int(self.entities.get_column("rows").sum()) if self.entities.height else 0
        if timed_rows == 0:
            nulls = self.overall["null_timestamps"]
            why = f"all {self.rows:,} rows lack a timestamp" if nulls else "no rows in scope"
            return skipped(f"nothing to time: {why}")
        metrics = self._metrics()
        statuses = {
            name: status_from_thresholds(
                metrics[name] or 0, self.rows, self.settings.warn_at, self.settings.fail_at
            )
            for name in ("gap_count", "out_of_order_rows", "late_rows", "future_rows")
        }
        stale = (
            bool(metrics["stale"])
            or bool(metrics["stale_entities"])
            or bool(metrics["stopped_entities"])
        )
        status = worst_status(statuses.values())
        if stale and status is Status.PASS:
            status = Status.WARN
        findings, metrics["findings_left_out"] = self._findings(metrics, statuses)
        return CheckResult(
            TOOL,
            status,
            self._summary(metrics),
            metrics=metrics,
            findings=findings,
            events=self._stopped_events(),
        )

    def _stopped_events(self) -> list[Event]:
        """One event per stopped entity, from its newest reading to the fleet's, counting the
        readings it missed (as liveness_check counts a late start): the finding names the first
        few, these name every one, so the per-device health and the grid see each."""
        newest = self.overall["newest"]
        return [
            Event(
                kind="stopped",
                entity=None if r[ENTITY] is None else str(r[ENTITY]),
                column=None,
                start=r["newest"],
                end=newest,
                count=max(int(r["behind"] // r["expected"]) if r["expected"] else 1, 1),
            )
            for r in self._stopped().iter_rows(named=True)
        ]

    def _metrics(self) -> dict[str, Any]:
        entities = self.entities
        expected = [float(v) for v in entities.get_column("expected").drop_nulls().to_list()]
        gap_entities = entities.filter(pl.col("gaps") > 0)
        top = gap_entities.row(0, named=True) if gap_entities.height else None
        newest: datetime | None = self.overall["newest"]
        max_age = self.settings.max_age_seconds
        age = None if newest is None else (self.as_of - newest).total_seconds()
        stale_entities: int | None = None
        if max_age is not None and entities.get_column(ENTITY).null_count() < entities.height:
            cutoff = self.as_of - timedelta(seconds=max_age)
            stale_entities = entities.filter(pl.col("newest") < cutoff).height
        overall = self.overall
        return {
            "rows": self.rows,
            "timed_rows": int(entities.get_column("rows").sum()),
            "null_timestamps": overall["null_timestamps"],
            "entities": entities.height,
            "expected_interval_source": (
                "configured"
                if self.settings.expected_interval_seconds is not None
                else "median step"
            ),
            "expected_interval_seconds": statistics.median(expected) if expected else None,
            "expected_interval_min_seconds": min(expected) if expected else None,
            "expected_interval_max_seconds": max(expected) if expected else None,
            "gap_factor": self.settings.gap_factor,
            "gap_count": int(entities.get_column("gaps").sum()),
            "entities_with_gaps": gap_entities.height,
            "total_gap_seconds": _seconds(float(entities.get_column("gap_missing").sum())),
            "max_gap_seconds": _seconds(top["max_gap"]) if top else 0.0,
            "max_gap_entity": top[ENTITY] if top else None,
            "max_gap_start": iso(top["max_gap_start"]) if top else None,
            "max_gap_end": iso(top["max_gap_end"]) if top else None,
            "longest_gaps": [
                {
                    "entity": g[ENTITY],
                    "start": iso(g[PREV]),
                    "end": iso(g[TS]),
                    "seconds": g[STEP],
                }
                for g in self.longest.iter_rows(named=True)
            ],
            "out_of_order_rows": (
                int(entities.get_column("out_of_order").sum())
                if self.order_basis is not None
                else None
            ),
            "out_of_order_basis": self.order_basis or NOT_EVALUATED,
            "duplicate_timestamps": int(entities.get_column("duplicates").sum()),
            "as_of": self.as_of.isoformat(),
            "future_rows": overall["future_rows"],
            "late_threshold_seconds": self.settings.late_threshold_seconds,
            "late_rows": overall["late_rows"] if self.has_ingest else None,
            "latency_p50_seconds": overall["p50"] if self.has_ingest else None,
            "latency_p95_seconds": overall["p95"] if self.has_ingest else None,
            "latency_max_seconds": overall["max"] if self.has_ingest else None,
            "newest_timestamp": iso(newest),
            "freshness_age_seconds": age,
            "max_age_seconds": max_age,
            "stale": max_age is not None and age is not None and age > max_age,
            "stale_entities": stale_entities,
            "irregular_entities": int(entities.get_column(IRREGULAR).sum()),
            "stopped_entities": self._stopped().height,
        }

    def _stopped(self) -> pl.DataFrame:
        """The entities whose newest reading is far before the fleet's: more than
        `stopped_intervals` of their own intervals and their gap bound (or k times their
        longest step, where that is less: `_longest_multiples`), and beyond the fleet's spread
        of ends (`stopped_share` of the data's span for a small fleet). With one entity there
        is no fleet to compare with."""
        entities = self.entities
        newest, oldest = self.overall["newest"], self.overall["oldest"]
        if entities.height < 2 or newest is None or oldest is None:
            return entities.clear()
        span = (newest - oldest).total_seconds()
        behind = (pl.lit(newest) - pl.col("newest")).dt.total_microseconds() / 1_000_000
        # Only where the series has stepped at all: a device whose readings share one time
        # has no longest silence to compare with.
        longest = pl.when(pl.col(LONGEST_STEP) > 0).then(
            _longest_multiples(entities, self.settings.significance) * pl.col(LONGEST_STEP)
        )
        own = pl.max_horizontal(
            self.settings.stopped_intervals * pl.col("expected"),
            pl.min_horizontal(pl.col(BOUND), longest),
        )
        lagging = entities.with_columns(behind.alias("behind"))
        far_behind = pl.col("behind") > own
        if entities.height >= STOPPED_MIN_FLEET:
            # Series that simply end at their own times (a fixed count of irregular readings)
            # are staggered: a stopped device lags far beyond the fleet's usual spread of ends.
            # The fleet is the yardstick, not the file's span: three silent hours among 200
            # devices that all report to the last minute is a stop in a day's file and in a
            # year's.
            lag = pl.col("behind")
            typical = (
                lag.median() + STOPPED_LAG_Z * MAD_TO_SIGMA * (lag - lag.median()).abs().median()
            )
            far_behind = far_behind & (lag > typical)
        else:
            # Too few devices to know their usual spread of ends: a share of the span.
            far_behind = far_behind & (pl.col("behind") > self.settings.stopped_share * span)
        return lagging.filter(far_behind).sort(["newest", ENTITY], nulls_last=True)

    def _findings(
        self, metrics: dict[str, Any], statuses: dict[str, Status]
    ) -> tuple[list[Finding], int]:
        gap_findings = self._gap_findings(statuses["gap_count"])
        leaders = gap_findings[:1] + self._order_finding(metrics, statuses["out_of_order_rows"])
        if self.late is not None:
            leaders += self._late_finding(metrics, statuses["late_rows"])
        leaders += (
            self._future_finding(metrics, statuses["future_rows"])
            + self._stale_findings(metrics)
            + self._stopped_finding()
        )
        findings = leaders + gap_findings[1:]
        # Stable: within one severity, each kind of problem leads before the other gaps.
        findings.sort(key=lambda f: -status_rank(f.severity))
        # Entities with gaps beyond the MAX_GAP_FINDINGS listed are left out too.
        unlisted = max(0, metrics["entities_with_gaps"] - MAX_GAP_FINDINGS)
        shown, dropped = left_out(findings, MAX_FINDINGS)
        return shown, dropped + unlisted

    def _gap_findings(self, severity: Status) -> list[Finding]:
        findings = []
        factor = self.settings.gap_factor
        for entity in (
            self.entities.filter(pl.col("gaps") > 0).head(MAX_GAP_FINDINGS).iter_rows(named=True)
        ):
            key = entity[ENTITY]
            examples = [
                {
                    "entity": key,
                    "timestamp": iso(g[PREV]),
                    "next_timestamp": iso(g[TS]),
                    "gap_seconds": _seconds(g[STEP]),
                }
                for g in self.longest.filter(pl.col(ENTITY).eq_missing(key)).iter_rows(named=True)
            ][:MAX_EXAMPLES]
            if not examples:
                # This entity's gaps are not among the longest overall: show its own longest.
                examples = [
                    {
                        "entity": key,
                        "timestamp": iso(entity["max_gap_start"]),
                        "next_timestamp": iso(entity["max_gap_end"]),
                        "gap_seconds": _seconds(entity["max_gap"]),
                    }
                ]
            basis = (
                f"{human_duration(entity[BOUND])}, beyond chance for the data's own steps "
                f"(irregular sampling, median step {human_duration(entity['expected'])})"
                if entity[IRREGULAR]
                else f"{factor:g}x the expected interval of {human_duration(entity['expected'])}"
            )
            findings.append(
                Finding(
                    what=(
                        f"{plural(entity['gaps'], 'gap')} longer than {basis}; "
                        f"longest {human_duration(entity['max_gap'])}"
                        + self._cause(
                            self._skip_cause(examples, entity["expected"], entity["gaps"])
                        )
                    ),
                    count=entity["gaps"],
                    severity=at_least_warn(severity),
                    entity=key,
                    start=iso(entity["max_gap_start"]),
                    end=iso(entity["max_gap_end"]),
                    examples=examples,
                )
            )
        return findings

    def _order_finding(self, metrics: dict[str, Any], severity: Status) -> list[Finding]:
        count = metrics["out_of_order_rows"]
        if not count:
            return []
        examples = [
            {
                "row": r[FILE_ROW],
                "entity": r[ENTITY],
                "timestamp": iso(r[OUT_OF_ORDER_TS]),
                "previous_timestamp": iso(r[PREV_IN_FILE]),
                # Only when several files were read: which one the row is in.
                **({"file": r[FILE]} if r.get(FILE) is not None else {}),
            }
            for r in self.out_of_order.iter_rows(named=True)
        ]
        first = examples[0] if examples else {}
        cause = (
            repeat_cause([r[OUT_OF_ORDER_TS] for r in self.out_of_order.iter_rows(named=True)])
            if self.naive
            else None
        )
        return [
            Finding(
                what=(
                    f"{plural(count, 'row')} out of order: earlier than the previous row "
                    f"of the same entity in {self._order_words()}"
                    + _in_one_file(examples)
                    + self._cause(cause)
                ),
                count=count,
                severity=at_least_warn(severity),
                # One entity only when the counts per entity say so: the examples are the first
                # few rows, which may all be of one entity while later ones are of others.
                entity=first.get("entity") if self._one_entity_out_of_order() else None,
                start=first.get("timestamp"),
                examples=examples,
            )
        ]

    def _late_finding(self, metrics: dict[str, Any], severity: Status) -> list[Finding]:
        count = metrics["late_rows"]
        if not count or self.late is None:
            return []
        examples = [
            {
                "row": r[FILE_ROW],
                "entity": r[ENTITY],
                "timestamp": iso(r[TS]),
                "ingest_time": iso(r[INGEST]),
                "latency_seconds": r[LATENCY],
            }
            for r in self.late.iter_rows(named=True)
        ]
        threshold = human_duration(self.settings.late_threshold_seconds)
        return [
            Finding(
                what=(
                    f"{plural(count, 'row')} arrived more than {threshold} after their timestamp "
                    f"(max latency {human_duration(metrics['latency_max_seconds'])})"
                ),
                count=count,
                severity=at_least_warn(severity),
                entity=examples[0]["entity"]
                if examples and count <= len(examples) and self._single_entity(self.late)
                else None,
                examples=examples,
            )
        ]

    def _future_finding(self, metrics: dict[str, Any], severity: Status) -> list[Finding]:
        count = metrics["future_rows"]
        if not count:
            return []
        examples = [
            {"row": r[FILE_ROW], "entity": r[ENTITY], "timestamp": iso(r[TS])}
            for r in self.future.iter_rows(named=True)
        ]
        latest = examples[0]["timestamp"] if examples else None
        tolerance = human_duration(self.settings.future_tolerance_seconds)
        newest: datetime | None = self.overall["newest"]
        cause = (
            offset_cause(
                (newest - self.as_of).total_seconds(), self.settings.future_tolerance_seconds
            )
            if self.naive and newest is not None
            else None
        )
        return [
            Finding(
                what=(
                    f"{plural(count, 'row')} timestamped more than {tolerance} "
                    f"after {metrics['as_of']}" + self._cause(cause)
                ),
                count=count,
                severity=at_least_warn(severity),
                # The examples are the latest future rows: one entity among them is all the
                # rows' only when they are all the rows.
                entity=examples[0]["entity"]
                if examples and count <= len(examples) and self._single_entity(self.future)
                else None,
                start=latest,
                examples=examples,
            )
        ]

    def _stale_findings(self, metrics: dict[str, Any]) -> list[Finding]:
        max_age = metrics["max_age_seconds"]
        findings = []
        if metrics["stale"]:
            age = metrics["freshness_age_seconds"]
            cause = offset_cause(-age, max_age) if self.naive else None
            findings.append(
                Finding(
                    what=(
                        "data is stale: newest row is "
                        f"{human_duration(age)} old "
                        f"(max {human_duration(max_age)})" + self._cause(cause)
                    ),
                    count=1,
                    severity=Status.WARN,
                    start=metrics["newest_timestamp"],
                )
            )
        # When every entity is stale the dataset is, and the finding above says so.
        if metrics["stale_entities"] and metrics["stale_entities"] < metrics["entities"]:
            cutoff = self.as_of - timedelta(seconds=max_age)
            stale = self.entities.filter(pl.col("newest") < cutoff).sort("newest")
            findings.append(
                Finding(
                    what=(
                        f"{stale.height:,} of {metrics['entities']:,} entities sent nothing "
                        f"for more than {human_duration(max_age)}"
                    ),
                    count=stale.height,
                    severity=Status.WARN,
                    examples=[
                        {"entity": r[ENTITY], "timestamp": iso(r["newest"])}
                        for r in stale.head(MAX_EXAMPLES).iter_rows(named=True)
                    ],
                )
            )
        return findings

    def _stopped_finding(self) -> list[Finding]:
        stopped = self._stopped()
        if not stopped.height:
            return []
        newest = self.overall["newest"]
        first = stopped.row(0, named=True)
        interval = first["expected"] or 0.0
        # Where its own pauses are long (a fleet offline at night), the longest of them says
        # why this one is a stop.
        longest = first[LONGEST_STEP]
        pauses = (
            f", its longest silence before {human_duration(longest)}"
            if longest is not None and longest > STOPPED_INTERVALS_SAID * interval
            else ""
        )
        return [
            Finding(
                what=(
                    f"{stopped.height:,} of {self.entities.height:,} entities stopped sending "
                    f"before the others: {first[ENTITY]}'s newest reading is "
                    f"{human_duration(first['behind'])} before the newest of all "
                    f"({human_duration(interval)} interval{pauses})"
                ),
                count=stopped.height,
                severity=Status.WARN,
                entity=first[ENTITY] if stopped.height == 1 else None,
                start=iso(first["newest"]),
                end=iso(newest),
                examples=[
                    {
                        "entity": r[ENTITY],
                        "timestamp": iso(r["newest"]),
                        "behind_seconds": r["behind"],
                    }
                    for r in stopped.head(MAX_EXAMPLES).iter_rows(named=True)
                ],
            )
        ]

    @staticmethod
    def _cause(cause: str | None) -> str:
        return f" ({cause})" if cause else ""

    def _skip_cause(
        self, examples: list[dict[str, Any]], interval: float | None, gaps: int
    ) -> str | None:
        """The daylight-saving cause of the gaps it explains, each such example marked; when it
        explains only some of the entity's gaps, it says how many, so a real outage beside a
        skipped hour is not explained away."""
        if not self.naive or interval is None:
            return None
        causes: list[str] = []
        for example in examples:
            start = datetime.fromisoformat(example["timestamp"])
            end = datetime.fromisoformat(example["next_timestamp"])
            cause = skip_cause(start, end, example["gap_seconds"] - interval, interval)
            if cause is not None:
                example["likely_cause"] = "daylight saving time"
                causes.append(cause)
        if not causes:
            return None
        if len(causes) >= gaps:
            return causes[0]
        return f"{len(causes)} of the {gaps} gaps {causes[0]}"

    def _order_words(self) -> str:
        basis = self.order_basis
        return "file order" if basis in (None, "file rows") else f"the order of {basis}"

    def _one_entity_out_of_order(self) -> bool:
        if "out_of_order" not in self.entities.columns:
            return self._single_entity(self.out_of_order)
        return int((self.entities.get_column("out_of_order") > 0).sum()) == 1

    @staticmethod
    def _single_entity(frame: pl.DataFrame) -> bool:
        return frame.height > 0 and frame.get_column(ENTITY).n_unique() == 1

    def _summary(self, metrics: dict[str, Any]) -> str:
        gaps = metrics["gap_count"]
        parts = [plural(gaps, "gap")]
        if gaps:
            where = (
                f" on {metrics['max_gap_entity']}" if metrics["max_gap_entity"] is not None else ""
            )
            parts[0] += f" (longest {human_duration(metrics['max_gap_seconds'])}{where})"
        if metrics["out_of_order_rows"] is None:
            parts.append("order not evaluated (no order column: set columns.order_by)")
        else:
            parts.append(f"{metrics['out_of_order_rows']:,} out of order")
        if metrics["duplicate_timestamps"]:
            parts.append(f"{metrics['duplicate_timestamps']:,} repeated timestamps")
        parts.append(f"{metrics['future_rows']:,} in the future")
        if metrics["late_rows"] is not None:
            p95 = metrics["latency_p95_seconds"]
            parts.append(
                f"{metrics['late_rows']:,} late (p95 latency {human_duration(p95 or 0.0)})"
            )
        parts += _interval_words(metrics)
        if metrics["newest_timestamp"] is not None:
            seconds = metrics["freshness_age_seconds"]
            stale = ", STALE" if metrics["stale"] else ""
            # Within the future tolerance a reading may come after the time of the run.
            age = (
                f"{human_duration(seconds)} old"
                if seconds >= 0
                else f"{human_duration(-seconds)} after the run's time"
            )
            parts.append(f"newest {metrics['newest_timestamp']} ({age}{stale})")
        if metrics["stale_entities"]:
            parts.append(f"{metrics['stale_entities']} stale entities")
        if metrics["stopped_entities"]:
            parts.append(f"{metrics['stopped_entities']} stopped early")
        if metrics["irregular_entities"]:
            parts.append(
                f"{metrics['irregular_entities']} irregularly sampled (gaps judged against the "
                "tail of the data's own steps)"
            )
        if metrics["null_timestamps"]:
            parts.append(f"{metrics['null_timestamps']:,} rows without timestamp skipped")
        return f"{metrics['timed_rows']:,} timed rows: " + ", ".join(parts)


def _interval_words(metrics: dict[str, Any]) -> list[str]:
    """The expected interval; a fleet of devices read at different rates (1 s and 1 min) gets
    its range, not one figure that is wrong for some of them."""
    interval = metrics["expected_interval_seconds"]
    if interval is None:
        return []
    low = human_duration(metrics["expected_interval_min_seconds"])
    high = human_duration(metrics["expected_interval_max_seconds"])
    if low == high:
        return [f"expected interval {human_duration(interval)}"]
    return [f"expected interval {low} to {high} by entity (median {human_duration(interval)})"]


def _in_one_file(examples: list[dict[str, Any]]) -> str:
    """' (in day_2.csv)' when every example names the same file, else ''."""
    files = {str(e["file"]).rsplit(": row ", 1)[0] for e in examples if e.get("file")}
    return f" (in {files.pop()})" if len(files) == 1 else ""


def _seconds(value: float) -> float:
    """Seconds to the microsecond the timestamps hold: 3630.025, not the 3630.0249999999996
    a division of microseconds gives."""
    return round(float(value), 6)
