"""Clean sensor series for the range, flat-line and spike checks: data with no fault at all, which
must pass at every size (a status means evidence beyond chance)."""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

CLEAN_KINDS = ("gaussian", "ar1", "daily_cycle", "quantised")


def clean_values(kind: str, n: int, seed: int) -> list[float]:
    """n readings, one a minute: white noise, an AR(1) process, a daily cycle with sensor noise,
    or an AR(1) process read to 0.1 (many repeats)."""
    rng = random.Random(seed)
    if kind == "gaussian":
        return [20.0 + rng.gauss(0, 1) for _ in range(n)]
    if kind == "daily_cycle":
        return [20.0 + 5.0 * math.sin(2 * math.pi * i / 1440) + rng.gauss(0, 0.2) for i in range(n)]
    values, x = [], 0.0
    for _ in range(n):
        x = 0.9 * x + rng.gauss(0, 0.3)
        values.append(50.0 + x)
    if kind == "quantised":
        return [round(v, 1) for v in values]
    return values


def clean_fleet(tmp_path: Path, kind: str, per_device: int, devices: int = 3) -> Path:
    """A Parquet file of `devices` devices with `per_device` clean readings each."""
    start = datetime(2024, 1, 1)
    frames = [
        pl.DataFrame(
            {
                "timestamp": [start + timedelta(minutes=i) for i in range(per_device)],
                "device": f"d{d}",
                "humidity": clean_values(kind, per_device, seed=1000 * d + per_device),
            }
        )
        for d in range(devices)
    ]
    path = tmp_path / f"{kind}_{per_device}.parquet"
    pl.concat(frames).write_parquet(path)
    return path
