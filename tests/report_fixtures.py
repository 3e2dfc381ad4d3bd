"""A fixed Inspection for the renderer tests and golden snapshots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dq_agent.outcome import AgentInfo, Audit, DatasetInfo, Inspection
from dq_agent.result import CheckResult, Event, Finding, Source, Status

TOOLS = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]


DAY = datetime(2024, 1, 1, tzinfo=UTC)


def at(hour: int, minute: int = 0) -> datetime:
    return DAY + timedelta(hours=hour, minutes=minute)


def _missing_events(column: str) -> list[Event]:
    """dev-03 lost `column` from 02:00 to 03:10 (5-minute buckets), dev-05 once at 12:00."""
    run = [Event("missing", "dev-03", column, at(2, 5 * i), at(2, 5 * i + 4), 5) for i in range(14)]
    return [*run, Event("missing", "dev-05", column, at(12), at(12), 1)]


def _conflict(entity: str, hour: int, minute: int) -> Finding:
    return Finding(
        what="1 conflicting reading at 1 duplicated key",
        count=1,
        entity=entity,
        start=at(hour, minute).isoformat(),
        end=at(hour, minute).isoformat(),
        examples=[{"entity": entity, "timestamp": at(hour, minute).isoformat(), "copies": 2}],
    )


def sample_inspection(data_name: str = "pressure") -> Inspection:
    checks = {
        "null_check": CheckResult(
            tool="null_check",
            status=Status.FAIL,
            summary=f"998 missing values in 1 of 4 columns ({data_name} 8.7%)",
            metrics={
                "columns": {
                    data_name: {"null_count": 998, "missing_count": 998, "missing_rate": 0.0866}
                }
            },
            findings=[
                Finding(
                    what="missing values",
                    count=998,
                    severity=Status.FAIL,
                    column=data_name,
                    entity="dev-03",
                    start="2024-01-01T02:00:00+00:00",
                    end="2024-01-01T03:10:00+00:00",
                    examples=[
                        {
                            "device_id": "dev-03",
                            "timestamp": "2024-01-01T02:00:00+00:00",
                            data_name: None,
                        }
                    ],
                )
            ],
            source=Source.AGENT,
            events=_missing_events(data_name),
        ),
        "duplicate_check": CheckResult(
            tool="duplicate_check",
            status=Status.WARN,
            summary="12 duplicate keys (12 conflicting), 0 exact duplicate rows",
            metrics={
                "exact_duplicate_rows": 0,
                "duplicate_key_rows": 12,
                "conflicting_key_rows": 12,
            },
            findings=[
                _conflict("dev-01", 16, 15),
                _conflict("dev-04", 11, 21),
                _conflict("dev-03", 3, 12),
            ],
            source=Source.AGENT,
            events=[
                Event("duplicate_key", "dev-01", None, at(16, 15), at(16, 15), 2),
                Event("duplicate_key", "dev-04", None, at(11, 21), at(11, 21), 2),
                Event("duplicate_key", "dev-03", None, at(3, 12), at(3, 12), 2),
            ],
        ),
        "outlier_check": CheckResult(
            tool="outlier_check",
            status=Status.PASS,
            summary="no outliers beyond 3 sigma in 2 columns",
            metrics={"columns": {"temperature": {"outlier_count": 0}}},
            source=Source.AGENT,
            # A passing check's events are chance: the picture leaves them out.
            events=[Event("outlier", "dev-07", "temperature", at(9), at(9), 1)],
        ),
        "delay_check": CheckResult.failed(
            "delay_check", "ComputeError: boom", "check the timestamp column"
        ),
        "structure_check": CheckResult(
            tool="structure_check",
            status=Status.PASS,
            summary="5 columns as expected",
            metrics={"missing_columns": []},
            source=Source.BACKFILLED,
        ),
    }
    return Inspection(
        dataset=DatasetInfo(
            path="sample_data/sensors.parquet",
            file_format="parquet",
            files=1,
            rows=11520,
            columns=["timestamp", "device_id", "temperature", data_name],
            roles={
                "timestamp": "timestamp",
                "entity": ["device_id"],
                "values": ["temperature", data_name],
            },
            time_start="2024-01-01T00:00:00+00:00",
            time_end="2024-01-01T23:59:00+00:00",
            entities=8,
        ),
        checks=checks,
        audit=Audit(
            expected_tools=TOOLS,
            called_tools=TOOLS[:3],
            fallback_executed=["delay_check", "structure_check"],
            fallback_outputs={"structure_check": checks["structure_check"].to_dict()},
        ),
        agent=AgentInfo(
            status="ok", model="qwen2.5:7b", mode="tools", steps=7, narrative="Pressure has gaps."
        ),
        timings={"load_seconds": 0.01, "checks_seconds": 0.2, "total_seconds": 0.21},
        started_at="2024-01-02T06:00:00+00:00",
    )
