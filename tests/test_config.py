from pathlib import Path

import pytest

from dq_agent.config import Config, resolve
from dq_agent.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dq.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_documented_default_yaml_equals_built_in_defaults() -> None:
    assert resolve(ROOT / "configs" / "default.yaml", environ={}) == Config()


def test_precedence_cli_over_environment_over_yaml_over_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "agent:\n  model: from-yaml\n  timeout_seconds: 10\n  num_ctx: 4096\n")
    env = {"DQ_AGENT_MODEL": "from-env", "DQ_AGENT_MODEL_TIMEOUT": "20"}
    config = resolve(path, cli={"agent.model": "from-cli"}, environ=env)
    assert config.agent.model == "from-cli"
    assert config.agent.timeout_seconds == 20.0
    assert config.agent.num_ctx == 4096
    assert config.agent.seed == 42


def test_none_on_the_command_line_means_not_given(tmp_path: Path) -> None:
    path = write(tmp_path, "agent:\n  model: from-yaml\n")
    assert resolve(path, cli={"agent.model": None}, environ={}).agent.model == "from-yaml"


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "outlier_check:\n  sigmaa: 3\n")
    with pytest.raises(ConfigError) as info:
        resolve(path, environ={})
    assert "outlier_check.sigmaa" in info.value.message
    assert str(path) in info.value.message
    assert "sigma" in info.value.message


def test_unknown_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown section 'checks'"):
        resolve(write(tmp_path, "checks: {}\n"), environ={})


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("outlier_check:\n  sigma: -1\n", "outlier_check.sigma"),
        ("outlier_check:\n  sigma: lots\n", "outlier_check.sigma"),
        ("outlier_check:\n  method: median\n", "outlier_check.method"),
        ("delay_check:\n  gap_factor: 0\n", "delay_check.gap_factor"),
        ("null_check:\n  sentinels: -999\n", "null_check.sentinels"),
        ("agent:\n  max_steps: 2.5\n", "agent.max_steps"),
        ("agent:\n  enabled: maybe\n", "agent.enabled"),
        (
            "structure_check:\n  text_numeric_min_share: 2\n",
            "structure_check.text_numeric_min_share",
        ),
        ("null_check:\n  fail_at: .nan\n", "null_check.fail_at"),
        ("null_check:\n  warn_at: -0.1\n", "null_check.warn_at"),
        ("delay_check:\n  gap_factor: .nan\n", "delay_check.gap_factor"),
        ("outlier_check:\n  significance: .nan\n", "outlier_check.significance"),
        ("outlier_check:\n  fail_z: -3\n", "outlier_check.fail_z"),
        ("outlier_check:\n  warn_at: 0\n", "outlier_check.warn_at"),
        ("structure_check:\n  dtypes: {temperature: banana}\n", "structure_check.dtypes"),
    ],
)
def test_bad_values_name_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        resolve(path, environ={})
    assert key in info.value.message
    assert str(path) in info.value.message


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="DQ_AGENT_MODEL_TIMEOUT"):
        resolve(None, environ={"DQ_AGENT_MODEL_TIMEOUT": "soon"})


def test_environment_booleans() -> None:
    assert resolve(None, environ={"DQ_AGENT_FALLBACK_MERGE": "false"}).agent.fallback_merge is False
    assert resolve(None, environ={"OLLAMA_HOST": "http://h:1"}).agent.host == "http://h:1"


def test_yaml_is_loaded_safely(tmp_path: Path) -> None:
    path = write(tmp_path, "agent: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        resolve(path, environ={})


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="mapping"):
        resolve(write(tmp_path, text), environ={})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        resolve(tmp_path / "nope.yaml", environ={})


def test_empty_file_is_defaults(tmp_path: Path) -> None:
    assert resolve(write(tmp_path, ""), environ={}) == Config()


def test_null_threshold_disables_level(tmp_path: Path) -> None:
    config = resolve(write(tmp_path, "null_check:\n  fail_at: null\n"), environ={})
    assert config.null_check.fail_at is None


def test_warn_threshold_above_fail_threshold_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "null_check:\n  warn_at: 0.5\n  fail_at: 0.1\n")
    with pytest.raises(
        ConfigError, match=r"null_check.warn_at \(0.5\) is above null_check.fail_at"
    ):
        resolve(path, environ={})


def test_nan_from_the_environment_is_rejected() -> None:
    with pytest.raises(ConfigError, match="DQ_AGENT_MODEL_TIMEOUT"):
        resolve(environ={"DQ_AGENT_MODEL_TIMEOUT": "nan"})


@pytest.mark.parametrize(
    "name", ["Float64", "float32", "Datetime", 'Datetime(time_unit="us")', "str", "bool", "Decimal"]
)
def test_known_dtype_names_are_accepted(tmp_path: Path, name: str) -> None:
    config = resolve(write(tmp_path, f"structure_check:\n  dtypes: {{t: '{name}'}}\n"), environ={})
    assert config.structure_check.dtypes == {"t": name}
    assert config.origins["structure_check.dtypes"] == str(tmp_path / "dq.yaml")


def test_an_unquoted_yaml_time_is_read_as_that_time(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("delay_check:\n  as_of: 2024-03-04T08:10:00Z\n")
    config = resolve(path, environ={})
    assert config.delay_check.as_of == "2024-03-04T08:10:00+00:00"
