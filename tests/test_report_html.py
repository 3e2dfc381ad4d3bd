"""The HTML report: self-contained, escaped, within its size limits, and rendered by a real
headless Chromium with no network request and no console error."""

import os
import re
import shutil
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from dq_agent.config import resolve
from dq_agent.inspection import inspect
from dq_agent.outcome import Inspection
from dq_agent.report.html import render_html
from dq_agent.result import Event, Status
from tests.conftest import ROOT, SAMPLE_DIR
from tests.report_fixtures import DAY, sample_inspection

GOLDEN = Path(__file__).parent / "golden" / "report.html"
SCREENSHOT = ROOT / "docs" / "report-sample.png"


def _sample() -> Inspection:
    """The sample as the README shows it: run from the repository, path as typed there."""
    config = resolve(None, {"agent.enabled": False, "history.enabled": False})
    config.delay_check.as_of = "2024-03-05T00:00:00Z"
    inspection = inspect(str(SAMPLE_DIR / "sensors.parquet"), config)
    inspection.dataset.path = "sample_data/sensors.parquet"
    return inspection


def test_html_matches_golden_snapshot() -> None:
    text = render_html(sample_inspection())
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_nothing_is_loaded_from_elsewhere() -> None:
    text = render_html(sample_inspection())
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert "<script" not in text
    assert not re.search(r"\b(src|href)\s*=", text)
    assert "@import" not in text and "url(" not in text
    # The only address is the SVG namespace, a name that is never fetched.
    assert set(re.findall(r"https?://[^\"' )]+", text)) == {"http://www.w3.org/2000/svg"}


def test_every_name_and_value_is_escaped() -> None:
    hostile = '<script>alert(1)</script>"&\x1b'
    inspection = sample_inspection(data_name=hostile)
    inspection.dataset.path = hostile
    result = inspection.checks["null_check"]
    inspection.checks["null_check"] = replace(
        result, events=[Event("missing", hostile, hostile, DAY, DAY, 3)]
    )
    text = render_html(inspection)
    assert "<script>" not in text and "\x1b" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&amp;\\x1b" in text


def test_backfilled_and_errors_are_marked() -> None:
    text = render_html(sample_inspection())
    assert '<span class="backfilled">BACKFILLED (model skipped it)</span>' in text
    assert "could not run: ComputeError: boom" in text
    assert "The agent&#x27;s account" in text or "The agent's account" in text


def test_sample_report_is_small() -> None:
    size = len(render_html(_sample()).encode("utf-8"))
    assert size <= 80_000, size


def test_300_devices_over_a_day_stay_under_a_megabyte() -> None:
    """The worst picture: every device has a problem of alternating kinds in every other
    bucket, so no two cells merge."""
    inspection = sample_inspection()
    kinds = ("missing", "duplicate_key", "outlier")
    events = [
        Event(
            kinds[(d + b) % 3],
            f"device-{d:03d}",
            "pressure",
            DAY + timedelta(minutes=5 * b),
            DAY + timedelta(minutes=5 * b),
            1 + (b % 2),
        )
        for d in range(300)
        for b in range(0, 288, 1)
    ]
    inspection.checks["null_check"] = replace(inspection.checks["null_check"], events=events)
    inspection.dataset.entities = 300
    text = render_html(inspection)
    size = len(text.encode("utf-8"))
    assert size <= 1_000_000, size
    # 300 devices and the fixture's 3; the heat map shows the worst 100.
    assert "… 203 more entities" in text


def _chromium() -> str | None:
    return os.environ.get("DQ_AGENT_CHROMIUM") or shutil.which("chromium")


def test_renders_offline_in_headless_chromium(tmp_path: Path) -> None:
    executable = _chromium()
    if executable is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed: CI must install it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(_sample()), encoding="utf-8")
    requests: list[str] = []
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1150, "height": 900})
            page.on("request", lambda request: requests.append(request.url))
            page.on(
                "console",
                lambda message: problems.append(message.text) if message.type == "error" else None,
            )
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(page_file.as_uri(), wait_until="load")
            heatmap = page.locator("svg.heatmap")
            box = heatmap.bounding_box()
            assert box is not None and box["width"] > 800 and box["height"] > 100
            titles = page.locator("svg.heatmap rect title").all_text_contents()
            assert "dev-01 05:55–08:00: gap, no data" in titles
            assert "dev-01 10:10–10:15: rows at a repeated key (several)" in titles
            assert page.locator("ol.incidents li").count() >= 5
            assert page.title().startswith("dq-agent: sample_data/sensors.parquet")
            if os.environ.get("UPDATE_SCREENSHOT") == "1":
                page.screenshot(path=str(SCREENSHOT))
        finally:
            browser.close()
    assert requests == [page_file.as_uri()]
    assert problems == []


def test_status_colours_cover_every_status() -> None:
    from dq_agent.report.html import STATUS_COLOURS

    assert set(STATUS_COLOURS) == set(Status)


def test_guessed_roles_are_said() -> None:
    inspection = sample_inspection()
    inspection.dataset.inferred = [
        {
            "role": "entity",
            "value": "device_id",
            "reason": "named like a device",
            "setting": "columns.entity",
        }
    ]
    page = render_html(inspection)
    assert "Guessed: entity=device_id (named like a device; set columns.entity)" in page
    assert "Guessed:" not in render_html(sample_inspection())
