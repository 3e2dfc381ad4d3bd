"""The history database's schema: an ordered, append-only list of migrations."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


# Ordered and append-only: a released migration is never edited, a change is a new entry.
# `PRAGMA user_version` holds the number of migrations applied.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs and their checks",
        (
            """
            CREATE TABLE runs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                recorded_at TEXT NOT NULL,
                started_at TEXT,
                as_of TEXT,
                dataset_path TEXT NOT NULL,
                rows INTEGER,
                model TEXT,
                mode TEXT,
                agent_status TEXT,
                verdict TEXT NOT NULL,
                exit_code INTEGER NOT NULL,
                expected_tools TEXT NOT NULL DEFAULT '[]',
                called_tools TEXT NOT NULL DEFAULT '[]',
                fallback_executed TEXT NOT NULL DEFAULT '[]',
                sentinel_rounds INTEGER NOT NULL DEFAULT 0,
                steps INTEGER NOT NULL DEFAULT 0,
                prompt_tokens INTEGER NOT NULL DEFAULT 0,
                completion_tokens INTEGER NOT NULL DEFAULT 0,
                duration_seconds REAL,
                timings TEXT NOT NULL DEFAULT '{}'
            )
            """,
            """
            CREATE TABLE checks (
                run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                tool TEXT NOT NULL,
                status TEXT NOT NULL,
                source TEXT NOT NULL,
                summary TEXT NOT NULL DEFAULT '',
                duration_seconds REAL,
                metrics TEXT NOT NULL DEFAULT '{}',
                error TEXT,
                PRIMARY KEY (run_id, tool)
            )
            """,
        ),
    ),
    Migration(
        2,
        "dataset key and fingerprint for baselines, narrative checks for stats",
        (
            "ALTER TABLE runs ADD COLUMN dataset_key TEXT",
            # Older runs are keyed by their path as recorded: the best we know about them.
            "UPDATE runs SET dataset_key = dataset_path WHERE dataset_key IS NULL",
            "ALTER TABLE runs ADD COLUMN dataset_format TEXT",
            "ALTER TABLE runs ADD COLUMN fp_files INTEGER",
            "ALTER TABLE runs ADD COLUMN fp_size_bytes INTEGER",
            "ALTER TABLE runs ADD COLUMN fp_mtime TEXT",
            "ALTER TABLE runs ADD COLUMN fp_schema TEXT",
            "ALTER TABLE runs ADD COLUMN fingerprint TEXT",
            "ALTER TABLE runs ADD COLUMN narrative_checks TEXT",
            "CREATE INDEX runs_by_dataset ON runs (dataset_key, id)",
        ),
    ),
    Migration(
        3,
        "tools the model called only after the loop pushed it, and every sentinel round",
        (
            "ALTER TABLE runs ADD COLUMN called_after_push TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE runs ADD COLUMN sentinel_invocations TEXT NOT NULL DEFAULT '[]'",
        ),
    ),
    Migration(
        4,
        "readings excused by maintenance windows, each once (NULL: recorded before windows)",
        ("ALTER TABLE runs ADD COLUMN excused_readings INTEGER",),
    ),
)
DATABASE_VERSION = len(MIGRATIONS)
