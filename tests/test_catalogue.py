"""The catalogue is the one place that declares the checks: nothing else spells their names."""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

from dq_agent.catalogue import CATALOGUE, CHECK_NAMES, contract_table, label_of
from dq_agent.config import Config
from dq_agent.narrative.vocabulary import dimension_pattern
from dq_agent.report.labels import dimension_name
from dq_agent.tools import DETECTION_TOOL_NAMES

PACKAGE = Path(__file__).resolve().parents[1] / "dq_agent"
ROOT = PACKAGE.parent


def _own_stem(name: str) -> str:
    """A check's own modules share the stem of the module that declares its plan
    (`checks/delays.py` and `checks/delays_report.py`)."""
    spec = next(s for s in CATALOGUE if s.name == name)
    module = sys.modules[spec.plan.__module__]
    return Path(str(module.__file__)).stem


def _literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_no_check_name_is_spelled_outside_its_own_modules() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        literals = _literals(path)
        for name in CHECK_NAMES:
            own = path.parent.name == "checks" and path.stem.startswith(_own_stem(name))
            if name in literals and not own:
                offenders.append(f"{path.relative_to(ROOT)}: {name!r}")
    assert offenders == []


def test_the_scan_would_find_a_stray_name(tmp_path: Path) -> None:
    stray = tmp_path / "stray.py"
    stray.write_text(f'LABELS = {{"{CHECK_NAMES[0]}": "x"}}\n', encoding="utf-8")
    assert CHECK_NAMES[0] in _literals(stray)


def test_every_check_has_its_declarations() -> None:
    assert CHECK_NAMES == DETECTION_TOOL_NAMES
    assert len(CHECK_NAMES) >= 5
    config = Config()
    for spec in CATALOGUE:
        assert spec.label and label_of(spec.name) == spec.label == dimension_name(spec.name)
        assert spec.description.endswith(".")
        assert spec.metric_keys or spec.column_metric_keys
        assert dataclasses.is_dataclass(spec.settings)
        assert config.section(spec.settings) is getattr(config, spec.name)
        # The narrative counts the check as covered by its name and by its plain words.
        assert dimension_pattern(spec.name).search(f"the {spec.name} ran")
        word = spec.words.split("|")[0].rstrip("?").replace("\\w*", "")
        assert dimension_pattern(spec.name).search(f"about {word} here"), word


def test_the_readme_contract_lists_the_catalogue_metric_keys() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert contract_table() in readme


def test_a_run_has_every_declared_metric_key(clean_parquet: Path) -> None:
    from dq_agent.load import load
    from dq_agent.runner import run_tools
    from dq_agent.tools import register_detection_tools

    config = Config()
    results = run_tools(register_detection_tools(load(str(clean_parquet), config), config))
    for spec in CATALOGUE:
        metrics = results[spec.name].to_dict()["metrics"]
        assert set(spec.metric_keys) <= set(metrics), spec.name
        if spec.column_metric_keys:
            assert metrics["columns"], spec.name
            for column_metrics in metrics["columns"].values():
                assert set(spec.column_metric_keys) <= set(column_metrics), spec.name


def test_every_check_is_written_for_every_engine() -> None:
    """A check runs on Polars, DuckDB and Spark (`--engine`, out of core, a caller's Spark
    DataFrame) from one declaration: written over Narwhals (`checks.portable.on_polars`), with
    its conformance tests (tests/test_conformance_*.py)."""
    from dq_agent.checks.portable import is_portable

    assert [spec.name for spec in CATALOGUE if not is_portable(spec.plan)] == []
