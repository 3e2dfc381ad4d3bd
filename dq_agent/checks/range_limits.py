"""The validity limits range_check applies: per value column and, in a long layout, per tag.

Limits come from the config (`range_check.limits`: fail limits `min`/`max`, suspect limits
`suspect_min`/`suspect_max`), by exact name, else the first glob pattern that matches. A key
names a value column or, in a long layout (a historian's `TagName`/`ts`/`Value`, a melted
`device`/`variable`/`value`: `series_kinds.variable_keys`), a tag: the quantity a series
measures. A tag's own entry wins over its value column's.

Where the config leaves a key unset, a unit default may fill it, only when the unit is
unmistakable: from the name (of the column, or of the tag in a long layout) or from the unit
the loader read in the values ("-5.00 K": `Dataset.units`):

- relative humidity (`humidity`, `rh`): suspect outside 0-100, always;
- an absolute pressure (`abs_pressure`, `hpa`, `psia`, `barometric`) or a Kelvin temperature
  (`kelvin`, `temp_k`, `T_K`, "Temperature (K)", a value unit K): suspect below 0, always;
- a generic percentage (`pct`, `percent`, `%` in the name, or a % unit in the values): 0-100
  only when the data itself keeps to it. A percentage may be signed by design (a speed
  deviation, a valve's signed travel) or go beyond 100 (a motor load up to 130 %): then a
  large share of its readings lies outside 0-100 (the trial's signed and overload columns:
  about half), where a fault is a small minority (the sample's out-of-range run: 0.2 % of its
  readings). So the default applies when at most `percent_outside_share` (1 %) of the
  column's or tag's readings in the whole data (maintenance windows left out, whatever a
  call's narrowing) lie outside 0-100; otherwise it is not applied and the result says so,
  with that share and the key that sets limits.

Deciding that needs the data, and the limits must be known before the later checks' plans
are built (flat line, spike, outlier and the flag file leave out what range flagged, in nodes
keyed by the limits). So `resolve` runs one small aggregate query per dataset and config,
only when a generic percentage or a long layout needs it, on the engine the check runs on,
and keeps the answer for the dataset's frame.
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import MISSING_PART, Scope
from dq_agent.checks.portable import count, missing
from dq_agent.checks.series_kinds import variable_keys
from dq_agent.checks.series_values import matches_any, settings_for
from dq_agent.engines import Engine
from dq_agent.engines.base import Frame, entity_key_expr, grouped
from dq_agent.load import Dataset
from dq_agent.settings import fraction, setting

if TYPE_CHECKING:
    from dq_agent.config import Config

LIMIT_KEYS = ("min", "max", "suspect_min", "suspect_max")
MAX_TAGS_LISTED = 20
FAIL, SUSPECT, GOOD = 4, 3, 0
"""Levels as QARTOD flags: 4 outside a fail limit, 3 outside a suspect limit only."""


def _limit_table(value: Any) -> str | None:
    for column, limits in value.items():
        unknown = sorted(set(limits) - set(LIMIT_KEYS))
        if unknown:
            return f"use only {', '.join(LIMIT_KEYS)} for {column!r} (not {', '.join(unknown)})"
        for low, high in (("min", "max"), ("suspect_min", "suspect_max"), ("min", "suspect_min")):
            if low in limits and high in limits and limits[low] > limits[high]:
                return f"have {low} <= {high} for {column!r}"
        if "suspect_max" in limits and "max" in limits and limits["suspect_max"] > limits["max"]:
            return f"have suspect_max <= max for {column!r}"
    return None


@dataclass
class RangeCheckConfig:
    # `setting` returns a dataclasses.field with a default factory: no shared mutable default.
    limits: dict[str, dict[str, float]] = setting(factory=dict, rule=_limit_table)  # noqa: RUF009
    """Per column or tag name or glob pattern: any of min, max, suspect_min, suspect_max."""
    unit_defaults: bool = True
    """Suspect limits for columns and tags whose name or values state a unit with bounds."""
    percent_outside_share: float = setting(0.01, rule=fraction)
    """A generic percentage gets 0-100 only when at most this share of its readings is outside."""
    excluded: list[str] = field(default_factory=list)
    """Column or tag names or glob patterns never range-checked."""


@dataclass(frozen=True)
class Limits:
    min: float | None = None
    max: float | None = None
    suspect_min: float | None = None
    suspect_max: float | None = None
    source: str = "config"
    unit_read: str | None = None
    """The unit read from the values ("-5.00 K": K) that gave the default, if one did."""

    def is_empty(self) -> bool:
        return all(getattr(self, key) is None for key in LIMIT_KEYS)

    def to_dict(self) -> dict[str, Any]:
        return {**{key: getattr(self, key) for key in LIMIT_KEYS}, "source": self.source}

    def origin(self) -> str:
        """Where the limits come from, short: "config", "unit default", "config and unit
        default", with the unit when it was read from the values."""
        first = self.source.split(":")[0]
        return first + (f", unit {self.unit_read} read from the values" if self.unit_read else "")

    def low(self) -> float:
        """The tightest lower limit (-inf without one): a reading's excess is measured from it."""
        lows = [v for v in (self.min, self.suspect_min) if v is not None]
        return max(lows) if lows else -math.inf

    def high(self) -> float:
        highs = [v for v in (self.max, self.suspect_max) if v is not None]
        return min(highs) if highs else math.inf


@dataclass(frozen=True)
class UnitDefault:
    limits: Limits
    conditional: bool = False
    """A generic percentage: applied only when the data keeps to 0-100."""


# Names that state a unit with a physical bound. Only unmistakable ones: a plain "pressure" may
# be gauge or differential pressure, which can be negative, so it gets no default.
_HUMIDITY = re.compile(r"humidity|(^|[^a-z])rh([^a-z]|$)")
_PERCENT = re.compile(r"(^|[^a-z])(pct|percent)([^a-z]|$)|%")
_ABSOLUTE_PRESSURE = re.compile(
    r"abs(olute)?[^a-z]*press|press\w*[^a-z]abs(olute)?([^a-z]|$)|psia|barometric|(^|[^a-z])hpa([^a-z]|$)"
)
# Kelvin: the word; K alone in brackets ("Temperature (K)", "temp [K]"), upper case as SI
# writes it (a lower-case "(k)" may be thousands); or a temperature name ending in a separate k
# ("temp_k", "T_K", "outlet_t_k"). A k inside a word ("kw", "peak", "tank_k") is no unit.
_KELVIN = re.compile(r"kelvin|[(\[]\s*K\s*[)\]]|(?i:(^|[^a-z])(t|temp\w*)[^a-z0-9]+k$)")
# Units the loader read in the values ("-5.00 K", "39.5 %"); case matters: "k" is no Kelvin.
_VALUE_UNITS = {
    "K": "kelvin",
    "%": "percent",
    "hPa": "absolute pressure",
    "psia": "absolute pressure",
}


def unit_limits(name: str, unit: str | None = None) -> Limits | None:
    """The suspect limits a unit default gives a column or tag `name` whose values carry
    `unit`, whether or not the data later confirms a percentage's (`unit_default`)."""
    default = unit_default(name, unit)
    return default.limits if default is not None else None


def unit_default(name: str, unit: str | None = None) -> UnitDefault | None:
    """The suspect-limit default of a column or tag `name` whose values carry `unit` (None when
    read as numbers), or None when neither states a bounded unit unmistakably."""
    lower = name.lower()
    read = f" (unit {unit} read from the values)"
    if _HUMIDITY.search(lower):
        return UnitDefault(_percent("unit default: relative humidity 0-100 %"))
    if _PERCENT.search(lower):
        return UnitDefault(
            _percent("unit default: percentage 0-100 (the data keeps to it)"), conditional=True
        )
    if _ABSOLUTE_PRESSURE.search(lower):
        return UnitDefault(Limits(suspect_min=0.0, source="unit default: absolute pressure >= 0"))
    if _KELVIN.search(name) or "kelvin" in lower:
        return UnitDefault(Limits(suspect_min=0.0, source="unit default: Kelvin >= 0"))
    kind = _VALUE_UNITS.get(unit or "")
    if kind == "percent":
        return UnitDefault(
            _percent("unit default: percentage 0-100 (the data keeps to it)" + read, unit),
            conditional=True,
        )
    if kind == "absolute pressure":
        source = f"unit default: {kind} >= 0" + read
        return UnitDefault(Limits(suspect_min=0.0, source=source, unit_read=unit))
    if kind == "kelvin":
        source = "unit default: Kelvin >= 0" + read
        return UnitDefault(Limits(suspect_min=0.0, source=source, unit_read=unit))
    return None


def _percent(source: str, unit: str | None = None) -> Limits:
    return Limits(suspect_min=0.0, suspect_max=100.0, source=source, unit_read=unit)


def merged(configured: Mapping[str, float] | None, default: Limits | None) -> Limits | None:
    """The config's limits with a default filling the keys it leaves unset; None for none."""
    configured = configured or {}
    values = {key: configured.get(key, getattr(default, key, None)) for key in LIMIT_KEYS}
    if all(v is None for v in values.values()):
        return None
    if not configured:
        source = default.source if default is not None else "config"
    elif default is not None and any(key not in configured for key in LIMIT_KEYS):
        source = f"config and {default.source}"
    else:
        source = "config"
    unit = default.unit_read if default is not None and source != "config" else None
    return Limits(**values, source=source, unit_read=unit)


@dataclass(frozen=True)
class SeriesLimits:
    """Limits of some series of a long layout (by their entity key: `checks.base.entity_key`)."""

    limits: Limits
    series: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class NotApplied:
    """A percentage default left out because the data goes beyond 0-100 too often."""

    name: str
    """The column, or `column: tag` in a long layout."""
    share_outside: float
    key: str
    """The config key that sets its limits."""


@dataclass(frozen=True)
class ColumnRange:
    """What range_check applies to one value column: one set of limits for all its readings
    (`limits`), or in a long layout limits per series (`per_series`, the first that names a
    series applies; series named by none are not checked)."""

    column: str
    limits: Limits | None
    per_series: tuple[SeriesLimits, ...] | None = None
    not_applied: tuple[NotApplied, ...] = ()
    unlimited_tags: tuple[str, ...] = ()
    """In a long layout, the tags no limits apply to (their series are not checked)."""

    def is_checked(self) -> bool:
        return self.limits is not None if self.per_series is None else bool(self.per_series)

    def limits_of(self, series: str | None) -> Limits | None:
        if self.per_series is None:
            return self.limits
        return next((s.limits for s in self.per_series if series in s.series), None)

    def level(self, x: nw.Expr, key: nw.Expr | None) -> nw.Expr:
        """FAIL, SUSPECT or GOOD (Int8) for each reading `x` (GOOD for null) of the series
        named `key`."""
        return self._per_series(key, lambda lim: level(x, lim), nw.lit(GOOD, dtype=nw.Int8))

    def outside(self, x: nw.Expr, key: nw.Expr | None) -> nw.Expr:
        """Whether each reading `x` lies beyond any of its limits (null for null): `level` above
        GOOD, in two comparisons (the tightest limits) instead of four."""
        return self._per_series(
            key,
            lambda lim: (x < nw.lit(lim.low())) | (x > nw.lit(lim.high())),
            nw.lit(False),
        )

    def excess(self, x: nw.Expr, key: nw.Expr | None) -> nw.Expr:
        """How far each reading lies beyond its tightest limits (ranks the worst readings)."""
        return self._per_series(
            key,
            lambda lim: nw.max_horizontal(nw.lit(lim.low()) - x, x - nw.lit(lim.high())),
            nw.lit(None, dtype=nw.Float64),
        )

    def _per_series(self, key: nw.Expr | None, of: Any, otherwise: nw.Expr) -> nw.Expr:
        if self.per_series is None or key is None:
            return of(self.limits) if self.limits is not None else otherwise
        expr = otherwise
        for group in reversed(self.per_series):
            expr = nw.when(key.is_in(list(group.series))).then(of(group.limits)).otherwise(expr)
        return expr

    def to_dict(self) -> dict[str, Any]:
        """The limits as the result reports them: the column's, and per tag in a long layout."""
        if self.per_series is None:
            return {"limits": self.limits.to_dict() if self.limits is not None else None}
        by_tag = {tag: s.limits.to_dict() for s in self.per_series for tag in s.tags}
        return {
            "limits": None,
            "limits_by_tag": dict(sorted(by_tag.items())),
            "tags_without_limits": list(self.unlimited_tags[:MAX_TAGS_LISTED]),
            "tags_without_limits_count": len(self.unlimited_tags),
        }


def level(x: nw.Expr, limits: Limits) -> nw.Expr:
    def outside(low: float | None, high: float | None) -> nw.Expr:
        out = nw.lit(False)
        if low is not None:
            out = out | (x < low)
        if high is not None:
            out = out | (x > high)
        return out.fill_null(False)

    return (
        nw.when(outside(limits.min, limits.max))
        .then(nw.lit(FAIL, dtype=nw.Int8))
        .when(outside(limits.suspect_min, limits.suspect_max))
        .then(nw.lit(SUSPECT, dtype=nw.Int8))
        .otherwise(nw.lit(GOOD, dtype=nw.Int8))
    )


@dataclass(frozen=True)
class Ranges:
    """The limits of every numeric value column, and the config keys that name nothing."""

    columns: dict[str, ColumnRange]
    unmatched: tuple[str, ...]


def series_key(keys: Sequence[str]) -> nw.Expr | None:
    """`checks.base.entity_key` in Narwhals (`engines.base.entity_key_expr`), or None."""
    return entity_key_expr(keys) if keys else None


def resolve(engine: Engine, dataset: Dataset, config: Config) -> Ranges:
    """Every numeric value column's `ColumnRange` under `config`, on `engine`; computed once per
    dataset frame, engine and settings."""
    settings = config.section(RangeCheckConfig)
    memo = (id(dataset.frame), engine.name, repr(settings), tuple(dataset.sentinels))
    found = _RESOLVED.get(memo)
    if found is None:
        found = _resolve(engine, dataset, settings)
        _RESOLVED[memo] = found
        weakref.finalize(dataset.frame, _RESOLVED.pop, memo, None)
    return found


_RESOLVED: dict[tuple[Any, ...], Ranges] = {}


def _resolve(engine: Engine, dataset: Dataset, settings: RangeCheckConfig) -> Ranges:
    schema = dataset.frame.collect_schema()
    columns = [c for c in dataset.roles.values if c in schema and schema[c].is_numeric()]
    variables = variable_keys(dataset)
    named = set(columns)
    if variables:
        ranges, tags = _long(engine, dataset, settings, columns, variables)
        named |= tags
    else:
        ranges = _wide(engine, dataset, settings, columns)
    unmatched = tuple(
        key for key in settings.limits if not any(matches_any(n, [key]) for n in named)
    )
    return Ranges({r.column: r for r in ranges}, unmatched)


def _candidate(
    name: str, unit: str | None, settings: RangeCheckConfig, configured: Mapping[str, float] | None
) -> tuple[Mapping[str, float] | None, UnitDefault | None]:
    """The configured entry (its own, else `configured`) and the unit default of a column or
    tag; both None when excluded."""
    if matches_any(name, settings.excluded):
        return None, None
    own = settings_for(name, settings.limits)
    default = unit_default(name, unit) if settings.unit_defaults else None
    return (own if own is not None else configured), default


def _wide(
    engine: Engine, dataset: Dataset, settings: RangeCheckConfig, columns: Sequence[str]
) -> list[ColumnRange]:
    candidates = {c: _candidate(c, dataset.units.get(c), settings, None) for c in columns}
    conditional = [c for c, (_, d) in candidates.items() if d is not None and d.conditional]
    shares: dict[str, float] = {}
    if conditional:
        rows = _whole(engine, dataset)
        schema = rows.collect_schema()
        query = rows.select(
            expr
            for i, c in enumerate(conditional)
            for expr in _outside_counts(schema, c, i, dataset.sentinels)
        )
        (counts,) = engine.collect([query], dataset)
        row = counts.row(0, named=True)
        shares = {c: _share(row[f"__out{i}"], row[f"__n{i}"]) for i, c in enumerate(conditional)}
    ranges = []
    for column, (configured, default) in candidates.items():
        limits, not_applied = _decide(
            column, column, configured, default, shares.get(column), settings
        )
        ranges.append(ColumnRange(column, limits, None, not_applied))
    return ranges


def _long(
    engine: Engine,
    dataset: Dataset,
    settings: RangeCheckConfig,
    columns: Sequence[str],
    variables: Sequence[str],
) -> tuple[list[ColumnRange], set[str]]:
    """Per tag: the distinct series with their tag, and per value column how many readings
    each has and how many lie outside 0-100, in one group-by (a table of the series)."""
    keys = list(dataset.roles.entity)
    rows = _whole(engine, dataset)
    schema = rows.collect_schema()
    aggs = [
        expr
        for i, c in enumerate(columns)
        for expr in _outside_counts(schema, c, i, dataset.sentinels)
    ]
    query = grouped(rows, keys, *aggs) if aggs else rows.select(*keys).unique()
    (table,) = engine.collect([query], dataset)
    text = [pl.col(k).cast(pl.String) for k in keys]
    if len(keys) > 1:
        text = [part.fill_null(MISSING_PART) for part in text]
    table = table.with_columns(
        (text[0] if len(keys) == 1 else pl.concat_str(text, separator="/")).alias("__key"),
        pl.concat_str([pl.col(v).cast(pl.String) for v in variables], separator="/").alias("__tag"),
    ).filter(pl.col("__key").is_not_null() & pl.col("__tag").is_not_null())
    series_of: dict[str, list[str]] = dict(table.group_by("__tag").agg(pl.col("__key")).iter_rows())
    tags = sorted(series_of)
    ranges = []
    for i, column in enumerate(columns):
        configured, _ = _candidate(column, None, settings, None)
        excluded = matches_any(column, settings.excluded)
        per_tag: dict[Limits, tuple[list[str], list[str]]] = {}
        not_applied: list[NotApplied] = []
        unlimited: list[str] = []
        totals = (
            table.group_by("__tag").agg(pl.col(f"__out{i}").sum(), pl.col(f"__n{i}").sum())
            if aggs
            else table.select("__tag")
        ).sort("__tag")
        for row in totals.iter_rows(named=True):
            tag = row["__tag"]
            if excluded:
                break
            own, default = _candidate(tag, dataset.units.get(column), settings, configured)
            share = _share(row.get(f"__out{i}", 0), row.get(f"__n{i}", 0))
            limits, skipped = _decide(f"{column}: {tag}", tag, own, default, share, settings)
            not_applied += skipped
            if limits is None:
                unlimited.append(tag)
            else:
                listed = per_tag.setdefault(limits, ([], []))
                listed[0].extend(series_of[tag])
                listed[1].append(tag)
        groups = tuple(
            SeriesLimits(lim, tuple(sorted(s)), tuple(sorted(t))) for lim, (s, t) in per_tag.items()
        )
        not_applied.sort(key=lambda n: n.name)
        unlimited = tags if excluded else unlimited
        ranges.append(
            ColumnRange(column, None, groups, tuple(not_applied), tuple(sorted(unlimited)))
        )
    return ranges, set(tags)


def _decide(
    name: str,
    key: str,
    configured: Mapping[str, float] | None,
    default: UnitDefault | None,
    share: float | None,
    settings: RangeCheckConfig,
) -> tuple[Limits | None, tuple[NotApplied, ...]]:
    """The limits of a column or tag: a conditional default only when the data keeps to it."""
    if (
        default is not None
        and default.conditional
        and share is not None
        and share > settings.percent_outside_share
    ):
        return merged(configured, None), (NotApplied(name, share, key),)
    return merged(configured, default.limits if default is not None else None), ()


def _whole(engine: Engine, dataset: Dataset) -> Frame:
    """The whole data's rows, maintenance windows left out when the run computed them."""
    return engine.rows(dataset, Scope(excused=dataset.excusal))


def _outside_counts(
    schema: nw.Schema, column: str, index: int, sentinels: Sequence[float]
) -> list[nw.Expr]:
    absent = missing(schema, column, sentinels)
    x = nw.col(column).cast(nw.Float64)
    outside = ~absent & ((x < 0.0) | (x > 100.0))
    return [count(~absent).alias(f"__n{index}"), count(outside).alias(f"__out{index}")]


def _share(outside: Any, total: Any) -> float:
    return int(outside or 0) / int(total) if total else 0.0
