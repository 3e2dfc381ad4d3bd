"""The run history: one SQLite file, schema migrations applied on open, one write path.

Safe when cron starts several runs at once: WAL lets readers and one writer work side by side,
a busy timeout makes writers queue instead of failing with "database is locked", and each run is
written in one short `BEGIN IMMEDIATE` transaction (the write lock is taken up front, so a
transaction never has to upgrade a read lock, which SQLite refuses without waiting). A process
killed mid-write leaves the last committed state: a run and its checks land together or not at
all.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from dq_agent.errors import HistoryError
from dq_agent.history.fingerprint import Fingerprint
from dq_agent.history.migrations import DATABASE_VERSION, MIGRATIONS
from dq_agent.history.records import CheckRecord, RunRecord, dataset_key
from dq_agent.outcome import Inspection

DEFAULT_BUSY_TIMEOUT_SECONDS = 30.0
_OPEN_RETRIES = 6


_RUN_COLUMNS = (
    "recorded_at",
    "started_at",
    "as_of",
    "dataset_path",
    "dataset_key",
    "dataset_format",
    "rows",
    "fp_files",
    "fp_size_bytes",
    "fp_mtime",
    "fp_schema",
    "fingerprint",
    "model",
    "mode",
    "agent_status",
    "verdict",
    "exit_code",
    "expected_tools",
    "called_tools",
    "fallback_executed",
    "sentinel_rounds",
    "steps",
    "prompt_tokens",
    "completion_tokens",
    "duration_seconds",
    "timings",
    "narrative_checks",
    "called_after_push",
    "sentinel_invocations",
    "excused_readings",
)
_CHECK_COLUMNS = (
    "run_id",
    "tool",
    "status",
    "source",
    "summary",
    "duration_seconds",
    "metrics",
    "error",
)


class HistoryStore:
    """An open history database. Use `HistoryStore.open(path)`, ideally as a context manager."""

    def __init__(
        self, connection: sqlite3.Connection, path: Path, busy_timeout_seconds: float
    ) -> None:
        self._connection = connection
        self.path = path
        self.busy_timeout_seconds = busy_timeout_seconds

    @classmethod
    def open(
        cls, path: Path | str, *, busy_timeout_seconds: float = DEFAULT_BUSY_TIMEOUT_SECONDS
    ) -> HistoryStore:
        """Open (creating file and directory on first use) and migrate to the current schema."""
        target = Path(path).expanduser()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(
                f"cannot create the history directory {target.parent}: {exc.strerror}"
            ) from exc
        try:
            connection = sqlite3.connect(target, timeout=busy_timeout_seconds, isolation_level=None)
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot open the history database {target}: {exc}") from exc
        store = cls(connection, target, busy_timeout_seconds)
        try:
            store._configure_with_retries()
        except sqlite3.DatabaseError as exc:
            connection.close()
            if _is_busy(exc):
                raise store._error("cannot open the history", exc) from exc
            raise HistoryError(
                f"history database {target} is unusable: {exc}; move it aside or set history.path"
            ) from exc
        except HistoryError:
            connection.close()
            raise
        return store

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return _user_version(self._connection)

    # -- writing -------------------------------------------------------------------------------

    def save_run(
        self, inspection: Inspection, exit_code: int, *, dataset_name: str | None = None
    ) -> int:
        """Record one `inspect` run and return its id.

        `dataset_name` is `config.history.dataset_name`: runs sharing it share one baseline.
        """
        record = RunRecord.from_inspection(inspection, exit_code, dataset_name=dataset_name)
        return self.save_record(record)

    def save_record(self, record: RunRecord) -> int:
        """The one write path: a run and all its checks in one short transaction."""
        # Everything that can be slow (stat, JSON) happens before the write lock is taken.
        run_values = _run_values(record)
        check_rows = [_check_values(check) for check in record.checks.values()]
        placeholders = ", ".join("?" for _ in _RUN_COLUMNS)
        try:
            with _write_transaction(self._connection):
                cursor = self._connection.execute(
                    f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}) VALUES ({placeholders})",
                    run_values,
                )
                run_id = cursor.lastrowid
                assert run_id is not None
                self._connection.executemany(
                    f"INSERT INTO checks ({', '.join(_CHECK_COLUMNS)}) VALUES "
                    f"({', '.join('?' for _ in _CHECK_COLUMNS)})",
                    [(run_id, *row) for row in check_rows],
                )
        except sqlite3.Error as exc:
            raise self._error("cannot record the run", exc) from exc
        return run_id

    # -- reading -------------------------------------------------------------------------------

    def recent_runs(self, limit: int | None = None, dataset: str | None = None) -> list[RunRecord]:
        """Runs newest first; `dataset` filters by path (as given or absolute) or dataset name."""
        if dataset is None:
            return self._select("1 = 1", (), limit)
        return self._select(
            "(dataset_key IN (?, ?) OR dataset_path = ?)",
            (dataset, dataset_key(dataset), dataset),
            limit,
        )

    def baseline_runs(
        self, key: str, limit: int, exclude_started_at: str | None = None
    ) -> list[RunRecord]:
        """The newest `limit` runs of dataset `key` whose verdict was not fail."""
        where, params = _dataset_filter(key, exclude_started_at)
        return self._select(f"{where} AND verdict != 'fail'", params, limit)

    def count_runs(self, key: str, exclude_started_at: str | None = None) -> tuple[int, int]:
        """(all runs, failed runs) recorded for dataset `key`."""
        where, params = _dataset_filter(key, exclude_started_at)
        try:
            row = self._connection.execute(
                f"SELECT COUNT(*), COALESCE(SUM(verdict = 'fail'), 0) FROM runs WHERE {where}",
                params,
            ).fetchone()
        except sqlite3.Error as exc:
            raise self._error("cannot read the history", exc) from exc
        return int(row[0]), int(row[1])

    def integrity_check(self) -> str:
        """SQLite's own verdict on the file: "ok" when sound."""
        return str(self._connection.execute("PRAGMA integrity_check").fetchone()[0])

    def _select(self, where: str, params: Sequence[Any], limit: int | None) -> list[RunRecord]:
        limit_value = -1 if limit is None else max(limit, 0)
        runs_query = f"SELECT id FROM runs WHERE {where} ORDER BY id DESC LIMIT ?"
        connection = self._connection
        try:
            # One read transaction: runs and their checks come from the same snapshot.
            with _read_transaction(connection):
                run_rows = connection.execute(
                    f"SELECT id, {', '.join(_RUN_COLUMNS)} FROM runs WHERE id IN ({runs_query}) "
                    "ORDER BY id DESC",
                    (*params, limit_value),
                ).fetchall()
                check_rows = connection.execute(
                    f"SELECT {', '.join(_CHECK_COLUMNS)} FROM checks "
                    f"WHERE run_id IN ({runs_query}) ORDER BY run_id, rowid",
                    (*params, limit_value),
                ).fetchall()
        except sqlite3.Error as exc:
            raise self._error("cannot read the history", exc) from exc
        checks_by_run: dict[int, dict[str, CheckRecord]] = {}
        for row in check_rows:
            check = _check_from_row(row)
            checks_by_run.setdefault(int(row[0]), {})[check.tool] = check
        return [_run_from_row(row, checks_by_run.get(int(row[0]), {})) for row in run_rows]

    # -- setup ---------------------------------------------------------------------------------

    def _error(self, action: str, exc: sqlite3.Error) -> HistoryError:
        if _is_busy(exc):
            return HistoryError(
                f"{action}: {self.path} stayed locked by another dq-agent run for more than "
                f"{self.busy_timeout_seconds:g}s; try again"
            )
        return HistoryError(f"{action} in {self.path}: {exc}")

    def _configure_with_retries(self) -> None:
        """Switching a brand-new file to WAL needs a moment alone with it; when several cron runs
        create the file at once, SQLite may report "locked" at once instead of waiting. Retry."""
        for attempt in range(_OPEN_RETRIES):
            try:
                self._configure()
                self._migrate()
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == _OPEN_RETRIES - 1:
                    raise
                time.sleep(0.05 * 2**attempt)

    def _configure(self) -> None:
        connection = self._connection
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise HistoryError(
                f"history database {self.path} cannot use WAL journaling (got {mode}); "
                "put it on a local file system"
            )
        # FULL: a recorded run survives a power cut too; one fsync per nightly run costs nothing.
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA foreign_keys = ON")

    def _migrate(self) -> None:
        connection = self._connection
        if _user_version(connection) == DATABASE_VERSION:
            return
        with _write_transaction(connection):
            # Read again under the write lock: a concurrent run may have migrated meanwhile.
            version = _user_version(connection)
            if version > DATABASE_VERSION:
                raise HistoryError(
                    f"history database {self.path} has schema version {version}, newer than this "
                    f"dq-agent knows ({DATABASE_VERSION}); upgrade dq-agent or set history.path"
                )
            for migration in MIGRATIONS[version:]:
                for statement in migration.statements:
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {migration.version}")


@contextmanager
def _write_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    connection.execute("BEGIN IMMEDIATE")
    committed = False
    try:
        yield
        connection.execute("COMMIT")
        committed = True
    finally:
        if not committed and connection.in_transaction:
            connection.execute("ROLLBACK")


@contextmanager
def _read_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    connection.execute("BEGIN")
    try:
        yield
    finally:
        if connection.in_transaction:
            connection.execute("COMMIT")


def _is_busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _user_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def _dataset_filter(key: str, exclude_started_at: str | None) -> tuple[str, tuple[Any, ...]]:
    if exclude_started_at:
        return "dataset_key = ? AND COALESCE(started_at, '') != ?", (key, exclude_started_at)
    return "dataset_key = ?", (key,)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def _loads(text: Any, default: Any) -> Any:
    if text is None:
        return default
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return default


def _run_values(record: RunRecord) -> tuple[Any, ...]:
    fp = record.fingerprint
    return (
        record.recorded_at,
        record.started_at,
        record.as_of,
        record.dataset_path,
        record.dataset_key,
        record.dataset_format,
        record.rows,
        fp.files if fp else None,
        fp.size_bytes if fp else None,
        fp.mtime if fp else None,
        fp.schema if fp else None,
        fp.digest if fp else None,
        record.model,
        record.mode,
        record.agent_status,
        record.verdict,
        record.exit_code,
        _dumps(record.expected_tools),
        _dumps(record.called_tools),
        _dumps(record.fallback_executed),
        record.sentinel_rounds,
        record.steps,
        record.prompt_tokens,
        record.completion_tokens,
        record.duration_seconds,
        _dumps(record.timings),
        None if record.narrative_checks is None else _dumps(record.narrative_checks),
        _dumps(record.called_after_push),
        _dumps(record.sentinel_invocations),
        record.excused_readings,
    )


def _check_values(check: CheckRecord) -> tuple[Any, ...]:
    return (
        check.tool,
        check.status,
        check.source,
        check.summary,
        check.duration_seconds,
        _dumps(check.metrics),
        check.error,
    )


def _run_from_row(row: Sequence[Any], checks: dict[str, CheckRecord]) -> RunRecord:
    values = dict(zip(("id", *_RUN_COLUMNS), row, strict=True))
    fingerprint = None
    if values["fingerprint"] is not None:
        fingerprint = Fingerprint(
            files=int(values["fp_files"] or 0),
            size_bytes=values["fp_size_bytes"],
            mtime=values["fp_mtime"],
            rows=values["rows"],
            schema=str(values["fp_schema"] or ""),
            digest=str(values["fingerprint"]),
        )
    narrative = _loads(values["narrative_checks"], None)
    timings = _loads(values["timings"], {})
    return RunRecord(
        id=int(values["id"]),
        recorded_at=str(values["recorded_at"]),
        started_at=values["started_at"],
        as_of=values["as_of"],
        dataset_path=str(values["dataset_path"]),
        dataset_key=str(values["dataset_key"] or values["dataset_path"]),
        dataset_format=values["dataset_format"],
        rows=values["rows"],
        fingerprint=fingerprint,
        model=values["model"],
        mode=values["mode"],
        agent_status=values["agent_status"],
        verdict=str(values["verdict"]),
        exit_code=int(values["exit_code"]),
        expected_tools=_string_list(_loads(values["expected_tools"], [])),
        called_tools=_string_list(_loads(values["called_tools"], [])),
        fallback_executed=_string_list(_loads(values["fallback_executed"], [])),
        sentinel_rounds=int(values["sentinel_rounds"]),
        steps=int(values["steps"]),
        prompt_tokens=int(values["prompt_tokens"]),
        completion_tokens=int(values["completion_tokens"]),
        duration_seconds=values["duration_seconds"],
        timings=dict(timings) if isinstance(timings, dict) else {},
        narrative_checks=narrative if isinstance(narrative, dict) else None,
        called_after_push=_string_list(_loads(values["called_after_push"], [])),
        sentinel_invocations=_dict_list(_loads(values["sentinel_invocations"], [])),
        excused_readings=values["excused_readings"],
        checks=checks,
    )


def _dict_list(value: Any) -> list[dict[str, Any]]:
    return (
        [dict(item) for item in value if isinstance(item, dict)] if isinstance(value, list) else []
    )


def _check_from_row(row: Sequence[Any]) -> CheckRecord:
    values = dict(zip(_CHECK_COLUMNS, row, strict=True))
    metrics = _loads(values["metrics"], {})
    return CheckRecord(
        tool=str(values["tool"]),
        status=str(values["status"]),
        source=str(values["source"]),
        summary=str(values["summary"] or ""),
        metrics=metrics if isinstance(metrics, dict) else {},
        duration_seconds=values["duration_seconds"],
        error=values["error"],
    )


def _string_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
