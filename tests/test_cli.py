import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from dq_agent import __version__
from dq_agent.catalogue import CHECK_NAMES
from dq_agent.cli import app
from tests.conftest import clean_frame

ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}


def run(*args: str) -> tuple[int, str, str]:
    runner = CliRunner()
    result = runner.invoke(app, list(args), env=ENV, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == 0
    assert out.strip() == f"dq-agent {__version__}"


def test_help_documents_exit_codes() -> None:
    code, out, _ = run("inspect", "--help")
    assert code == 0
    assert "3 the input cannot be read" in " ".join(out.split())
    for option in (
        "--no-agent",
        "--format",
        "--output",
        "--fail-on",
        "--as-of",
        "--quiet",
        "--debug",
    ):
        assert option in out


def test_clean_data_passes_with_every_dimension(clean_parquet: Path) -> None:
    code, out, err = run("inspect", str(clean_parquet), "--no-agent")
    assert code == 0, err
    for name in ("Missing values", "Duplicates", "Outliers", "Timing & delays", "Structure"):
        assert name in out
    assert "PASS" in out
    assert "direct" in out
    assert "Traceback" not in out + err


def test_json_contract_keys(clean_parquet: Path) -> None:
    code, out, _ = run("inspect", str(clean_parquet), "--no-agent", "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert report["schema_version"] == "1.0"
    assert report["verdict"] == "pass"
    assert report["dataset"]["rows"] == 720
    assert report["dataset"]["roles"]["entity"] == ["device_id"]
    assert set(report["dataset"]["time_range"]) == {"start", "end"}
    tools = list(CHECK_NAMES)
    assert list(report["checks"]) == tools
    for tool in tools:
        check = report["checks"][tool]
        assert check["source"] == "direct"
        assert {"status", "summary", "metrics", "findings"} <= set(check)
    assert report["audit"] == {
        "expected_tools": tools,
        "called_tools": tools,
        "called_after_push": [],
        "fallback_executed": [],
        "fallback_outputs": {},
    }
    metrics = {tool: report["checks"][tool]["metrics"] for tool in tools}
    assert {"null_count", "missing_count", "missing_rate"} <= set(
        metrics["null_check"]["columns"]["pressure"]
    )
    assert {"exact_duplicate_rows", "duplicate_key_rows", "conflicting_key_rows"} <= set(
        metrics["duplicate_check"]
    )
    assert "outlier_count" in metrics["outlier_check"]["columns"]["temperature"]
    assert {"gap_count", "max_gap_seconds", "late_rows", "out_of_order_rows"} <= set(
        metrics["delay_check"]
    )
    assert {
        "missing_columns",
        "unexpected_columns",
        "unparseable_timestamps",
        "text_numeric_columns",
        "invalid_utf8_values",
    } <= set(metrics["structure_check"])
    assert report["agent"]["status"] == "disabled"
    assert "total_seconds" in report["timings"]


def faulty_parquet(tmp_path: Path) -> Path:
    frame = clean_frame()
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()) < 3)
        .then(None)
        .otherwise(pl.col("pressure"))
        .alias("pressure")
    )
    path = tmp_path / "faulty.parquet"
    frame.write_parquet(path)
    return path


def test_fail_on_sets_exit_code(tmp_path: Path) -> None:
    path = faulty_parquet(tmp_path)  # 3 of 720 pressure values missing: warn
    assert run("inspect", str(path), "--no-agent", "--fail-on", "warn")[0] == 1
    assert run("inspect", str(path), "--no-agent", "--fail-on", "fail")[0] == 0
    assert run("inspect", str(path), "--no-agent", "--fail-on", "never")[0] == 0


def test_output_file_is_written_and_stdout_stays_clean(tmp_path: Path, clean_parquet: Path) -> None:
    target = tmp_path / "r.json"
    code, out, err = run(
        "inspect", str(clean_parquet), "--no-agent", "-f", "json", "-o", str(target), "--quiet"
    )
    assert code == 0
    assert out == ""
    assert err == ""
    assert json.loads(target.read_text())["verdict"] == "pass"


def test_markdown_output(tmp_path: Path, clean_parquet: Path) -> None:
    code, out, _ = run("inspect", str(clean_parquet), "--no-agent", "--format", "markdown")
    assert code == 0
    assert out.startswith("# Data-quality report")
    assert "| Missing values | PASS |" in out


def test_quiet_rich_prints_nothing(clean_parquet: Path) -> None:
    code, out, err = run("inspect", str(clean_parquet), "--no-agent", "--quiet")
    assert (code, out, err) == (0, "", "")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--format", "xml"], 2, "--format must be one of"),
        (["--fail-on", "sometimes"], 2, "--fail-on must be one of"),
        (["--as-of", "yesterday-ish"], 2, "--as-of"),
    ],
)
def test_bad_options_exit_2(clean_parquet: Path, args: list[str], code: int, message: str) -> None:
    result_code, _, err = run("inspect", str(clean_parquet), "--no-agent", *args)
    assert result_code == code
    assert message in err
    assert "Traceback" not in err


def test_missing_input_exits_3_with_one_line(tmp_path: Path) -> None:
    code, out, err = run("inspect", str(tmp_path / "nope.parquet"), "--no-agent")
    assert code == 3
    assert err.strip().count("\n") == 0
    assert "no such file or directory" in err
    assert out == ""


def test_header_only_csv_exits_3(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("timestamp,device_id,value\n")
    code, _, err = run("inspect", str(path), "--no-agent")
    assert code == 3
    assert "no data rows" in err


def test_bad_config_exits_2_naming_key_and_file(tmp_path: Path, clean_parquet: Path) -> None:
    config = tmp_path / "dq.yaml"
    config.write_text("outlier_check:\n  sigma: -3\n")
    code, _, err = run("inspect", str(clean_parquet), "--no-agent", "--config", str(config))
    assert code == 2
    assert "outlier_check.sigma" in err
    assert str(config) in err


def test_output_may_not_overwrite_input(clean_parquet: Path) -> None:
    before = clean_parquet.read_bytes()
    code, _, err = run("inspect", str(clean_parquet), "--no-agent", "-o", str(clean_parquet))
    assert code == 2
    assert "is the input file" in err
    assert clean_parquet.read_bytes() == before


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["inspect", str(tmp_path / "nope.csv"), "--no-agent", "--debug"], env=ENV
    )
    assert result.exit_code != 0
    assert type(result.exception).__name__ == "InputError"


def test_markup_and_escape_sequences_in_data_are_shown_literally(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    rows = "".join(f"2024-01-01T00:{i:02d}:00,[bold]dev\x1b[31m,{i % 7}\n" for i in range(40))
    path.write_text(
        "timestamp,[link=http://x]device_id[/link],value\n" + rows + "2024-01-01T01:00:00,x,\n"
    )
    code, out, err = run("inspect", str(path), "--no-agent")
    assert code in (0, 1), err
    assert "[link=http://x]device_id[/link]" in out
    assert "\x1b" not in out


def test_trace_may_not_overwrite_input(clean_parquet: Path) -> None:
    before = clean_parquet.read_bytes()
    code, _, err = run("inspect", str(clean_parquet), "--no-agent", "--trace", str(clean_parquet))
    assert code == 2
    assert "is the input file" in err
    assert clean_parquet.read_bytes() == before


def test_a_check_that_errors_leaves_its_dimension_unchecked_and_exits_3(
    clean_parquet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from dq_agent import tools
    from dq_agent.checks.base import CheckPlan

    broken_name = CHECK_NAMES[2]

    def broken_plan(*_: object) -> CheckPlan:
        def finish(_frames: object) -> object:
            raise TypeError("a dtype this check cannot handle")

        return CheckPlan(broken_name, [], finish)  # type: ignore[arg-type]

    catalogue = tuple(
        dataclasses.replace(spec, plan=broken_plan) if spec.name == broken_name else spec
        for spec in tools.CATALOGUE
    )
    monkeypatch.setattr(tools, "CATALOGUE", catalogue)
    code, out, err = run("inspect", str(clean_parquet), "--no-agent", "--format", "json")
    assert code == 3, err
    report = json.loads(out)
    check = report["checks"][broken_name]
    assert check["status"] == "error"
    assert check["error"] == "TypeError: a dtype this check cannot handle"
    # Every other dimension was still checked and passed.
    others = {name: c["status"] for name, c in report["checks"].items() if name != broken_name}
    assert others == dict.fromkeys(others, "pass") and len(others) == len(CHECK_NAMES) - 1


def test_a_run_writes_its_history_under_the_isolated_home(
    clean_parquet: Path, isolated_user_state: Path
) -> None:
    runner = CliRunner()
    env = {k: v for k, v in ENV.items() if k != "DQ_AGENT_HISTORY"}
    result = runner.invoke(app, ["inspect", str(clean_parquet), "--no-agent"], env=env)
    assert result.exit_code == 0, result.stderr
    assert (isolated_user_state / "dq-agent" / "history.sqlite").is_file()
    assert Path.home() == isolated_user_state


def test_the_cli_imports_no_heavy_library_before_a_command_runs() -> None:
    # `--help` and `--version` stay fast: Polars, pyarrow, the Ollama client and Rich load only
    # when a command does its work (the speed itself is measured by `make bench`).
    import subprocess
    import sys

    code = (
        "import sys, dq_agent.cli; "
        "print(sorted(m for m in ('polars', 'pyarrow', 'ollama', 'httpx', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_run_without_the_model_loads_no_ollama_client(clean_parquet: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from dq_agent.cli import main; sys.argv = ['dq-agent', 'inspect', "
        f"{str(clean_parquet)!r}, '--no-agent', '--no-history', '-q']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('ollama', 'httpx', 'dq_agent.agent.loop') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_checks_option_runs_only_the_named_checks_and_says_which_were_left_out(
    clean_parquet: Path,
) -> None:
    code, out, _ = run(
        "inspect",
        str(clean_parquet),
        "--no-agent",
        "--format",
        "json",
        "--checks",
        "range_check,null_check",
    )
    assert code == 0
    report = json.loads(out)
    # Catalogue order, whatever order the option gave.
    assert list(report["checks"]) == ["null_check", "range_check"]
    assert report["audit"]["expected_tools"] == ["null_check", "range_check"]
    code, out, _ = run("inspect", str(clean_parquet), "--no-agent", "--checks", "spike_check")
    assert code == 0
    assert "not selected (run.checks): null_check, duplicate_check" in " ".join(out.split())


def test_checks_option_rejects_an_unknown_check(clean_parquet: Path) -> None:
    code, _, err = run("inspect", str(clean_parquet), "--no-agent", "--checks", "null_chek")
    assert code == 2
    assert "'run.checks' in option --checks" in err and "null_chek" in err


def test_exit_3_says_why_on_stderr(clean_parquet: Path) -> None:
    # range_check without limits judges nothing: not evaluated, so nothing was checked.
    code, out, err = run("inspect", str(clean_parquet), "--no-agent", "--checks", "range_check")
    assert code == 3
    assert "SKIPPED" in out
    assert err.strip().splitlines()[-1] == (
        "dq-agent: exit 3: nothing was checked: every check errored or was not evaluated "
        "(see the report)"
    )
    code, _, err = run("inspect", str(clean_parquet), "--no-agent", "-q", "--checks", "range_check")
    assert code == 3
    assert "dq-agent: exit 3: nothing was checked" in err
