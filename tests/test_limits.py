"""The memory limit: sizes, the estimate, the refusal, and the estimate against real peak RSS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from dq_agent.cli import app
from dq_agent.errors import ConfigError, InputError
from dq_agent.limits import (
    CSV_PEAK_FACTOR,
    DEFAULT_BUDGET_SHARE,
    PARQUET_PEAK_FACTOR,
    PROGRAM_BYTES,
    OverBudget,
    check_memory_budget,
    estimate_peak_bytes,
    format_size,
    machine_memory_bytes,
    memory_budget,
    over_budget,
    parquet_data_bytes,
    parse_size,
)
from tests.conftest import clean_frame

ROOT = Path(__file__).resolve().parents[1]
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2G", 2 * 2**30),
        ("512M", 512 * 2**20),
        ("1.5GB", 3 * 2**29),
        ("64MiB", 64 * 2**20),
        (" 2 g ", 2 * 2**30),
        ("10k", 10 * 2**10),
        ("1T", 2**40),
        ("1000000", 1_000_000),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "-1G", "2X", "1.2.3G", "nan", "1e9", "two gigs"])
def test_parse_size_rejects_what_is_not_a_size(text: str) -> None:
    with pytest.raises(ConfigError, match="not a memory size"):
        parse_size(text)


@pytest.mark.parametrize("text", ["0", "0G", "0.0000001K"])
def test_parse_size_rejects_zero(text: str) -> None:
    with pytest.raises(ConfigError, match="more than 0"):
        parse_size(text)


def test_format_size() -> None:
    assert format_size(3.2 * 2**30) == "3.2 GB"
    assert format_size(512 * 2**20) == "512 MB"
    assert format_size(2**30) == "1.0 GB"
    assert format_size(10) == "10 B"


@pytest.fixture
def parquet_file(tmp_path: Path) -> Path:
    path = tmp_path / "sensors.parquet"
    clean_frame(devices=4, rows_per_device=500).write_parquet(path, row_group_size=300)
    return path


def test_parquet_size_is_the_sum_of_row_groups_from_the_footer(parquet_file: Path) -> None:
    metadata = pq.ParquetFile(parquet_file).metadata
    assert metadata.num_row_groups == 7
    expected = sum(metadata.row_group(i).total_byte_size for i in range(7))
    assert parquet_data_bytes(parquet_file) == expected > 0


def test_estimate_rule_for_parquet_and_csv(tmp_path: Path, parquet_file: Path) -> None:
    data = parquet_data_bytes(parquet_file)
    peak, rule = estimate_peak_bytes([parquet_file, parquet_file], "parquet")
    assert peak == int(PROGRAM_BYTES + PARQUET_PEAK_FACTOR * 2 * data)
    assert "uncompressed size from the Parquet metadata" in rule
    csv = tmp_path / "s.csv"
    clean_frame().write_csv(csv)
    peak, rule = estimate_peak_bytes([csv], "csv")
    assert peak == int(PROGRAM_BYTES + CSV_PEAK_FACTOR * csv.stat().st_size)
    assert "CSV file size" in rule


def test_refused_just_below_the_estimate_and_allowed_at_it(parquet_file: Path) -> None:
    peak, _ = estimate_peak_bytes([parquet_file], "parquet")
    check_memory_budget([parquet_file], "parquet", peak)
    with pytest.raises(InputError) as caught:
        check_memory_budget([parquet_file], "parquet", peak - 1)
    message = caught.value.message
    assert message.startswith("sensors.parquet needs about ")
    assert "uncompressed size from the Parquet metadata" in message
    assert "raise --max-memory or inspect a smaller slice" in message
    assert caught.value.exit_code == 3


def test_several_files_are_summed_and_named_by_count(tmp_path: Path) -> None:
    files = []
    for i in range(3):
        path = tmp_path / f"part-{i}.csv"
        path.write_text("a,b\n" + "1,2\n" * 1000)
        files.append(path)
    with pytest.raises(InputError, match=r"^3 files needs about"):
        check_memory_budget(files, "csv", PROGRAM_BYTES)


def test_corrupt_parquet_footer_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1" + b"\x00" * 32 + b"PAR1")
    with pytest.raises(InputError, match=r"cannot read .* as Parquet"):
        parquet_data_bytes(path)


def test_cli_refuses_csv_over_the_limit_up_front_with_exit_3(
    parquet_file: Path, tmp_path: Path
) -> None:
    csv = tmp_path / "sensors.csv"
    pl.read_parquet(parquet_file).write_csv(csv)
    runner = CliRunner()
    env = {**ENV, "DQ_AGENT_MAX_MEMORY": "100M"}
    # Asked to run in memory (otherwise CSV over the budget is streamed, `test_out_of_core_csv`).
    result = runner.invoke(app, ["inspect", str(csv), "--no-agent", "--engine", "polars"], env=env)
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.startswith("dq-agent: error: sensors.csv needs about ")
    assert "the limit is 100 MB" in result.stderr
    env["DQ_AGENT_MAX_MEMORY"] = "4G"
    result = runner.invoke(app, ["inspect", str(csv), "--no-agent", "-f", "json"], env=env)
    assert result.exit_code in (0, 1)
    assert json.loads(result.stdout)["dataset"]["rows"] == 2000


def test_the_budget_is_the_limit_set_else_a_share_of_the_machine(parquet_file: Path) -> None:
    assert memory_budget("2G") == (2 * 2**30, "the memory limit of 2.0 GB (--max-memory)")
    machine = machine_memory_bytes()
    assert machine is not None and machine > 0
    budget = memory_budget(None)
    assert budget is not None
    assert budget[0] == int(DEFAULT_BUDGET_SHARE * machine)
    assert budget[1].endswith("80% of this machine's memory (--max-memory)")
    peak, rule = estimate_peak_bytes([parquet_file], "parquet")
    assert over_budget([parquet_file], "parquet", (peak, "x")) is None
    over = over_budget([parquet_file], "parquet", (peak - 1, "the limit"))
    assert over == OverBudget(peak, peak - 1, rule, "the limit")
    assert over.reason() == f"the data needs about {format_size(peak)} in memory ({rule}), " + (
        "more than the limit"
    )


# A child's peak RSS (ru_maxrss) starts at its parent's size when forked, and a test process
# grows to hundreds of MB: the measured run is forked from this small launcher instead, which
# prints its exit code and its own peak RSS (wait4: this one child's usage) in KB.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


@pytest.mark.slow
def test_estimate_covers_the_measured_peak_rss(tmp_path: Path) -> None:
    """The estimate bounds the real peak RSS of a run in a fresh process; this fails when the
    checks outgrow the factors in limits.py (then measure again, as its docstring says)."""
    rows, devices = 400_000, 20
    path = tmp_path / "big.parquet"
    index = pl.int_range(rows)
    pl.select(
        timestamp=pl.datetime(2024, 1, 1, time_zone="UTC") + pl.duration(minutes=index // devices),
        device_id=pl.format("dev-{}", index % devices),
        temperature=(index % 97).cast(pl.Float64) / 10,
        pressure=1000 + (index % 13).cast(pl.Float64),
    ).write_parquet(path)
    report, errors = tmp_path / "report.json", tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "dq_agent.cli", "inspect", str(path), "--no-agent", "-q"]
    with errors.open("wb") as stderr:
        launched = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, *command, "-f", "json", "-o", str(report)],
            cwd=ROOT,
            env=ENV,
            stderr=stderr,
            stdout=subprocess.PIPE,
            check=True,
            text=True,
        )
    code, peak_kb = (int(part) for part in launched.stdout.split())
    assert code in (0, 1), errors.read_text()
    assert json.loads(report.read_text())["dataset"]["rows"] == rows
    peak = peak_kb * 1024
    estimate, _ = estimate_peak_bytes([path], "parquet")
    assert peak <= estimate, f"measured {format_size(peak)}, estimated {format_size(estimate)}"
