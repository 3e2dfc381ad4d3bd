"""Run history: every run recorded in SQLite, skip-rate stats, today against the baseline."""

from dq_agent.errors import HistoryError
from dq_agent.history.baseline import ChangeRule, compare_with_baseline
from dq_agent.history.migrations import DATABASE_VERSION
from dq_agent.history.paths import history_path
from dq_agent.history.records import CheckRecord, RunRecord, dataset_key
from dq_agent.history.stats import HistoryStats, compute_stats
from dq_agent.history.store import HistoryStore
from dq_agent.history.trend import DEFAULT_TREND_RUNS, Trend, build_trend
from dq_agent.history.views import (
    history_json,
    history_renderable,
    model_table,
    stats_json,
    stats_renderable,
    tool_table,
    trend_json,
    trend_renderable,
)

__all__ = [
    "DATABASE_VERSION",
    "DEFAULT_TREND_RUNS",
    "ChangeRule",
    "CheckRecord",
    "HistoryError",
    "HistoryStats",
    "HistoryStore",
    "RunRecord",
    "Trend",
    "build_trend",
    "compare_with_baseline",
    "compute_stats",
    "dataset_key",
    "history_json",
    "history_path",
    "history_renderable",
    "model_table",
    "stats_json",
    "stats_renderable",
    "tool_table",
    "trend_json",
    "trend_renderable",
]
