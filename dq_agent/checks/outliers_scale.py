"""The scale outlier_check judges a group on: its raw values, or a power or the log of them when
the group is clearly skewed (dust, particle counts, concentrations, flows, latencies: right-
skewed positive quantities whose clean tail a symmetric rule calls outlying).

Power transforms are monotone, so a group's quantiles on any such scale are the transformed
quantiles on the raw one: from the raw Q10, median and Q90 (one aggregate per group), the
quantile skewness (Q90 + Q10 - 2 Q50) / (Q90 - Q10) on each scale of `SCALES` costs nothing
more. A group is judged on the scale whose skewness is nearest 0, and only when

- the raw skewness is beyond what a symmetric group of that size shows by chance
  (`MIN_SKEW`, and `SKEW_SDS` times its sampling spread, about 1.06 / sqrt(n) for t-like
  data: simulated), so symmetric data keeps today's raw figures exactly;
- that scale at least halves it (`MIN_GAIN`) and takes at least `MIN_SKEW` off it: the skew
  is the quantity's, which a scale fixes, not that of a level that moves (a drift, a daily
  cycle), which none does. A slow process's quantile skewness strays far beyond the chance of
  independent values (the bench's humidity: 0.12 between devices, where independent values
  give 0.015), but over a span of a fraction of its level no scale changes it by as much (at
  most 0.063 there; a lognormal of sigma 0.25 loses 0.157 on the log scale, a gamma of shape
  10 0.129 on the cube root, a Weibull of shape 2 0.108 on the square root);
- the values allow it (a power of non-negative values, the log of positive ones), the group
  is judged on its own spread (`min_group_size` values) and its Q10 to Q90 span many steps of
  the column's resolution (`COARSE_STEPS`): the quantiles of a few steps say nothing of shape.

The check then works on the transformed values of that group throughout (centre, spread, the
neighbours' test, autocorrelation, extremes): z is on the scale judged; the examples keep the
raw value. `outlier_check.scale: raw` turns it off.

Written over Narwhals on the small table of groups: the same choice on every engine (on
Polars, `nw.from_native` over the eager table); the per-row transform has a Polars and a
Narwhals form (`on_scale_pl`, `on_scale_nw`).
"""

from __future__ import annotations

from typing import Any

import narwhals as nw
import polars as pl

# Candidate scales as Box-Cox powers (0: the log), in order of preference on a tie: the raw
# scale first, then the mildest. x^(1/3) makes a gamma (shape 1-5) near symmetric, the log a
# lognormal, 1/4 a Weibull of shape 0.7.
RAW = 1.0
SCALES = (RAW, 0.5, 1 / 3, 0.25, 0.0)
SCALE_NAMES = {RAW: "raw", 0.5: "square root", 1 / 3: "cube root", 0.25: "fourth root", 0.0: "log"}
LOW_QUANTILE, HIGH_QUANTILE = 0.1, 0.9
# Kelly's skewness of t-like samples spreads about 1.06 / sqrt(n) (simulated n = 30..50,000):
# 5 of those, and never below 0.1 (a lognormal of sigma 0.25 has 0.16, a gamma of shape 20
# 0.10, whose raw tails are within the null's).
SKEW_SDS = 5.0 * 1.06
MIN_SKEW = 0.1
MIN_GAIN = 0.5
COARSE_STEPS = 20


def scale_name(power: float) -> str:
    """The scale's name in metrics and text ("log", "cube root")."""
    for candidate, name in SCALE_NAMES.items():
        if abs(candidate - power) < 1e-9:
            return name
    return f"power {power:g}"


_RAW_SKEW, _SKEWED, _BEST = "__skew_raw", "__skewed", "__skew_best"


def _candidate(power: float) -> str:
    # No dot in the name: Spark reads `a.b` as a field of a struct.
    return f"__skew_{SCALES.index(power)}"


def with_scale(
    frame: nw.LazyFrame[Any],
    name: str,
    low_q: str,
    median: str,
    high_q: str,
    lowest: str,
    n: str,
    resolution: nw.Expr,
    min_group_size: int,
) -> nw.LazyFrame[Any]:
    """`frame` (one row per group) with column `name`: the power of `SCALES` the group is
    judged on (RAW unless clearly skewed), from its raw Q10 (`low_q`), median, Q90 (`high_q`),
    smallest value (`lowest`) and number of values (`n`) and the column's resolution (0 when
    none). In steps, each figure a column once: one expression holding every candidate's
    skewness in each branch of the choice took 2 s on 200 groups."""
    low, mid, high = nw.col(low_q), nw.col(median), nw.col(high_q)
    width = high - low
    count = nw.col(n).cast(nw.Float64)
    eligible = (
        (count >= min_group_size)
        & (width > 0)
        & (width >= COARSE_STEPS * resolution)
        & ~nw.col(lowest).is_null()
    ).fill_null(False)
    threshold = nw.max_horizontal(nw.lit(MIN_SKEW), SKEW_SDS / count.clip(lower_bound=1) ** 0.5)
    frame = frame.with_columns(
        _skewness(low, mid, high, RAW, eligible).abs().alias(_RAW_SKEW),
    ).with_columns((eligible & (nw.col(_RAW_SKEW) > threshold).fill_null(False)).alias(_SKEWED))
    skewed = nw.col(_SKEWED)
    candidates = SCALES[1:]
    frame = frame.with_columns(
        _skewness(
            low,
            mid,
            high,
            power,
            skewed & ((nw.col(lowest) > 0) if power == 0 else (nw.col(lowest) >= 0)),
        )
        .abs()
        .alias(_candidate(power))
        for power in candidates
    ).with_columns(nw.min_horizontal(*[nw.col(_candidate(p)) for p in candidates]).alias(_BEST))
    best, raw = nw.col(_BEST), nw.col(_RAW_SKEW)
    chosen: nw.Expr = nw.lit(RAW)
    # The first (mildest) scale reaching the best wins a tie: built from the last backwards.
    for power in reversed(candidates):
        reached = (nw.col(_candidate(power)) <= best).fill_null(False)
        chosen = nw.when(reached).then(nw.lit(power)).otherwise(chosen)
    accepted = (
        skewed
        & (best <= MIN_GAIN * raw).fill_null(False)
        & (raw - best >= MIN_SKEW).fill_null(False)
    )
    return frame.with_columns(
        nw.when(accepted).then(chosen).otherwise(nw.lit(RAW)).alias(name)
    ).drop(_RAW_SKEW, _SKEWED, _BEST, *[_candidate(p) for p in candidates])


def _skewness(
    low_q: nw.Expr, median: nw.Expr, high_q: nw.Expr, power: float, allowed: nw.Expr
) -> nw.Expr:
    """Kelly's quantile skewness on the scale `power`, null where not `allowed` (the quantiles
    are read only there: no log of 0 or division by 0 is asked of an engine)."""

    def on(q: nw.Expr) -> nw.Expr:
        safe = nw.when(allowed).then(q).otherwise(nw.lit(1.0))
        return safe if power == RAW else safe.log() if power == 0 else safe**power

    low, mid, high = on(low_q), on(median), on(high_q)
    span = nw.when(allowed).then(high - low).otherwise(nw.lit(1.0))
    return nw.when(allowed).then((high + low - 2 * mid) / span)


def on_scale_nw(x: nw.Expr, power: nw.Expr) -> nw.Expr:
    """x on the scale `power` (a column of the group's power): itself where raw, its log where
    0, else x^power. Only a group's own values meet its power, which allows it; the guards keep
    an engine from a log or root of a value of another branch."""
    return (
        nw.when(power == RAW)
        .then(x)
        .when(power == 0)
        .then(nw.when(x > 0).then(x).log())
        .otherwise(nw.when(x >= 0).then(x) ** power)
    )


def on_scale_pl(x: pl.Expr, power: pl.Expr) -> pl.Expr:
    """`on_scale_nw` in Polars."""
    return (
        pl.when(power == RAW)
        .then(x)
        .when(power == 0)
        .then(pl.when(x > 0).then(x).log())
        .otherwise(pl.when(x >= 0).then(x).pow(power))
    )
