"""A hand-written Polars reference of dq-agent's five original checks, for `make bench`.

    python bench/reference.py bench_data/10m/sensors.parquet    # one JSON object on stdout

What an engineer who knows Polars would write by hand for the metrics null_check,
duplicate_check, outlier_check, delay_check and structure_check compute on a sensor file
(timestamp, device, value columns, ingest time): read the file, sort it once by device and time,
and compute each check's headline counts with plain expressions, without dq-agent's generality
(no config, scopes, findings, examples, events, maintenance windows or multi-file order). The
rules are dq-agent's (the same sentinels, robust outlier rule and gap rule); `bench.py` compares
the counts with dq-agent's and bench/README.md says which differ and why.

Each step is timed on its own (`timings`, seconds): `load` (read and parse numbers stored as
text), `sort` (the series order every check but structure reads), then one figure per check.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

SENTINELS = [-999.0, -9999.0, -200.0]
# outlier_check's defaults and constants (dq_agent/checks/outliers.py, evidence.py).
SIGMA = 3.0
MIN_GROUP_SIZE = 30
MAD_TO_SIGMA = 1 / 0.6744897501960817
MEAN_ABS_TO_SIGMA = 1.2533141373155001
SMALL_SAMPLE_BIAS = 1.3
FAR = 5 / 3
RESOLUTION_SAMPLE = 10_000
# delay_check's defaults and constants (dq_agent/checks/delays.py, delays_report.py).
GAP_FACTOR = 3.0
SIGNIFICANCE = 0.001
LATE_SECONDS = 300.0
FUTURE_TOLERANCE_SECONDS = 300.0
SHORT_SERIES_STEPS, FLEET_SERIES = 30, 20
TAIL_MAX, SMALL_TAIL, TAIL_TRIM = 200, 10, 3
LOST_READING, LOST_COMMON = 1.5, 0.01
# A text column is numbers stored as text when this share of its values parse.
NUMERIC_TEXT_SHARE = 0.9

Counts = dict[str, Any]


def load(path: Path, entity: str) -> tuple[pl.DataFrame, dict[str, int]]:
    """The file with text columns of numbers parsed (unparseable text becomes null); per parsed
    column, how many present values did not parse."""
    frame = pl.read_parquet(path)
    text = [c for c, t in frame.schema.items() if t == pl.String and c != entity]
    parsed = {c: pl.col(c).str.strip_chars().cast(pl.Float64, strict=False) for c in text}
    shares = frame.head(10_000).select(
        (e.is_not_null().sum() / pl.col(c).is_not_null().sum().clip(1)).alias(c)
        for c, e in parsed.items()
    )
    numeric = [c for c in text if shares[c][0] >= NUMERIC_TEXT_SHARE]
    unparseable = frame.select(
        (pl.col(c).is_not_null() & parsed[c].is_null()).sum().alias(c) for c in numeric
    )
    frame = frame.with_columns(parsed[c].alias(c) for c in numeric)
    return frame, {c: int(unparseable[c][0]) for c in numeric}


def missing(frame: pl.DataFrame, column: str) -> pl.Expr:
    col = pl.col(column)
    dtype = frame.schema[column]
    if not dtype.is_numeric():
        return col.is_null()
    out = col.is_null() | col.cast(pl.Float64).is_in(SENTINELS)
    if dtype.is_float():
        out = out | col.is_nan() | col.is_infinite()
    return out.fill_null(True)


def clean(frame: pl.DataFrame, column: str) -> pl.Expr:
    return pl.when(missing(frame, column)).then(None).otherwise(pl.col(column).cast(pl.Float64))


def series_order(frame: pl.DataFrame, entity: str, ts: str) -> pl.DataFrame:
    """Device by device, each device's rows in time order (no time last, ties in file order),
    with each row's index in the file."""
    return frame.with_row_index("row").sort([entity, ts], nulls_last=True, maintain_order=True)


def null_check(frame: pl.DataFrame, ordered: pl.DataFrame, entity: str) -> Counts:
    columns = frame.columns
    counts = frame.select(
        pl.len().alias("rows"),
        *[pl.col(c).null_count().alias(f"{c}:null") for c in columns],
        *[
            (pl.col(c).is_nan().sum() if frame.schema[c].is_float() else pl.lit(0)).alias(
                f"{c}:nan"
            )
            for c in columns
        ],
        *[
            (pl.col(c).is_infinite().sum() if frame.schema[c].is_float() else pl.lit(0)).alias(
                f"{c}:inf"
            )
            for c in columns
        ],
        *[missing(frame, c).sum().alias(f"{c}:missing") for c in columns],
    ).row(0, named=True)
    # The longest run of missing values per column, within one device in time order.
    new_device = pl.col(entity) != pl.col(entity).shift()
    runs = ordered.select(
        *[
            pl.when(missing(frame, c))
            .then((new_device | ~missing(frame, c).shift().fill_null(False)).cum_sum())
            .alias(c)
            for c in columns
        ]
    )
    longest = runs.select(
        pl.col(c).drop_nulls().value_counts().struct.field("count").max().fill_null(0).alias(c)
        for c in columns
    ).row(0, named=True)
    per_column = {
        c: {
            "null_count": counts[f"{c}:null"],
            "nan_count": counts[f"{c}:nan"],
            "nonfinite_count": counts[f"{c}:inf"],
            "sentinel_count": counts[f"{c}:missing"]
            - counts[f"{c}:null"]
            - counts[f"{c}:nan"]
            - counts[f"{c}:inf"],
            "missing_count": counts[f"{c}:missing"],
            "longest_missing_run": longest[c],
        }
        for c in columns
    }
    return {
        "rows": counts["rows"],
        "total_missing": sum(m["missing_count"] for m in per_column.values()),
        "columns": per_column,
    }


def duplicate_check(ordered: pl.DataFrame, entity: str, ts: str) -> Counts:
    """Exact duplicate rows and duplicate (device, time) keys. Sorted, the rows of a repeated
    key are neighbours: only those are grouped."""
    columns = [c for c in ordered.columns if c != "row"]
    same_key = pl.col(entity).eq_missing(pl.col(entity).shift()) & pl.col(ts).eq_missing(
        pl.col(ts).shift()
    )
    candidates = ordered.filter(same_key | same_key.shift(-1).fill_null(False)).select(columns)
    rows = candidates.group_by(columns).len("copies")
    keys = (
        rows.filter(pl.col(ts).is_not_null())
        .group_by([entity, ts])
        .agg(pl.col("copies").sum(), pl.len().alias("distinct"))
        .filter(pl.col("copies") > 1)
    )
    copies, distinct = pl.col("copies"), pl.col("distinct")
    exact = rows.select(
        (copies - 1).sum().alias("exact_duplicate_rows"),
        (copies > 1).sum().alias("exact_duplicate_groups"),
    ).row(0, named=True)
    key = keys.select(
        (copies - 1).sum().alias("duplicate_key_rows"),
        (copies - distinct).sum().alias("identical_key_rows"),
        (distinct - 1).sum().alias("conflicting_key_rows"),
        pl.len().alias("duplicate_key_groups"),
        (distinct > 1).sum().alias("conflicting_key_groups"),
    ).row(0, named=True)
    return {"rows": ordered.height, **exact, **key}


def _resolution(values: pl.Series) -> float:
    """The coarsest step of 1, 0.1, ... 0.000001 every value is a whole multiple of."""
    values = values.drop_nulls()
    for decimals in range(7):
        scaled = values * 10.0**decimals
        if ((scaled - scaled.round()).abs() <= 1e-12 * scaled.abs().clip(1.0)).all():
            return 10.0**-decimals
    return 0.0


def outlier_check(ordered: pl.DataFrame, entity: str, values: list[str]) -> Counts:
    """Per device and column: the median and MAD (mean absolute deviation where the MAD is 0)
    scaled to sigma, never below the column's resolution; a value is an outlier beyond SIGMA
    of those, or when it stands out from the two readings on both sides (outlier_check's two
    rules, for groups of at least MIN_GROUP_SIZE values)."""
    series = pl.col(entity)
    x_cols = {c: f"x:{c}" for c in values}
    frame = ordered.select(
        series, *[clean(ordered, c).alias(x) for c, x in x_cols.items()]
    ).with_columns(
        e
        for x in x_cols.values()
        for e in (
            _spike(pl.col(x), series).alias(f"spike:{x}"),
            (pl.col(x) - _side_mean(pl.col(x), series, 1)).abs().alias(f"local:{x}"),
        )
    )
    resolution = {x: _resolution(frame[x].head(RESOLUTION_SAMPLE)) for x in x_cols.values()}
    stats = []
    for x in x_cols.values():
        col = pl.col(x)
        deviation = (col - col.median()).abs()
        local = pl.col(f"local:{x}")
        stats += [
            col.count().alias(f"n:{x}"),
            col.median().alias(f"median:{x}"),
            deviation.median().alias(f"mad:{x}"),
            deviation.mean().alias(f"meanad:{x}"),
            local.median().alias(f"local_mad:{x}"),
            local.mean().alias(f"local_meanad:{x}"),
        ]
    groups = frame.group_by(entity).agg(stats)
    spreads = []
    for x in x_cols.values():
        n = pl.col(f"n:{x}")
        unbiased = 1.0 / (1.0 - SMALL_SAMPLE_BIAS / n.cast(pl.Float64).clip(lower_bound=4))
        spreads += [
            (n >= MIN_GROUP_SIZE).alias(f"checked:{x}"),
            pl.max_horizontal(
                _robust_spread(pl.col(f"mad:{x}"), pl.col(f"meanad:{x}")) * unbiased,
                resolution[x],
            ).alias(f"spread:{x}"),
            pl.max_horizontal(
                _robust_spread(pl.col(f"local_mad:{x}"), pl.col(f"local_meanad:{x}")),
                resolution[x],
            ).alias(f"local_spread:{x}"),
        ]
    groups = groups.with_columns(spreads)
    judged = frame.join(groups, on=entity, how="left", maintain_order="left")
    flags = judged.select(
        (
            pl.col(f"checked:{x}")
            & (
                ((pl.col(x) - pl.col(f"median:{x}")).abs() > SIGMA * pl.col(f"spread:{x}"))
                | (
                    pl.col(f"spike:{x}").abs() > FAR * SIGMA * pl.col(f"local_spread:{x}")
                ).fill_null(False)
            )
        )
        .fill_null(False)
        .sum()
        .alias(c)
        for c, x in x_cols.items()
    ).row(0, named=True)
    checked = groups.select(
        pl.col(f"n:{x}").filter(pl.col(f"checked:{x}")).sum().alias(c) for c, x in x_cols.items()
    ).row(0, named=True)
    return {
        "total_outliers": sum(flags.values()),
        "total_checked_values": sum(checked.values()),
        "columns": {c: {"outlier_count": flags[c], "checked_values": checked[c]} for c in values},
    }


def _robust_spread(mad: pl.Expr, meanad: pl.Expr) -> pl.Expr:
    return pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(meanad * MEAN_ABS_TO_SIGMA)


def _side_mean(x: pl.Expr, series: pl.Expr, direction: int) -> pl.Expr:
    """The mean of the two readings before (1) or after (-1) on the same device."""
    far = 2 * direction
    return pl.when(series.shift(far) == series).then((x.shift(direction) + x.shift(far)) / 2)


def _spike(x: pl.Expr, series: pl.Expr) -> pl.Expr:
    up, down = x - _side_mean(x, series, 1), x - _side_mean(x, series, -1)
    nearer = pl.when(up.abs() < down.abs()).then(up).otherwise(down)
    return pl.when(up * down > 0).then(nearer).otherwise(0.0)


def delay_check(
    frame: pl.DataFrame, ordered: pl.DataFrame, entity: str, ts: str, ingest: str | None
) -> Counts:
    """Per device: steps between its readings in time order, the median positive step, and a
    gap where a step exceeds gap_factor x that median and the bound the longest steps of the
    whole data give (delay_check's step tail); rows out of order in the file; latency."""
    as_of = datetime.now(UTC)
    future = as_of + timedelta(seconds=FUTURE_TOLERANCE_SECONDS)
    overall = frame.select(
        pl.col(ts).is_null().sum().alias("null_timestamps"),
        (pl.col(ts) > future).sum().alias("future_rows"),
        *(
            [((pl.col(ingest) - pl.col(ts)).dt.total_seconds() > LATE_SECONDS).sum()]
            if ingest
            else []
        ),
    ).row(0)
    timed = ordered.filter(pl.col(ts).is_not_null()).select(entity, ts)
    same = pl.col(entity) == pl.col(entity).shift()
    steps = timed.select(
        entity,
        pl.when(same).then(pl.col(ts).diff().dt.total_microseconds() / 1e6).alias("step"),
    )
    step = pl.col("step")
    per_device = steps.group_by(entity).agg(
        step.filter(step > 0).median().alias("expected"),
        (step > 0).sum().alias("positive"),
        (step == 0).sum().alias("repeated"),
    )
    short = pl.col("positive") < SHORT_SERIES_STEPS
    fleet = pl.col("expected").filter(short).median()
    per_device = per_device.with_columns(
        pl.when(short & (short.sum() >= FLEET_SERIES))
        .then(pl.max_horizontal("expected", fleet))
        .otherwise(pl.col("expected"))
        .alias("scale")
    )
    scaled = steps.filter(step > 0).join(per_device, on=entity).select(step / pl.col("scale"))
    tail = _step_tail(scaled.to_series())
    factor = max(GAP_FACTOR, tail) if tail is not None else GAP_FACTOR
    gaps = (
        steps.join(per_device, on=entity)
        .filter(step > factor * pl.col("scale"))
        .select(
            pl.len().alias("gap_count"),
            (step - pl.col("expected")).sum().alias("total_gap_seconds"),
            step.max().fill_null(0.0).alias("max_gap_seconds"),
        )
        .row(0, named=True)
    )
    # Out of order: earlier than the device's previous row in the file.
    out_of_order = (
        frame.select(entity, ts)
        .filter(pl.col(ts).is_not_null())
        .select((pl.col(ts) < pl.col(ts).shift().over(entity)).sum())
        .item()
    )
    return {
        **gaps,
        "out_of_order_rows": out_of_order,
        "duplicate_timestamps": int(per_device["repeated"].sum()),
        "late_rows": overall[2] if ingest else None,
        "future_rows": overall[1],
        "null_timestamps": overall[0],
        "irregular_entities": per_device.height if tail is not None and tail > GAP_FACTOR else 0,
        "expected_interval_seconds": per_device["expected"].median(),
    }


def _step_tail(ratios: pl.Series) -> float | None:
    """delay_check's `step_tail`: the step (in units of each device's scale) that clean data
    exceeds anywhere with chance SIGNIFICANCE, fitted on the longest steps."""
    n = ratios.len()
    if n < 2:
        return None
    top = ratios.top_k(TAIL_MAX + 1).sort(descending=True).to_list()
    k = min(max(n // 8, min(n // 2, SMALL_TAIL)), TAIL_MAX)
    k = max(k, 1)
    trim = min(TAIL_TRIM, k // 10)
    tie, kept = top[k], top[trim]
    censored = (trim + 1) * kept + sum(top[trim + 1 : k])
    below = ratios.filter(ratios < tie)
    u = float(below.max()) if below.len() else tie  # type: ignore[arg-type]
    if kept == tie:
        return float(tie)
    regular = _regular(ratios)
    if regular is not None:
        return regular
    above = int((ratios > u).sum())
    nu = k - trim
    scale = (censored - k * u) / nu
    return float(u + nu * ((above / SIGNIFICANCE) ** (1 / nu) - 1) * scale)


def _regular(ratios: pl.Series) -> float | None:
    """delay_check's regular-logger bound, judged on all the steps: the N/16-th and N/8-th
    longest are the typical step; with at least LOST_COMMON of the steps missing a reading,
    the geometric reach of N steps."""
    n = ratios.len()
    ordered = ratios.sort(descending=True)
    k = max(max(n // 8, min(n // 2, SMALL_TAIL)), 1)
    middle, tie = ordered[min(k // 2, n - 1)], ordered[min(k, n - 1)]
    if not (middle == tie and tie <= 1):
        return None
    longer = int((ratios > LOST_READING).sum())
    lost = (longer - min(longer, TAIL_TRIM)) / n
    if lost < LOST_COMMON:
        return float(tie)
    return max(float(tie), 1 + math.log(SIGNIFICANCE / n) / math.log(lost))


def structure_check(frame: pl.DataFrame, unparseable: dict[str, int], ts: str) -> Counts:
    """Dtype facts: numbers stored as text and how many did not parse, timestamps that are not
    a time, columns with one value."""
    distinct = frame.select(pl.all().n_unique()).row(0, named=True)
    return {
        "text_numeric_columns": sorted(unparseable),
        "text_numeric_unparseable": unparseable,
        "unparseable_timestamps": 0 if frame.schema[ts] != pl.String else None,
        "constant_columns": sorted(c for c, n in distinct.items() if n == 1),
    }


def run(path: Path, entity: str, ts: str, ingest: str | None) -> dict[str, Any]:
    timings: dict[str, float] = {}

    def timed(name: str, step: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        result = step()
        timings[name] = time.perf_counter() - started
        return result

    frame, unparseable = timed("load", lambda: load(path, entity))
    ordered = timed("sort", lambda: series_order(frame, entity, ts))
    roles = {entity, ts, ingest}
    values = [c for c, t in frame.schema.items() if c not in roles and t.is_numeric()]
    checks = {
        "null_check": timed("null_check", lambda: null_check(frame, ordered.drop("row"), entity)),
        "duplicate_check": timed("duplicate_check", lambda: duplicate_check(ordered, entity, ts)),
        "outlier_check": timed("outlier_check", lambda: outlier_check(ordered, entity, values)),
        "delay_check": timed(
            "delay_check", lambda: delay_check(frame, ordered, entity, ts, ingest)
        ),
        "structure_check": timed(
            "structure_check", lambda: structure_check(frame, unparseable, ts)
        ),
    }
    timings["total"] = sum(timings.values())
    return {"rows": frame.height, "timings": timings, "checks": checks}


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--entity", default="device_id")
    parser.add_argument("--timestamp", default="timestamp")
    parser.add_argument("--ingest", default="ingest_time")
    args = parser.parse_args(argv)
    result = run(args.path, args.entity, args.timestamp, args.ingest or None)
    json.dump(result, sys.stdout, default=_jsonable)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
