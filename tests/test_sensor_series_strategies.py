"""The Polars strategies behind the sensor checks' shared series, against plain references:
the readings in (or outside) the judged runs by an as-of join on the sorted runs, and
spike_check's readings per series from the runs, on data with runs at a series' ends."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks import flatline, spikes
from dq_agent.checks.base import SERIES, Scope
from dq_agent.checks.flatline_report import AT_REST, RUN_AT, RUN_LENGTH, STUCK
from dq_agent.checks.series_values import POSITION
from dq_agent.load import load
from tests.test_checks_flatline import MINUTES, config_for_fleet, fleet

COLUMNS = ["temp", "rh", "setpoint", "valve"]


def _positions(runs: pl.LazyFrame, flag: str | None) -> pl.LazyFrame:
    """Every position of the runs with `flag` (None: all), as the hash join read them."""
    if flag is not None:
        runs = runs.filter(pl.col(flag))
    start = pl.col(RUN_AT)
    return runs.select(pl.int_ranges(start, start + pl.col(RUN_LENGTH)).explode().alias(POSITION))


@pytest.mark.parametrize("column", COLUMNS)
def test_readings_in_runs_match_a_join_on_every_position(tmp_path: Path, column: str) -> None:
    config = config_for_fleet()
    dataset = load(str(fleet(tmp_path)), config)
    scope = Scope()
    values = flatline.checked_values(dataset, scope, column, config)
    runs = flatline.judged_runs(dataset, scope, column, config)
    stuck = values.join(_positions(runs, STUCK), on=POSITION, how="semi")
    got = flatline.stuck_readings(dataset, scope, column, config)
    assert got.collect().equals(stuck.collect())
    running = values.join(_positions(runs, None), on=POSITION, how="anti")
    got = flatline.running_values(dataset, scope, column, config)
    assert got.collect().equals(running.collect())
    rest = flatline.rest_rows(dataset, scope, column, config).collect()
    want_rest = values.join(_positions(runs, AT_REST), on=POSITION, how="semi").select("__at_row")
    assert rest.equals(want_rest.collect())


def test_runs_at_a_series_end_leave_the_next_series_whole(tmp_path: Path) -> None:
    """valve is stuck for all of device a (the first series), so the as-of join matches
    device b's first readings to that run: they must stay outside it."""
    config = config_for_fleet()
    dataset = load(str(fleet(tmp_path)), config)
    stuck = flatline.stuck_readings(dataset, Scope(), "valve", config).collect()
    running = flatline.running_values(dataset, Scope(), "valve", config).collect()
    assert (stuck.height, running.height) == (MINUTES, MINUTES)
    assert stuck[SERIES].n_unique() == 1
    assert running[SERIES].n_unique() == 1
    assert stuck[SERIES][0] != running[SERIES][0]
    temp = flatline.stuck_readings(dataset, Scope(), "temp", config).collect()
    assert temp.height == 26


@pytest.mark.parametrize("with_flatline", [True, False])
def test_spike_readings_per_series_match_the_input(tmp_path: Path, with_flatline: bool) -> None:
    config = config_for_fleet()
    if not with_flatline:
        config.run.checks = ["spike_check"]
    dataset = load(str(fleet(tmp_path)), config)
    for column in COLUMNS:
        got = spikes._readings(dataset, Scope(), column, config)
        want = (
            spikes.spike_input(dataset, Scope(), column, config)
            .group_by(SERIES)
            .agg(pl.len().cast(pl.Int64).alias("__readings"))
        )
        assert got.collect().sort(SERIES).equals(want.collect().sort(SERIES))
    # valve's first device is one stuck run: with flatline_check, spike_check sees no reading
    # of it, so that series is not one of spike_check's at all.
    valve = spikes._readings(dataset, Scope(), "valve", config).collect()
    assert valve.height == (1 if with_flatline else 2)


@pytest.mark.parametrize(
    ("entity", "names"),
    [
        (["site"], ["b", None, "a", "c"]),
        (["site", "unit"], ["b", "a", None, "a"]),
        (["probe"], [0.0, -0.0, 2.5, None]),
    ],
)
def test_series_table_entity_is_each_rows_name(
    tmp_path: Path, entity: list[str], names: list[object]
) -> None:
    """The series table's entity (a series' name cast once and put on its rows, or each row's
    cast where equal keys may be written two ways: floats) is each row's own name in series
    order, as a per-row cast gives it."""
    from dq_agent.checks.base import ORDER, entity_key, materialising, series_rows
    from dq_agent.checks.series_values import ENTITY, series_columns
    from dq_agent.config import Config

    rows = 40
    frame = pl.DataFrame(
        {
            "time": pl.datetime_range(
                pl.datetime(2024, 1, 1), pl.datetime(2024, 1, 1, 0, rows - 1), "1m", eager=True
            ).reverse(),
            entity[0]: [names[i % len(names)] for i in range(rows)],
            **({"unit": [["x", "y", None][i % 3] for i in range(rows)]} if len(entity) > 1 else {}),
            "v": [float(i) for i in range(rows)],
        }
    )
    path = tmp_path / "e.parquet"
    frame.write_parquet(path)
    config = Config()
    config.columns.entity = entity
    config.columns.timestamp = "time"
    dataset = load(str(path), config)
    assert list(dataset.roles.entity) == entity
    with materialising():
        got = series_columns(dataset, Scope(), ["v"]).collect()
        key = entity_key(dataset)
        assert key is not None
        want = series_rows(dataset, Scope()).select(
            key.cast(pl.Categorical).gather(pl.col(ORDER)).alias(ENTITY)
        )
        assert got.select(ENTITY).equals(want.collect())
