"""outlier_check judges a clearly skewed group on the power or log scale that makes it most
symmetric (`outliers_scale`): clean lognormal, gamma and Weibull readings pass, readings far out
on that scale are still found with their exact count, symmetric groups stay on the raw scale,
and every engine gives the same results (tests/test_conformance.py's runner: the Polars
strategy against the generic path on each engine)."""

from __future__ import annotations

import math
import random
from datetime import timedelta
from pathlib import Path
from statistics import NormalDist

import narwhals as nw
import polars as pl
import pytest

from dq_agent.checks.outliers import build_outlier_check, plan_outlier_check
from dq_agent.checks.outliers_scale import RAW, scale_name, with_scale
from dq_agent.config import resolve
from dq_agent.engines import Engine
from dq_agent.errors import ConfigError
from dq_agent.result import CheckResult, Status
from tests.cli_json import assert_same_out_of_core
from tests.fixtures_checks import T0, write_parquet
from tests.test_checks_outliers import alone
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_outlier_check, build_outlier_check)

READINGS = 300
SIGMA = 0.8
# Each device's log-level: the devices differ, as real ones do.
LEVELS = {"d0": 0.0, "d1": 1.0, "d2": 2.0, "d3": 3.0}
# Positions of device d2's readings made faulty, away from the series' ends.
FAULTY = (40, 90, 140, 190, 230, 270)


def _normal_scores(count: int, seed: int) -> list[float]:
    """A sample of the standard normal with no chance in it: its quantiles at (k + 1/2) / n,
    in a shuffled order. The largest is 2.93 for 300: no clean reading beyond 3 sigmas."""
    scores = [NormalDist().inv_cdf((k + 0.5) / count) for k in range(count)]
    random.Random(seed).shuffle(scores)
    return scores


def _lognormal(tmp_path: Path, faulty: float | None = None, name: str = "dust") -> Path:
    """Four devices of 300 minutes of a lognormal quantity (sigma 0.8 on the log scale: clean
    readings up to 10 times the median); with `faulty`, device d2's readings at FAULTY are
    that many log-sigmas from its median instead."""
    frames = []
    for seed, (device, level) in enumerate(LEVELS.items()):
        scores = _normal_scores(READINGS, seed)
        if device == "d2" and faulty is not None:
            for position in FAULTY:
                scores[position] = faulty
        frames.append(
            pl.DataFrame(
                {
                    "device": device,
                    "time": [T0 + timedelta(minutes=i) for i in range(READINGS)],
                    name: [math.exp(level + SIGMA * z) for z in scores],
                }
            )
        )
    return write_parquet(tmp_path / "lognormal.parquet", pl.concat(frames))


def _columns(result: CheckResult, *keys: str) -> dict[str, tuple[object, ...]]:
    return {name: tuple(m[k] for k in keys) for name, m in result.metrics["columns"].items()}


def test_clean_lognormal_groups_pass_on_the_log_scale(local_engine: Engine, tmp_path: Path) -> None:
    path = _lognormal(tmp_path)
    result = _run(local_engine, path, alone())
    assert result.status is Status.PASS
    assert _columns(result, "outlier_count", "scales", "groups_checked") == {
        "dust": (0, {"log": 4}, 4)
    }
    assert result.summary.endswith(
        "; skewed groups judged on a power or log scale: 4 groups of dust on the log scale"
    )
    # On the raw scale the clean tail reads as outliers beyond chance.
    config = alone()
    config.outlier_check.scale = "raw"
    raw = _run(local_engine, path, config)
    assert raw.status is Status.FAIL
    assert raw.metrics["columns"]["dust"]["scales"] == {"raw": 4}
    assert raw.metrics["columns"]["dust"]["outlier_count"] > 40


@pytest.mark.parametrize(("faulty", "sign"), [(12.0, 1), (-12.0, -1)])
def test_readings_far_out_on_the_log_scale_are_found(
    local_engine: Engine, tmp_path: Path, faulty: float, sign: int
) -> None:
    """Six readings of d2 12 log-sigmas up (e^9.6: 15,000 times the median) or down: exactly
    those six, a fail naming d2, z on the log scale, the raw values in the examples."""
    result = _run(local_engine, _lognormal(tmp_path, faulty), alone())
    assert result.status is Status.FAIL
    assert _columns(result, "outlier_count", "groups_with_excess", "scales") == {
        "dust": (6, 1, {"log": 4})
    }
    (finding,) = result.findings
    assert (finding.entity, finding.count, finding.severity) == ("d2", 6, Status.FAIL)
    assert " on the log scale; " in finding.what
    example = finding.examples[0]
    assert example["value"] == pytest.approx(math.exp(2.0 + SIGMA * faulty))
    assert sign * float(example["z"]) > 10


def test_gamma_and_weibull_groups_pass_on_a_root_scale(
    local_engine: Engine, tmp_path: Path
) -> None:
    """Gamma readings of shapes 1 to 5 (exponential to mildly skewed) and Weibull of shapes 1.1
    to 2.3, 2,000 a device, drawn with a fixed seed."""
    draw = random.Random(7)
    frames = []
    for shape in (1, 2, 3, 4, 5):
        frames.append(
            pl.DataFrame(
                {
                    "device": f"g{shape}",
                    "time": [T0 + timedelta(minutes=i) for i in range(2000)],
                    "conc_ppm": [draw.gammavariate(shape, 2.0) for _ in range(2000)],
                    "flow": [10 * draw.weibullvariate(1.0, 0.8 + shape * 0.3) for _ in range(2000)],
                }
            )
        )
    path = write_parquet(tmp_path / "roots.parquet", pl.concat(frames))
    result = _run(local_engine, path, alone())
    assert result.status is Status.PASS
    assert _columns(result, "outlier_count", "scales") == {
        "conc_ppm": (18, {"cube root": 2, "fourth root": 2, "square root": 1}),
        # Shapes 2.0 and 2.3 are near symmetric: raw.
        "flow": (28, {"raw": 2, "square root": 2, "cube root": 1}),
    }


def test_a_long_layout_judges_each_tag_on_its_own_scale(
    local_engine: Engine, tmp_path: Path
) -> None:
    """device/tag/value: the dust tag of each device on the log scale, the symmetric
    temperature on the raw one."""
    frames = []
    for seed, device in enumerate(("m0", "m1")):
        scores = _normal_scores(READINGS, seed)
        times = [T0 + timedelta(minutes=i) for i in range(READINGS)]
        frames += [
            pl.DataFrame(
                {
                    "device": device,
                    "tag": "dust",
                    "ts": times,
                    "value": [math.exp(z) for z in scores],
                }
            ),
            pl.DataFrame(
                {"device": device, "tag": "temp", "ts": times, "value": [20 + z for z in scores]}
            ),
        ]
    frame = pl.concat(frames).sort("device", "ts", "tag")
    path = write_parquet(tmp_path / "long.parquet", frame)
    result = _run(local_engine, path, alone())
    assert result.status is Status.PASS
    assert _columns(result, "outlier_count", "scales") == {"value": (0, {"raw": 2, "log": 2})}


def test_symmetric_groups_positive_or_not_stay_raw(local_engine: Engine, tmp_path: Path) -> None:
    """Normal readings around 20 and around 3 (positive, a span near their level) and readings
    with zeros and negatives: no scale halves a skew they do not have."""
    frames = []
    for seed, device in enumerate(("a", "b", "c")):
        scores = _normal_scores(READINGS, seed)
        frames.append(
            pl.DataFrame(
                {
                    "device": device,
                    "time": [T0 + timedelta(minutes=i) for i in range(READINGS)],
                    "temp": [20 + z for z in scores],
                    "level": [3 + z for z in scores],
                    "offset": [z for z in scores],
                }
            )
        )
    path = write_parquet(tmp_path / "symmetric.parquet", pl.concat(frames))
    result = _run(local_engine, path, alone())
    assert _columns(result, "scales") == {
        "temp": ({"raw": 3},),
        "level": ({"raw": 3},),
        "offset": ({"raw": 3},),
    }


def _choice(
    table: dict[str, list[float]], resolution: float = 0.0, min_size: int = 30
) -> list[float]:
    frame = nw.from_native(pl.LazyFrame(table))
    chosen = with_scale(
        frame, "scale", "q10", "q50", "q90", "low", "n", nw.lit(resolution), min_size
    )
    return list(chosen.collect().to_native().get_column("scale"))


def test_the_choice_of_scale() -> None:
    """From each group's raw Q10, median, Q90, smallest value and count: a lognormal's
    quantiles go to the log scale, an exponential's to the cube root; symmetric ones, too few
    values, a zero (no log), a negative (no power), a coarse span, or a skew no scale halves
    stay raw."""
    z = 1.2815515655446004
    lognormal = [math.exp(-z), 1.0, math.exp(z)]
    exponential = [-math.log(0.9), math.log(2.0), -math.log(0.1)]
    rows = {
        "lognormal": (*lognormal, 0.01, 1000.0),
        "exponential": (*exponential, 0.001, 1000.0),
        "symmetric": (17.0, 20.0, 23.0, 10.0, 1000.0),
        "few": (*lognormal, 0.01, 29.0),
        "lognormal with a zero": (*lognormal, 0.0, 1000.0),
        "exponential with a negative": (*exponential, -0.5, 1000.0),
        "cycle": (39.2, 43.4, 48.6, 30.0, 5000.0),
    }
    table = {
        name: [row[k] for row in rows.values()]
        for k, name in enumerate(("q10", "q50", "q90", "low", "n"))
    }
    chosen = dict(zip(rows, _choice(table), strict=True))
    assert {k: scale_name(v) for k, v in chosen.items()} == {
        "lognormal": "log",
        "exponential": "cube root",
        "symmetric": "raw",
        "few": "raw",
        "lognormal with a zero": "fourth root",
        "exponential with a negative": "raw",
        "cycle": "raw",
    }
    # In steps of 0.25, a span of 3.6 is fewer than 20 steps: too coarse to tell a shape.
    assert _choice({k: v[:1] for k, v in table.items()}, resolution=0.25) == [RAW]


def test_the_scale_setting_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "dq.yaml"
    path.write_text("outlier_check:\n  scale: raw\n", encoding="utf-8")
    assert resolve(path, environ={}).outlier_check.scale == "raw"
    path.write_text("outlier_check:\n  scale: log\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        resolve(path, environ={})
    assert "outlier_check.scale" in info.value.message


@pytest.mark.spark
def test_a_lognormal_fault_on_spark(spark_engine: Engine, tmp_path: Path) -> None:
    result = _run(spark_engine, _lognormal(tmp_path, 12.0), alone())
    assert _columns(result, "outlier_count", "scales") == {"dust": (6, {"log": 4})}
    assert [(f.entity, f.count) for f in result.findings] == [("d2", 6)]


def test_out_of_core_the_scales_come_from_ranks_alike(tmp_path: Path) -> None:
    """Over a memory budget (`--max-memory`, as tests/test_out_of_core.py) the quantiles that
    choose the scale come from ranks: the same outlier_check as in memory."""
    in_memory = assert_same_out_of_core(_lognormal(tmp_path, 12.0), "outlier_check")
    assert in_memory["checks"]["outlier_check"]["metrics"]["columns"]["dust"]["scales"] == {
        "log": 4
    }
