"""What the results support: names, counts, rates, durations in any unit, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.narrative.facts import Facts, build_fact_book
from dq_agent.narrative.figures import find_figures
from dq_agent.result import CheckResult, Finding, Status


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    path = tmp_path / "plant.csv"
    path.write_text(
        "timestamp,device_id,temperature,pressure\n"
        "2024-01-01T10:00:00,sensor_1,20.5,1.01\n"
        "2024-01-01T10:01:00,sensor_1,20.7,\n",
        encoding="utf-8",
    )
    return load(str(path), Config())


@pytest.fixture
def checks() -> dict[str, CheckResult]:
    return {
        "null_check": CheckResult(
            "null_check",
            Status.FAIL,
            "998 missing values (4.99%)",
            {"missing": {"pressure": 998}, "missing_rate": {"pressure": 0.0499}, "empty": True},
            [
                Finding(
                    "missing run",
                    12,
                    column="pressure",
                    entity="sensor_9",
                    examples=[{"device_id": "sensor_4", "timestamp": datetime(2024, 1, 3, 8, 30)}],
                )
            ],
        ),
        "delay_check": CheckResult(
            "delay_check",
            Status.WARN,
            "longest gap 25 min on pump_3",
            {
                "gap_seconds_total": 1803.0,
                "latency_ms_p95": 1500,
                "interval_minutes": 2,
                "age": timedelta(hours=3),
                "newest": datetime(2024, 1, 31, 23, 0, tzinfo=UTC),
                "missing_pct": 12.5,
            },
            [Finding("gap", 1, entity="7", start="2024-01-01T10:00:00", end="2024-01-01T10:10:01")],
        ),
        "duplicate_check": CheckResult(
            "duplicate_check", Status.WARN, "3 duplicate rows", {"rows": 20000, "duplicates": 3}
        ),
    }


@pytest.fixture
def facts(checks: dict[str, CheckResult], dataset: Dataset) -> Facts:
    return build_fact_book(checks, dataset).whole


def _supported(facts: Facts, text: str) -> list[bool]:
    return [facts.supports(figure) for figure in find_figures(text)]


def test_counts_match_exactly(facts: Facts) -> None:
    assert _supported(facts, "998 and 12 and 1803") == [True, True, True]
    assert _supported(facts, "997 and 999 and 14") == [False, False, False]


def test_rates_match_as_fractions_or_percentages_within_rounding(facts: Facts) -> None:
    assert _supported(facts, "4.99% 5.0% 5% 0.0499 0.05") == [True] * 5
    assert _supported(facts, "5.1% 4.9% 0.06") == [False, False, False]


def test_a_percentage_metric_matches_its_fraction_too(facts: Facts) -> None:
    assert _supported(facts, "12.5% and 0.125 and 12.5") == [True, True, True]


def test_durations_match_in_any_unit(facts: Facts) -> None:
    # 1803 s of gaps, a 601 s gap between the finding's start and end, 25 min in the summary,
    # 1500 ms p95 latency, a 2-minute interval, an age of 3 hours.
    assert (
        _supported(
            facts,
            "1803 s, 30 minutes, 601 s, 10 min 1 s, 10.0 min, 10 minutes, 25 min, 1500 ms, 1.5 s, "
            "2 minutes, 120 s, 3 hours, 180 min",
        )
        == [True] * 13
    )
    assert _supported(facts, "11 min, 10.5 min, 10 min 5 s, 2 hours, 4 s") == [False] * 5


def test_durations_need_a_time_quantity(facts: Facts) -> None:
    # 998 is a count, not a duration: "998 s" is no figure of the results.
    assert _supported(facts, "998 s") == [False]


def test_moments_match_the_timestamps_of_the_results(facts: Facts) -> None:
    assert (
        _supported(
            facts,
            "2024-01-01 10:10, Jan 3, 2024 at 08:30, 2024-01-31T23:00:00Z, in 2024",
        )
        == [True] * 5
    )
    assert _supported(facts, "2024-01-02, 11:45, Feb 1, 2023") == [False] * 3


def test_names_come_from_the_dataset_and_the_results(facts: Facts) -> None:
    known = (
        "pressure",
        "Device_ID",
        "timestamp",
        "sensor_9",
        "sensor_4",
        "7",
        "missing_rate",
        "pump_3",
    )
    for name in known:
        assert facts.knows_name(name), name
    for name in ("column1", "humidity", "sensor_5"):
        assert not facts.knows_name(name), name


def test_file_names_are_the_files_inspected(facts: Facts) -> None:
    assert facts.knows_file("plant.csv") and facts.knows_file("data/plant.csv")
    assert not facts.knows_file("plant.parquet") and not facts.knows_file("sensors.csv")


def test_the_dataset_gives_column_counts_and_sentinels(facts: Facts) -> None:
    assert _supported(facts, "4 columns, 2 value columns, sentinel -999") == [True, True, True]


def test_a_boolean_is_not_a_figure(dataset: Dataset) -> None:
    flags = {"structure_check": CheckResult("structure_check", Status.PASS, "ok", {"bom": True})}

    assert _supported(build_fact_book(flags, dataset).whole, "1") == [False]


def test_a_sentence_about_a_check_takes_its_figures_from_that_check(
    checks: dict[str, CheckResult], dataset: Dataset
) -> None:
    book = build_fact_book(checks, dataset)
    three, ninety_eight, rows, moment = find_figures("3, 998, 20,000, 2024-01-01 10:10")

    assert book.supports(three, ["duplicate_check"]) and not book.supports(three, ["null_check"])
    assert book.supports(ninety_eight, ["null_check"])
    assert not book.supports(ninety_eight, ["duplicate_check", "delay_check"])
    assert book.supports(ninety_eight, []) and book.supports(three, [])
    # The size of the data and the timestamps belong to every check.
    assert book.supports(rows, ["null_check"]) and book.supports(moment, ["duplicate_check"])
