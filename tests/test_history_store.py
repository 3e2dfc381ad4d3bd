"""History store: paths, fingerprint, records, migrations, concurrency and crash safety."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from dq_agent.config import HistoryConfig
from dq_agent.history.fingerprint import data_files, fingerprint_of
from dq_agent.history.migrations import DATABASE_VERSION
from dq_agent.history.paths import history_path
from dq_agent.history.records import RunRecord, dataset_key
from dq_agent.history.store import HistoryError, HistoryStore
from dq_agent.outcome import AgentInfo, Audit, DatasetInfo, Inspection
from dq_agent.result import CheckResult, Source, Status, metric_keys

TOOLS = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]

# Builds an Inspection inside a child process; shared by the concurrency and kill tests.
CHILD_PRELUDE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from dq_agent.history.store import HistoryStore
    from dq_agent.outcome import AgentInfo, Audit, DatasetInfo, Inspection
    from dq_agent.result import CheckResult, Source, Status

    TOOLS = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]

    def make(worker, i, width):
        columns = {f"c{j}": {"missing_rate": 0.001 * j, "missing": j} for j in range(width)}
        checks = {
            tool: CheckResult(tool, Status.PASS, "ok", {"columns": columns}, source=Source.AGENT)
            for tool in TOOLS
        }
        return Inspection(
            dataset=DatasetInfo("data.csv", "csv", 1, 100, ["c0"], {}),
            checks=checks,
            audit=Audit(TOOLS, called_tools=list(TOOLS)),
            agent=AgentInfo(status="ok", model=f"worker-{worker}", mode="native"),
            started_at=f"{worker}-{i}",
        )
    """
)


def make_inspection(
    path: str = "data.csv",
    *,
    rows: int = 1000,
    called: list[str] | None = None,
    backfilled: list[str] | None = None,
    metrics: dict[str, dict[str, Any]] | None = None,
    statuses: dict[str, Status] | None = None,
    agent: AgentInfo | None = None,
    timings: dict[str, float] | None = None,
    started_at: str = "2024-05-01T02:00:00+00:00",
) -> Inspection:
    backfilled = backfilled or []
    called = called if called is not None else [t for t in TOOLS if t not in backfilled]
    checks = {
        tool: CheckResult(
            tool=tool,
            status=(statuses or {}).get(tool, Status.PASS),
            summary=f"{tool} summary",
            metrics=(metrics or {}).get(tool, {}),
            source=Source.BACKFILLED if tool in backfilled else Source.AGENT,
            duration_seconds=0.25,
        )
        for tool in TOOLS
    }
    return Inspection(
        dataset=DatasetInfo(
            path, "csv", 1, rows, ["timestamp", "pressure"], {"timestamp": "timestamp"}
        ),
        checks=checks,
        audit=Audit(TOOLS, called_tools=called, fallback_executed=backfilled),
        agent=agent or AgentInfo(status="ok", model="qwen2.5:7b", mode="native", sentinel_rounds=1),
        timings=timings if timings is not None else {"total": 12.5},
        started_at=started_at,
    )


# -- default path ---------------------------------------------------------------------------


def test_history_path_prefers_config_then_dq_agent_home_then_xdg_then_home(tmp_path: Path) -> None:
    env = {
        "DQ_AGENT_HOME": str(tmp_path / "dq"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "HOME": str(tmp_path / "home"),
    }
    configured = HistoryConfig(path=str(tmp_path / "mine.sqlite"))
    assert history_path(configured, env) == tmp_path / "mine.sqlite"
    assert history_path(HistoryConfig(), env) == tmp_path / "dq" / "history.sqlite"
    del env["DQ_AGENT_HOME"]
    assert history_path(HistoryConfig(), env) == tmp_path / "xdg" / "dq-agent" / "history.sqlite"
    env["XDG_DATA_HOME"] = "relative/dir"  # invalid per the XDG spec: ignored
    expected_home = tmp_path / "home" / ".local" / "share" / "dq-agent" / "history.sqlite"
    assert history_path(HistoryConfig(), env) == expected_home
    env["XDG_DATA_HOME"] = ""
    assert history_path(HistoryConfig(), env) == expected_home


def test_history_path_expands_the_user_directory() -> None:
    path = history_path(HistoryConfig(path="~/runs.sqlite"), {})
    assert path == Path.home() / "runs.sqlite"


# -- fingerprint and records ----------------------------------------------------------------


def test_fingerprint_sums_sizes_over_a_directory_and_a_glob(tmp_path: Path) -> None:
    folder = tmp_path / "day"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.parquet").write_bytes(b"x" * 100)
    (folder / "sub" / "b.parquet").write_bytes(b"y" * 50)
    (folder / "notes.csv").write_bytes(b"z" * 7)  # a directory with Parquet files reads only those
    os.utime(folder / "a.parquet", (1_700_000_000, 1_700_000_000))
    os.utime(folder / "sub" / "b.parquet", (1_700_000_100, 1_700_000_100))

    fp = fingerprint_of({"path": str(folder), "rows": 10, "columns": ["a", "b"]})
    assert (fp.files, fp.size_bytes, fp.rows) == (2, 150, 10)
    assert fp.mtime == "2023-11-14T22:15:00+00:00"

    globbed = fingerprint_of(
        {"path": str(folder / "**" / "*.parquet"), "rows": 10, "columns": ["a", "b"]}
    )
    assert (globbed.files, globbed.size_bytes) == (2, 150)
    assert globbed.schema == fp.schema


def test_fingerprint_counts_gzipped_csv_files_in_a_directory(tmp_path: Path) -> None:
    """A directory of `.csv.gz` deliveries is read by the loader, so the fingerprint sees
    those files too: a new delivery changes it."""
    folder = tmp_path / "gz"
    folder.mkdir()
    (folder / "day_1.csv.gz").write_bytes(b"x" * 40)
    (folder / "day_2.csv.gz").write_bytes(b"y" * 60)
    (folder / "readme.md").write_bytes(b"z" * 9)
    fp = fingerprint_of({"path": str(folder), "rows": 4, "columns": ["a"]})
    assert (fp.files, fp.size_bytes) == (2, 100)
    (folder / "day_3.csv.gz").write_bytes(b"w" * 5)
    later = fingerprint_of({"path": str(folder), "rows": 4, "columns": ["a"]})
    assert (later.files, later.size_bytes) == (3, 105)
    assert later.digest != fp.digest
    assert data_files("-") == []


def test_fingerprint_changes_with_schema_rows_and_content(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    data.write_text("a,b\n1,2\n")
    base = {"path": str(data), "rows": 1, "columns": ["a", "b"]}
    first = fingerprint_of(base)
    assert fingerprint_of(base) == first
    assert fingerprint_of({**base, "columns": ["a", "c"]}).schema != first.schema
    assert fingerprint_of({**base, "dtypes": {"a": "Int64", "b": "String"}}).schema != first.schema
    assert fingerprint_of({**base, "rows": 2}).digest != first.digest
    data.write_text("a,b\n1,2\n3,4\n")
    assert fingerprint_of(base).digest != first.digest


def test_fingerprint_tolerates_a_path_that_is_gone(tmp_path: Path) -> None:
    fp = fingerprint_of({"path": str(tmp_path / "gone.csv"), "rows": 5, "columns": ["a"]})
    assert (fp.files, fp.size_bytes, fp.mtime, fp.rows) == (0, None, None, 5)
    assert data_files(str(tmp_path / "nothing-*.csv")) == []
    assert fingerprint_of({}).files == 0


def test_dataset_key_is_the_name_else_the_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert dataset_key("data.csv") == str(tmp_path / "data.csv")
    assert dataset_key("./data.csv") == str(tmp_path / "data.csv")
    assert dataset_key("data.csv", "plant-7") == "plant-7"


def test_record_from_report_tolerates_missing_sections() -> None:
    record = RunRecord.from_report({"verdict": "warn"}, 1)
    assert (record.verdict, record.exit_code, record.expected_tools, record.checks) == (
        "warn",
        1,
        [],
        {},
    )
    assert record.agent_ran is False
    assert record.duration_seconds is None


def test_duration_is_the_recorded_total_else_the_sum_of_stages() -> None:
    timings = {"load_seconds": 1.0, "checks_seconds": 2.0, "total_seconds": 3.5}
    assert (
        RunRecord.from_report(make_inspection(timings=timings).to_dict(), 0).duration_seconds == 3.5
    )
    stages = {"load": 1.0, "checks": 2.0, "agent": 4.5}
    assert (
        RunRecord.from_report(make_inspection(timings=stages).to_dict(), 0).duration_seconds == 7.5
    )


# -- store ----------------------------------------------------------------------------------


def test_open_creates_directory_and_file_with_current_schema_in_wal(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "history.sqlite"
    with HistoryStore.open(path) as store:
        assert store.schema_version == DATABASE_VERSION == 4
        assert store.integrity_check() == "ok"
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "checks"} <= tables
    connection.close()


def test_save_run_round_trips_every_recorded_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    content = b"timestamp,pressure\n2024-01-01T00:00:00,1.0\n"
    Path("data.csv").write_bytes(content)
    narrative = {"repair_attempted": True, "unsupported_names": ["column1"]}
    agent = AgentInfo(
        status="ok",
        model="qwen2.5:1.5b",
        mode="text",
        steps=9,
        sentinel_rounds=2,
        prompt_tokens=1500,
        completion_tokens=300,
        narrative_checks=narrative,
        sentinel_invocations=[
            {"round": 1, "by": "loop", "missing": ["delay_check"]},
            {"round": 2, "by": "model", "missing": []},
        ],
    )
    inspection = make_inspection(
        "data.csv",
        backfilled=["structure_check"],
        metrics={"null_check": {"columns": {"pressure": {"missing_rate": 0.048}}}},
        statuses={"null_check": Status.WARN},
        agent=agent,
        timings={"load": 0.5, "total": 9.75},
    )
    inspection.audit.called_after_push = ["delay_check"]
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run_id = store.save_run(inspection, exit_code=1)
        (run,) = store.recent_runs()

    assert run.id == run_id
    assert (run.dataset_path, run.dataset_key) == ("data.csv", str(tmp_path / "data.csv"))
    assert (run.rows, run.verdict, run.exit_code) == (1000, "warn", 1)
    assert (run.model, run.mode, run.agent_status) == ("qwen2.5:1.5b", "text", "ok")
    assert run.expected_tools == TOOLS
    assert run.called_tools == TOOLS[:4]
    assert run.fallback_executed == ["structure_check"]
    assert (run.sentinel_rounds, run.steps, run.prompt_tokens, run.completion_tokens) == (
        2,
        9,
        1500,
        300,
    )
    assert run.duration_seconds == 9.75
    assert run.timings == {"load": 0.5, "total": 9.75}
    assert run.narrative_checks == narrative
    # A model that checks itself and one that is pushed are told apart in the history.
    assert run.called_after_push == ["delay_check"]
    assert run.sentinel_invocations == [
        {"round": 1, "by": "loop", "missing": ["delay_check"]},
        {"round": 2, "by": "model", "missing": []},
    ]
    assert run.started_at == "2024-05-01T02:00:00+00:00"
    assert list(run.checks) == TOOLS
    # A result holds every documented metric key (null when not evaluated).
    assert run.checks["null_check"].metrics == {
        **dict.fromkeys(metric_keys("null_check")),
        "columns": {"pressure": {"missing_rate": 0.048}},
    }
    assert (run.checks["null_check"].status, run.checks["structure_check"].source) == (
        "warn",
        "backfilled",
    )
    assert run.fingerprint is not None
    assert (run.fingerprint.files, run.fingerprint.size_bytes) == (1, len(content))
    assert run.to_dict()["audit"] == {
        "expected_tools": TOOLS,
        "called_tools": TOOLS[:4],
        "fallback_executed": ["structure_check"],
        "called_after_push": ["delay_check"],
    }


def test_recent_runs_newest_first_with_limit_and_dataset_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        ids = [
            store.save_run(make_inspection(p, rows=n), 0)
            for n, p in enumerate(["a.csv", "b.csv", "a.csv"])
        ]
        named = store.save_run(make_inspection("elsewhere/a.csv"), 0, dataset_name="plant-7")

        assert [r.id for r in store.recent_runs()] == [named, *reversed(ids)]
        assert [r.id for r in store.recent_runs(limit=2)] == [named, ids[2]]
        assert [r.rows for r in store.recent_runs(dataset="a.csv")] == [2, 0]
        assert [r.rows for r in store.recent_runs(dataset=str(tmp_path / "a.csv"))] == [2, 0]
        assert [r.id for r in store.recent_runs(dataset="plant-7")] == [named]
        assert store.recent_runs(dataset="missing.csv") == []
        assert store.recent_runs(limit=0) == []


def test_migrates_a_version_1_database_written_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript(
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT, recorded_at TEXT NOT NULL, started_at TEXT,
            as_of TEXT, dataset_path TEXT NOT NULL, rows INTEGER, model TEXT, mode TEXT,
            agent_status TEXT, verdict TEXT NOT NULL, exit_code INTEGER NOT NULL,
            expected_tools TEXT NOT NULL DEFAULT '[]', called_tools TEXT NOT NULL DEFAULT '[]',
            fallback_executed TEXT NOT NULL DEFAULT '[]',
            sentinel_rounds INTEGER NOT NULL DEFAULT 0,
            steps INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0, duration_seconds REAL,
            timings TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE checks (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, tool TEXT NOT NULL,
            status TEXT NOT NULL, source TEXT NOT NULL, summary TEXT NOT NULL DEFAULT '',
            duration_seconds REAL, metrics TEXT NOT NULL DEFAULT '{}', error TEXT,
            PRIMARY KEY (run_id, tool)
        );
        INSERT INTO runs (recorded_at, dataset_path, rows, model, mode, agent_status,
                          verdict, exit_code, expected_tools, called_tools, fallback_executed,
                          sentinel_rounds)
        VALUES ('2024-04-30T02:00:00+00:00', '/data/plant.csv', 500, 'qwen2.5:7b', 'native', 'ok',
                'pass', 0, '["null_check","structure_check"]', '["null_check"]',
                '["structure_check"]', 1);
        INSERT INTO checks (run_id, tool, status, source, metrics)
        VALUES (1, 'null_check', 'pass', 'agent', '{"columns": {"p": {"missing_rate": 0.001}}}');
        PRAGMA user_version = 1;
        """
    )
    connection.close()

    with HistoryStore.open(path) as store:
        assert store.schema_version == DATABASE_VERSION
        (old,) = store.recent_runs()
        assert (old.id, old.dataset_key, old.fingerprint, old.narrative_checks) == (
            1,
            "/data/plant.csv",
            None,
            None,
        )
        assert old.fallback_executed == ["structure_check"]
        # Recorded before the history kept excused readings: unknown, not 0.
        assert old.excused_readings is None
        assert old.checks["null_check"].metrics == {"columns": {"p": {"missing_rate": 0.001}}}
        assert [r.id for r in store.baseline_runs("/data/plant.csv", 7)] == [1]
        new_id = store.save_run(make_inspection("/data/plant.csv"), 0)
        assert new_id == 2
        assert store.recent_runs()[0].fingerprint is not None
    with HistoryStore.open(path) as store:  # reopening an up-to-date file changes nothing
        assert store.schema_version == DATABASE_VERSION
        assert len(store.recent_runs()) == 2


def test_refuses_a_database_from_a_newer_dq_agent(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite"
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {DATABASE_VERSION + 1}")
    connection.close()
    with pytest.raises(HistoryError, match="newer than this dq-agent"):
        HistoryStore.open(path)


def test_a_directory_in_place_of_the_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="cannot open the history database"):
        HistoryStore.open(tmp_path)


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"this is not sqlite at all, just some text" * 100)
    with pytest.raises(HistoryError, match="unusable"):
        HistoryStore.open(path)


def test_a_writer_that_waits_too_long_gets_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    HistoryStore.open(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another run holding the write lock
    try:
        with HistoryStore.open(path, busy_timeout_seconds=0.05) as store:
            with pytest.raises(HistoryError, match="stayed locked by another dq-agent run"):
                store.save_run(make_inspection(), 0)
            assert store.recent_runs() == []  # readers are not blocked by a writer (WAL)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.slow
def test_concurrent_writers_all_land(tmp_path: Path) -> None:
    """Several processes open the same fresh file at once (racing to create and migrate it)
    and each saves runs, opening the store per run like separate cron jobs."""
    db, go = tmp_path / "h.sqlite", tmp_path / "go"
    script = tmp_path / "writer.py"
    script.write_text(
        CHILD_PRELUDE
        + textwrap.dedent(
            """
            db, go = sys.argv[1], Path(sys.argv[2])
            worker, count = int(sys.argv[3]), int(sys.argv[4])
            while not go.exists():
                time.sleep(0.001)
            for i in range(count):
                with HistoryStore.open(db) as store:
                    store.save_run(make(worker, i, 20), 0)
            """
        )
    )
    workers, per_worker = 8, 15
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), str(db), str(go), str(w), str(per_worker)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    time.sleep(0.3)  # let every interpreter start and wait at the barrier
    go.touch()
    outcomes = [(p.wait(timeout=60), p.stderr.read() if p.stderr else "") for p in processes]
    for process in processes:
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    assert [code for code, _ in outcomes] == [0] * workers, [err for _, err in outcomes]
    assert not any("locked" in err for _, err in outcomes)
    with HistoryStore.open(db) as store:
        runs = store.recent_runs()
        assert len(runs) == workers * per_worker
        assert {(r.model, r.started_at) for r in runs} == {
            (f"worker-{w}", f"{w}-{i}") for w in range(workers) for i in range(per_worker)
        }
        assert all(list(r.checks) == TOOLS for r in runs)
        assert store.integrity_check() == "ok"


@pytest.mark.slow
def test_a_writer_killed_mid_write_leaves_only_whole_runs(tmp_path: Path) -> None:
    db, ready = tmp_path / "h.sqlite", tmp_path / "ready"
    script = tmp_path / "writer.py"
    script.write_text(
        CHILD_PRELUDE
        + textwrap.dedent(
            """
            db, ready = sys.argv[1], Path(sys.argv[2])
            with HistoryStore.open(db) as store:
                i = 0
                while True:
                    # Wide metrics make each transaction long enough for a kill to land inside.
                    store.save_run(make(0, i, 400), 0)
                    i += 1
                    if i == 10:
                        ready.touch()
            """
        )
    )
    # Each kill lands mid-transaction often but not always: several rounds make it near certain
    # that a store without transactions would leave a partial run behind.
    for round_number in range(6):
        ready.unlink(missing_ok=True)
        process = subprocess.Popen([sys.executable, str(script), str(db), str(ready)])
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert process.poll() is None, "writer died on its own"
            assert time.monotonic() < deadline, "writer never got going"
            time.sleep(0.005)
        time.sleep(0.013 * (round_number + 1))
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    with HistoryStore.open(db) as store:
        assert store.integrity_check() == "ok"
        runs = store.recent_runs()
        assert len(runs) >= 60
        assert all(list(r.checks) == TOOLS for r in runs)
        assert all(len(r.checks["null_check"].metrics["columns"]) == 400 for r in runs)
    connection = sqlite3.connect(db)
    orphans = connection.execute(
        "SELECT COUNT(*) FROM checks WHERE run_id NOT IN (SELECT id FROM runs)"
    )
    assert orphans.fetchone()[0] == 0
    connection.close()


def test_history_json_of_a_run_is_plain_json(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.save_run(make_inspection(), 0)
        (run,) = store.recent_runs()
    assert json.loads(json.dumps(run.to_dict()))["verdict"] == "pass"


def test_the_readings_maintenance_excused_are_recorded_once_each(tmp_path: Path) -> None:
    """Two overlapping windows: 27 and 5 readings, the 5 also in the first: 27 excused."""
    inspection = make_inspection("/data/plant.csv")
    window = {"device": None, "start": "2024-01-01T00:35:00+00:00", "reason": None}
    inspection.maintenance = [
        {
            **window,
            "end": "2024-01-01T00:55:00+00:00",
            "excused_readings": 27,
            "devices": 2,
            "in_earlier_windows": 0,
        },
        {
            **window,
            "device": "a",
            "end": "2024-01-01T00:59:00+00:00",
            "excused_readings": 5,
            "devices": 1,
            "in_earlier_windows": 5,
        },
    ]
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.save_run(inspection, 0)
        store.save_run(make_inspection("/data/plant.csv"), 0)
        without, with_windows = store.recent_runs()
    assert (with_windows.excused_readings, without.excused_readings) == (27, 0)
    assert with_windows.to_dict()["excused_readings"] == 27
    assert RunRecord.from_report({}, 0).excused_readings is None
