"""Timing fixtures for delay_check: series whose gaps, order and latency are known by construction.

Every figure a test asserts is derived here from the minute offsets, not from the check.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, timedelta
from pathlib import Path

from tests.fixtures_checks import T0, minute, write_csv

# Device a samples every 5 minutes (median positive step 300 s). Its steps are
# 5,5,5,5,30,5,5,20,5,5,15,5,5,5: with the default factor 3 the 30- and 20-minute steps are gaps
# (> 15 min) and the 15-minute step, exactly 3x, is not.
A_MINUTES = [0, 5, 10, 15, 20, 50, 55, 60, 80, 85, 90, 105, 110, 115, 120]
# Device b is hourly and device c every minute, both without gaps: a single fleet-wide interval
# would call every step of b a gap.
B_MINUTES = [60 * h for h in range(12)]
C_MINUTES = list(range(30))
INTERVALS_ROWS = len(A_MINUTES) + len(B_MINUTES) + len(C_MINUTES)  # 57

A_GAPS = [(20, 50), (60, 80)]  # (start, end) minutes, longest first
A_GAP_SECONDS = [(end - start) * 60 for start, end in A_GAPS]  # [1800, 1200]
# Missing time beyond the expected 5 minutes: 25 + 15 minutes.
A_MISSING_SECONDS = sum(seconds - 300 for seconds in A_GAP_SECONDS)  # 2400


def intervals_csv(tmp_path: Path) -> Path:
    """Devices a (gaps), b (hourly) and c (every minute), rows in time order."""
    rows = [(m, "a", 20.0 + i) for i, m in enumerate(A_MINUTES)]
    rows += [(m, "b", 30.0 + i) for i, m in enumerate(B_MINUTES)]
    rows += [(m, "c", 40.0 + i) for i, m in enumerate(C_MINUTES)]
    rows.sort(key=lambda r: (r[0], r[1]))
    return write_csv(
        tmp_path / "intervals.csv",
        ["timestamp", "device_id", "value"],
        [[minute(m), device, value] for m, device, value in rows],
    )


# Devices x and y written alternately (x on even rows, y on odd rows). x has two swapped pairs:
# minutes 2 and 6 come after a later minute. y repeats minute 2 at once (a repeat, in order) and
# minute 3 after minute 5 (a repeat that is also out of order).
X_FILE_ORDER = [0, 1, 3, 2, 4, 5, 7, 6, 8, 9]
Y_FILE_ORDER = [0, 1, 2, 2, 3, 4, 5, 3, 6, 7]
ORDER_ROWS = 20
OUT_OF_ORDER_ROWS = [6, 14, 15]  # file rows (0-based): x's minute 2 and 6, y's second minute 3
DUPLICATE_TIMESTAMPS = 2


def order_csv(tmp_path: Path) -> Path:
    rows = []
    for x_minute, y_minute in zip(X_FILE_ORDER, Y_FILE_ORDER, strict=True):
        rows.append([minute(x_minute), "x", 1.0])
        rows.append([minute(y_minute), "y", 2.0])
    return write_csv(tmp_path / "order.csv", ["timestamp", "device_id", "value"], rows)


# 20 readings a minute apart; ingest latencies in seconds. Over the 300 s threshold: 301, 600
# and 3600 (300 itself is not over).
LATENCIES = [30] * 14 + [200, 299, 300, 301, 600, 3600]
LATE_ROWS = 3


def linear_quantile(values: Sequence[float], q: float) -> float:
    """The linear-interpolation quantile (position q x (n - 1) in the sorted values)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_csv(tmp_path: Path) -> Path:
    rows = []
    for i, latency in enumerate(LATENCIES):
        arrived = (T0 + timedelta(minutes=i, seconds=latency)).strftime("%Y-%m-%d %H:%M:%S")
        rows.append([minute(i), "m1", 1.0 + i, arrived])
    return write_csv(
        tmp_path / "latency.csv", ["timestamp", "device_id", "value", "ingest_time"], rows
    )


def iso_at(minutes: float) -> str:
    """T0 plus `minutes` as an ISO UTC string, as the config's as_of or a check reports it."""
    return (T0 + timedelta(minutes=minutes)).replace(tzinfo=UTC).isoformat()
