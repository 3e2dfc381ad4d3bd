from dq_agent.report.markdown import render_markdown
from tests.report_fixtures import sample_inspection


def test_markdown_has_table_audit_and_marks_backfill() -> None:
    text = render_markdown(sample_inspection())
    assert text.startswith("# Data-quality report: sample\\_data/sensors.parquet")
    assert "**Verdict: FAIL**" in text
    assert (
        "| Structure | PASS | 5 columns as expected | **BACKFILLED (model skipped it)** |" in text
    )
    assert "| Timing & delays | ERROR |" in text
    assert "backfilled: delay\\_check, structure\\_check" in text


def test_markdown_escapes_data() -> None:
    text = render_markdown(sample_inspection(data_name="p|<script>`x`\x1b"))
    assert "<script>" not in text
    assert "p\\|\\<script\\>\\`x\\`\\\\x1b" in text
