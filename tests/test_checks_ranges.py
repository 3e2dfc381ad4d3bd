"""range_check on small files with exactly known out-of-range readings, and clean data."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.range_limits import unit_default
from dq_agent.checks.ranges import column_range, plan_range_check, unit_limits
from dq_agent.checks.series_values import AT_ROW
from dq_agent.checks.value_flags import flagged_rows
from dq_agent.config import Config, resolve
from dq_agent.errors import ConfigError
from dq_agent.load import load
from dq_agent.result import Status
from tests.fixtures_checks import iso_minute, minute, run_check, write_csv, write_parquet
from tests.fixtures_series import CLEAN_KINDS, clean_fleet

HEADER = ["timestamp", "device_id", "rel_humidity", "temp_c", "pressure"]
# Device a: humidity -3, -4, -5 at minutes 10-12 (one run of 3) and 104 at minute 20 (a run of
# 1); -999 at minute 15 is a missing value, never out of range. Device b: -1 at minute 30.
A_HUMIDITY = {10: -3.0, 11: -4.0, 12: -5.0, 15: -999, 20: 104.0}
B_HUMIDITY = {30: -1.0}
# temp_c has configured limits: fail above 90, suspect above 60. Device b: 95 (fail) at minute 5,
# 70 (suspect) at minute 6.
B_TEMP = {5: 95.0, 6: 70.0}


def _fleet(tmp_path: Path) -> Path:
    rows = [
        [minute(i), "a", A_HUMIDITY.get(i, 50.0 + (i % 7) / 10), 20.0 + (i % 5) / 10, -3.0]
        for i in range(40)
    ] + [
        [minute(i), "b", B_HUMIDITY.get(i, 40.0 + (i % 3) / 10), B_TEMP.get(i, 21.0), -2.5]
        for i in range(40)
    ]
    return write_csv(tmp_path / "fleet.csv", HEADER, rows)


def _config(**limits: dict[str, float]) -> Config:
    config = Config()
    config.range_check.limits = limits
    return config


def test_counts_runs_and_worst_values_per_device(tmp_path: Path) -> None:
    config = _config(**{"temp*": {"max": 90.0, "suspect_max": 60.0}})
    result = run_check(plan_range_check, _fleet(tmp_path), config)
    metrics = result.metrics
    humidity = metrics["columns"]["rel_humidity"]
    assert (humidity["suspect_count"], humidity["fail_count"], humidity["runs"]) == (5, 0, 3)
    assert humidity["devices_affected"] == 2
    assert humidity["checked_values"] == 79  # the -999 is missing, not checked
    assert humidity["limits"]["source"] == "unit default: relative humidity 0-100 %"
    temp = metrics["columns"]["temp_c"]
    assert (temp["fail_count"], temp["suspect_count"], temp["runs"]) == (1, 1, 1)
    assert temp["limits"] == {
        "min": None,
        "max": 90.0,
        "suspect_min": None,
        "suspect_max": 60.0,
        "source": "config",
    }
    # A plain "pressure" may be gauge pressure: negative values are not called out of range.
    assert metrics["columns_without_limits"] == ["pressure"]
    assert (metrics["out_of_range_count"], metrics["fail_count"]) == (7, 1)
    assert result.status is Status.FAIL
    by_place = {(f.column, f.entity): f for f in result.findings}
    a = by_place["rel_humidity", "a"]
    assert a.count == 4 and a.severity is Status.WARN
    assert (a.start, a.end) == (iso_minute(10), iso_minute(20))
    assert "longest 3" in a.what and "lowest -5, highest 104" in a.what
    assert [e["value"] for e in a.examples] == [-5.0, -4.0, 104.0]
    assert a.examples[0]["timestamp"] == iso_minute(12)
    b_temp = by_place["temp_c", "b"]
    assert b_temp.severity is Status.FAIL and b_temp.count == 2
    assert "no limits for pressure" in result.summary


def test_suspect_only_is_a_warning(tmp_path: Path) -> None:
    result = run_check(plan_range_check, _fleet(tmp_path))
    assert result.status is Status.WARN
    assert result.metrics["columns_without_limits"] == ["temp_c", "pressure"]


def test_configured_limits_replace_and_defaults_fill(tmp_path: Path) -> None:
    config = _config(rel_humidity={"suspect_min": -10.0}, pressure={"min": -2.8})
    result = run_check(plan_range_check, _fleet(tmp_path), config)
    humidity = result.metrics["columns"]["rel_humidity"]
    # -3..-5 are now within the suspect band; 104 is still above the unit default 100.
    assert humidity["suspect_count"] == 1
    assert humidity["limits"]["source"] == "config and unit default: relative humidity 0-100 %"
    pressure = result.metrics["columns"]["pressure"]
    assert (pressure["fail_count"], pressure["devices_affected"]) == (40, 1)


def test_without_a_timestamp_rows_are_reported(tmp_path: Path) -> None:
    frame = pl.DataFrame({"humidity_pct": [50.0, 101.0, 50.0, -1.0]})
    result = run_check(plan_range_check, write_parquet(tmp_path / "h.parquet", frame))
    finding = result.findings[0]
    assert finding.count == 2 and finding.entity is None
    assert sorted(e["row"] for e in finding.examples) == [1, 3]


def test_an_entity_scope_reports_rows_of_the_file(tmp_path: Path) -> None:
    path = _fleet(tmp_path)
    result = run_check(plan_range_check, path, scope=Scope(entity="b"))
    (finding,) = result.findings
    assert finding.examples[0]["timestamp"] == iso_minute(30)
    assert result.metrics["columns"]["rel_humidity"]["suspect_count"] == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("humidity", (0.0, 100.0)),
        ("RH_1", (0.0, 100.0)),
        ("valve_pct", (0.0, 100.0)),  # only when the data keeps to it: see below
        ("load %", (0.0, 100.0)),
        ("abs_pressure", (0.0, None)),
        ("pressure_abs_hpa", (0.0, None)),
        ("temp_k", (0.0, None)),
        ("kelvin", (0.0, None)),
        ("Temperature (K)", (0.0, None)),
        ("temp [K]", (0.0, None)),
        ("T_K", (0.0, None)),
        ("outlet_t_k", (0.0, None)),
        ("Temp_Kelvin", (0.0, None)),
        ("kw", None),
        ("peak", None),
        ("peak_k", None),
        ("tank_k", None),
        ("temp_kw", None),
        ("Power (kW)", None),
        ("count (k)", None),
        ("pressure", None),
        ("temperature", None),
        ("rhythm", None),
        ("track", None),
    ],
)
def test_unit_defaults_only_for_unmistakable_names(
    name: str, expected: tuple[float, float | None] | None
) -> None:
    limits = unit_limits(name)
    got = None if limits is None else (limits.suspect_min, limits.suspect_max)
    assert got == expected


def test_exact_names_win_over_patterns_and_excluded_columns_are_unchecked(
    tmp_path: Path,
) -> None:
    frame = pl.DataFrame({"temp": [1.0, 2.0], "tank": [1.0, 2.0], "humidity": [1.0, 2.0]})
    path = write_parquet(tmp_path / "t.parquet", frame)
    config = _config(**{"t*": {"max": 1.0}, "temp": {"max": 2.0}})
    dataset = load(str(path), config)
    assert column_range(dataset, "temp", config).limits.max == 2.0  # type: ignore[union-attr]
    assert column_range(dataset, "tank", config).limits.max == 1.0  # type: ignore[union-attr]
    assert column_range(dataset, "humidity", config) is not None
    config.range_check.excluded = ["hum*"]
    assert column_range(dataset, "humidity", config) is None


def test_bad_limits_are_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "dq.yaml"
    path.write_text("range_check:\n  limits:\n    temp: {lowest: 1}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="use only min, max"):
        resolve(path)
    path.write_text("range_check:\n  limits:\n    temp: {min: 5, max: 1}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="have min <= max for 'temp'"):
        resolve(path)
    path.write_text("range_check:\n  limits:\n    temp: {min: 0, max: 9}\n", encoding="utf-8")
    assert resolve(path).range_check.limits == {"temp": {"min": 0.0, "max": 9.0}}


def test_limits_of_which_none_names_the_data_are_a_config_error(tmp_path: Path) -> None:
    # A misspelt column would otherwise leave every reading unchecked behind a quiet pass.
    data = _fleet(tmp_path)
    path = tmp_path / "dq.yaml"
    path.write_text(
        "range_check:\n  limits:\n    rel_humidty: {min: 0, max: 60}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as raised:
        run_check(plan_range_check, data, resolve(path))
    assert raised.value.message == (
        f"bad value for 'range_check.limits' in {path}: 'rel_humidty' names no value column or tag "
        "of the data; value columns: rel_humidity, temp_c, pressure"
    )
    # A site's shared list, some of whose names this file lacks: checked, the rest named.
    path.write_text(
        "range_check:\n  limits:\n    rel_humidity: {min: 0, max: 60}\n    FT-9*: {max: 1}\n",
        encoding="utf-8",
    )
    result = run_check(plan_range_check, data, resolve(path))
    assert result.metrics["unmatched_limits"] == ["FT-9*"]
    assert "range_check.limits names no column or tag: FT-9*" in result.summary


@pytest.mark.parametrize("kind", CLEAN_KINDS)
@pytest.mark.parametrize("size", [10, 1_000, 30_000])
def test_clean_humidity_passes_at_every_size(tmp_path: Path, kind: str, size: int) -> None:
    result = run_check(plan_range_check, clean_fleet(tmp_path, kind, size))
    assert result.status is Status.PASS, result.summary
    assert result.metrics["columns"]["humidity"]["checked_values"] == 3 * size


def test_a_kelvin_header_makes_readings_below_zero_suspect(tmp_path: Path) -> None:
    # "Temperature (K)" and "T_K", each with two negative readings on device a; "peak_k" with
    # the same readings has no unit and is not checked.
    below = {7: -5.0, 8: -1.0}
    rows = [[minute(i), "a", *[below.get(i, 290.0 + (i % 4) / 10)] * 3] for i in range(30)]
    header = ["timestamp", "device_id", "Temperature (K)", "T_K", "peak_k"]
    result = run_check(plan_range_check, write_csv(tmp_path / "kelvin.csv", header, rows))
    columns = result.metrics["columns"]
    assert set(columns) == {"Temperature (K)", "T_K"}
    assert [columns[c]["suspect_count"] for c in ("Temperature (K)", "T_K")] == [2, 2]
    assert [columns[c]["fail_count"] for c in ("Temperature (K)", "T_K")] == [0, 0]


@pytest.mark.parametrize(
    ("name", "unit", "source", "conditional"),
    [
        ("Humidity_RH", None, "unit default: relative humidity 0-100 %", False),
        ("rel_humidity", "%", "unit default: relative humidity 0-100 %", False),
        ("valve_pct", None, "unit default: percentage 0-100 (the data keeps to it)", True),
        (
            "level",
            "%",
            "unit default: percentage 0-100 (the data keeps to it) (unit % read from the values)",
            True,
        ),
        ("temperature", "K", "unit default: Kelvin >= 0 (unit K read from the values)", False),
        ("temperature", "k", None, False),  # a lower-case k may be thousands
        ("temperature", "°C", None, False),
        ("line_pressure", "bar", None, False),  # gauge or absolute: not said
    ],
)
def test_a_unit_default_from_the_name_or_the_values_unit(
    name: str, unit: str | None, source: str | None, conditional: bool
) -> None:
    default = unit_default(name, unit)
    assert (default.limits.source if default else None) == source
    assert (default.conditional if default else False) is conditional


def _percent_file(tmp_path: Path, outside: int, rows: int = 500) -> Path:
    """One device's `load_pct`: `outside` of `rows` readings at 120 %, the rest 40-60 %."""
    values = [120.0 if i < outside else 40.0 + (i % 21) for i in range(rows)]
    frame = pl.DataFrame(
        {
            "timestamp": [datetime(2024, 1, 1) + timedelta(minutes=i) for i in range(rows)],
            "device_id": "a",
            "load_pct": values,
        }
    )
    return write_parquet(tmp_path / f"pct{outside}.parquet", frame)


@pytest.mark.parametrize(
    ("outside", "applied"),
    [(0, True), (5, True), (6, False), (250, False)],  # 5 of 500 is the 1 % share
)
def test_a_percentage_default_applies_only_when_the_data_keeps_to_0_100(
    tmp_path: Path, outside: int, applied: bool
) -> None:
    result = run_check(plan_range_check, _percent_file(tmp_path, outside))
    metrics = result.metrics
    if applied:
        assert metrics["columns"]["load_pct"]["suspect_count"] == outside
        assert metrics["defaults_not_applied"] == []
        assert result.status is (Status.WARN if outside else Status.PASS)
    else:
        assert metrics["columns_without_limits"] == ["load_pct"]
        (skipped,) = metrics["defaults_not_applied"]
        assert skipped["share_outside"] == outside / 500
        assert skipped["setting"] == "range_check.limits.load_pct"
        assert "0-100 % default is not applied to load_pct" in result.summary
        # No other column has limits: nothing was held against one.
        assert result.status is Status.SKIPPED


def test_the_share_is_a_setting_and_configured_limits_still_apply(tmp_path: Path) -> None:
    config = Config()
    config.range_check.percent_outside_share = 0.02
    result = run_check(plan_range_check, _percent_file(tmp_path, 6), config)
    assert result.metrics["columns"]["load_pct"]["suspect_count"] == 6
    # Not applied, the default fills nothing: the configured max alone is checked.
    config = _config(load_pct={"max": 125.0})
    result = run_check(plan_range_check, _percent_file(tmp_path, 250), config)
    assert result.metrics["columns"]["load_pct"]["limits"]["source"] == "config"
    assert result.metrics["out_of_range_count"] == 0


def test_humidity_keeps_its_default_however_much_lies_outside(tmp_path: Path) -> None:
    frame = pl.DataFrame({"humidity": [-5.0] * 50 + [50.0] * 50})
    result = run_check(plan_range_check, write_parquet(tmp_path / "h.parquet", frame))
    assert result.metrics["columns"]["humidity"]["suspect_count"] == 50


def test_kelvin_read_from_the_values_unit(tmp_path: Path) -> None:
    # "-5.00 K": the loader reads numbers and keeps the unit per column (Dataset.units).
    below = {4: "-5.00 K", 5: "-1.00 K"}
    rows = [[minute(i), "a", below.get(i, f"{290 + i % 3}.00 K")] for i in range(20)]
    path = write_csv(tmp_path / "k.csv", ["timestamp", "device_id", "temperature"], rows)
    config = Config()
    assert load(str(path), config).units == {"temperature": "K"}
    result = run_check(plan_range_check, path, config)
    temperature = result.metrics["columns"]["temperature"]
    assert temperature["suspect_count"] == 2
    assert temperature["limits"]["source"] == (
        "unit default: Kelvin >= 0 (unit K read from the values)"
    )
    assert "(suspect below 0, unit default, unit K read from the values)" in (
        result.findings[0].what
    )


def test_percent_outside_share_is_checked_and_named(tmp_path: Path) -> None:
    path = tmp_path / "dq.yaml"
    path.write_text("range_check:\n  percent_outside_share: 1.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"range_check\.percent_outside_share") as raised:
        resolve(path)
    assert str(path) in str(raised.value)
    path.write_text("range_check:\n  percent_outside: 0.1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="percent_outside") as raised:
        resolve(path)
    assert str(path) in str(raised.value)


def test_out_of_range_readings_of_a_tag_are_left_out_of_the_later_checks(tmp_path: Path) -> None:
    # A long layout: tag Humidity_RH has -3 at minutes 5-7 (its 0-100 default); tag Flow has
    # no limits, and its negative readings are usual. The flag file lists exactly those three readings, by range_check.
    rows = [
        ["Humidity_RH", minute(i), -3.0 if 5 <= i <= 7 else 40.0 + i % 4] for i in range(30)
    ] + [["Flow", minute(i), -2.0 + (i % 5) / 2] for i in range(30)]
    path = write_csv(tmp_path / "long.csv", ["TagName", "ts", "Value"], rows)
    config = Config()
    dataset = load(str(path), config)
    flagged = flagged_rows(dataset, Scope(), "Value", config).collect()
    assert sorted(flagged.get_column(AT_ROW).to_list()) == [5, 6, 7]
    assert set(flagged.get_column("check").to_list()) == {"range_check"}
    result = run_check(plan_range_check, path, config)
    value = result.metrics["columns"]["Value"]
    assert (value["suspect_count"], value["runs"]) == (3, 1)
    assert value["tags_without_limits"] == ["Flow"]
    assert "no limits for 1 tag of Value (Flow" in result.summary


def test_no_limits_is_not_evaluated_rather_than_passed(tmp_path: Path) -> None:
    # temp_c and flow have no unit with physical bounds and no configured limits.
    rows = [[minute(i), "a", 20.0 + i / 10, 5.0 - i] for i in range(10)]
    path = write_csv(tmp_path / "plain.csv", ["timestamp", "device_id", "temp_c", "flow"], rows)
    result = run_check(plan_range_check, path)
    assert result.status is Status.SKIPPED
    assert result.summary == (
        "not evaluated: no validity limits for temp_c, flow; set range_check.limits (min, max, "
        "suspect_min, suspect_max by column name or pattern) to check them"
    )
    assert result.metrics["columns_without_limits"] == ["temp_c", "flow"]
    assert (result.metrics["columns_checked"], result.metrics["out_of_range_count"]) == (0, 0)
    # The same file with limits is checked: the negative flow fails.
    checked = run_check(plan_range_check, path, _config(flow={"min": 0.0}))
    assert checked.status is Status.FAIL
    assert checked.metrics["columns"]["flow"]["fail_count"] == 4


def test_limits_on_a_column_without_readings_are_not_evaluated(tmp_path: Path) -> None:
    rows = [[minute(i), "a", -999, 20.0 + i] for i in range(10)]  # -999: missing, every row
    header = ["timestamp", "device_id", "rel_humidity", "temp_c"]
    result = run_check(plan_range_check, write_csv(tmp_path / "empty_rh.csv", header, rows))
    assert result.status is Status.SKIPPED
    assert result.summary == (
        "not evaluated: the columns with limits (rel_humidity) have no readings; no limits for "
        "temp_c (set range_check.limits)"
    )
    assert result.metrics["columns"]["rel_humidity"]["checked_values"] == 0


def test_no_value_column_is_not_evaluated(tmp_path: Path) -> None:
    rows = [[minute(i), "a", "on"] for i in range(10)]
    path = write_csv(tmp_path / "text.csv", ["timestamp", "device_id", "mode"], rows)
    result = run_check(plan_range_check, path)
    assert result.status is Status.SKIPPED
    assert result.summary.startswith("not evaluated: no numeric value column")
