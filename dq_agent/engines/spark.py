"""The Spark engine (optional extra `spark`).

A file's dataset is read by dq-agent's own loader, as for every engine (the same dialect, role
and type decisions); its normalised frame is then handed over as Parquet, written once into the
run's temporary folder (`dq_agent.scratch`) with the file order as a column (`FILE_ROW`: a Spark frame has no order
of its own), and read by the session (keyed by the frame; the file is removed with it). A
caller's own Spark DataFrame (`dq_agent.inspect`) is adopted as it is (`SparkEngine.adopt`):
nothing is collected to the driver but the queries' small results.

Each query is collected on its own to Polars through Arrow and normalised
(`engines.base.normalised`: an unsigned 64-bit column comes back as Decimal(20, 0), durations
as the integer microseconds Parquet holds them in). The session's time zone must be UTC, as
the loader's timestamps are: the shared local session (`local_session`) sets it, and a
caller's session is refused without it.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import FILE_ROW, Scope, entity_key
from dq_agent.engines import spark_gateway
from dq_agent.engines.base import Frame, TableEngine, scoped
from dq_agent.errors import ConfigError, InputError
from dq_agent.load import Dataset
from dq_agent.maintenance import EXCUSED, Excusal
from dq_agent.scratch import scratch_path

INSTALL = "the Spark engine needs pyspark and Java 17 or newer: pip install 'dq-agent[spark]'"
_SESSION_ZONE = "spark.sql.session.timeZone"
_LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    _SESSION_ZONE: "UTC",
    # Parquet's TIME (a time of day) is refused without it.
    "spark.sql.timeType.enabled": "true",
    # The default 200 shuffle partitions cost more in task start-up than they save on one
    # machine. 8 rather than one per core: null_check at 1M rows on 2 cores took 7.0-11.6 s with
    # 8 and 14.3-16.6 s with 2 (load 9 to 11); the Spark tests 2m39s and 2m28s (noise).
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
_LOCAL: list[Any] = []


def local_session() -> Any:
    """The one local SparkSession of this process (started on first use: several seconds, a
    JVM), with its time zone UTC. Raises ConfigError when pyspark or Java is missing."""
    if _LOCAL:
        return _LOCAL[0]
    try:
        from pyspark.errors import PySparkRuntimeError
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise ConfigError(INSTALL) from exc
    builder = SparkSession.builder.master("local[*]").appName("dq-agent")
    for key, value in _LOCAL_CONF.items():
        builder = builder.config(key, value)
    # Errors only, from the JVM's start: Spark's default profile warns on every start.
    logging = Path(__file__).with_name("spark_log4j2.properties")
    builder = builder.config(
        "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={logging.as_uri()}"
    )
    try:
        _start_jvm(builder)
        session = builder.getOrCreate()
    except PySparkRuntimeError as exc:
        # Without Java: "[JAVA_GATEWAY_EXITED] Java gateway process exited ...".
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{INSTALL} ({first})") from exc
    session.sparkContext.setLogLevel("ERROR")
    _quiet_query_errors()
    _LOCAL.append(session)
    return session


def _start_jvm(builder: Any) -> None:
    """The JVM started with the builder's settings through `spark_gateway` (its start-up
    notices dropped), unless this process already has one (a caller's session)."""
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(builder._options.items()))
    SparkContext._ensure_initialized(gateway=spark_gateway.launch(conf))


def _quiet_query_errors() -> None:
    """PySpark logs every failing query's exception with its Java stack (KBs of JSON on
    stderr) before raising it; dq-agent reports the failure as that check's error already."""
    from pyspark.logger import PySparkLogger

    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        # PySpark's own logger class (a plain Logger would refuse its keyword arguments).
        PySparkLogger.getLogger(name).disabled = True


class SparkEngine(TableEngine):
    name = "spark"

    def __init__(self, session: Any = None) -> None:
        self.session = session if session is not None else local_session()
        zone = self.session.conf.get(_SESSION_ZONE)
        if zone not in ("UTC", "Etc/UTC", "GMT", "Z", "+00:00"):
            # Spark renders a timestamp's wall-clock time in the session's zone when it is
            # compared with a literal or returned: every time would move by the zone's offset.
            raise ConfigError(
                f"the Spark session's time zone is {zone}: dq-agent reads timestamps as UTC; "
                f"set spark.conf.set('{_SESSION_ZONE}', 'UTC') first"
            )
        self._frames: dict[tuple[int, Excusal | None], Any] = {}
        self._adopted: dict[int, Any] = {}

    def adopt(self, dataset: Dataset, frame: Any, timezone: str = "UTC") -> None:
        """Run `dataset`'s queries on `frame`, the caller's Spark DataFrame whose first rows it
        was loaded from (`loading.frames.spark_input`), instead of handing its Polars frame
        over. Loading's normalisation is Polars code: a column it changed (numbers or times
        written as text, epoch numbers, local times) would differ on Spark, so it is refused,
        naming what to cast in Spark first (InputError)."""
        from pyspark.sql import functions as F

        frame = _utc_times(frame, dataset, timezone)
        have = pl.from_arrow(frame.limit(0).toArrow())
        assert isinstance(have, pl.DataFrame)
        differ = [
            f"{name} ({have.schema.get(name)} in Spark, {dtype} for the checks)"
            for name, dtype in dataset.frame.collect_schema().items()
            if have.schema.get(name) != dtype
        ]
        if differ or dataset.time_parts:
            what = "; ".join(differ) or f"{' and '.join(dataset.time_parts)} read as one time"
            raise InputError(
                f"loading reads some columns of {dataset.path} differently from Spark, and the "
                f"checks run on Spark: {what}. Cast them in Spark first (numbers as double, "
                "times with to_timestamp in UTC), or set the roles in the config"
            )
        # The frame's own order (partition by partition, as read) numbered: positions in
        # findings are positions in the caller's frame. The ids are increasing, not
        # consecutive, so a scope always numbers its rows with a window (`rows`).
        self._adopted[id(dataset.frame)] = frame.withColumn(
            FILE_ROW, F.monotonically_increasing_id()
        )

    def rows(self, dataset: Dataset, scope: Scope, *, index: bool = False) -> Frame:
        frame: Frame = nw.from_native(self._frame(dataset, scope.excused))
        # An adopted frame's FILE_ROW ids increase but are not consecutive: always renumbered,
        # and not handed on (a row named by it would not be the caller's row; nothing narrows
        # a scope there: the library refuses a model and maintenance windows on such a frame).
        # A handed-over file's FILE_ROW is the file's row, which a narrowed scope's findings name.
        adopted = id(dataset.frame) in self._adopted
        rows = scoped(frame, dataset, scope, index=index, renumber=adopted)
        return rows.drop(FILE_ROW) if adopted else rows

    def hashed(self, frame: Frame, columns: Sequence[str], name: str) -> Frame:
        """Spark's `xxhash64` (a long). It skips a null value (a and null hash like null and
        a): a collision more, which the check's comparison by value resolves."""
        from pyspark.sql import functions as F

        native = frame.to_native()
        values = [F.col("`" + c.replace("`", "``") + "`") for c in columns]
        out: Frame = nw.from_native(native.withColumn(name, F.xxhash64(*values)))
        return out

    def materialised(self, frame: Frame) -> Frame:
        """Spark's `localCheckpoint`, computed now: the later queries start from its stored
        rows, not from its plan. With `cache` each query still carried the whole plan that
        built the frame, and a check's plans grew with every frame built on another:
        flatline_check's test of pumps took 46 s to plan locally, and CI timed out in it."""
        out: Frame = nw.from_native(frame.to_native().localCheckpoint(eager=True))
        return out

    def _frame(self, dataset: Dataset, excusal: Excusal | None) -> Any:
        """The dataset's rows as a Spark DataFrame: the caller's (`adopt`), else its Polars
        frame handed over as Parquet on first use. Maintenance windows the inspection has not
        computed into the frame (`maintenance.materialise`) are computed by Polars, into a
        column of the file."""
        adopted = self._adopted.get(id(dataset.frame))
        ts = dataset.roles.timestamp
        computed = excusal is not None and excusal.column is None and ts is not None
        if adopted is not None:
            if computed:
                raise InputError(
                    "maintenance windows on a Spark DataFrame are not supported yet: their "
                    "mask is computed by Polars; compute it into a boolean column and name it"
                )
            return adopted
        key = (id(dataset.frame), excusal if computed else None)
        frame = self._frames.get(key)
        if frame is not None:
            return frame
        handed = dataset.frame.with_row_index(FILE_ROW).with_columns(
            pl.col(FILE_ROW).cast(pl.Int64)
        )
        if computed and excusal is not None and ts is not None:
            handed = handed.with_columns(excusal.expression(ts, entity_key(dataset)).alias(EXCUSED))
        durations = [n for n, t in handed.collect_schema().items() if isinstance(t, pl.Duration)]
        handed = handed.with_columns(pl.col(durations).cast(pl.Duration("us")))
        path = scratch_path("spark-frame", ".parquet")
        handed.sink_parquet(path)
        frame = _with_intervals(self.session.read.parquet(str(path)), durations)
        self._frames[key] = frame
        # The file holds a copy of the data: remove it when the frame goes.
        weakref.finalize(dataset.frame, self._drop, key, path).atexit = False
        return frame

    def _drop(self, key: tuple[int, Excusal | None], path: Path) -> None:
        self._frames.pop(key, None)
        path.unlink(missing_ok=True)


def _utc_times(frame: Any, dataset: Dataset, timezone: str) -> Any:
    """The timestamp and ingest columns' date-times without a zone (TIMESTAMP_NTZ) read as
    UTC, as loading reads naive times by default. In another zone (`columns.timezone`) loading
    resolves them with Polars code (the repeated hour of a fall-back): refused on Spark."""
    from pyspark.sql.types import TimestampNTZType, TimestampType

    times = (dataset.roles.timestamp, dataset.roles.ingest_time)
    naive = [
        f.name
        for f in frame.schema.fields
        if isinstance(f.dataType, TimestampNTZType) and f.name in times
    ]
    if not naive:
        return frame
    if timezone != "UTC":
        raise InputError(
            f"{', '.join(naive)} on Spark: date-times without a zone read in {timezone} are "
            "not supported yet; convert them to UTC timestamps in Spark (to_utc_timestamp)"
        )
    return frame.withColumns({n: frame[n].cast(TimestampType()) for n in naive})


def _with_intervals(frame: Any, durations: Sequence[str]) -> Any:
    """Parquet has no duration type: it holds a duration as its integer microseconds, which
    Spark reads as a number, and a check would then take it for a measurement. The difference
    of two timestamps is Spark's exact day-time interval."""
    from pyspark.sql import functions as F

    if not durations:
        return frame
    zero = F.timestamp_micros(F.lit(0))
    return frame.withColumns({n: F.timestamp_micros(F.col(n)) - zero for n in durations})


def with_epoch_micros(frame: Frame, column: str, name: str) -> Frame:
    """`frame` with column `name`: the timestamp `column` as integer microseconds since the
    epoch, Spark's `unix_micros` (Narwhals has no `dt.timestamp` or `dt.total_*` on Spark, and
    Spark refuses a cast of a timestamp to an integer)."""
    from pyspark.sql import functions as F

    quoted = "`" + column.replace("`", "``") + "`"
    out: Frame = nw.from_native(frame.to_native().withColumn(name, F.unix_micros(F.col(quoted))))
    return out
