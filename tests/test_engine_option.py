"""`--engine` / `run.engine` / DQ_AGENT_ENGINE: where a file's checks run.

The file is read by dq-agent's loader whatever the engine and handed over; the checks ported to
every engine run there and give the Polars run's results (the conformance suites compare each
check in detail; here the whole pipeline: the CLI, the report, the agent's drill-down); the
others run on Polars, and the report names them.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
import pytest
from typer.testing import CliRunner

from dq_agent.agent.drilldown import run_drill_down
from dq_agent.catalogue import CATALOGUE
from dq_agent.checks.base import Scope, run_plans
from dq_agent.checks.delays import AS_OF_KEY
from dq_agent.checks.nulls import build_null_check
from dq_agent.checks.portable import is_portable, on_engine, on_polars
from dq_agent.cli import app
from dq_agent.config import Config, resolve
from dq_agent.engines import Engine
from dq_agent.engines.names import engine_named
from dq_agent.errors import EXIT_USAGE, ConfigError
from dq_agent.inspection import inspect
from dq_agent.load import Dataset, load
from dq_agent.runner import resident, run_tools
from dq_agent.tools import DETECTION_TOOL_NAMES, not_ported, register_detection_tools
from tests.conftest import SAMPLE_DIR
from tests.fake_ollama import FakeOllama, call, reply, verify
from tests.spark_support import session_or_skip

SAMPLE = str(SAMPLE_DIR / "sensors.parquet")
ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
AS_OF = "2024-03-05T00:00:00"


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=ENV, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _checks(report: dict[str, Any]) -> dict[str, Any]:
    """Each check's outcome without its timings: what must not depend on the engine."""
    return {
        name: (check["status"], check["summary"], check["metrics"], check["findings"])
        for name, check in report["checks"].items()
    }


def test_the_engine_is_set_by_yaml_environment_and_option_in_that_order(tmp_path: Path) -> None:
    path = tmp_path / "dq.yaml"
    path.write_text("run:\n  engine: duckdb\n", encoding="utf-8")
    assert Config().run.engine == "polars"
    assert resolve(path, environ={}).run.engine == "duckdb"
    assert resolve(path, environ={"DQ_AGENT_ENGINE": "spark"}).run.engine == "spark"
    cli = {"run.engine": "polars"}
    assert resolve(path, cli=cli, environ={"DQ_AGENT_ENGINE": "spark"}).run.engine == "polars"


def test_an_unknown_engine_names_the_key_the_file_and_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "dq.yaml"
    path.write_text("run:\n  engine: snowflake\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        resolve(path, environ={})
    assert "run.engine" in info.value.message
    assert str(path) in info.value.message
    assert "polars, duckdb, spark" in info.value.message
    code, _, err = _cli("inspect", SAMPLE, "--no-agent", "--engine", "snowflake")
    assert code == EXIT_USAGE
    assert "--engine" in err
    assert "Traceback" not in err


def test_a_missing_extra_is_a_config_error_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An import of a module set to None fails: as on a machine without the extra.
    monkeypatch.setitem(sys.modules, "duckdb", None)
    monkeypatch.delitem(sys.modules, "dq_agent.engines.duckdb", raising=False)
    code, _, err = _cli("inspect", SAMPLE, "--no-agent", "--engine", "duckdb")
    assert code == EXIT_USAGE
    assert "pip install 'dq-agent[duckdb]'" in " ".join(err.split())
    assert "Traceback" not in err


def test_the_checks_on_duckdb_give_the_polars_run_and_the_report_says_where_they_ran() -> None:
    runs = {}
    for engine in ("polars", "duckdb"):
        code, out, err = _cli(
            "inspect", SAMPLE, "--no-agent", "-f", "json", "--as-of", AS_OF, "--engine", engine
        )
        assert code == 0, err  # the sample's faults warn; the default --fail-on is fail
        runs[engine] = json.loads(out)
    assert _checks(runs["duckdb"]) == _checks(runs["polars"])
    assert runs["duckdb"]["verdict"] == runs["polars"]["verdict"] == "warn"
    ported = [s.name for s in CATALOGUE if is_portable(s.plan)]
    others = [s.name for s in CATALOGUE if not is_portable(s.plan)]
    assert {"null_check", "duplicate_check", "range_check"} <= set(ported)
    assert runs["duckdb"]["dataset"]["engine"] == "duckdb"
    assert runs["duckdb"]["dataset"]["on_polars"] == others
    assert runs["polars"]["dataset"]["engine"] == "polars"
    assert runs["polars"]["dataset"]["on_polars"] == []


def test_every_report_names_the_engine() -> None:
    code, out, _ = _cli("inspect", SAMPLE, "--no-agent", "--engine", "duckdb", "--as-of", AS_OF)
    assert code == 0
    text = " ".join(out.replace("│", " ").split())
    assert "engine: duckdb" in text
    code, out, _ = _cli(
        "inspect", SAMPLE, "--no-agent", "--engine", "duckdb", "-f", "markdown", "--as-of", AS_OF
    )
    assert "- Engine: duckdb" in out
    code, out, _ = _cli(
        "inspect", SAMPLE, "--no-agent", "--engine", "duckdb", "-f", "html", "--as-of", AS_OF
    )
    assert '<p class="dim">Engine: duckdb</p>' in out
    code, out, _ = _cli(
        "inspect", SAMPLE, "--no-agent", "--engine", "duckdb", "-f", "junit", "--as-of", AS_OF
    )
    assert '<property name="dq.engine" value="duckdb"' in out
    code, out, _ = _cli("inspect", SAMPLE, "--no-agent", "--as-of", AS_OF)
    assert "engine:" not in out


def test_a_drill_down_narrows_on_the_engine_as_on_polars() -> None:
    config = resolve(cli={AS_OF_KEY: AS_OF}, environ={})
    dataset = resident(load(SAMPLE, config))
    engine = engine_named("duckdb")
    assert engine is not None
    on_polars = {t.name: t for t in register_detection_tools(dataset, config)}
    on_duckdb = {t.name: t for t in register_detection_tools(dataset, config, engine)}
    arguments = {"entity": "dev-02", "start": "2024-03-04T06:00:00"}
    for name in DETECTION_TOOL_NAMES:
        polars = run_drill_down(on_polars, {"tool": name, **arguments})
        duckdb = run_drill_down(on_duckdb, {"tool": name, **arguments})
        assert (duckdb.status, duckdb.summary, duckdb.metrics) == (
            polars.status,
            polars.summary,
            polars.metrics,
        ), name
        assert [f.to_dict() for f in duckdb.findings] == [f.to_dict() for f in polars.findings]


def test_an_agent_run_on_duckdb_gives_the_direct_verdict() -> None:
    config = Config()
    config.agent.enabled = False
    direct = inspect(SAMPLE, config)
    script = [
        reply(calls=[call(name) for name in DETECTION_TOOL_NAMES]),
        reply(calls=[call("drill_down", tool="range_check", entity="dev-02")]),
        verify(True),
        reply("Humidity on dev-02 is out of range."),
    ]
    with FakeOllama(script) as fake:
        config = Config()
        config.agent.host = fake.url
        config.agent.timeout_seconds = 5
        config.agent.fallback_merge = False
        config.run.engine = "duckdb"
        agent = inspect(SAMPLE, config)
    assert agent.dataset.engine == "duckdb"
    assert agent.audit.called_tools == list(DETECTION_TOOL_NAMES)
    assert agent.audit.fallback_executed == []
    assert {n: (r.status, r.summary) for n, r in agent.checks.items()} == {
        n: (r.status, r.summary) for n, r in direct.checks.items()
    }
    assert agent.verdict == direct.verdict


def test_not_ported_follows_the_selection() -> None:
    config = Config()
    config.run.checks = ["null_check", "range_check"]
    assert not_ported(config) == []
    config.run.checks = None
    assert not_ported(config) == [s.name for s in CATALOGUE if not is_portable(s.plan)]


@pytest.mark.spark
def test_the_checks_on_spark_give_the_polars_run() -> None:
    session_or_skip()
    runs = {}
    # Two checks: the conformance suites compare each check on Spark; this is the CLI's path.
    for engine in ("polars", "spark"):
        code, out, err = _cli(
            "inspect", SAMPLE, "--no-agent", "-f", "json", "--as-of", AS_OF, "--engine", engine,
            "--checks", "null_check,range_check",
        )  # fmt: skip
        assert code == 0, err
        runs[engine] = json.loads(out)
    assert _checks(runs["spark"]) == _checks(runs["polars"])
    assert runs["spark"]["dataset"]["engine"] == "spark"


def test_a_check_on_an_engine_is_built_once_and_its_building_counts_in_its_time() -> None:
    builds: list[Scope] = []

    def build_counted(engine: Engine, dataset: Dataset, config: Config, scope: Scope) -> Any:
        builds.append(scope)
        time.sleep(0.05)  # a build that computes something (`Engine.materialised`)
        plan = build_null_check(engine, dataset, config, scope)
        return replace(plan, tool="null_check")

    duckdb = engine_named("duckdb")
    assert duckdb is not None
    plan = on_engine(on_polars(build_counted), duckdb)
    config = Config()
    dataset = resident(load(SAMPLE, config))
    first = plan(dataset, config, Scope())  # registration
    again = plan(dataset, config, Scope())  # the run
    assert len(builds) == 1
    (result,) = run_plans([again])
    assert result.duration_seconds >= 0.05
    assert result.metrics["rows"] == 11_061
    assert first is not again and first.tool == again.tool == "null_check"
    plan(dataset, config, Scope(entity="dev-02"))
    assert builds == [Scope(), Scope(entity="dev-02")]


def test_the_hand_over_is_the_shared_steps_time_not_the_first_checks() -> None:
    from dq_agent.engines.duckdb import DuckDBEngine

    class SlowHandOver(DuckDBEngine):
        """DuckDB whose table takes 0.5 s to create, as 10M rows take about 1.8 s."""

        prepared: ClassVar[list[Scope]] = []

        def prepare(self, dataset: Dataset, scope: Scope) -> None:
            if not self.prepared:
                time.sleep(0.5)
            self.prepared.append(scope)
            super().prepare(dataset, scope)

    # Checks that take milliseconds on the sample (flat line and spike take most of a second).
    quick = "null_check,duplicate_check,range_check,liveness_check,structure_check"
    config = resolve(cli={AS_OF_KEY: AS_OF, "run.checks": quick}, environ={})
    dataset = resident(load(SAMPLE, config))
    timings: dict[str, float] = {}
    results = run_tools(register_detection_tools(dataset, config, SlowHandOver()), timings=timings)
    assert list(results) == quick.split(",")
    assert timings["shared_seconds"] >= 0.5
    # None of them was charged with the hand-over.
    assert all(r.duration_seconds < 0.5 for r in results.values()), {
        name: r.duration_seconds for name, r in results.items()
    }
    assert SlowHandOver.prepared and set(SlowHandOver.prepared) == {Scope()}


def test_an_engine_error_fails_its_check_only() -> None:
    import duckdb

    from dq_agent.engines.duckdb import DuckDBEngine

    class RefusingDuckDB(DuckDBEngine):
        """DuckDB refusing every query, as its binder refuses a name it cannot resolve."""

        def collect(self, queries: Any, dataset: Dataset) -> Any:
            raise duckdb.BinderException('Referenced column "x" not found')

    config = Config()
    dataset = resident(load(SAMPLE, config))
    tools = register_detection_tools(dataset, config, RefusingDuckDB())
    results = run_tools(tools)
    ported = {s.name for s in CATALOGUE if is_portable(s.plan)}
    for name, result in results.items():
        if name in ported:
            assert result.status == "error", name
            assert result.error == 'BinderException: Referenced column "x" not found'
        else:
            assert result.status != "error", name


def test_historian_tag_names_with_dots_run_on_duckdb_as_on_polars(tmp_path: Path) -> None:
    # Narwhals writes DuckDB's group-by keys into SQL unquoted (`engines.base.grouped`).
    path = tmp_path / "tags.parquet"
    tags = {"device_id": "unit.id", "temperature": "TIC101.PV", "timestamp": "Time.Stamp"}
    pl.read_parquet(SAMPLE).rename(tags).write_parquet(path)
    runs = {"polars": [], "duckdb": ["--engine", "duckdb"], "out of core": ["--max-memory", "380M"]}
    reports = {}
    codes = set()
    for run, options in runs.items():
        code, out, err = _cli(
            "inspect", str(path), "--no-agent", "-f", "json", "--as-of", AS_OF, *options
        )
        assert code in (0, 1), (run, err)
        reports[run] = json.loads(out)
        codes.add(code)
    assert len(codes) == 1
    assert reports["polars"]["dataset"]["roles"]["entity"] == ["unit.id"]
    assert reports["out of core"]["dataset"]["engine_reason"].startswith("out of core")
    assert all(check["status"] != "error" for check in reports["polars"]["checks"].values())
    assert _checks(reports["duckdb"]) == _checks(reports["polars"])
    assert _checks(reports["out of core"]) == _checks(reports["polars"])


@pytest.mark.parametrize(
    ("columns", "problem"),
    [
        (["device", "timestamp", "Temp", "temp"], "'Temp' and 'temp' (the same name but for case)"),
        (["device", "timestamp", "temp", ""], "a column without a name"),
    ],
)
def test_column_names_an_engine_cannot_take_are_refused_naming_them(
    tmp_path: Path, columns: list[str], problem: str
) -> None:
    # DuckDB and Spark compare names without case: such a run would mix two columns up.
    path = tmp_path / "odd.csv"
    rows = [f"a,2024-01-01T00:{m:02d}:00" + ",1.5" * (len(columns) - 2) for m in range(30)]
    path.write_text(",".join(columns) + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    code, out, err = _cli("inspect", str(path), "--no-agent", "--engine", "duckdb")
    assert code == 3
    assert out == ""
    message = " ".join(err.split())
    assert f"the checks cannot run on duckdb with these column names: {problem}" in message
    assert "run with --engine polars, or rename them" in message
    code, _, _ = _cli("inspect", str(path), "--no-agent")
    assert code in (0, 1)
