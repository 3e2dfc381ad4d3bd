"""delay_check: the timing of each series: sampling gaps, order, latency and freshness.

Per entity, the expected sampling interval is `delay_check.expected_interval_seconds` when set,
else that entity's median positive step between its time-sorted timestamps. A gap is a step
beyond chance for the data's own steps: longer than `gap_factor` times the expected interval,
and, where long steps are the data's normal (Poisson-like arrivals, report on change), beyond
the bound an exponential tail of its longest steps gives (`step_tail`, `significance`).
`total_gap_seconds` is the missing time
*beyond* the expected interval (a 5 h step in hourly data adds 4 h): the time in which readings
were due but none arrived. `max_gap_seconds` is the plain duration of the longest step that is a
gap. Rows without a timestamp are counted (`null_timestamps`) and left out of the analysis.

Order is judged in file order (a row index taken before any filtering): a row is out of order
when its timestamp is earlier than the previous row of the same entity in the same file (the
order between the files of a glob or directory means nothing); the examples name the file.
With an order column (`columns.order_by`: a sequence number, an offset) the rows are taken in
its order instead, across files. A caller's frame or a DuckDB table has no reader order: without
an order column its order is not evaluated (`out_of_order_rows` null, `out_of_order_basis`
"not evaluated"), never counted as 0.

With `scope.column` naming a value column, only the rows where that column holds a value are
timed, so the gaps are those of that column's readings (in a wide layout one sensor can stop while
the others go on). A role column (timestamp, entity, ingest time) does not narrow anything.

Both orders come from the series order the checks share (`base.series_rows`): each entity's
rows next to each other, in time order and in file order, so steps and order are comparisons of
neighbours and the per-entity figures a group-by over contiguous slices; nothing sorts the whole
data. The figures taken row by row (counts, latency, future rows) stream.

Every engine runs the check (`build_delay_check`, `checks.portable`): on Polars these queries
over the shared series order (the engine's strategy); on DuckDB and Spark the same figures
written over Narwhals (`delays_portable`), whose small results the finish puts together with
the helpers below. Either way `DelayFinisher` makes the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import narwhals as nw
import polars as pl

from dq_agent.checks.base import (
    FILE_ORDER,
    FILE_ROW,
    ORDER,
    SERIES,
    SERIES_START,
    TIME_IN_ORDER,
    CheckPlan,
    Scope,
    entity_key,
    series_rows,
)
from dq_agent.checks.delays_portable import FILE_INDEX, KEY, GenericQueries, generic_queries
from dq_agent.checks.delays_report import (
    BOUND,
    ENTITY,
    EXPECTED,
    FILE,
    FLEET_SERIES,
    INGEST,
    IRREGULAR,
    LATENCY,
    LONGEST_STEP,
    LOST_ONE,
    MAX_EXAMPLES,
    OUT_OF_ORDER_TS,
    PREV,
    PREV_IN_FILE,
    SHORT_SERIES_STEPS,
    SMALL_TAIL,
    STEP,
    TAIL_MAX,
    TAIL_TRIM,
    TOOL,
    TS,
    DelayCheckConfig,
    DelayFinisher,
    skipped,
)
from dq_agent.checks.dst import naive_source
from dq_agent.checks.events import (
    END,
    START,
    bounded,
    grain,
    point_events,
    span_events,
    time_grain,
    with_table,
)
from dq_agent.checks.portable import PolarsMode, PortablePlan, on_polars
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.engines import Engine, PolarsEngine
from dq_agent.errors import InputError
from dq_agent.load import Dataset
from dq_agent.maintenance import Excusal
from dq_agent.result import CheckResult
from dq_agent.timeparse import parse_iso_time

if TYPE_CHECKING:
    from dq_agent.config import Config

# The config key `--as-of` sets: one reference time for freshness and future rows.
AS_OF_KEY = f"{TOOL}.as_of"

# Columns of the queries only; the double underscore keeps them clear of real data columns.
_GID = "__series_id"
_TIMED = "__timed"

LONGEST_GAPS_KEPT = 10


def build_delay_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    timestamp = dataset.roles.timestamp
    if timestamp is None:
        reason = (
            "no timestamp column (set columns.timestamp to name one): delay_check does not apply"
        )
        return PortablePlan(TOOL, [], lambda frames: skipped(reason))
    scope.check_column(dataset)
    settings = config.section(DelayCheckConfig)
    as_of = parse_as_of(settings.as_of)
    future_limit = as_of + timedelta(seconds=settings.future_tolerance_seconds)
    naive = naive_source(dataset.raw_dtypes.get(timestamp, ""), config.columns.timezone)
    if isinstance(engine, PolarsEngine):
        plan = _polars_plan(dataset, scope, timestamp, settings, as_of, future_limit, naive)
        return _shielded(
            PortablePlan(TOOL, [nw.from_native(q) for q in plan.queries], plan.finish, plan.engine),
            dataset,
        )
    basis = order_basis(dataset)
    generic = generic_queries(engine, dataset, scope, settings, future_limit, basis is not None)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return _generic_finish(frames, generic, dataset, scope, settings, as_of, naive)

    return _shielded(PortablePlan(TOOL, generic.queries, finish), dataset)


plan_delay_check = on_polars(build_delay_check)

# The plain names of the collected frames' columns (the finish reads them by name).
_FIGURES = frozenset(
    {
        "rows",
        "null_timestamps",
        "future_rows",
        "newest",
        "oldest",
        "late_rows",
        "p50",
        "p95",
        "max",
        "expected",
        "gaps",
        "gap_missing",
        "max_gap",
        "max_gap_start",
        "max_gap_end",
        "duplicates",
        "out_of_order",
    }
)


def _shielded(plan: PortablePlan, dataset: Dataset) -> PortablePlan:
    """`plan` whose figures named like a column of the data (a historian's `max`, say) are
    collected under another name and named back for the finish: every engine gives a collected
    column named like one of the data's that column's dtype (`engines.base.normalised`), which
    would turn a latency into the column's integers or a count into its text."""
    clash = _FIGURES & set(dataset.columns)
    if not clash:
        return plan
    queries, back = [], []
    for query in plan.queries:
        names = {n: f"__delay_{n}" for n in query.collect_schema().names() if n in clash}
        queries.append(query.rename(names) if names else query)
        back.append({new: old for old, new in names.items()})

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return plan.finish([f.rename(r) if r else f for f, r in zip(frames, back, strict=True)])

    return replace(plan, queries=queries, finish=finish)


def _polars_plan(
    dataset: Dataset,
    scope: Scope,
    timestamp: str,
    settings: DelayCheckConfig,
    as_of: datetime,
    future_limit: datetime,
    naive: bool,
) -> CheckPlan:
    """The Polars engine's strategy: the queries over the series order the checks share
    (`base.series_rows`), computed once per run with the other checks' (docs/ARCHITECTURE.md,
    "Engines", says what the generic queries would cost here)."""
    has_ingest = dataset.roles.ingest_time is not None
    rows = _timing_frame(dataset, scope, timestamp)
    series = series_rows(dataset, scope)
    timed = _timed(dataset, scope, timestamp)
    backward = _backward_rows(
        series, timestamp, timed, file_rows=not scope.filters_rows(), dataset=dataset
    )
    # The figures taken row by row stream: less is held at once. The steps in time order (a
    # gather and a shift over the series order, in memory) are the one large frame; every
    # figure read from them, and the rows out of order (whose gathers in file order, run
    # beside the steps', added their peaks), are worked out in the finish, stage by stage
    # (`_from_steps`).
    queries: list[tuple[pl.LazyFrame, PolarsMode]] = [
        (
            _overall_query(rows, future_limit, settings.late_threshold_seconds, has_ingest),
            "streaming",
        ),
        (_future_query(rows, future_limit), "streaming"),
        (_in_time(series, timed), "in-memory"),
        (_series_names(dataset, series), "in-memory"),
    ]
    if has_ingest:
        queries.append((_late_query(rows, settings.late_threshold_seconds), "streaming"))

    basis = order_basis(dataset)
    grains = grain(dataset)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        overall, future, in_time, names = frames[:4]
        late = frames[4] if has_ingest else None
        steps = _Steps(in_time.lazy(), backward, names.lazy())
        figures, events = _from_steps(steps, settings, scope.excused)
        collected = [overall, *figures, future] + ([late] if late is not None else [])
        result = DelayFinisher(settings, as_of, has_ingest, collected, naive, basis).result()
        if grains is None:
            return result
        # The few future and late rows stream out of the frame (in memory, their filters'
        # working columns took 0.3 GB at 10M rows); the event table is built from them.
        picked = [rows.filter(pl.col(TS) > future_limit)]
        if has_ingest:
            picked.append(rows.filter(_latency_seconds() > settings.late_threshold_seconds))
        future_rows, *late_rows = pl.collect_all(picked, engine="streaming")
        table = events(
            future_rows.lazy(), late_rows[0].lazy() if late_rows else None, grains
        ).collect(engine="in-memory")
        return with_table(result, table)

    return CheckPlan(
        TOOL, [q for q, _ in queries], finish, engine=tuple(engine for _, engine in queries)
    )


@dataclass(frozen=True)
class _Steps:
    """What the Polars strategy's finish starts from: the timed rows in time order with their
    steps (`_in_time`, the one large frame) and the series' names, collected by its queries,
    and the query of the rows out of order (`_backward_rows`)."""

    in_time: pl.LazyFrame
    backward: pl.LazyFrame
    names: pl.LazyFrame


def _from_steps(
    steps: _Steps, settings: DelayCheckConfig, excused: Excusal | None
) -> tuple[
    list[pl.DataFrame],
    Callable[[pl.LazyFrame, pl.LazyFrame | None, pl.LazyFrame], pl.LazyFrame],
]:
    """The per-entity figures, the longest gaps and the first rows out of order, and the
    events' query (given the future and late rows and the grains), from the steps.

    Stage by stage, each a small frame before the next reads it: the figures per series, the
    steps in units of their series' scale and the tail fitted to them, the gaps. As one
    `collect_all` (the steps cached within it) they made delay_check's peak at 10M rows,
    0.47 GB above the data, every stage's working columns held at once."""
    per_series = _per_series(steps.in_time, settings).lazy()
    gaps = _gap_rows(steps.in_time, per_series, settings, excused, steps.names).collect().lazy()
    names = steps.names
    backward = steps.backward.collect(engine="in-memory").lazy()
    figures = pl.collect_all(
        [
            _heard_through_windows(_per_entity_query(per_series, gaps, backward, names), excused),
            _longest_gaps_query(gaps, names),
            _out_of_order_query(backward, names),
        ]
    )

    def events(
        future: pl.LazyFrame, late: pl.LazyFrame | None, grains: pl.LazyFrame
    ) -> pl.LazyFrame:
        return _events(gaps, backward, future, late, names, grains)

    return figures, events


def _events(
    gaps: pl.LazyFrame,
    backward: pl.LazyFrame,
    future: pl.LazyFrame,
    late: pl.LazyFrame | None,
    names: pl.LazyFrame,
    grains: pl.LazyFrame,
) -> pl.LazyFrame:
    """The picture's events, on every engine: gaps as spans, out-of-order, future and late
    rows as points (`names` gives each series' entity)."""
    events = [
        span_events(
            gaps.join(names, on=_GID, how="left").select(
                ENTITY, pl.col(PREV).alias(START), pl.col(TS).alias(END)
            ),
            "gap",
        ),
        point_events(
            backward.join(names, on=_GID, how="left").select(
                ENTITY, pl.col(OUT_OF_ORDER_TS).alias(START)
            ),
            grains,
            "out_of_order",
            None,
        ),
        point_events(future.select(ENTITY, pl.col(TS).alias(START)), grains, "future", None),
    ]
    if late is not None:
        events.append(
            point_events(late.select(ENTITY, pl.col(TS).alias(START)), grains, "late", None)
        )
    return bounded(events)


SPEC = CheckSpec(
    name=TOOL,
    label="Timing & delays",
    description=(
        "Check timing: gaps in sampling per entity, out-of-order and duplicate timestamps, "
        "future timestamps, ingest latency and data freshness."
    ),
    settings=DelayCheckConfig,
    plan=plan_delay_check,
    metric_keys=(
        "gap_count",
        "max_gap_seconds",
        "late_rows",
        "out_of_order_rows",
        "stopped_entities",
        "irregular_entities",
    ),
    baseline=(
        BaselineMetric("gap_count", "count", "gap count"),
        BaselineMetric("late_rows", "count", "late rows"),
    ),
    words=(r"delay\w*|gaps?|latenc\w*|late|timing|freshness|fresh|stale|out[- ]of[- ]order"),
)


def parse_as_of(value: str | None) -> datetime:
    """`delay_check.as_of` as an aware UTC datetime (a naive time is read as UTC); now if unset."""
    if value is None:
        return datetime.now(UTC)
    parsed = parse_iso_time(value)
    if parsed is None:
        # Config files and the CLI are validated; this catches a value set in code.
        raise ValueError(
            f"delay_check.as_of {value!r} is not an ISO 8601 time such as 2024-01-31T00:00:00Z"
        )
    return parsed


def _timing_frame(dataset: Dataset, scope: Scope, timestamp: str) -> pl.LazyFrame:
    """The scoped rows as (row index in the file, entity, timestamp[, ingest time])."""
    # The row index is taken before the scope filter so that examples name rows of the file.
    indexed = replace(dataset, frame=dataset.frame.with_row_index(FILE_ROW))
    lf = scope.filter(indexed)
    roles = dataset.roles
    role_columns = {timestamp, roles.ingest_time, *roles.entity}
    if scope.column is not None and scope.column not in role_columns:
        lf = lf.filter(~dataset.missing(scope.column))
    key = entity_key(dataset)
    columns = [
        pl.col(FILE_ROW),
        key if key is not None else pl.lit(None, dtype=pl.String).alias(ENTITY),
        pl.col(timestamp).alias(TS),
    ]
    if roles.ingest_time is not None:
        columns.append(pl.col(roles.ingest_time).alias(INGEST))
    return lf.select(columns)


def _seconds(duration: pl.Expr) -> pl.Expr:
    return duration.dt.total_microseconds() / 1_000_000


def _latency_seconds() -> pl.Expr:
    return _seconds(pl.col(INGEST) - pl.col(TS))


def _timed(dataset: Dataset, scope: Scope, timestamp: str) -> pl.Expr:
    """True for the rows that are timed: a timestamp, and a value in `scope.column` if it names
    a value column."""
    timed = pl.col(timestamp).is_not_null()
    roles = dataset.roles
    if scope.column is not None and scope.column not in {
        timestamp,
        roles.ingest_time,
        *roles.entity,
    }:
        timed = timed & ~dataset.missing(scope.column)
    return timed


def _series_names(dataset: Dataset, series: pl.LazyFrame) -> pl.LazyFrame:
    """Each series number (`SERIES`) with its entity."""
    key = entity_key(dataset)
    if key is None:
        # One series without a name. (A literal gathered at the first row in time order fails
        # when that row is not the file's first.)
        return (
            series.filter(pl.col(SERIES_START))
            .with_columns(pl.lit(None, dtype=pl.String).alias(ENTITY))
            .select(ENTITY)
            .with_row_index(_GID, offset=1)
        )
    starts = pl.col(ORDER).filter(pl.col(SERIES_START))
    return series.select(key.gather(starts)).with_row_index(_GID, offset=1)


def _in_series_order(
    series: pl.LazyFrame, order: str, columns: dict[str, pl.Expr], timed: pl.Expr
) -> pl.LazyFrame:
    """The timed rows taken in `order` (`ORDER` or `FILE_ORDER`) with their series number and
    `columns`. A series' rows are next to each other and its number is sorted, so a group-by
    on it works on slices. (Filtering keeps the data in place when every row is timed.)"""
    return (
        series.select(
            pl.col(SERIES).alias(_GID),
            timed.gather(pl.col(order)).alias(_TIMED),
            *[expr.alias(name) for name, expr in columns.items()],
        )
        .filter(pl.col(_TIMED))
        .select(pl.col(_GID).set_sorted(), *columns)
    )


def _in_time(series: pl.LazyFrame, timed: pl.Expr) -> pl.LazyFrame:
    """The timed rows in time order within each series, with the step in seconds from the
    previous one (null at a series' first row)."""
    ts = pl.col(TS)
    return _in_series_order(series, ORDER, {TS: pl.col(TIME_IN_ORDER)}, timed).with_columns(
        _within_series(_seconds(ts.diff())).alias(STEP)
    )


def _per_series(in_time: pl.LazyFrame, settings: DelayCheckConfig) -> pl.DataFrame:
    """One row per series: timed rows, newest time, repeated timestamps, expected interval (the
    median positive step), and the step beyond which a step is a gap (`BOUND`).

    A gap is a step beyond chance for the steps this data has: regular logging, Poisson-like
    arrivals and report-on-change with a heartbeat all have long steps of their own. Each step
    is put in units of its series' median step (a short series of a fleet: of the fleet's
    typical step when that is longer, its own median being noisy), and the longest of them are fitted with
    an exponential tail (`fitted_tail`). The bound is the larger of `gap_factor` and the tail's
    step with a `significance` chance of being exceeded anywhere in the data, times the
    series' scale. A series whose bound comes from the tail is counted as irregular."""
    step = pl.col(STEP)
    positive = step.filter(step > 0)
    aggregates = [
        pl.len().alias("rows"),
        pl.col(TS).max().alias("newest"),
        (step == 0).sum().alias("duplicates"),
        step.max().cast(pl.Float64).alias(LONGEST_STEP),
    ]
    if settings.expected_interval_seconds is not None:
        expected = pl.lit(settings.expected_interval_seconds, dtype=pl.Float64)
        return (
            in_time.group_by(_GID)
            .agg(
                *aggregates,
                expected.alias(EXPECTED),
                pl.lit(False).alias(IRREGULAR),
                (settings.gap_factor * expected).alias(BOUND),
            )
            .collect()
        )
    steps = pl.col(_STEPS)
    own = pl.col(EXPECTED)
    fleet = own.filter(steps < SHORT_SERIES_STEPS).median()
    # A short series of a fleet (FLEET_SERIES or more short series) is scaled by the longer of
    # its own median and the fleet's: its own few steps can make its median far too short.
    short = steps < SHORT_SERIES_STEPS
    scale = (
        pl.when(short & (short.sum() >= FLEET_SERIES))
        .then(pl.max_horizontal(own, fleet))
        .otherwise(own)
        .alias(_SCALE)
    )
    series = (
        in_time.group_by(_GID)
        .agg(
            *aggregates,
            positive.median().cast(pl.Float64).alias(EXPECTED),
            positive.len().alias(_STEPS),
        )
        .with_columns(scale)
        .collect()
    )
    # Each step's scale by a gather from the small table by the series number: a join of the
    # table onto every step took 1.1 s and 0.39 GB at 10M rows.
    ratios = (
        in_time.filter(step > 0).select((step / _by_series(series, _SCALE)).alias(_RATIO)).collect()
    )
    tail = fitted_tail(ratios, settings.significance)
    factor = settings.gap_factor
    return (
        series.lazy()
        .join(tail.lazy(), how="cross")
        .with_columns(
            (pl.col(_TAIL) > factor).fill_null(False).alias(IRREGULAR),
            (pl.max_horizontal(pl.lit(factor), pl.col(_TAIL)) * pl.col(_SCALE)).alias(BOUND),
        )
        .drop(_STEPS, _SCALE, _TAIL)
        .collect()
    )


def _by_series(table: pl.DataFrame, column: str) -> pl.Expr:
    """`column` of `table` (one row per series, `_GID`) on each row of its series: a gather
    by the series number (numbered from 1 in series order; a series without a row in the
    table gets null)."""
    numbers = table.get_column(_GID)
    last = numbers.max()
    every = pl.DataFrame(
        {_GID: pl.int_range(0, (last if isinstance(last, int) else 0) + 1, eager=True)}
    ).cast({_GID: numbers.dtype})
    dense = every.join(
        table.select(_GID, column), on=_GID, how="left", maintain_order="left"
    ).get_column(column)
    return pl.lit(dense).gather(pl.col(_GID))


def step_tail(ratios: pl.LazyFrame, significance: float) -> pl.LazyFrame:
    """One row: the step (in units of each series' scale, column `_RATIO` of `ratios`) that
    clean data exceeds anywhere with chance `significance`; null with fewer than 2 steps.

    Peaks over a threshold: take the k longest of N steps (k = N / 8, at most TAIL_MAX; of few
    steps up to half and SMALL_TAIL). When they are all one value once the longest tenth of
    them (at most TAIL_TRIM) are set aside (a heartbeat), or when most of them are the typical
    step itself (a regular logger, whose few long steps are gaps however alike), that value is
    the longest step clean data has, and the bound. Else the threshold u is the longest step
    shorter than the (k + 1)-th (steps come in whole seconds or heartbeats: a block of ties
    lies all above u or all below) and the tail above it is exponential, its scale estimated
    from the k longest with the trimmed longest censored at the next (the gaps being judged
    do not widen their own bound; the estimate is a Gamma of nu = k - trimmed). The chance
    that one of the K steps above u exceeds u + c * scale is then K * (1 + c / nu) ** -nu:
    solved for c. Whether most steps are the typical one is judged on all of them (`_regular`).

    This makes gaps rare long steps: a regular logger that lost more than about 1 reading in
    16 has long steps as its normal, and only the longest of them stand out."""
    return fitted_tail(ratios.collect(), significance).lazy()


def fitted_tail(ratios: pl.DataFrame, significance: float) -> pl.DataFrame:
    """`step_tail` of steps in memory, in stages: the longest steps and the regular logger's
    figures, then the threshold, then the steps above it, each compared with the one figure
    before as a literal, where a cross join put that figure on every step (a copy of every
    step per figure)."""
    ratio = pl.col(_RATIO)
    steps = ratios.lazy()
    n = pl.col("n")
    j = pl.col("j")
    k = pl.max_horizontal(n // 8, pl.min_horizontal(n // 2, SMALL_TAIL)).clip(1, TAIL_MAX)
    trim = pl.min_horizontal(pl.lit(TAIL_TRIM), pl.col("k") // 10)
    top_query = (
        steps.select(ratio.top_k(TAIL_MAX + 1).sort(descending=True))
        .with_row_index("j")
        .join(steps.select(pl.len().alias("n")), how="cross")
        .with_columns(k.alias("k"))
        .with_columns(trim.alias("trim"))
        .select(
            ratio.filter(j == pl.col("k")).first().alias("tie"),
            ratio.filter(j == pl.col("trim")).first().alias("kept"),
            # (trim + 1) x_trim + sum of x_j for trim < j < k: the censored sum of the k.
            (
                (pl.col("trim").first() + 1) * ratio.filter(j == pl.col("trim")).first()
                + ratio.filter((j > pl.col("trim")) & (j < pl.col("k"))).sum()
            ).alias("censored"),
            pl.col("k").first(),
            pl.col("trim").first(),
        )
    )
    top, regular = pl.collect_all([top_query, _regular(steps, significance)])
    tie = pl.lit(top.get_column("tie")[0], dtype=pl.Float64)
    below = steps.select(pl.coalesce(ratio.filter(ratio < tie).max(), tie).alias("u")).collect()
    u = pl.lit(below.get_column("u")[0], dtype=pl.Float64)
    above = steps.select((ratio > u).sum().alias("above"))
    nu = pl.col("k") - pl.col("trim")
    scale = (pl.col("censored") - pl.col("k") * pl.col("u")) / nu
    c = nu * ((pl.col("above").cast(pl.Float64) / significance) ** (1 / nu) - 1)
    return (
        top.lazy()
        .join(below.lazy(), how="cross")
        .join(regular.lazy(), how="cross")
        .join(above, how="cross")
        .select(
            pl.when(pl.col("kept") == pl.col("tie"))
            .then(pl.col("tie"))
            .when(pl.col("regular").is_not_null())
            .then(pl.col("regular"))
            .otherwise(pl.col("u") + c * scale)
            .cast(pl.Float64)
            .alias(_TAIL)
        )
        .collect()
    )


def _regular(ratios: pl.LazyFrame, significance: float) -> pl.LazyFrame:
    """One row, `regular`: for a regular logger, the longest step (in typical steps) that clean
    data reaches anywhere with chance `significance`; else null.

    A regular logger: the N/16-th and N/8-th longest of all N steps are one value, at most the
    typical step. Judged on all the steps, not on the TAIL_MAX longest: in a large file a few
    hundred gaps fill those, and a tail fitted on gaps alone hides every one of them. Such a
    logger's gaps are steps longer than `gap_factor` intervals, or longer than chance allows
    where it loses readings by nature (report-on-change data): with p its chance to lose one
    reading, a step of m intervals has chance about p ** (m - 1), and N steps reach
    1 + ln(significance / N) / ln(p) with chance `significance`. p is the share of its steps
    that lost exactly one reading, less one: the steps being judged do not vouch for
    themselves (a share of all steps longer than one interval took 150 gaps of 4 to 31
    minutes among 49,000 for chance, and an hourly logger's one 2-hour step in 7,267 would
    make itself chance at `gap_factor` 1.5). A clean report-on-change file of 28,701 steps,
    1,029 of 2 intervals, 54 of 3 and 3 of 4, has p = 3.6% and reaches 6.2; one of 94,177
    steps, 765 of 2 intervals, 9 of 3 and 1 of 4, has p = 0.81% and reaches 4.8 (a share of
    1% was once the least for this, and its 4-minute step was called a gap); a logger
    without a lost reading keeps `gap_factor`."""
    ratio = pl.col(_RATIO)
    n = pl.len()
    k = pl.max_horizontal(n // 8, pl.min_horizontal(n // 2, SMALL_TAIL)).clip(1)

    def longest(j: pl.Expr) -> pl.Expr:
        # The j-th longest (from 0): index n - 1 - j in ascending order, half an index up so
        # that rounding cannot take the one below.
        return ratio.quantile(((n - 1 - j + 0.5) / (n - 1)).clip(upper_bound=1.0), "lower")

    middle, tie = longest(k // 2), longest(k)
    low, high = LOST_ONE
    # Less the one being judged: a single such step cannot make itself chance.
    once = ((ratio > low) & (ratio <= high)).sum() - 1
    lost = once.clip(lower_bound=0).cast(pl.Float64) / n
    reach = 1 + (pl.lit(significance) / n).log() / lost.log()
    bound = pl.when(lost > 0).then(pl.max_horizontal(tie, reach)).otherwise(tie)
    return ratios.select(
        pl.when((n >= 2) & (middle == tie) & (tie <= 1)).then(bound).alias("regular")
    )


_STEPS, _SCALE, _RATIO, _TAIL = "__steps", "__step_scale", "__step_ratio", "__tail_bound"


def _gap_rows(
    in_time: pl.LazyFrame,
    per_series: pl.LazyFrame,
    settings: DelayCheckConfig,
    excused: Excusal | None = None,
    names: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """The gaps: series, step, previous and next timestamp, and the series' expected interval.

    A gap is longer than its series' bound, at least `gap_factor` times its median positive
    step, so longer than that factor times the shortest positive step of all: only the few
    steps past that bound are put next to their series' bound and judged exactly. With
    maintenance windows (`excused`, `names`), the time a window of the device covers is not
    missing time: the step is what is left outside the windows.
    """
    step = pl.col(STEP)
    if settings.expected_interval_seconds is not None:
        bound = pl.lit(settings.gap_factor * settings.expected_interval_seconds)
    else:
        bound = settings.gap_factor * step.filter(step > 0).min()
    candidates = in_time.with_columns(_within_series(pl.col(TS).shift(1)).alias(PREV)).filter(
        step > bound
    )
    if excused is not None and names is not None:
        covered = excused.overlap_seconds(pl.col(ENTITY), pl.col(PREV), pl.col(TS))
        candidates = (
            candidates.join(names, on=_GID, how="left")
            .with_columns((step - covered).alias(STEP))
            .drop(ENTITY)
        )
    return (
        candidates.join(per_series.select(_GID, EXPECTED, BOUND), on=_GID, how="inner")
        .filter(step > pl.col(BOUND))
        .select(_GID, STEP, PREV, TS, EXPECTED)
    )


def order_basis(dataset: Dataset) -> str | None:
    """What out-of-order rows are judged against: the order column, the rows' positions in the
    files, or nothing (a caller's frame or a DuckDB table without an order column)."""
    if dataset.order_column is not None:
        return f"column {dataset.order_column}"
    return "file rows" if dataset.file_order else None


def _backward_rows(
    series: pl.LazyFrame, timestamp: str, timed: pl.Expr, file_rows: bool, dataset: Dataset
) -> pl.LazyFrame:
    """The timed rows earlier than the previous timed row of their entity in file order (or in
    the order column's order, `columns.order_by`), within one file: series, row in the data,
    timestamp, previous timestamp, file. There are few. None without an order to judge."""
    ts = pl.col(TS)
    order = FILE_ORDER
    if dataset.order_column is not None:
        # A series' rows are contiguous and numbered in order (`SERIES`): sorting by the series
        # and the order value puts each series' rows in the column's order, still together.
        values = pl.col(dataset.order_column)
        by_column = pl.col(FILE_ORDER).sort_by(
            [pl.col(SERIES), values.gather(pl.col(FILE_ORDER))], maintain_order=True
        )
        series = series.with_columns(by_column.alias(_BY_COLUMN))
        order = _BY_COLUMN
        timed = timed & values.is_not_null()
    row = pl.col(order) if file_rows else pl.col(FILE_ROW).gather(pl.col(order))
    columns = {TS: pl.col(timestamp).gather(pl.col(order)), FILE_ROW: row}
    same_file = pl.lit(True)
    file_name = pl.lit(None, dtype=pl.String)
    if len(dataset.files) > 1:
        columns[_FILE] = dataset.file_index(row)
        # The order between files means nothing, unless an order column gives it.
        if dataset.order_column is None:
            same_file = pl.col(_FILE) == pl.col(_FILE).shift(1)
        names = pl.Series([str(f) for f in dataset.files], dtype=pl.String)
        starts = pl.Series(
            [sum(dataset.file_rows[:i]) for i in range(len(dataset.files))], dtype=pl.Int64
        )
        # "file: row n" counts the rows of that file (from 0, as `row` does).
        file_name = pl.format(
            "{}: row {}",
            pl.lit(names).gather(pl.col(_FILE)),
            pl.col(FILE_ROW).cast(pl.Int64) - pl.lit(starts).gather(pl.col(_FILE)),
        )
    backward = (
        _in_series_order(series, order, columns, timed)
        .with_columns(_within_series(ts.shift(1)).alias(PREV_IN_FILE))
        .filter((ts < pl.col(PREV_IN_FILE)) & same_file)
        .select(
            _GID, FILE_ROW, pl.col(TS).alias(OUT_OF_ORDER_TS), PREV_IN_FILE, file_name.alias(FILE)
        )
    )
    if order_basis(dataset) is None:
        # No order to judge: no rows, and the result says "not evaluated", never 0.
        backward = backward.clear()
    return backward


_FILE = "__file_index"
_BY_COLUMN = "__by_order_column"


def _within_series(previous: pl.Expr) -> pl.Expr:
    """`previous` (a value of the row before) where that row is of the same series, else null."""
    return pl.when(pl.col(_GID) == pl.col(_GID).shift(1)).then(previous)


def _overall_query(
    rows: pl.LazyFrame, future_limit: datetime, late_threshold: float, has_ingest: bool
) -> pl.LazyFrame:
    ts = pl.col(TS)
    exprs = [
        pl.len().alias("rows"),
        ts.is_null().sum().alias("null_timestamps"),
        (ts > future_limit).sum().alias("future_rows"),
        ts.max().alias("newest"),
        ts.min().alias("oldest"),
    ]
    if has_ingest:
        latency = pl.col(LATENCY)
        exprs += [
            (latency > late_threshold).sum().alias("late_rows"),
            latency.quantile(0.5, interpolation="linear").alias("p50"),
            latency.quantile(0.95, interpolation="linear").alias("p95"),
            latency.max().alias("max"),
        ]
        # A column of its own: worked out once, not once per figure.
        rows = rows.with_columns(_latency_seconds().alias(LATENCY))
    return rows.select(exprs)


def _per_entity_query(
    per_series: pl.LazyFrame, gaps: pl.LazyFrame, backward: pl.LazyFrame, names: pl.LazyFrame
) -> pl.LazyFrame:
    """One row per entity with timed rows: its counts, expected interval and longest gap (the
    first in time of its longest)."""
    step = pl.col(STEP)

    def at_longest_gap(column: str) -> pl.Expr:
        return pl.col(column).sort_by(STEP, descending=True, maintain_order=True).first()

    by_series = gaps.group_by(_GID).agg(
        pl.len().alias("gaps"),
        (step - pl.col(EXPECTED)).sum().alias("gap_missing"),
        step.max().alias("max_gap"),
        at_longest_gap(PREV).alias("max_gap_start"),
        at_longest_gap(TS).alias("max_gap_end"),
    )
    return (
        per_series.join(by_series, on=_GID, how="left")
        .join(backward.group_by(_GID).agg(pl.len().alias("out_of_order")), on=_GID, how="left")
        .join(names, on=_GID, how="left")
        .select(
            "rows",
            pl.col(EXPECTED).alias("expected"),
            pl.col("gaps").fill_null(0),
            pl.col("gap_missing").fill_null(0.0),
            "max_gap",
            "max_gap_start",
            "max_gap_end",
            "duplicates",
            "newest",
            ENTITY,
            pl.col("out_of_order").fill_null(0),
            IRREGULAR,
            BOUND,
            LONGEST_STEP,
        )
    )


def _heard_through_windows(per_entity: pl.LazyFrame, excused: Excusal | None) -> pl.LazyFrame:
    """A device silent in a maintenance window up to the fleet's newest reading is not
    stopped: its newest time moves on by the time its windows cover after it."""
    if excused is None:
        return per_entity
    newest = pl.col("newest")
    covered = excused.overlap_seconds(pl.col(ENTITY), newest, newest.max())
    return per_entity.with_columns(
        (newest + pl.duration(microseconds=(covered * 1_000_000).cast(pl.Int64))).alias("newest")
    )


def _longest_gaps_query(gaps: pl.LazyFrame, names: pl.LazyFrame) -> pl.LazyFrame:
    """The longest gaps of all series, longest first (ties by entity, then time)."""
    return (
        gaps.join(names, on=_GID, how="left")
        .sort([STEP, ENTITY, TS], descending=[True, False, False], nulls_last=True)
        .head(LONGEST_GAPS_KEPT)
        .select(ENTITY, PREV, TS, STEP, EXPECTED)
    )


def _out_of_order_query(backward: pl.LazyFrame, names: pl.LazyFrame) -> pl.LazyFrame:
    """The first out-of-order rows of the file."""
    return (
        backward.sort(FILE_ROW)
        .head(MAX_EXAMPLES)
        .join(names, on=_GID, how="left")
        .sort(FILE_ROW)
        .select(ENTITY, FILE_ROW, OUT_OF_ORDER_TS, PREV_IN_FILE, FILE)
    )


def _future_query(rows: pl.LazyFrame, future_limit: datetime) -> pl.LazyFrame:
    """The latest rows timestamped after the limit."""
    return (
        rows.filter(pl.col(TS) > future_limit)
        .sort([TS, FILE_ROW], descending=[True, False])
        .head(MAX_EXAMPLES)
        .select(FILE_ROW, ENTITY, TS)
    )


def _late_query(rows: pl.LazyFrame, late_threshold: float) -> pl.LazyFrame:
    """The rows that arrived latest after their timestamp, beyond the threshold."""
    return (
        rows.with_columns(_latency_seconds().alias(LATENCY))
        .filter(pl.col(LATENCY) > late_threshold)
        .sort([LATENCY, FILE_ROW], descending=[True, False])
        .head(MAX_EXAMPLES)
        .select(FILE_ROW, ENTITY, TS, INGEST, LATENCY)
    )


def _generic_finish(
    frames: list[pl.DataFrame],
    generic: GenericQueries,
    dataset: Dataset,
    scope: Scope,
    settings: DelayCheckConfig,
    as_of: datetime,
    naive: bool,
) -> CheckResult:
    """The result from the generic queries' small frames (`delays_portable`): put together
    with the Polars helpers of the production path, into the frames `DelayFinisher` reads,
    and the event table."""
    overall, series, gaps, future = frames[:4]
    per = series.with_row_index(_GID, offset=1)
    if per.get_column(KEY).n_unique() < per.height:
        raise InputError(
            f"entities of {', '.join(dataset.roles.entity)} whose values joined by '/' are "
            "the same text are different series: delay_check on this engine tells series "
            "apart by that text; rename the values or run on Polars"
        )
    ids = per.lazy().select(KEY, _GID)
    names = per.lazy().select(_GID, ENTITY)
    gap_rows = gaps.lazy().join(ids, on=KEY, how="inner")
    excused = scope.excused
    if excused is not None:
        # The queries kept the steps beyond the bound before the windows' time came off: the
        # time the windows cover comes off here, and the bound is applied again.
        covered = excused.overlap_seconds(pl.col(ENTITY), pl.col(PREV), pl.col(TS))
        gap_rows = gap_rows.with_columns((pl.col(STEP) - covered).alias(STEP)).filter(
            pl.col(STEP) > pl.col(BOUND)
        )
    # In time order within each series, as the Polars queries give them: of equal longest gaps
    # an entity's first in time is named.
    gap_rows = gap_rows.select(_GID, STEP, PREV, TS, EXPECTED).sort(_GID, TS)
    backward = _generic_backward(
        frames[generic.backward] if generic.backward is not None else None, ids, dataset
    )
    per_series = per.lazy().select(
        _GID, "rows", "newest", "duplicates", EXPECTED, IRREGULAR, BOUND, LONGEST_STEP
    )
    late = frames[generic.late] if generic.late is not None else None
    queries = [
        overall.lazy(),
        _heard_through_windows(_per_entity_query(per_series, gap_rows, backward, names), excused),
        _longest_gaps_query(gap_rows, names),
        _out_of_order_query(backward, names),
        future.lazy()
        .sort([TS, FILE_ROW], descending=[True, False])
        .head(MAX_EXAMPLES)
        .select(FILE_ROW, ENTITY, TS),
    ]
    if late is not None:
        queries.append(
            late.lazy()
            .sort([LATENCY, FILE_ROW], descending=[True, False])
            .head(MAX_EXAMPLES)
            .select(FILE_ROW, ENTITY, TS, INGEST, LATENCY)
        )
    ts = dataset.roles.timestamp
    assert ts is not None and generic.bounds is not None
    bounds = frames[generic.bounds]
    grains = time_grain(
        bounds.select(pl.concat([pl.col("__low"), pl.col("__high")]).alias(ts)).lazy(), ts
    )
    events = _events(
        gap_rows,
        backward,
        future.lazy(),
        late.lazy() if late is not None else None,
        names,
        grains,
    )
    *collected, table = pl.collect_all([*queries, events])
    has_ingest = late is not None
    result = DelayFinisher(
        settings, as_of, has_ingest, collected, naive, order_basis(dataset)
    ).result()
    return with_table(result, table)


def _generic_backward(
    rows: pl.DataFrame | None, ids: pl.LazyFrame, dataset: Dataset
) -> pl.LazyFrame:
    """The generic query's rows out of order with their series number and file name."""
    columns = [_GID, FILE_ROW, OUT_OF_ORDER_TS, PREV_IN_FILE, FILE]
    if rows is None:
        # No order to judge: no rows, and the result says "not evaluated", never 0.
        return pl.LazyFrame(
            schema={
                _GID: pl.UInt32,
                FILE_ROW: pl.Int64,
                OUT_OF_ORDER_TS: pl.Datetime("us", "UTC"),
                PREV_IN_FILE: pl.Datetime("us", "UTC"),
                FILE: pl.String,
            }
        )
    file_name = pl.lit(None, dtype=pl.String)
    if len(dataset.files) > 1:
        names = pl.Series([str(f) for f in dataset.files], dtype=pl.String)
        starts = pl.Series(
            [sum(dataset.file_rows[:i]) for i in range(len(dataset.files))], dtype=pl.Int64
        )
        index = pl.col(FILE_INDEX)
        file_name = pl.format(
            "{}: row {}",
            pl.lit(names).gather(index),
            pl.col(FILE_ROW) - pl.lit(starts).gather(index),
        )
    return (
        rows.lazy()
        .join(ids, on=KEY, how="inner")
        .with_columns(file_name.alias(FILE))
        .select(columns)
    )
