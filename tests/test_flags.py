"""--flags: a QARTOD flag per reading and value column, with the check that set it."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner, Result

from dq_agent.cli import app
from tests.fixtures_checks import iso_minute, minute, write_csv


def test_flags_file_has_keys_flags_and_checks(tmp_path: Path) -> None:
    rows = [[minute(i), "a", 50.0 + (i % 4) / 10] for i in range(60)]
    rows[10][2] = -5.0  # out of the 0-100% unit default: suspect, range_check
    rows[20][2] = ""  # missing: 9
    for i in range(30, 45):  # stuck for 15 readings: fail, flatline_check
        rows[i][2] = 51.0
    data = write_csv(tmp_path / "h.csv", ["timestamp", "device_id", "humidity"], rows)
    out = tmp_path / "flags.parquet"
    result = CliRunner().invoke(
        app,
        ["inspect", str(data), "--no-agent", "--no-history", "-f", "json", "--flags", str(out)],
        env={"COLUMNS": "100", "NO_COLOR": "1"},
    )
    assert result.exit_code in (0, 1), result.stderr
    flags = pl.read_parquet(out)
    assert flags.columns == ["timestamp", "device_id", "humidity_flag", "humidity_check"]
    assert flags.height == 60
    counts = dict(flags.group_by("humidity_flag").len().iter_rows())
    assert counts == {1: 60 - 1 - 1 - 15, 3: 1, 4: 15, 9: 1}
    assert flags["humidity_check"][10] == "range_check"
    assert flags["humidity_check"][30] == "flatline_check"
    assert flags["humidity_check"][20] is None and flags["humidity_flag"][20] == 9
    assert "17 flagged readings" in result.stderr


def _data(tmp_path: Path) -> Path:
    rows = [[minute(i), "a", 50.0 + (i % 4) / 10] for i in range(60)]
    return write_csv(tmp_path / "h.csv", ["timestamp", "device_id", "humidity"], rows)


def _inspect(*args: str) -> Result:
    return CliRunner().invoke(
        app,
        ["inspect", *args, "--no-agent", "--no-history", "-f", "json"],
        env={"COLUMNS": "100", "NO_COLOR": "1"},
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ("missing/flags.parquet", "cannot write {p}: folder {d}/missing does not exist"),
        ("", "cannot write {d}: it is a folder; name a file in it"),
    ],
)
def test_flags_that_cannot_be_written_are_a_usage_error_before_the_run(
    tmp_path: Path, flags: str, message: str
) -> None:
    """As `--output` into a missing folder: one line, exit 2, nothing written."""
    data = _data(tmp_path)
    target = tmp_path / flags if flags else tmp_path
    result = _inspect(str(data), "--flags", str(target))
    assert result.exit_code == 2
    expected = message.format(p=target, d=tmp_path)
    assert result.stderr == f"dq-agent: error: {expected}\n"
    report = _inspect(str(data), "-o", str(tmp_path / "missing" / "r.json"))
    assert report.exit_code == 2 and report.stderr.count("\n") == 1


def test_the_report_and_the_flags_may_not_be_one_file(tmp_path: Path) -> None:
    data = _data(tmp_path)
    same = tmp_path / "out.json"
    result = _inspect(str(data), "-o", str(same), "--flags", str(tmp_path / "." / "out.json"))
    assert result.exit_code == 2
    assert "--output and --flags both name" in result.stderr
    assert "give each its own file" in result.stderr
    assert not same.exists()


def test_the_flags_file_gets_the_mode_the_umask_gives(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        out = tmp_path / "flags.parquet"
        assert _inspect(str(_data(tmp_path)), "--flags", str(out)).exit_code == 0
        assert out.stat().st_mode & 0o777 == 0o644
        assert sorted(p.name for p in tmp_path.iterdir()) == ["flags.parquet", "h.csv"]
    finally:
        os.umask(old)


def test_excused_readings_name_maintenance_as_their_cause(tmp_path: Path) -> None:
    rows = [[minute(i), d, 50.0 + (i % 4) / 10] for d in ("a", "b") for i in range(60)]
    rows[5][2] = ""  # missing inside the window: 9, no cause
    data = write_csv(tmp_path / "h.csv", ["timestamp", "device_id", "humidity"], rows)
    config = tmp_path / "maint.yaml"
    config.write_text(
        f"maintenance:\n  - device: a\n    start: {iso_minute(0)}\n    end: {iso_minute(9)}\n",
        encoding="utf-8",
    )
    out = tmp_path / "flags.parquet"
    result = _inspect(str(data), "-c", str(config), "--flags", str(out))
    assert result.exit_code == 0, result.stderr
    flags = pl.read_parquet(out)
    by_cause = flags.group_by("humidity_flag", "humidity_check").len().sort("humidity_flag")
    # Device a's minutes 0-9: 9 excused, 1 missing.
    assert by_cause.rows() == [(1, None, 110), (2, "maintenance", 9), (9, None, 1)]
