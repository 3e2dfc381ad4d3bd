import os
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
import xmlschema

from dq_agent.catalogue import CHECK_NAMES
from dq_agent.report.junit import render_junit
from dq_agent.result import Status
from tests.report_fixtures import sample_inspection

SCHEMA = xmlschema.XMLSchema(Path(__file__).parent / "schemas" / "junit.xsd")
GOLDEN = Path(__file__).parent / "golden" / "report_junit.xml"


def test_junit_matches_golden_snapshot() -> None:
    text = render_junit(sample_inspection())
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_junit_validates_against_the_schema() -> None:
    SCHEMA.validate(render_junit(sample_inspection()))
    SCHEMA.validate(render_junit(sample_inspection(), warn_as="failure"))


def test_the_schema_rejects_what_a_ci_reader_would_not_take() -> None:
    """The schema can fail: a case without its time, a suite timestamp with a zone."""
    text = render_junit(sample_inspection())
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        SCHEMA.validate(re.sub(r'(<testcase [^>]*?) time="[^"]*"', r"\1", text, count=1))
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        SCHEMA.validate(text.replace('timestamp="2024-01-02T06:00:00"', 'timestamp="x"'))


def _cases(text: str) -> dict[str, ET.Element]:
    root = ET.fromstring(text)
    return {case.get("name", "").split(" ")[0]: case for case in root.iter("testcase")}


def _status(case: ET.Element) -> str | None:
    for prop in case.iter("property"):
        if prop.get("name") == "dq.status":
            return prop.get("value")
    return None


def test_one_case_per_check_with_the_status_as_outcome() -> None:
    inspection = sample_inspection()
    root = ET.fromstring(render_junit(inspection))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "1", "1")
    cases = _cases(render_junit(inspection))
    assert list(cases) == list(inspection.checks)
    assert cases["null_check"].find("failure") is not None
    assert cases["null_check"].find("failure").get("message").startswith("998 missing")  # type: ignore[union-attr]
    assert cases["delay_check"].find("error") is not None
    # A warning passes by default and says so; with warn_as=failure it fails.
    assert cases["duplicate_check"].find("failure") is None
    assert _status(cases["duplicate_check"]) == "warn"
    strict = _cases(render_junit(inspection, warn_as="failure"))
    assert strict["duplicate_check"].find("failure") is not None


def test_skipped_check_is_skipped() -> None:
    inspection = sample_inspection()
    inspection.checks["outlier_check"] = replace(
        inspection.checks["outlier_check"], status=Status.SKIPPED
    )
    text = render_junit(inspection)
    SCHEMA.validate(text)
    assert _cases(text)["outlier_check"].find("skipped") is not None


def test_hostile_data_stays_well_formed_xml() -> None:
    hostile = 'p"<x>&\x1b[2J\x00]]>'
    inspection = sample_inspection(data_name=hostile)
    inspection.dataset.path = hostile
    text = render_junit(inspection)
    SCHEMA.validate(text)
    root = ET.fromstring(text)
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and 'p"<x>&\\x1b[2J\\x00]]>' in (failure.text or "")
    assert "\x1b" not in text and "\x00" not in text


def test_cli_writes_a_valid_junit_file_of_a_real_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dq_agent.cli import app

    data = tmp_path / "readings.csv"
    data.write_text(
        "time;plant;temp\n"
        + "".join(f"2024-05-01T00:{m:02d}:00Z;A;{20 + (m % 3) * 0.1}\n" for m in range(60))
        + "2024-05-01T01:00:00Z;A;\n" * 30,
        encoding="utf-8",
    )
    target = tmp_path / "report.xml"
    result = CliRunner().invoke(
        app,
        [
            "inspect",
            str(data),
            "--no-agent",
            "-f",
            "junit",
            "-o",
            str(target),
            "--as-of",
            "2024-05-01T02:00:00Z",
            "--junit-warn-as",
            "failure",
        ],
        env={"DQ_AGENT_HISTORY": "false", "NO_COLOR": "1"},
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.stderr
    text = target.read_text(encoding="utf-8")
    SCHEMA.validate(text)
    cases = _cases(text)
    assert set(cases) == set(CHECK_NAMES)
    assert _status(cases["null_check"]) == "fail"
    assert cases["null_check"].find("failure") is not None


def test_guessed_roles_are_a_suite_property() -> None:
    inspection = sample_inspection()
    inspection.dataset.inferred = [
        {"role": "entity", "value": "device_id", "reason": "named so", "setting": "columns.entity"}
    ]
    text = render_junit(inspection)
    SCHEMA.validate(text)
    assert (
        '<property name="dq.guessed" value="entity=device_id (named so; set columns.entity)" />'
        in text
    )
