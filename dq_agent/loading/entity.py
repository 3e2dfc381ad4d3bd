"""The entity column found by behaviour, whatever its name.

The entity names a series: with it, (entity, timestamp) is unique where the timestamp alone is
not. A candidate is a text, categorical or integer column with at most a fifth as many distinct
values as rows (or named like a device, with fewer distinct values than rows); the one that makes (entity, timestamp) unique for at least 99% of rows wins
(ties: a name that says device/sensor/..., then text over numbers, then the first column). When
no single column does, pairs are tried: a melted file (`device`, `variable`, `value`) is keyed
by both; so is one whose best single column leaves repeats that a second column named like a
device removes (at least half of them). In a file where the timestamp alone is unique, a column named like a device with few values
is the entity; else a text column whose values' readings interleave in time, each at regular
steps (channels logged each at its own clock, `_interleaved`); else a column with one value
is the one device's name.

A column alone must do much better than chance (`_lifts`): a measurement with a few hundred
integer values makes (value, timestamp) nearly unique when a few devices share each timestamp,
and was taken for the entity. A column that nearly does it alone is the entity even when some
keys repeat; only a column named like a device may join it, so a reading cannot join it and
explain conflicting duplicates away.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

MIN_UNIQUE_SHARE = 0.99
MAX_DISTINCT_SHARE = 0.2
# How much of what chance leaves repeated a key must make unique (`_by_chance`): a device
# column makes nearly all of it unique, a measurement about none.
MIN_LIFT = 0.5
# A key that no second column completes is still the entity when it makes nearly all of what
# chance leaves repeated unique, for most rows.
STRONG_LIFT = 0.9
MIN_REPEATING_SHARE = 0.9
_MAX_PAIR_CANDIDATES = 8
# Interleaved channels (`_interleaved`): each value's steps at least twice the file's median
# step, and most of them within 10% of that value's own median step.
MIN_INTERLEAVE_RATIO = 2.0
MIN_REGULAR_SHARE = 0.8
# The words for a device or a measuring point, in English and in the German, French, Italian
# and Spanish plant exports come in (a French `capteur` column of 4 sensors was left out: the
# whole file one series). Words that also name a reading (a counter: Zähler, compteur) are not
# among them. Regular expressions, matched case-insensitively.
DEVICE_WORDS = (
    "device|sensor|machine|asset|entity|station|tag|unit|meter|equipment|node|host|site|line|"
    "plant|well|turbine|pump|signal|channel|series|serial|ger(ä|ae)t|anlage|maschine|"
    "messstelle|messpunkt|f(ü|ue)hler|capteur|sonde|appareil|(e|é)quipement|sensore|"
    "dispositivo|macchina|apparecchio|stazione|equipo|m(á|a)quina|estaci(ó|o)n"
)
# A device word anywhere in the name, or a name that says it names or identifies something.
ENTITY_NAME = re.compile(
    rf"({DEVICE_WORDS}|id$|name$|variable|metric|parameter|measurement)",
    re.I,
)
# A column that names what was measured in a melted (long) file.
VARIABLE_NAME = re.compile(
    r"^(variable|metric|parameter|measurement|signal|tag|quantity|name)$", re.I
)


def is_candidate(dtype: pl.DataType) -> bool:
    return dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum) or dtype.is_integer()


@dataclass(frozen=True)
class EntityGuess:
    columns: list[str]
    reason: str


def _rank(name: str, dtype: pl.DataType, index: int) -> tuple[int, int, int]:
    return (1 if ENTITY_NAME.search(name) else 0, 0 if dtype.is_integer() else 1, -index)


def find_entity(
    raw: pl.LazyFrame,
    schema: pl.Schema,
    timestamp: pl.Expr,
    candidates: list[str],
    named: list[str],
    instants: pl.Expr | None = None,
) -> EntityGuess | None:
    """The entity columns by behaviour over all rows, or None when no column acts as one.
    `instants`: the timestamp as numbers on one scale (for the steps between readings), where
    it can be read so."""
    if not candidates:
        return None
    stats = raw.select(
        pl.len().alias("__rows"),
        timestamp.n_unique().alias("__ts"),
        *[pl.col(c).n_unique().alias(c) for c in candidates],
    ).collect()
    counts = stats.row(0, named=True)
    rows = int(counts["__rows"])
    if rows == 0:
        return None
    order = {name: i for i, name in enumerate(schema.names())}
    ranked = sorted(candidates, key=lambda c: _rank(c, schema[c], order[c]), reverse=True)
    if counts["__ts"] >= MIN_UNIQUE_SHARE * rows:
        # Timestamps alone are unique: devices that never report at the same time cannot be
        # told by behaviour, so a device-like name decides.
        if named:
            return EntityGuess(list(named), "named like a device")
        # Devices that report at their own times (irregular, on change): a column named like
        # one with few values for its rows.
        loose = [
            c
            for c in ranked
            if ENTITY_NAME.search(c) and 1 < counts[c] <= MAX_DISTINCT_SHARE * rows
        ]
        # A batch or run number labels stretches of one series, one after the other: devices
        # report side by side (a stuck reading across two batches was two runs, on two
        # "devices").
        stretches = [c for c in loose if instants is not None and _in_stretches(raw, instants, c)]
        loose = [c for c in loose if c not in stretches]
        if loose:
            return EntityGuess(
                [loose[0]],
                "named like a device, with few values for its rows; timestamps alone are unique",
            )
        if stretches:
            return EntityGuess(
                [],
                f"{stretches[0]} labels stretches of time one after the other (a batch, "
                "a run), not devices reporting side by side; read as one series",
            )
        # Text only: an integer reading that cycles (10, 11, ..., 14, 10, ...) interleaves too.
        few = [
            c
            for c in ranked
            if not schema[c].is_integer() and 1 < counts[c] <= MAX_DISTINCT_SHARE * rows
        ]
        interleaved = _interleaved(raw, instants, few[:_MAX_PAIR_CANDIDATES])
        if interleaved is not None:
            column, ratio = interleaved
            return EntityGuess(
                [column],
                f"its {counts[column]:,} values' readings interleave in time, each at regular "
                f"steps ({ratio:,.0f}x the file's median step); timestamps alone are unique",
            )
        single = [c for c in ranked if counts[c] == 1]
        named_or_text = [c for c in single if ENTITY_NAME.search(c) or not schema[c].is_integer()]
        if named_or_text:
            return EntityGuess(
                [named_or_text[0]], "one value in a file whose timestamps are unique"
            )
        return None
    # A name that says device/sensor/... lifts the fifth-of-the-rows bound (a short file of a
    # few devices); the uniqueness test below still has to hold.
    keyed = [
        c
        for c in ranked
        if 1 < counts[c] <= MAX_DISTINCT_SHARE * rows
        or (ENTITY_NAME.search(c) and 1 < counts[c] < rows)
    ]
    if not keyed:
        return None
    shares = _unique_shares(raw, timestamp, [[c] for c in keyed], rows)
    lifts = _lifts(raw, timestamp, [[c] for c in keyed], shares, rows)
    # A key alone must beat chance; a pair's columns need not (a melted file's device alone
    # leaves every variable's reading repeated).
    singles = [c for c in keyed if lifts[(c,)] >= MIN_LIFT]
    best = max(singles, key=lambda c: (shares[(c,)], _rank(c, schema[c], order[c])), default=None)
    if best is not None and shares[(best,)] >= MIN_REPEATING_SHARE:
        completed = _completing_pair(raw, timestamp, best, keyed, shares[(best,)], rows, order)
        if completed is not None:
            return completed
        share = shares[(best,)]
        if share >= MIN_UNIQUE_SHARE:
            guess = EntityGuess([best], f"makes (entity, timestamp) unique for {share:.1%} of rows")
            return _with_device(guess, ranked, counts, order, rows)
        if lifts[(best,)] >= STRONG_LIFT:
            # Devices whose rows repeat some keys (conflicting or re-sent readings): the
            # repeats are duplicate_check's to report. Any other column joining the key would
            # explain them away (a reading differs between two copies of a row).
            return EntityGuess(
                [best],
                f"makes (entity, timestamp) unique for {share:.1%} of rows; the other rows "
                "repeat a key",
            )
    pairs = [list(p) for p in itertools.combinations(keyed[:_MAX_PAIR_CANDIDATES], 2)]
    if not pairs:
        return None
    pair_shares = _unique_shares(raw, timestamp, pairs, rows)
    pair = max(pairs, key=lambda p: (pair_shares[tuple(p)], -order[p[0]] - order[p[1]]))
    share = pair_shares[tuple(pair)]
    if share < MIN_UNIQUE_SHARE:
        return None
    pair.sort(key=lambda c: order[c])
    return EntityGuess(pair, f"together make (entity, timestamp) unique for {share:.1%} of rows")


def _in_stretches(raw: pl.LazyFrame, instants: pl.Expr, column: str) -> bool:
    """Whether each value of `column` holds one stretch of time that ends before the next
    value's begins."""
    spans = (
        raw.select(pl.col(column).alias("__k"), instants.alias("__t"))
        .drop_nulls()
        .group_by("__k")
        .agg(pl.col("__t").min().alias("__first"), pl.col("__t").max().alias("__last"))
        .sort("__first")
        .select((pl.col("__first") > pl.col("__last").shift()).fill_null(True).all())
        .collect()
    )
    return bool(spans.item())


def _interleaved(
    raw: pl.LazyFrame, instants: pl.Expr | None, columns: list[str]
) -> tuple[str, float] | None:
    """The column whose values' readings interleave: each value's readings at steps regular
    for it (`MIN_REGULAR_SHARE` within 10% of its median step) and at least twice the file's
    median step apart, as channels logged each at its own clock into one file are (their
    timestamps are all distinct, so no key repeats to tell them by). A state or a batch
    column comes in runs (its steps are the file's own); a reading's values come at irregular
    steps. With its ratio of steps; the most regular column wins."""
    if instants is None or not columns:
        return None
    found: list[tuple[float, float, str]] = []
    for column in columns:
        frame = raw.select(pl.col(column).alias("__k"), instants.alias("__t")).drop_nulls()
        step = pl.col("__t").diff().over("__k")
        own = frame.sort("__k", "__t").select("__k", step.alias("__d")).drop_nulls()
        typical = pl.col("__d").median().alias("typical")
        mine = own.with_columns(pl.col("__d").median().over("__k").alias("__m"))
        regular = ((pl.col("__d") - pl.col("__m")).abs() <= 0.1 * pl.col("__m")).mean()
        overall = frame.select(pl.col("__t").sort().diff().median().alias("overall"))
        figures = pl.concat(
            [mine.select(typical, regular.alias("regular")), overall], how="horizontal"
        )
        row = figures.collect().row(0, named=True)
        if not row["overall"] or row["typical"] is None or row["regular"] is None:
            continue
        ratio = float(row["typical"]) / float(row["overall"])
        if ratio >= MIN_INTERLEAVE_RATIO and row["regular"] >= MIN_REGULAR_SHARE:
            found.append((float(row["regular"]), ratio, column))
    if not found:
        return None
    _, ratio, column = max(found, key=lambda f: f[0])
    return column, ratio


def _with_device(
    guess: EntityGuess,
    ranked: list[str],
    counts: dict[str, Any],
    order: dict[str, int],
    rows: int,
) -> EntityGuess:
    """A melted file whose series `variable` alone tells apart: one device (`serial` 1001, one
    value in the file), or devices that report at their own times, so that (variable,
    timestamp) is unique without them. A column named like a device with few values names the
    device and joins the key (which stays unique); it is a role, not a constant column."""
    if not all(VARIABLE_NAME.match(c) for c in guess.columns):
        return guess
    device = [
        c
        for c in ranked
        if c not in guess.columns
        and ENTITY_NAME.search(c)
        and not VARIABLE_NAME.match(c)
        and counts[c] <= max(1, MAX_DISTINCT_SHARE * rows)
    ]
    if not device:
        return guess
    columns = sorted([device[0], *guess.columns], key=lambda c: order[c])
    one = " one" if counts[device[0]] == 1 else ""
    return EntityGuess(columns, f"{guess.reason}; {device[0]} names the{one} device")


def _completing_pair(
    raw: pl.LazyFrame,
    timestamp: pl.Expr,
    best: str,
    keyed: list[str],
    share: float,
    rows: int,
    order: dict[str, int],
) -> EntityGuess | None:
    """`best` with a second column named like a device when the pair removes most of the rows
    that `best` leaves repeated: a melted file of devices that report at their own times is
    almost unique by `variable` alone, yet keyed by (device, variable). Only a column named
    like a device may join, so a flag that differs between truly duplicated rows cannot
    explain them away."""
    if share >= 1.0:
        return None
    others = [c for c in keyed if c != best and ENTITY_NAME.search(c)][:_MAX_PAIR_CANDIDATES]
    if not others:
        return None
    pairs = [[best, c] for c in others]
    pair_shares = _unique_shares(raw, timestamp, pairs, rows)
    pair = max(pairs, key=lambda p: (pair_shares[tuple(p)], -order[p[1]]))
    better = pair_shares[tuple(pair)]
    if (1.0 - better) > (1.0 - share) / 2:
        return None
    pair.sort(key=lambda c: order[c])
    return EntityGuess(pair, f"together make (entity, timestamp) unique for {better:.1%} of rows")


def _unique_shares(
    raw: pl.LazyFrame, timestamp: pl.Expr, keys: list[list[str]], rows: int
) -> dict[tuple[str, ...], float]:
    exprs = [
        pl.struct([*[pl.col(c) for c in key], timestamp.alias("__ts")]).n_unique().alias(f"k{i}")
        for i, key in enumerate(keys)
    ]
    row = raw.select(exprs).collect().row(0)
    return {tuple(key): int(n) / rows for key, n in zip(keys, row, strict=True)}


def _lifts(
    raw: pl.LazyFrame,
    timestamp: pl.Expr,
    keys: list[list[str]],
    shares: dict[tuple[str, ...], float],
    rows: int,
) -> dict[tuple[str, ...], float]:
    """Of the rows that chance would leave repeated (`_by_chance`), the share each key makes
    unique: about 1 for a device column, about 0 for a measurement (0 where chance alone
    makes every row unique: nothing to show)."""
    chance = _by_chance(raw, timestamp, keys, rows)
    return {
        key: (shares[key] - chance[key]) / (1 - chance[key]) if chance[key] < 1 else 0.0
        for key in map(tuple, keys)
    }


def _by_chance(
    raw: pl.LazyFrame, timestamp: pl.Expr, keys: list[list[str]], rows: int
) -> dict[tuple[str, ...], float]:
    """The share of rows whose (key, timestamp) would be unique if the key's values fell on
    the timestamps at random, each as often as it does: a row whose key value has share p of
    the rows, at a timestamp with m rows, is alone there with probability (1 - p)^(m - 1)."""
    at_time = "__rows_at_time"
    exprs = [
        ((1 - pl.len().over(key) / rows) ** (pl.col(at_time) - 1)).mean().alias(f"k{i}")
        for i, key in enumerate(keys)
    ]
    row = raw.with_columns(pl.len().over(timestamp).alias(at_time)).select(exprs).collect().row(0)
    return {tuple(key): float(p) for key, p in zip(keys, row, strict=True)}
