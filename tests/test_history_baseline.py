"""Baseline comparison: findings when a key metric jumps, silence when it is stable."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from dq_agent.checks.base import Scope, run_plans
from dq_agent.checks.delays import plan_delay_check
from dq_agent.checks.duplicates import plan_duplicate_check
from dq_agent.checks.nulls import plan_null_check
from dq_agent.checks.outliers import plan_outlier_check
from dq_agent.config import Config
from dq_agent.history.baseline import (
    ChangeRule,
    KeyMetric,
    compare_with_baseline,
    describe_change,
    key_metrics,
)
from dq_agent.history.store import HistoryStore
from dq_agent.load import load
from dq_agent.outcome import AgentInfo, Audit, DatasetInfo, Inspection
from dq_agent.result import CheckResult, Source, Status

TOOLS = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]
ROWS = 10_000


def make_inspection(
    path: str,
    *,
    pressure_missing: float = 0.001,
    temperature_missing: float = 0.0,
    pressure_outliers: float = 0.003,
    exact_duplicates: int = 0,
    duplicate_keys: int = 2,
    gaps: int = 3,
    late_rows: int = 10,
    fail: bool = False,
    broken: tuple[str, ...] = (),
    started_at: str = "",
) -> Inspection:
    metrics: dict[str, dict[str, Any]] = {
        "null_check": {
            "columns": {
                "pressure": {
                    "missing_count": round(pressure_missing * ROWS),
                    "missing_rate": pressure_missing,
                },
                "temperature": {"missing_count": 0, "missing_rate": temperature_missing},
            }
        },
        "duplicate_check": {
            "exact_duplicate_rows": exact_duplicates,
            "duplicate_key_rows": duplicate_keys,
        },
        "outlier_check": {
            # outlier_rate is against the values checked, not the rows: the count is its own.
            "columns": {"pressure": {"outlier_rate": pressure_outliers, "outlier_count": 30}}
        },
        "delay_check": {"gap_count": gaps, "late_rows": late_rows},
        "structure_check": {},
    }
    checks = {}
    for tool in TOOLS:
        status = Status.FAIL if fail and tool == "null_check" else Status.PASS
        if tool in broken:
            checks[tool] = CheckResult.failed(tool, "boom", "fix it")
        else:
            checks[tool] = CheckResult(tool, status, "s", metrics[tool], source=Source.AGENT)
    return Inspection(
        dataset=DatasetInfo(path, "csv", 1, ROWS, ["timestamp", "pressure", "temperature"], {}),
        checks=checks,
        audit=Audit(TOOLS, called_tools=list(TOOLS)),
        agent=AgentInfo(status="ok", model="qwen2.5:7b", mode="native"),
        started_at=started_at,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    with HistoryStore.open(tmp_path / "history.sqlite") as opened:
        yield opened


@pytest.fixture
def data_path(tmp_path: Path) -> str:
    return str(tmp_path / "plant.csv")


def record_week(store: HistoryStore, path: str, **overrides: Any) -> None:
    """Seven stable nights: small jitter around the usual levels."""
    for night, jitter in enumerate([0.0, 0.0002, -0.0001, 0.0001, 0.0, -0.0002, 0.0001]):
        store.save_run(
            make_inspection(
                path,
                pressure_missing=0.001 + jitter,
                gaps=[2, 3, 3, 4, 3, 2, 3][night],
                started_at=f"2024-05-0{night + 1}T02:00:00+00:00",
                **overrides,
            ),
            0,
        )


def test_no_earlier_runs_says_so_and_invents_nothing(store: HistoryStore, data_path: str) -> None:
    section = compare_with_baseline(make_inspection(data_path, pressure_missing=0.5), store)
    assert section["status"] == "no_baseline"
    assert (section["runs"], section["metrics"], section["findings"]) == (0, [], [])
    assert "no earlier runs" in section["message"]


def test_only_failed_earlier_runs_give_no_baseline(store: HistoryStore, data_path: str) -> None:
    for _ in range(3):
        store.save_run(make_inspection(data_path, fail=True), 1)
    section = compare_with_baseline(make_inspection(data_path), store)
    assert section["status"] == "no_baseline"
    assert (section["earlier_runs"], section["excluded_failed_runs"]) == (3, 3)
    assert "all 3 earlier runs" in section["message"] and "failed" in section["message"]


def test_stable_metrics_give_no_findings(store: HistoryStore, data_path: str) -> None:
    record_week(store, data_path)
    today = make_inspection(
        data_path, pressure_missing=0.0012, gaps=4, late_rows=12, duplicate_keys=3
    )
    section = compare_with_baseline(today, store)
    assert section["status"] == "compared"
    assert section["runs"] == 7
    assert section["findings"] == []
    assert len(section["metrics"]) == 7  # two missing rates, one outlier rate, four counts
    assert not any(m["large"] for m in section["metrics"])
    assert "no large change" in section["message"]


def test_a_jump_in_missing_rate_is_a_finding(store: HistoryStore, data_path: str) -> None:
    record_week(store, data_path)
    section = compare_with_baseline(make_inspection(data_path, pressure_missing=0.048), store)
    assert [f["what"] for f in section["findings"]] == [
        "pressure missing rate 4.8% vs baseline 0.1%"
    ]
    (finding,) = section["findings"]
    assert (finding["column"], finding["tool"], finding["source"]) == (
        "pressure",
        "null_check",
        "baseline",
    )
    assert (finding["count"], finding["severity"], finding["baseline_runs"]) == (480, "warn", 7)
    assert finding["today"] == 0.048
    assert finding["baseline"] == pytest.approx(0.001)
    assert "1 large change" in section["message"]


def test_jumps_in_counts_and_outlier_rates_are_findings(
    store: HistoryStore, data_path: str
) -> None:
    record_week(store, data_path)
    today = make_inspection(
        data_path, gaps=40, exact_duplicates=120, pressure_outliers=0.02, late_rows=14
    )
    findings = sorted(compare_with_baseline(today, store)["findings"], key=lambda f: f["what"])
    assert [(f["what"], f["count"]) for f in findings] == [
        ("exact duplicate rows 120 vs baseline 0", 120),
        ("gap count 40 vs baseline 3", 40),
        ("pressure outlier rate 2.0% vs baseline 0.3%", 30),  # the check's count, not rate x rows
    ]


def test_failed_runs_do_not_enter_the_baseline(store: HistoryStore, data_path: str) -> None:
    """Four recent failed nights at 30% missing must not make 30% look normal."""
    record_week(store, data_path)
    for _ in range(4):
        store.save_run(make_inspection(data_path, pressure_missing=0.3, fail=True), 1)
    section = compare_with_baseline(make_inspection(data_path, pressure_missing=0.3), store)
    assert section["runs"] == 7
    assert section["excluded_failed_runs"] == 4
    assert [f["what"] for f in section["findings"]] == [
        "pressure missing rate 30.0% vs baseline 0.1%"
    ]


def test_only_the_last_n_runs_count(store: HistoryStore, data_path: str) -> None:
    for _ in range(7):  # an older regime: 20% missing was normal then
        store.save_run(make_inspection(data_path, pressure_missing=0.2), 0)
    for _ in range(3):
        store.save_run(make_inspection(data_path, pressure_missing=0.001), 0)
    today = make_inspection(data_path, pressure_missing=0.2)
    recent = compare_with_baseline(today, store, runs=3)
    assert (recent["runs"], len(recent["findings"])) == (3, 1)
    longer = compare_with_baseline(today, store, runs=10)  # 7 of 10 at 20%: the median is 20%
    assert (longer["runs"], longer["findings"]) == (10, [])


def test_other_datasets_do_not_mix_but_a_dataset_name_joins_paths(
    store: HistoryStore, tmp_path: Path, data_path: str
) -> None:
    record_week(store, str(tmp_path / "other.csv"))
    assert compare_with_baseline(make_inspection(data_path), store)["status"] == "no_baseline"

    for night in range(3):
        store.save_run(
            make_inspection(str(tmp_path / f"day{night}" / "plant.csv")), 0, dataset_name="plant"
        )
    today = make_inspection(str(tmp_path / "day9" / "plant.csv"), pressure_missing=0.05)
    section = compare_with_baseline(today, store, dataset_name="plant")
    assert (section["dataset"], section["runs"]) == ("plant", 3)
    assert len(section["findings"]) == 1


def test_the_run_itself_is_never_its_own_baseline(store: HistoryStore, data_path: str) -> None:
    record_week(store, data_path)
    today = make_inspection(
        data_path, pressure_missing=0.048, started_at="2024-05-08T02:00:00+00:00"
    )
    store.save_run(today, 0)  # saved before comparing: must not dilute the baseline
    section = compare_with_baseline(today, store)
    assert section["runs"] == 7
    assert len(section["findings"]) == 1


def test_errored_checks_are_not_compared(store: HistoryStore, data_path: str) -> None:
    record_week(store, data_path)
    today = make_inspection(data_path, pressure_missing=0.5, broken=("null_check",))
    section = compare_with_baseline(today, store)
    assert section["findings"] == []
    assert {m["tool"] for m in section["metrics"]} == {
        "duplicate_check",
        "outlier_check",
        "delay_check",
    }


def test_median_of_an_even_number_of_runs(store: HistoryStore, data_path: str) -> None:
    for gaps in (2, 4, 10, 100):
        store.save_run(make_inspection(data_path, gaps=gaps), 0)
    section = compare_with_baseline(make_inspection(data_path, gaps=7), store)
    (gap,) = (m for m in section["metrics"] if m["metric"] == "gap_count")
    assert (gap["baseline"], gap["runs"], gap["large"]) == (7.0, 4, False)


@pytest.mark.parametrize(
    ("kind", "today", "baseline", "large"),
    [
        ("rate", 0.048, 0.001, True),
        ("rate", 0.0009, 0.0001, False),  # 9x, but under half a percentage point
        ("rate", 0.406, 0.40, False),  # a big absolute level, a small relative change
        ("rate", 0.81, 0.40, True),
        ("rate", 0.005, 0.0, True),  # from zero the absolute floor decides
        ("rate", 0.004, 0.0, False),
        ("rate", 0.0, 0.05, False),  # improvements are not findings
        ("count", 5, 0, True),
        ("count", 4, 0, False),
        ("count", 15, 10, False),  # +5 but only 1.5x
        ("count", 20, 10, True),
    ],
)
def test_change_rule(kind: str, today: float, baseline: float, large: bool) -> None:
    assert ChangeRule().is_large(kind, today, baseline) is large


def test_key_metrics_skip_absent_and_non_numeric_values() -> None:
    found = key_metrics(
        {
            "null_check": {
                "columns": {"a": {"missing_rate": 0.1}, "b": {"missing_rate": None}, "c": 3}
            },
            "duplicate_check": {"exact_duplicate_rows": True, "duplicate_key_rows": 4},
            "delay_check": {"gap_count": float("nan")},
            "outlier_check": {"columns": "oops"},
        }
    )
    assert found == {
        KeyMetric("null_check", "missing_rate", "a", "rate", "a missing rate"): 0.1,
        KeyMetric(
            "duplicate_check", "duplicate_key_rows", None, "count", "duplicate key rows"
        ): 4.0,
    }


def test_describe_change_keeps_small_rates_readable() -> None:
    metric = KeyMetric("null_check", "missing_rate", "p", "rate", "p missing rate")
    assert describe_change(metric, 0.0004, 0.0) == "p missing rate 0.04% vs baseline 0%"
    count = KeyMetric("delay_check", "gap_count", None, "count", "gap count")
    assert describe_change(count, 12, 2.5) == "gap count 12 vs baseline 2.5"


def test_end_to_end_with_the_real_checks(tmp_path: Path) -> None:
    """Real files through load and the real checks: the metric keys the checks write are the
    ones the baseline reads, and a night with 10% of pressure missing stands out."""
    data = tmp_path / "plant.csv"
    with HistoryStore.open(tmp_path / "history.sqlite") as store:
        for night in range(3):
            write_sensor_csv(data, missing_every=0, seed=night)
            inspection = real_inspection(data, night)
            assert compare_with_baseline(inspection, store)["findings"] == []
            store.save_run(inspection, 0)
        write_sensor_csv(data, missing_every=10, seed=9)
        section = compare_with_baseline(real_inspection(data, 9), store)
    assert section["runs"] == 3
    compared = {(m["tool"], m["metric"], m["column"]) for m in section["metrics"]}
    assert ("null_check", "missing_rate", "pressure") in compared
    assert ("outlier_check", "outlier_rate", "pressure") in compared
    assert ("duplicate_check", "exact_duplicate_rows", None) in compared
    assert ("delay_check", "gap_count", None) in compared
    assert [(f["what"], f["count"]) for f in section["findings"]] == [
        ("pressure missing rate 10.0% vs baseline 0%", 60)
    ]


def real_inspection(path: Path, night: int) -> Inspection:
    """The four checks whose metrics feed the baseline, run by code on a real file."""
    config = Config()
    dataset = load(str(path), config)
    plans = [
        plan(dataset, config, Scope())
        for plan in (plan_null_check, plan_duplicate_check, plan_outlier_check, plan_delay_check)
    ]
    checks = {result.tool: result for result in run_plans(plans)}
    rows = int(dataset.frame.select(pl.len()).collect().item())
    return Inspection(
        dataset=DatasetInfo(str(path), "csv", 1, rows, dataset.columns, {}),
        checks=checks,
        audit=Audit(list(checks)),
        started_at=f"2024-05-0{night + 1}T02:00:00+00:00",
    )


def write_sensor_csv(path: Path, *, missing_every: int, seed: int) -> None:
    """Two devices, 300 one-minute readings each; every `missing_every`-th pressure blank."""
    lines = ["timestamp,device_id,temperature,pressure"]
    for device in range(2):
        for i in range(300):
            stamp = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=i)
            wobble = ((i * 7 + seed) % 11) / 10
            pressure = "" if missing_every and i % missing_every == 0 else f"{1000 + wobble:.2f}"
            lines.append(f"{stamp:%Y-%m-%dT%H:%M:%SZ},dev-{device},{20 + wobble:.2f},{pressure}")
    path.write_text("\n".join(lines) + "\n")


def _excusing(inspection: Inspection, readings: int) -> Inspection:
    window = {"device": None, "start": "2024-05-08T00:00:00+00:00", "reason": "overhaul"}
    inspection.maintenance = [
        {**window, "end": "2024-05-08T04:00:00+00:00", "excused_readings": readings, "devices": 3}
    ]
    return inspection


def test_a_change_on_a_night_of_many_excused_readings_says_so(
    store: HistoryStore, data_path: str
) -> None:
    """Seven nights without windows, then one whose windows excused 4,000 of the 10,000 rows:
    the missing rate of what was left jumped, and the finding says what else changed."""
    record_week(store, data_path)
    today = _excusing(make_inspection(data_path, pressure_missing=0.048), 4000)
    section = compare_with_baseline(today, store)
    assert section["excused_readings"] == {"today": 4000, "baseline": 0.0}
    note = "4,000 readings excused by maintenance today vs 0 usually"
    assert [f["what"] for f in section["findings"]] == [
        f"pressure missing rate 4.8% vs baseline 0.1% ({note})"
    ]
    assert section["message"].endswith(f"1 large change; {note}")


def test_excused_readings_as_usual_add_nothing(store: HistoryStore, data_path: str) -> None:
    for night in range(7):
        store.save_run(
            _excusing(make_inspection(data_path, started_at=f"2024-05-0{night + 1}T02:00"), 100),
            0,
        )
    today = _excusing(make_inspection(data_path, pressure_missing=0.048), 103)
    section = compare_with_baseline(today, store)
    assert section["excused_readings"] == {"today": 103, "baseline": 100.0}
    assert [f["what"] for f in section["findings"]] == [
        "pressure missing rate 4.8% vs baseline 0.1%"
    ]
    assert "excused" not in section["message"]


def test_a_check_that_evaluated_nothing_is_left_out_of_the_comparison(
    store: HistoryStore, data_path: str
) -> None:
    """Today's micro-batch could not judge outliers: its zeros are no figures to compare."""
    record_week(store, data_path)
    today = make_inspection(data_path, pressure_outliers=0.0)
    today.checks["outlier_check"] = CheckResult(
        "outlier_check",
        Status.SKIPPED,
        "not evaluated: no device has 4 or more values with any spread in a column",
        {"columns": {"pressure": {"outlier_rate": 0.0, "outlier_count": 0}}},
    )
    section = compare_with_baseline(today, store)
    assert [m["tool"] for m in section["metrics"] if m["tool"] == "outlier_check"] == []
    assert section["findings"] == []
    # The same zero from a check that did evaluate is compared (and is no jump upwards).
    evaluated = compare_with_baseline(make_inspection(data_path, pressure_outliers=0.0), store)
    assert [m["tool"] for m in evaluated["metrics"]].count("outlier_check") == 1
