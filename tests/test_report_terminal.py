import os
from pathlib import Path

from rich.console import Console

from dq_agent.report.terminal import render_plain, render_rich
from tests.report_fixtures import sample_inspection

GOLDEN = Path(__file__).parent / "golden" / "report_rich.txt"


def test_rich_report_matches_golden_snapshot() -> None:
    text = render_plain(sample_inspection(), width=100)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_backfilled_and_error_dimensions_are_visible() -> None:
    text = render_plain(sample_inspection(), width=100)
    assert "BACKFILLED" in text
    assert "expected 5, called by the model 3, backfilled: delay_check, structure_check" in text
    assert "ComputeError: boom" in text
    assert "Verdict:  FAIL" in text


def test_data_is_never_markup_and_escapes_are_neutralised() -> None:
    hostile = "[bold red]pressure[/] \x1b[2J\x9b31m"
    text = render_plain(sample_inspection(data_name=hostile), width=100)
    assert "[bold red]pressure[/]" in text
    assert "\x1b" not in text and "\x9b" not in text
    assert "\\x1b[2J" in text


def test_no_colour_codes_when_not_a_terminal(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with target.open("w") as handle:
        render_rich(sample_inspection(), Console(file=handle, width=100))
    assert "\x1b[" not in target.read_text()


def test_colour_on_a_terminal_unless_no_color(tmp_path: Path, monkeypatch: object) -> None:
    target = tmp_path / "out.txt"
    with target.open("w") as handle:
        render_rich(sample_inspection(), Console(file=handle, width=100, force_terminal=True))
    assert "\x1b[" in target.read_text()
