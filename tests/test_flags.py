"""--flags: a QARTOD flag per reading and value column, with the check that set it."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from dq_agent.cli import app
from tests.fixtures_checks import minute, write_csv


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
