"""The ported checks give the same results on every engine (`dq_agent.engines`).

Each case runs a check on every engine: as the runner does on Polars (`run_plans`, the production
path), and through each engine's own execution (`run_portable`). The Spark cases are marked
`spark` (`-m "not spark"` leaves them out) and share one local session, started once. Integer counts, text and
times must be identical, floats within 1e-9 relative; the cases' exact counts are asserted too,
so an engine that agrees with a wrong production result still fails.
"""

from __future__ import annotations

import decimal
import functools
import json
import math
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Protocol

import polars as pl
import pytest

from dq_agent.checks.base import Scope, entity_key, run_plans
from dq_agent.checks.nulls import build_null_check, plan_null_check
from dq_agent.checks.portable import run_portable
from dq_agent.config import Config
from dq_agent.engines import POLARS, Engine
from dq_agent.load import Dataset, load
from dq_agent.maintenance import Excusal, Window, materialise
from dq_agent.result import CheckResult
from tests.fixtures_checks import T0, iso_minute, minute, write_csv, write_parquet
from tests.spark_support import session_or_skip

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_data"
ENGINE_NAMES = ("polars", "duckdb", pytest.param("spark", marks=pytest.mark.spark))


@pytest.fixture(scope="module")
def engines() -> Iterator[dict[str, Engine]]:
    found: dict[str, Engine] = {"polars": POLARS}
    try:
        from dq_agent.engines.duckdb import DuckDBEngine
    except ImportError:  # pragma: no cover - duckdb is a dev dependency
        pass
    else:
        found["duckdb"] = DuckDBEngine()
    yield found


@pytest.fixture(scope="session")
def spark_engine() -> Engine:
    from dq_agent.engines.spark import SparkEngine

    return SparkEngine(session_or_skip())


@pytest.fixture(params=["polars", "duckdb"])
def local_engine(request: pytest.FixtureRequest, engines: dict[str, Engine]) -> Engine:
    """The engines in this process, for the cases that only vary inputs the Spark cases already
    cover: a Spark query costs seconds (one shared session, tests/spark_support.py)."""
    name: str = request.param
    if name not in engines:
        pytest.skip(f"the {name} engine is not installed")
    return engines[name]


@pytest.fixture(params=ENGINE_NAMES)
def engine(request: pytest.FixtureRequest, engines: dict[str, Engine]) -> Engine:
    name: str = request.param
    if name == "spark":
        spark: Engine = request.getfixturevalue("spark_engine")
        return spark
    if name not in engines:
        pytest.skip(f"the {name} engine is not installed")
    return engines[name]


def _same(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where `actual` differs from `expected`: floats within 1e-9 relative, all else equal."""
    if isinstance(expected, float) and isinstance(actual, float):
        both_nan = math.isnan(expected) and math.isnan(actual)
        if both_nan or math.isclose(expected, actual, rel_tol=1e-9, abs_tol=0.0):
            return []
        return [f"{path}: {expected!r} != {actual!r}"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        if expected.keys() != actual.keys():
            return [f"{path}: keys {sorted(expected)} != {sorted(actual)}"]
        return [m for k in expected for m in _same(expected[k], actual[k], f"{path}.{k}")]
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(expected)} items != {len(actual)}"]
        return [
            m
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for m in _same(e, a, f"{path}[{i}]")
        ]
    if type(expected) is not type(actual) or expected != actual:
        return [
            f"{path}: {expected!r} ({type(expected).__name__}) != {actual!r} ({type(actual).__name__})"
        ]
    return []


def _comparable(result: CheckResult) -> dict[str, Any]:
    out = result.to_dict()
    del out["duration_seconds"]
    out["events"] = [(e.kind, e.entity, e.column, e.start, e.end, e.count) for e in result.events]
    out["events_complete"] = result.events_complete
    return out


def run_both(
    check: tuple[Any, Any],
    engine: Engine,
    data: Path | Dataset,
    config: Config | None = None,
    scope: Scope | None = None,
) -> CheckResult:
    """A ported check (its production plan and its portable build) on `engine`, after checking
    it equals the production path's result."""
    plan, build = check
    config = config or Config()
    scope = scope or Scope()
    dataset = load(str(data), config) if isinstance(data, Path) else data
    (production,) = run_plans([plan(dataset, config, scope)])
    result = run_portable(build, engine, dataset, config, scope)
    assert _same(_comparable(production), _comparable(result)) == []
    return result


class RunBoth(Protocol):
    def __call__(
        self,
        engine: Engine,
        data: Path | Dataset,
        config: Config | None = None,
        scope: Scope | None = None,
    ) -> CheckResult: ...


def runner(plan: Any, build: Any) -> RunBoth:
    """`run_both` for one ported check (its catalogue plan function and its portable build)."""
    return functools.partial(run_both, (plan, build))


_run = runner(plan_null_check, build_null_check)


def with_windows(
    dataset: Dataset, windows: tuple[Window, ...], computed: bool
) -> tuple[Dataset, Excusal]:
    """The dataset and the excusal a check reads for maintenance `windows`: as windows to test
    against, or (`computed`) as the excused flag the inspection computes once beside the frame."""
    excusal = Excusal(windows)
    if not computed:
        return dataset, excusal
    ts = dataset.roles.timestamp
    assert ts is not None
    frame, _ = materialise(dataset.frame.collect(), excusal, ts, entity_key(dataset))
    return Dataset(**{**dataset.__dict__, "frame": frame.lazy()}), Excusal(windows, "__excused")


def _columns(result: CheckResult, *keys: str) -> dict[str, tuple[Any, ...]]:
    return {name: tuple(m[k] for k in keys) for name, m in result.metrics["columns"].items()}


# --- the sample data: expected.json's counts ----------------------------------------------


@pytest.mark.parametrize("file_name", ["sensors.parquet", "sensors.csv"])
def test_sample_data_counts_on_every_engine(engine: Engine, file_name: str) -> None:
    expected = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    wanted = expected["files"][file_name]["null_check"]
    result = _run(engine, SAMPLE_DIR / file_name)
    assert result.metrics["rows"] == wanted["rows"]
    assert result.metrics["total_missing"] == wanted["total_missing"]
    for name, counts in wanted["columns"].items():
        for key, value in counts.items():
            assert result.metrics["columns"][name][key] == value, (name, key)
    assert result.events  # the missing values are on the time axis on every engine


# --- fixtures with injected defects ---------------------------------------------------------

# Device a's rows out of time order: its missing minutes 7, 8, 9 are one run only in time order.
A_FILE_ORDER = [7, 0, 8, 1, 9, 2, 3, 4, 5, 6]


def _fleet(tmp_path: Path) -> Path:
    """20 rows; temp: 4 nulls + 1 sentinel, pressure: 1 sentinel, spare: entirely empty."""
    a_temp: dict[int, Any] = {7: "", 8: "NA", 9: -999}
    b_temp: dict[int, Any] = {0: "", 1: ""}
    rows = [[minute(i), "a", a_temp.get(i, 20.5 + i), 1000 + i, None] for i in A_FILE_ORDER] + [
        [minute(i), "b", b_temp.get(i, 30.5 + i), -200 if i == 5 else 1100 + i, None]
        for i in range(10)
    ]
    header = ["timestamp", "device_id", "temp", "pressure", "spare"]
    return write_csv(tmp_path / "fleet.csv", header, rows)


def test_fleet_counts_runs_and_findings(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _fleet(tmp_path))
    assert _columns(result, "null_count", "sentinel_count", "missing_count") == {
        "timestamp": (0, 0, 0),
        "device_id": (0, 0, 0),
        "temp": (4, 1, 5),
        "pressure": (0, 1, 1),
        "spare": (20, 0, 20),
    }
    run = result.metrics["columns"]["temp"]["longest_missing_run"]
    assert (run["length"], run["entity"], run["start"], run["end"]) == (
        3,
        "a",
        iso_minute(7),
        iso_minute(9),
    )
    assert (run["start_row"], run["end_row"]) == (0, 4)
    assert [(f.column, f.count) for f in result.findings] == [
        ("spare", 20),
        ("temp", 5),
        ("pressure", 1),
    ]
    assert [e["value"] for e in result.findings[1].examples] == [None, None, -999.0]
    assert sum(e.count for e in result.events if e.column == "temp") == 5


@pytest.mark.parametrize(
    ("scope", "rows", "temp_missing", "run_entity"),
    [
        (Scope(entity="b"), 10, 2, "b"),
        (Scope(start=T0.replace(minute=5), end=T0.replace(minute=8)), 8, 2, "a"),
        (Scope(column="temp", entity="a", end=T0.replace(minute=8)), 9, 2, "a"),
        (Scope(entity="nobody"), 0, None, None),
    ],
)
def test_scopes_narrow_alike(
    engine: Engine,
    tmp_path: Path,
    scope: Scope,
    rows: int,
    temp_missing: int | None,
    run_entity: str | None,
) -> None:
    result = _run(engine, _fleet(tmp_path), scope=scope)
    assert result.metrics["rows"] == rows
    if temp_missing is not None:
        temp = result.metrics["columns"]["temp"]
        assert temp["missing_count"] == temp_missing
        assert temp["longest_missing_run"]["entity"] == run_entity


def test_rows_without_a_time_end_their_series(engine: Engine, tmp_path: Path) -> None:
    rows = [
        [minute(2), "a", None],
        [None, "a", None],
        [minute(0), "a", None],
        [minute(1), "a", 1.0],
        [minute(0), "b", None],
    ]
    path = write_csv(tmp_path / "t.csv", ["timestamp", "device_id", "temp"], rows)
    run = _run(engine, path).metrics["columns"]["temp"]["longest_missing_run"]
    assert (run["length"], run["entity"], run["start"], run["end"]) == (2, "a", iso_minute(2), None)
    assert (run["start_row"], run["end_row"]) == (0, 1)


def test_file_order_without_a_timestamp(engine: Engine, tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "wide.csv", ["x", "y"], [[1, 2], [None, 3], [None, 4], [4, 5], [None, 6]]
    )
    result = _run(engine, path)
    run = result.metrics["columns"]["x"]["longest_missing_run"]
    assert (run["length"], run["start_row"], run["end_row"]) == (2, 1, 2)
    assert result.events == []


def test_nan_infinities_and_sentinels_are_told_apart(engine: Engine, tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(7)],
            "device_id": ["a"] * 7,
            "temp": [1.0, float("inf"), float("-inf"), float("nan"), None, -999.0, 2.0],
        }
    )
    result = _run(engine, write_parquet(tmp_path / "inf.parquet", frame))
    assert _columns(result, "null_count", "nan_count", "nonfinite_count", "sentinel_count")[
        "temp"
    ] == (1, 1, 2, 1)
    assert result.findings[0].examples[2]["value"] == "NaN"


def test_every_dtype(engine: Engine, tmp_path: Path) -> None:
    n = 4
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(n)],
            "device_id": ["a"] * n,
            "dec": pl.Series([decimal.Decimal("1.5"), None, decimal.Decimal("-999"), None]),
            "f32": pl.Series([1.0, float("inf"), None, 2.0], dtype=pl.Float32),
            "i8": pl.Series([1, None, 0, 3], dtype=pl.Int8),
            "u64": pl.Series([1, 2, 3, None], dtype=pl.UInt64),
            "flag": [True, None, False, True],
            "day": [date(2024, 1, 1), None, date(2024, 1, 2), date(2024, 1, 3)],
            "clock": [time(1, 2), time(3, 4), None, time(5, 6)],
            "took": [timedelta(seconds=1), None, None, timedelta(seconds=2)],
            "kind": pl.Series(["x", None, "y", "x"], dtype=pl.Categorical),
            "nested": [{"a": 1}, None, {"a": 2}, {"a": 3}],
        }
    )
    result = _run(engine, write_parquet(tmp_path / "types.parquet", frame))
    assert {name: m[0] for name, m in _columns(result, "missing_count").items()} == {
        "timestamp": 0,
        "device_id": 0,
        "dec": 3,
        "f32": 2,
        "i8": 1,
        "u64": 1,
        "flag": 1,
        "day": 1,
        "clock": 1,
        "took": 2,
        "kind": 1,
    }


def test_an_entity_of_two_columns(engine: Engine, tmp_path: Path) -> None:
    # Site s1 line 1 misses minutes 1-3; s1 line 2 misses minute 4 only; "s1/1" is one series.
    rows = [
        [
            minute(i),
            "s1",
            line,
            None if (line == 1 and 1 <= i <= 3) or (line == 2 and i == 4) else 1.0,
        ]
        for line in (1, 2)
        for i in range(6)
    ]
    path = write_csv(tmp_path / "two.csv", ["timestamp", "site", "line", "temp"], rows)
    config = Config()
    config.columns.entity = ["site", "line"]
    result = _run(engine, path, config)
    run = result.metrics["columns"]["temp"]["longest_missing_run"]
    assert (run["length"], run["entity"]) == (3, "s1/1")
    assert result.metrics["columns"]["temp"]["missing_count"] == 4


@pytest.mark.parametrize("computed", [False, True], ids=["windows", "materialised"])
def test_maintenance_windows_leave_rows_out(engine: Engine, tmp_path: Path, computed: bool) -> None:
    # Device b's minutes 0-1 (both missing) fall in a window: 18 rows, temp misses 3.
    window = Window(0, _utc(0), _utc(1), "b", None)
    config = Config()
    dataset, excusal = with_windows(load(str(_fleet(tmp_path)), config), (window,), computed)
    result = _run(engine, dataset, config, Scope(excused=excusal))
    assert result.metrics["rows"] == 18
    temp = result.metrics["columns"]["temp"]
    assert temp["missing_count"] == 3
    assert temp["longest_missing_run"]["start_row"] == 0
    # A check that excuses nothing (duplicate_check) sees every row of the same frame.
    assert _run(engine, dataset, config).metrics["rows"] == 20


@pytest.mark.parametrize("computed", [False, True], ids=["windows", "materialised"])
def test_a_window_inside_a_series_joins_its_neighbours(
    engine: Engine, tmp_path: Path, computed: bool
) -> None:
    # temp misses minutes 2-3 and 5-6; a window leaves minute 4 out, so the four are one run
    # of neighbours (an engine numbering series positions before the window would see two).
    rows = [[minute(i), "a", "" if i in (2, 3, 5, 6) else 1.0] for i in range(10)]
    path = write_csv(tmp_path / "gap.csv", ["timestamp", "device_id", "temp"], rows)
    window = Window(0, _utc(4), _utc(4), "a", None)
    config = Config()
    dataset, excusal = with_windows(load(str(path), config), (window,), computed)
    result = _run(engine, dataset, config, Scope(excused=excusal))
    assert result.metrics["rows"] == 9
    temp = result.metrics["columns"]["temp"]
    assert temp["missing_count"] == 4
    run = temp["longest_missing_run"]
    assert (run["length"], run["start"], run["end"]) == (4, iso_minute(2), iso_minute(6))


def _utc(minutes: int) -> datetime:
    return (T0 + timedelta(minutes=minutes)).replace(tzinfo=UTC)
