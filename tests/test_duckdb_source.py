"""A DuckDB table as input, `dq-agent inspect duckdb:FILE.db:TABLE`: opened read-only, handed
over as Arrow to the Polars path, with the CLI's exit codes, and a history key and fingerprint
of its own."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from dq_agent.cli import app
from dq_agent.errors import InputError
from dq_agent.history import HistoryStore
from dq_agent.history.fingerprint import fingerprint_of, source_key
from dq_agent.loading.duckdb_source import parse_source, read_table

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "sensors.parquet"
ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
AS_OF = "2024-03-05T00:00:00Z"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=ENV, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def plant_db(tmp_path: Path) -> Path:
    """The sample data as a DuckDB table `readings`, as `arrivals` with the sequence the rows
    arrived in (`seq`), and a table in another schema."""
    path = tmp_path / "plant.db"
    with duckdb.connect(str(path)) as con:
        con.sql(f"create table readings as select * from read_parquet('{SAMPLE}')")
        con.sql(
            "create table arrivals as select row_number() over () - 1 as seq, * "
            f"from read_parquet('{SAMPLE}')"
        )
        con.sql("create schema archive")
        con.sql("create table archive.old as select * from readings limit 10")
    return path


def _json(*args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run("inspect", *args, "--no-agent", "--format", "json", "--as-of", AS_OF)
    return code, json.loads(out) if out.strip() else {}, err


# What a file has and a table cannot: the keys that differ, each checked on its own below.
FILE_ONLY = {
    "delay_check": {"out_of_order_rows", "out_of_order_basis"},
    "structure_check": {"has_bom", "load_notes"},
}


def test_a_table_gives_the_files_metrics_but_for_file_only_facts(plant_db: Path) -> None:
    code, table, err = _json(f"duckdb:{plant_db}:readings", "--no-history")
    assert code == 0, err
    _, from_file, _ = _json(str(SAMPLE), "--no-history")
    assert list(table["checks"]) == list(from_file["checks"])
    for tool, check in from_file["checks"].items():
        skip = FILE_ONLY.get(tool, set())
        got = table["checks"][tool]["metrics"]
        assert {k: v for k, v in got.items() if k not in skip} == {
            k: v for k, v in check["metrics"].items() if k not in skip
        }, tool
    assert table["verdict"] == from_file["verdict"]
    delays = table["checks"]["delay_check"]["metrics"]
    assert (delays["out_of_order_rows"], delays["out_of_order_basis"]) == (None, "not evaluated")
    structure = table["checks"]["structure_check"]["metrics"]
    assert structure["has_bom"] is None
    assert "not_evaluated" in structure["load_notes"]
    dataset = table["dataset"]
    assert (dataset["format"], dataset["files"]) == ("duckdb", 0)
    assert dataset["path"] == f"duckdb:{plant_db}:readings"
    assert dataset["rows"] == from_file["dataset"]["rows"] == 11061


def test_the_order_column_from_the_config_judges_order(plant_db: Path, tmp_path: Path) -> None:
    config = tmp_path / "dq.yaml"
    config.write_text("columns:\n  order_by: seq\n", encoding="utf-8")
    code, report, err = _json(
        f"duckdb:{plant_db}:arrivals", "--no-history", "--config", str(config)
    )
    assert code == 0, err
    delays = report["checks"]["delay_check"]["metrics"]
    assert (delays["out_of_order_rows"], delays["out_of_order_basis"]) == (4, "column seq")
    assert "seq" not in report["dataset"]["roles"]["values"]
    # The option says the same as the config key.
    code, report, err = _json(f"duckdb:{plant_db}:arrivals", "--no-history", "--order-by", "seq")
    assert code == 0, err
    assert report["checks"]["delay_check"]["metrics"]["out_of_order_rows"] == 4
    code, _, err = run("inspect", f"duckdb:{plant_db}:arrivals", "--no-agent", "--order-by", "nope")
    assert code == 2
    assert "columns.order_by names column 'nope'" in err and "--order-by" in err


def test_exit_codes_follow_the_verdict(plant_db: Path) -> None:
    source = f"duckdb:{plant_db}:readings"
    assert run("inspect", source, "--no-agent", "--no-history", "--quiet")[0] == 0
    assert run("inspect", source, "--no-agent", "--no-history", "--fail-on", "warn")[0] == 1


def test_a_schema_qualified_table(plant_db: Path) -> None:
    code, report, err = _json(f"duckdb:{plant_db}:archive.old", "--no-history")
    assert code in (0, 1), err
    assert report["dataset"]["rows"] == 10


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("duckdb:{db}:nope", "has no table 'nope'; tables: archive.old, arrivals, readings"),
        ("duckdb:{missing}:readings", "no such DuckDB database"),
        ("duckdb:{db}", "does not name a DuckDB table: write duckdb:FILE.db:TABLE"),
        ("duckdb:{db}:", "does not name a DuckDB table"),
        ("duckdb:{not_db}:readings", "cannot open"),
    ],
)
def test_a_missing_table_or_file_is_an_input_error(
    plant_db: Path, tmp_path: Path, source: str, message: str
) -> None:
    not_db = tmp_path / "notes.db"
    not_db.write_text("not a database", encoding="utf-8")
    named = source.format(db=plant_db, missing=tmp_path / "gone.db", not_db=not_db)
    code, out, err = run("inspect", named, "--no-agent", "--no-history")
    assert code == 3
    assert message in " ".join(err.split())
    assert "Traceback" not in out + err


def test_the_database_is_opened_read_only_and_left_as_it_was(plant_db: Path) -> None:
    before = hashlib.sha256(plant_db.read_bytes()).hexdigest()
    frame = read_table(f"duckdb:{plant_db}:readings")
    assert frame.kind == "duckdb"
    assert hashlib.sha256(plant_db.read_bytes()).hexdigest() == before
    assert not plant_db.with_name(plant_db.name + ".wal").exists()
    # A second process may hold it open for reading meanwhile.
    with duckdb.connect(str(plant_db), read_only=True):
        assert read_table(f"duckdb:{plant_db}:readings").frame.collect().height == 11061


def test_the_report_may_not_overwrite_the_database(plant_db: Path) -> None:
    code, _, err = run(
        "inspect", f"duckdb:{plant_db}:readings", "--no-agent", "--no-history", "-o", str(plant_db)
    )
    assert code == 2
    assert "is the input file" in err


def test_without_duckdb_installed_the_message_says_how_to_get_it(
    plant_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # `import duckdb` raises ImportError
    with pytest.raises(InputError, match=r"pip install 'dq-agent\[duckdb\]'"):
        read_table(f"duckdb:{plant_db}:readings")


def test_history_keys_the_table_by_its_databases_absolute_path(
    plant_db: Path, isolated_user_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(plant_db.parent)
    assert run("inspect", "duckdb:plant.db:readings", "--no-agent", "--quiet")[0] == 0
    monkeypatch.chdir(isolated_user_state)
    assert run("inspect", f"duckdb:{plant_db}:readings", "--no-agent", "--quiet")[0] == 0
    with HistoryStore.open(isolated_user_state / "dq-agent" / "history.sqlite") as store:
        runs = store.recent_runs(dataset=f"duckdb:{plant_db}:readings")
    assert len(runs) == 2
    assert {run.dataset_key for run in runs} == {f"duckdb:{plant_db}:readings"}
    fingerprint = runs[0].fingerprint
    assert fingerprint is not None
    assert (fingerprint.files, fingerprint.size_bytes) == (1, plant_db.stat().st_size)
    # `history` finds them by the source as written in another directory.
    monkeypatch.chdir(plant_db.parent)
    code, out, _ = run("history", "duckdb:plant.db:readings", "--format", "json")
    assert code == 0 and json.loads(out)["count"] == 2


def test_source_names_and_fingerprints_without_duckdb(tmp_path: Path) -> None:
    source = parse_source("duckdb:data/plant.db:main.readings")
    assert (source.database, source.table) == (Path("data/plant.db"), "main.readings")
    # The last colon separates the table.
    assert parse_source("duckdb:a:b.db:t").database == Path("a:b.db")
    assert source_key("duckdb:plant.db:readings") == f"duckdb:{Path.cwd() / 'plant.db'}:readings"
    gone = fingerprint_of(
        {"path": f"duckdb:{tmp_path / 'gone.db'}:t", "rows": 3, "format": "duckdb"}
    )
    assert (gone.files, gone.size_bytes, gone.rows) == (0, None, 3)
    # A frame named like a file is not fingerprinted by that file.
    file = tmp_path / "x.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(file)
    assert fingerprint_of({"path": str(file), "format": "polars"}).files == 0
    assert fingerprint_of({"path": str(file), "format": "parquet"}).files == 1


def test_one_table_has_one_name_whatever_its_spelling() -> None:
    from dq_agent.loading.duckdb_source import parse_source

    names = {
        parse_source(f"duckdb:plant.db:{table}").name
        for table in ("readings", '"readings"', "main.readings", 'main."readings"')
    }
    assert len(names) == 1
    assert parse_source('duckdb:plant.db:"My Table"').name.endswith(":My Table")
    assert parse_source("duckdb:plant.db:staging.readings").name.endswith(":staging.readings")
