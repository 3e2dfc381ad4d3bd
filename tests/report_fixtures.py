"""A fixed Inspection for the renderer tests and golden snapshots."""

from __future__ import annotations

from dq_agent.outcome import AgentInfo, Audit, DatasetInfo, Inspection
from dq_agent.result import CheckResult, Finding, Source, Status

TOOLS = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]


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
            source=Source.AGENT,
        ),
        "outlier_check": CheckResult(
            tool="outlier_check",
            status=Status.PASS,
            summary="no outliers beyond 3 sigma in 2 columns",
            metrics={"columns": {"temperature": {"outlier_count": 0}}},
            source=Source.AGENT,
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
