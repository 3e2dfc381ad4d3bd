"""A summary that names some columns says it names only some, the columns with most first, and
one column's many findings do not push another column's out of the list (the fleet trial: a
parked vehicle's position held at each stop, 700 runs per coordinate, beside one engine
temperature stuck at -40, which only the JSON showed; "4 stuck runs (a 1, b 1, c 1)" with d
dropped)."""

from __future__ import annotations

import random
from pathlib import Path

from dq_agent.checks.base import listed
from dq_agent.checks.flatline import plan_flatline_check
from dq_agent.checks.flatline_report import MAX_FINDINGS
from dq_agent.checks.ranges import plan_range_check
from dq_agent.config import Config
from tests.fixtures_checks import minute, run_check, write_csv

READINGS = 2_000


def _noise(rng: random.Random, level: float) -> float:
    return round(level + rng.gauss(0.0, 1.0), 4)


def _file(tmp_path: Path, held: dict[str, list[range]]) -> Path:
    """One series of READINGS one-minute readings of noisy columns, each held over the
    ranges `held` gives it, at a value of its own per range (one value held again and again
    would be a level the series rests at, no fault)."""
    rng = random.Random(7)
    columns = sorted(held)
    rows = []
    for i in range(READINGS):
        row: list[object] = [minute(i)]
        for n, column in enumerate(columns):
            stuck = next((k for k, r in enumerate(held[column]) if i in r), None)
            row.append(
                round(10.0 * n + 50.3 + 0.37 * stuck, 4) if stuck is not None else _noise(rng, 50.0)
            )
        rows.append(row)
    return write_csv(tmp_path / "wide.csv", ["timestamp", *columns], rows)


def test_listed_says_how_many_more() -> None:
    assert listed(["a 1", "b 2"]) == "a 1, b 2"
    assert listed(["a 1", "b 2", "c 3", "d 4"]) == "a 1, b 2, c 3, +1 more"
    assert listed([f"c{i}" for i in range(1_205)], shown=2) == "c0, c1, +1,203 more"


def test_stuck_runs_summary_names_the_columns_with_most_and_how_many_more(
    tmp_path: Path,
) -> None:
    held = {
        "a": [range(100, 130)],
        "b": [range(300, 330)],
        "c": [range(500, 530), range(900, 930)],
        "d": [range(700, 730)],
    }
    result = run_check(plan_flatline_check, _file(tmp_path, held))
    assert result.metrics["stuck_runs"] == 5
    assert result.summary.startswith("5 stuck runs (c 2, a 1, b 1, +1 more), 150 readings")


def test_one_column_many_runs_leaves_room_for_another_columns_run(tmp_path: Path) -> None:
    # 25 runs of 40 readings in `position`, one of 30 in `temp`: by length alone the first
    # MAX_FINDINGS findings would all be position's.
    held = {
        "position": [range(20 + 78 * k, 60 + 78 * k) for k in range(25)],
        "temp": [range(1_500, 1_530)],
    }
    result = run_check(plan_flatline_check, _file(tmp_path, held))
    assert result.metrics["columns"]["position"]["stuck_runs"] == 25
    assert result.metrics["columns"]["temp"]["stuck_runs"] == 1
    assert len(result.findings) == MAX_FINDINGS
    assert [f.column for f in result.findings[:2]] == ["position", "temp"]
    assert result.findings[1].count == 30
    assert all(f.count == 40 for f in result.findings[2:])


def test_range_summary_orders_columns_by_readings_out_of_range(tmp_path: Path) -> None:
    rng = random.Random(3)
    columns = ["p1", "p2", "p3", "p4"]
    outside = {"p1": 1, "p2": 4, "p3": 2, "p4": 3}
    rows = []
    for i in range(600):
        row: list[object] = [minute(i)]
        for column in columns:
            high = 400 <= i < 400 + outside[column]
            row.append(150.0 if high else _noise(rng, 50.0))
        rows.append(row)
    path = write_csv(tmp_path / "ranged.csv", ["timestamp", *columns], rows)
    config = Config()
    config.range_check.limits = {"p*": {"max": 100.0}}
    result = run_check(plan_range_check, path, config)
    assert result.summary.startswith(
        "10 readings out of range (p2 4 fail, p4 3 fail, p3 2 fail, +1 more)"
    )
