"""Which tokens a narrative presents as data names, and which are the tool's own words."""

from __future__ import annotations

import pytest

from dq_agent.narrative.names import NameKind, find_name_claims


def _names(text: str) -> list[str]:
    return [claim.name for claim in find_name_claims(text)]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("998 missing values found in column1.", ["column1"]),
        ("Spikes on sensor_7 and deviceId.", ["sensor_7", "deviceId"]),
        ("Nulls in `pressure` and in `Outlet Temp`.", ["pressure", "Outlet Temp"]),
        ("Latency is `ingest_time - timestamp`.", ["ingest_time", "timestamp"]),
        ("The column 'flow rate' is empty.", ["flow rate"]),
        ('The "humidity" column is empty.', ["humidity"]),
        ("Missing values in column humidity.", ["humidity"]),
        ("Outliers in columns temperature and pressure.", ["temperature", "pressure"]),
        ("The humidity column is constant.", ["humidity"]),
        ("The temperature and pressure columns have gaps.", ["temperature", "pressure"]),
        ("Device 7 and sensor S-12 and machine M3 are late.", ["7", "S-12", "M3"]),
        ("The device_id key's repeats.", ["device_id"]),
    ],
)
def test_data_names_are_found(text: str, names: list[str]) -> None:
    assert _names(text) == names


@pytest.mark.parametrize(
    "text",
    [
        "The timestamp column parses and each column has the expected types.",
        "All 4 columns present; the column is constant; columns types are fine.",
        "The column reads as text; each column holds floats; one column stores text.",
        "null_check, Structure_Check and verify_result() ran.",
        "p95 latency in UTF-8, int64 and Float64 columns, ISO8601 times.",
        "`missing` values and `duplicates`, status `PASS`, `-999` sentinels.",
        "Sensor ID and device data across all devices.",
    ],
)
def test_the_tools_own_words_are_not_data_names(text: str) -> None:
    assert _names(text) == []


def test_file_names_are_claims_of_their_own_kind() -> None:
    claims = find_name_claims("Read data/sensors.parquet and plant.CSV, e.g. the 2nd file.")

    assert [(c.name, c.kind) for c in claims] == [
        ("data/sensors.parquet", NameKind.FILE),
        ("plant.CSV", NameKind.FILE),
    ]


def test_claims_carry_their_span() -> None:
    text = "Gaps on sensor_2 in column `pressure`."

    assert [text[c.start : c.end] for c in find_name_claims(text)] == ["sensor_2", "`pressure`"]
