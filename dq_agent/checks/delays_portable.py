"""delay_check's queries over Narwhals, for the engines other than Polars (DuckDB, Spark).

The same figures as the Polars queries of `delays` (whose docstrings say what each means),
written for an engine that runs SQL-like windows: the time order within each entity from the
engine's `in_series`, with each timed row's previous one (its `previous`: a shift over the
entity ordered by that position, or the engine's cheaper way), the file
order (or the order column's) by a `shift` over the entity ordered by the row. Times become
numbers only as whole microseconds since the epoch, by the engine's own function
(`portable.with_epoch_micros`: Narwhals casts a timestamp to an integer exactly on no engine but
Polars, and has no duration-to-number on Spark), so every step and latency is the same
float as on Polars. Quantiles are linear and on those floats.

The step tail (`delays.step_tail`) needs order statistics of all the steps: the longest
TAIL_MAX + 1 by a sort and a head, and for a regular logger the N/16-th and N/8-th longest,
found without a sort of every step: a value that fills both ranks covers at least N/16 of the
steps, so only the few values that frequent are candidates, and the count of steps longer
than each decides.

What these queries return is small (one row per series, the gaps, the rows out of order, the
rows in the future or late): the finish in `delays` puts them together with the Polars helpers
the production path uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import narwhals as nw

from dq_agent.checks.base import FILE_ROW, ROW, Scope
from dq_agent.checks.delays_report import (
    BOUND,
    ENTITY,
    EXPECTED,
    FLEET_SERIES,
    INGEST,
    IRREGULAR,
    LATENCY,
    LONGEST_STEP,
    LOST_ONE,
    OUT_OF_ORDER_TS,
    PREV,
    PREV_IN_FILE,
    SHORT_SERIES_STEPS,
    SMALL_TAIL,
    STEP,
    TAIL_MAX,
    TAIL_TRIM,
    TS,
    DelayCheckConfig,
)
from dq_agent.checks.portable import (
    count,
    missing,
    quantile_by_rank,
    ranked,
    with_epoch_micros,
)
from dq_agent.engines import Engine
from dq_agent.engines.base import (
    Frame,
    entity_key_expr,
    entity_rows,
    previous_in_file,
    series_numbers,
)
from dq_agent.load import Dataset

_SERIES_COLUMNS = ("rows", "newest", "duplicates", EXPECTED, IRREGULAR, BOUND, LONGEST_STEP)
# Columns of the queries; the double underscore keeps them clear of real data columns.
KEY = "__series_key"
FILE_INDEX = "__file_index"
_POSITION = "__position"
_TS_US = "__ts_us"
_INGEST_US = "__ingest_us"
_PREV_US = "__prev_us"
_STEP_US = "__step_us"
_STEPS = "__steps"
_SCALE = "__step_scale"
_POSITIVE = "__positive_step"
_RATIO = "__step_ratio"
_TAIL = "__tail_bound"
_NULL_KEY = "\x00"
_NUMBER = "__series_number"
_US = 1_000_000


@dataclass(frozen=True)
class GenericQueries:
    """The queries, in this order: overall, per series, gaps, future rows, then (when there
    is one) rows out of order, late rows and the data's time range."""

    queries: list[Frame]
    backward: int | None
    late: int | None
    bounds: int | None


def generic_queries(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    settings: DelayCheckConfig,
    future_limit: datetime,
    judge_order: bool,
) -> GenericQueries:
    ts = dataset.roles.timestamp
    assert ts is not None
    roles = dataset.roles
    entity = list(roles.entity)
    rows = engine.rows(dataset, scope, index=True)
    schema = rows.collect_schema()
    present = None
    if scope.column is not None and scope.column not in {ts, roles.ingest_time, *entity}:
        # Only the rows with a value in the scope's value column are timed.
        present = ~missing(schema, scope.column, dataset.sentinels)
    at = FILE_ROW if scope.filters_rows() else ROW
    text = entity_key_expr(entity) if entity else nw.lit(None, dtype=nw.String)
    key = text.fill_null(_NULL_KEY) if entity else nw.lit(_NULL_KEY)
    # Where the engine numbers the series, the queries go by that number and name their few
    # result rows from its names (`labelled`): the timed rows carry no text.
    number = series_numbers(engine, dataset) if entity else None
    labels = None
    if number is not None:
        labels = number.names.select(
            nw.col(number.column).cast(nw.Int64).alias(_NUMBER), key.alias(KEY), text.alias(ENTITY)
        )
        key = nw.col(number.column).cast(nw.Int64)

    # The timing rows: the scoped rows (with a value in the scope's column), for the figures
    # taken row by row.
    micros = {_TS_US: ts}
    if roles.ingest_time is not None:
        micros[_INGEST_US] = roles.ingest_time
    timing = _epoch_micros(rows if present is None else rows.filter(present), micros)
    columns = [nw.col(at).cast(nw.Int64).alias(FILE_ROW), text.alias(ENTITY), nw.col(ts).alias(TS)]
    if roles.ingest_time is not None:
        latency = (nw.col(_INGEST_US) - nw.col(_TS_US)) / _US
        columns += [nw.col(roles.ingest_time).alias(INGEST), latency.alias(LATENCY)]
    timing = timing.select(*columns, _TS_US)

    queries = [
        _overall(engine, timing, future_limit, settings, roles.ingest_time is not None),
    ]
    carried = [number.column] if number is not None else entity
    timed = _in_time(engine, dataset, scope, carried, present, key)
    # The step in seconds is derived again by each reader (a column fewer to fetch), the
    # position kept only for the ranks out of core.
    kept = [KEY, TS, PREV, _STEP_US, *([_POSITION] if engine.out_of_core else [])]
    in_time = timed.select(kept)
    if scope.filters_rows() or not engine.stores_series_order(dataset):
        # Computed once for the queries below. Where the engine stores the series order and
        # the scope keeps every row, each reader computes the steps again (a filter and a
        # streaming `lag`): at 10M rows on DuckDB (load 5 to 6) delay_check took a median
        # 3.75 s of CPU so against 4.3 s with the steps fetched once as Arrow.
        in_time = engine.materialised(in_time)
    in_time = in_time.with_columns(_seconds())
    series = engine.materialised(_per_series(engine, in_time, settings))
    queries.append(labelled(series, labels).select(KEY, _entity_text(), *_SERIES_COLUMNS))
    gaps = (
        in_time.filter(nw.col(_STEP_US) > 0)
        .join(series.select(KEY, EXPECTED, BOUND), on=KEY, how="inner")
        .filter(nw.col(STEP) > nw.col(BOUND))
    )
    queries.append(
        labelled(gaps, labels).select(KEY, _entity_text(), STEP, PREV, TS, EXPECTED, BOUND)
    )
    queries.append(timing.filter(nw.col(TS) > nw.lit(future_limit)).select(FILE_ROW, ENTITY, TS))
    backward = late = bounds = None
    if judge_order:
        backward = len(queries)
        held = previous_in_file(engine, dataset, scope)
        if held is not None and present is None and dataset.order_column is None:
            # The previous timed row's time in file order, held by the engine: a filter.
            held_rows, previous = held
            backward_rows = _backward_held(dataset, held_rows, previous, key, text, labels is None)
        else:
            # Each entity's rows in file order: a window over each entity, told apart the
            # engine's cheapest way (`entity_rows`).
            ordered, by = entity_rows(engine, dataset, scope, index=True)
            backward_rows = _backward(dataset, ordered, by, present, at, key, text, labels is None)
        queries.append(labelled(backward_rows, labels))
    if roles.ingest_time is not None:
        late = len(queries)
        queries.append(
            timing.filter(nw.col(LATENCY) > settings.late_threshold_seconds).select(
                FILE_ROW, ENTITY, TS, INGEST, LATENCY
            )
        )
    # The events' buckets span the whole data, not the scope (`events.grain`).
    bounds = len(queries)
    whole = engine.rows(dataset, Scope())
    queries.append(whole.select(nw.col(ts).min().alias("__low"), nw.col(ts).max().alias("__high")))
    return GenericQueries(queries, backward, late, bounds)


def _epoch_micros(frame: Frame, columns: dict[str, str]) -> Frame:
    """`frame` with timestamp columns' microseconds since the epoch, by the engine's own
    function (`portable.with_epoch_micros`), `columns` mapping each new name to its source."""
    for name, source in columns.items():
        frame = with_epoch_micros(frame, source, name)
    return frame


def labelled(frame: Frame, labels: Frame | None) -> Frame:
    """`frame`, whose KEY is the engine's series number where `labels` (number, KEY and ENTITY
    of each series) is given, with KEY the entity's text and ENTITY, as without a number."""
    if labels is None:
        return frame
    names = frame.collect_schema().names()
    numbered = frame.rename({KEY: _NUMBER}).join(labels, on=_NUMBER, how="inner")
    return numbered.select(*names, *([ENTITY] if ENTITY not in names else []))


def _seconds() -> nw.Expr:
    return (nw.col(_STEP_US) / _US).alias(STEP)


def _entity_text() -> nw.Expr:
    """The entity as text (ENTITY) from the series key: null where no entity is named."""
    return nw.when(nw.col(KEY) != _NULL_KEY).then(nw.col(KEY)).alias(ENTITY)


def _overall(
    engine: Engine,
    timing: Frame,
    future_limit: datetime,
    settings: DelayCheckConfig,
    has_ingest: bool,
) -> Frame:
    t = nw.col(TS)
    exprs = [
        nw.len().cast(nw.Int64).alias("rows"),
        count(t.is_null()).alias("null_timestamps"),
        count(t > nw.lit(future_limit)).alias("future_rows"),
        t.max().alias("newest"),
        t.min().alias("oldest"),
    ]
    if has_ingest:
        latency = nw.col(LATENCY)
        p50 = latency.quantile(0.5, interpolation="linear")
        p95 = latency.quantile(0.95, interpolation="linear")
        if engine.out_of_core:
            # From the latencies' ranks (`portable.ranked`): a sort DuckDB can do on disk.
            timing = ranked(timing, LATENCY, [], FILE_ROW)
            p50, p95 = quantile_by_rank(LATENCY, 0.5), quantile_by_rank(LATENCY, 0.95)
        exprs += [
            count(latency > settings.late_threshold_seconds).alias("late_rows"),
            p50.alias("p50"),
            p95.alias("p95"),
            latency.max().alias("max"),
        ]
    return timing.select(exprs)


def _in_time(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    carried: list[str],
    present: nw.Expr | None,
    key: nw.Expr,
) -> Frame:
    """The timed rows in time order within each series (`Engine.in_series`, carrying the
    columns `key` reads), each with the previous one's time (PREV, the engine's `previous`)
    and the step from it (in microseconds and in seconds)."""
    ts = dataset.roles.timestamp
    assert ts is not None
    timed = ~nw.col(ts).is_null()
    if present is not None:
        timed = timed & present
    kept = engine.in_series(dataset, scope, timed, [*carried, ts], _POSITION, {PREV: ts})
    return (
        _epoch_micros(kept, {_TS_US: ts, _PREV_US: PREV})
        .with_columns((nw.col(_TS_US) - nw.col(_PREV_US)).alias(_STEP_US))
        .select(
            key.alias(KEY),
            nw.col(ts).alias(TS),
            PREV,
            _STEP_US,
            _seconds(),
            _POSITION,
        )
    )


def _per_series(engine: Engine, in_time: Frame, settings: DelayCheckConfig) -> Frame:
    """`delays._per_series`: one row per series with its counts, expected interval and the
    step beyond which a step is a gap."""
    step_us = nw.col(_STEP_US)
    aggregates = [
        nw.len().cast(nw.Int64).alias("rows"),
        nw.col(TS).max().alias("newest"),
        count(step_us == 0).alias("duplicates"),
        nw.col(STEP).max().cast(nw.Float64).alias(LONGEST_STEP),
    ]
    grouped = in_time.group_by(KEY)
    if settings.expected_interval_seconds is not None:
        expected = settings.expected_interval_seconds
        return grouped.agg(*aggregates).with_columns(
            nw.lit(float(expected), dtype=nw.Float64).alias(EXPECTED),
            nw.lit(False).alias(IRREGULAR),
            nw.lit(settings.gap_factor * expected, dtype=nw.Float64).alias(BOUND),
        )
    own = nw.col(EXPECTED)
    median: nw.Expr = nw.when(step_us > 0).then(nw.col(STEP)).median()
    if engine.out_of_core:
        # From the steps' ranks (`portable.ranked`): a window DuckDB sorts on disk, where its
        # median aggregate holds every step of a series in memory.
        positive = nw.when(step_us > 0).then(nw.col(STEP)).alias(_POSITIVE)
        grouped = ranked(in_time.with_columns(positive), _POSITIVE, [KEY], _POSITION).group_by(KEY)
        median = quantile_by_rank(_POSITIVE, 0.5)
    series = grouped.agg(
        *aggregates,
        median.cast(nw.Float64).alias(EXPECTED),
        count(step_us > 0).alias(_STEPS),
    )
    short = nw.col(_STEPS) < SHORT_SERIES_STEPS
    fleet = series.select(
        nw.when(short).then(own).median().alias("__fleet"),
        count(short).alias("__short"),
    )
    scale = (
        nw.when(short & (nw.col("__short") >= FLEET_SERIES))
        .then(nw.max_horizontal(own, nw.col("__fleet")))
        .otherwise(own)
    )
    series = engine.materialised(series.join(fleet, how="cross").with_columns(scale.alias(_SCALE)))
    ratios = engine.materialised(
        in_time.filter(step_us > 0)
        .join(series.select(KEY, _SCALE), on=KEY, how="inner")
        .select((nw.col(STEP) / nw.col(_SCALE)).alias(_RATIO))
    )
    factor = settings.gap_factor
    return series.join(_step_tail(ratios, settings.significance), how="cross").select(
        KEY,
        "rows",
        "newest",
        "duplicates",
        EXPECTED,
        (nw.col(_TAIL) > factor).fill_null(False).alias(IRREGULAR),
        (nw.max_horizontal(nw.lit(factor), nw.col(_TAIL)) * nw.col(_SCALE)).alias(BOUND),
        LONGEST_STEP,
    )


def _step_tail(ratios: Frame, significance: float) -> Frame:
    """`delays.step_tail` (its docstring says what it fits): one row, _TAIL."""
    ratio = nw.col(_RATIO)
    n, j, k, trim = nw.col("n"), nw.col("j"), nw.col("k"), nw.col("trim")
    total = ratios.select(nw.len().cast(nw.Int64).alias("n"))
    tail_k = nw.max_horizontal(n // 8, nw.min_horizontal(n // 2, nw.lit(SMALL_TAIL))).clip(
        1, TAIL_MAX
    )
    # The TAIL_MAX + 1 longest, numbered from the longest (ties: equal values, any order).
    top = (
        ratios.sort(_RATIO, descending=True)
        .head(TAIL_MAX + 1)
        .with_columns((-ratio).alias("__minus"))
        .with_row_index("j", order_by="__minus")
        .join(total, how="cross")
        .with_columns(tail_k.alias("k"))
        .with_columns(nw.min_horizontal(nw.lit(TAIL_TRIM), k // 10).alias("trim"))
        .select(
            nw.when(j == k).then(ratio).max().alias("tie"),
            nw.when(j == trim).then(ratio).max().alias("kept"),
            nw.when((j > trim) & (j < k)).then(ratio).sum().fill_null(0.0).alias("__inner"),
            k.max().alias("k"),
            trim.max().alias("trim"),
        )
        .with_columns(((trim + 1) * nw.col("kept") + nw.col("__inner")).alias("censored"))
    )
    tie = nw.col("tie")
    below = ratios.join(top.select("tie"), how="cross").select(
        nw.coalesce(nw.when(ratio < tie).then(ratio).max(), tie.max()).alias("u")
    )
    above = ratios.join(below, how="cross").select(count(ratio > nw.col("u")).alias("above"))
    u = nw.col("u")
    nu = k - trim
    scale = (nw.col("censored") - k * u) / nu
    c = nu * ((nw.col("above").cast(nw.Float64) / significance) ** (1 / nu) - 1)
    return (
        top.join(below, how="cross")
        .join(_regular(ratios, total, significance), how="cross")
        .join(above, how="cross")
        .select(
            nw.when(nw.col("kept") == tie)
            .then(tie)
            .when(~nw.col("regular").is_null())
            .then(nw.col("regular"))
            .otherwise(u + c * scale)
            .cast(nw.Float64)
            .alias(_TAIL)
        )
    )


def _regular(ratios: Frame, total: Frame, significance: float) -> Frame:
    """`delays._regular` (its docstring says what it is): one row, `regular`.

    The N/16-th and N/8-th longest steps (ranks k // 2 and k from the longest, from 0) are one
    value v exactly when fewer than k // 2 + 1 steps are longer than v and at least k + 1 are
    at least v: v fills k - k // 2 + 1 ranks, so it is among the few values that frequent."""
    ratio = nw.col(_RATIO)
    n, k = nw.col("n"), nw.col("k")
    low, high = LOST_ONE
    stats = ratios.select(
        count((ratio > low) & (ratio <= high)).alias("__once"),
    ).join(total, how="cross")
    stats = stats.with_columns(
        nw.max_horizontal(n // 8, nw.min_horizontal(n // 2, nw.lit(SMALL_TAIL)))
        .clip(lower_bound=1)
        .alias("k")
    )
    values = ratios.group_by(_RATIO).agg(nw.len().cast(nw.Int64).alias("__count"))
    candidates = (
        values.join(stats.select("k"), how="cross")
        .filter(nw.col("__count") >= k - k // 2 + 1)
        .select(ratio.alias("__v"), "__count", "k")
    )
    longer = (
        candidates.select("__v")
        .join(values, how="cross")
        .filter(ratio > nw.col("__v"))
        .group_by("__v")
        .agg(nw.col("__count").sum().alias("__longer"))
    )
    longer_count = nw.col("__longer").fill_null(0)
    tie = (
        candidates.join(longer, on="__v", how="left")
        .filter(
            (longer_count <= k // 2)
            & (longer_count + nw.col("__count") >= k + 1)
            & (nw.col("__v") <= 1)
        )
        .select(nw.col("__v").max().alias("__tie"))
    )
    once = nw.col("__once") - 1
    lost = once.clip(lower_bound=0).cast(nw.Float64) / n
    reach = 1 + (nw.lit(significance) / n).log() / lost.log()
    bound = (
        nw.when(lost > 0).then(nw.max_horizontal(nw.col("__tie"), reach)).otherwise(nw.col("__tie"))
    )
    return stats.join(tie, how="cross").select(
        nw.when((n >= 2) & ~nw.col("__tie").is_null()).then(bound).alias("regular")
    )


def _backward(
    dataset: Dataset,
    rows: Frame,
    by: list[str],
    present: nw.Expr | None,
    at: str,
    key: nw.Expr,
    text: nw.Expr,
    named: bool,
) -> Frame:
    """`delays._backward_rows`: the timed rows earlier than the previous timed row of their
    entity in file order (the order column's, `columns.order_by`), within one file, with the
    index of their file (the finish names it). `by`: the columns that tell the entities
    apart (`engines.base.entity_rows`). `named`: with the entity's text (ENTITY), else the
    caller names the rows (`labelled`), and the window's rows carry no text: at 10M rows on
    DuckDB 1.3 s of CPU against 1.75 s with it."""
    ts = dataset.roles.timestamp
    assert ts is not None
    timed = ~nw.col(ts).is_null()
    if present is not None:
        timed = timed & present
    order = [ROW]
    if dataset.order_column is not None:
        timed = timed & ~nw.col(dataset.order_column).is_null()
        order = [dataset.order_column, ROW]
    file_index = _file_index(dataset, nw.col(at))
    same_file = nw.lit(True)
    previous = [nw.col(ts).shift(1).over(*by, order_by=order).alias(PREV_IN_FILE)]
    if len(dataset.files) > 1 and dataset.order_column is None:
        # The order between files means nothing, unless an order column gives it.
        same_file = nw.col(FILE_INDEX) == nw.col("__prev_file")
        previous.append(nw.col(FILE_INDEX).shift(1).over(*by, order_by=order).alias("__prev_file"))
    return (
        rows.filter(timed)
        .with_columns(file_index.alias(FILE_INDEX))
        .with_columns(previous)
        .filter((nw.col(ts) < nw.col(PREV_IN_FILE)) & same_file)
        .select(
            key.alias(KEY),
            *([text.alias(ENTITY)] if named else []),
            nw.col(at).cast(nw.Int64).alias(FILE_ROW),
            nw.col(ts).alias(OUT_OF_ORDER_TS),
            PREV_IN_FILE,
            FILE_INDEX,
        )
    )


def _backward_held(
    dataset: Dataset, rows: Frame, previous: str, key: nw.Expr, text: nw.Expr, named: bool
) -> Frame:
    """`_backward` where the engine holds each timed row's previous timed row's time in file
    order (`engines.base.previous_in_file`, null across files): every row kept, no order
    column, no value column to be present."""
    ts = dataset.roles.timestamp
    assert ts is not None
    return rows.filter(~nw.col(ts).is_null() & (nw.col(ts) < nw.col(previous))).select(
        key.alias(KEY),
        *([text.alias(ENTITY)] if named else []),
        nw.col(ROW).cast(nw.Int64).alias(FILE_ROW),
        nw.col(ts).alias(OUT_OF_ORDER_TS),
        nw.col(previous).alias(PREV_IN_FILE),
        _file_index(dataset, nw.col(ROW)).alias(FILE_INDEX),
    )


def _file_index(dataset: Dataset, row: nw.Expr) -> nw.Expr:
    """`Dataset.file_index` in Narwhals: the index of the file row `row` came from."""
    index: nw.Expr = nw.lit(len(dataset.file_rows) - 1 if dataset.file_rows else 0)
    start = sum(dataset.file_rows[:-1])
    for i in range(len(dataset.file_rows) - 2, -1, -1):
        index = nw.when(row < start).then(nw.lit(i)).otherwise(index)
        start -= dataset.file_rows[i]
    return index.cast(nw.Int64)
