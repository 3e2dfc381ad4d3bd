"""Configuration: defaults, YAML file, environment and CLI, resolved in one place.

Precedence is CLI > environment > YAML > defaults (`resolve`). YAML keys are the field names
below, section by section; an unknown key or a bad value is an error that names the key and the
file.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from dq_agent.errors import ConfigError
from dq_agent.limits import parse_size


@dataclass
class ColumnsConfig:
    timestamp: str | None = None
    entity: list[str] | None = None
    values: list[str] | None = None
    ingest_time: str | None = None
    timezone: str = "UTC"
    timestamp_format: str | None = None
    """A strptime format for a text timestamp column (e.g. '%m/%d/%Y %H:%M'): then the only one."""


@dataclass
class InputConfig:
    separator: str | None = None
    decimal_comma: bool | None = None


@dataclass
class NullCheckConfig:
    markers: list[str] = field(
        default_factory=lambda: ["", "NA", "N/A", "null", "NULL", "NaN", "nan"]
    )
    sentinels: list[float] = field(default_factory=lambda: [-999.0, -9999.0, -200.0])
    warn_at: float | None = 0.0
    fail_at: float | None = 0.05


@dataclass
class DuplicateCheckConfig:
    warn_at: float | None = 0.0
    fail_at: float | None = 0.01


@dataclass
class OutlierCheckConfig:
    method: str = "sigma"
    sigma: float = 3.0
    min_group_size: int = 30
    warn_at: float | None = 0.0
    fail_at: float | None = 0.01


@dataclass
class DelayCheckConfig:
    expected_interval_seconds: float | None = None
    gap_factor: float = 3.0
    late_threshold_seconds: float = 300.0
    max_age_seconds: float | None = None
    future_tolerance_seconds: float = 300.0
    as_of: str | None = None
    warn_at: float | None = 0.0
    fail_at: float | None = 0.01


@dataclass
class StructureCheckConfig:
    expected_columns: list[str] | None = None
    allow_unexpected: bool = True
    dtypes: dict[str, str] = field(default_factory=dict)
    # A column whose non-empty values are mostly numbers is a numeric column; its other values
    # are reported as text in a numeric column.
    text_numeric_min_share: float = 0.5


@dataclass
class AgentConfig:
    enabled: bool = True
    model: str = "qwen2.5:7b"
    host: str = "http://127.0.0.1:11434"
    timeout_seconds: float = 120.0
    num_ctx: int = 8192
    temperature: float = 0.0
    seed: int = 42
    max_steps: int = 20
    max_sentinel_rounds: int = 3
    sentinel: bool = True
    fallback_merge: bool = True
    require: bool = False


@dataclass
class HistoryConfig:
    enabled: bool = True
    path: str | None = None
    baseline_runs: int = 7
    dataset_name: str | None = None


@dataclass
class LimitsConfig:
    max_memory: str | None = None


@dataclass
class Config:
    input: InputConfig = field(default_factory=InputConfig)
    columns: ColumnsConfig = field(default_factory=ColumnsConfig)
    null_check: NullCheckConfig = field(default_factory=NullCheckConfig)
    duplicate_check: DuplicateCheckConfig = field(default_factory=DuplicateCheckConfig)
    outlier_check: OutlierCheckConfig = field(default_factory=OutlierCheckConfig)
    delay_check: DelayCheckConfig = field(default_factory=DelayCheckConfig)
    structure_check: StructureCheckConfig = field(default_factory=StructureCheckConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    source: str | None = field(default=None, compare=False)
    """The config file the settings came from, for messages about them (not a section)."""


# Environment variables and the config key each one sets.
ENVIRONMENT = {
    "OLLAMA_HOST": "agent.host",
    "DQ_AGENT_MODEL": "agent.model",
    "DQ_AGENT_MODEL_TIMEOUT": "agent.timeout_seconds",
    "DQ_AGENT_FALLBACK_MERGE": "agent.fallback_merge",
    "DQ_AGENT_HISTORY": "history.enabled",
    "DQ_AGENT_MAX_MEMORY": "limits.max_memory",
}

# Command-line options and the config key each one sets (for error messages).
CLI_OPTIONS = {
    "agent.enabled": "--no-agent",
    "agent.model": "--model",
    "agent.host": "--host",
    "agent.timeout_seconds": "--model-timeout",
    "agent.require": "--require-agent",
    "delay_check.as_of": "--as-of",
    "history.enabled": "--no-history",
    "limits.max_memory": "--max-memory",
}

_CHOICES = {"outlier_check.method": ("sigma", "mad")}
_NON_NEGATIVE = {
    "null_check.warn_at",
    "null_check.fail_at",
    "duplicate_check.warn_at",
    "duplicate_check.fail_at",
    "outlier_check.warn_at",
    "outlier_check.fail_at",
    "delay_check.warn_at",
    "delay_check.fail_at",
    "delay_check.late_threshold_seconds",
    "delay_check.future_tolerance_seconds",
}
_POSITIVE = {
    "outlier_check.sigma",
    "outlier_check.min_group_size",
    "delay_check.gap_factor",
    "delay_check.expected_interval_seconds",
    "delay_check.max_age_seconds",
    "agent.timeout_seconds",
    "agent.num_ctx",
    "agent.max_steps",
    "agent.max_sentinel_rounds",
    "history.baseline_runs",
}


def resolve(
    config_file: Path | None = None,
    cli: dict[str, Any] | None = None,
    environ: typing.Mapping[str, str] | None = None,
) -> Config:
    """Build the effective configuration: CLI > environment > YAML > defaults."""
    config = Config()
    if config_file is not None:
        config.source = str(config_file)
        _apply(config, _read_yaml(config_file), origin=str(config_file))
    env = os.environ if environ is None else environ
    for variable, key in ENVIRONMENT.items():
        if env.get(variable, "") != "":
            _set_dotted(config, key, env[variable], origin=f"environment variable {variable}")
    for key, value in (cli or {}).items():
        if value is not None:
            _set_dotted(config, key, value, origin=f"option {CLI_OPTIONS.get(key, key)}")
    _check_threshold_order(config, str(config_file) if config_file else "the defaults")
    return config


def _check_threshold_order(config: Config, origin: str) -> None:
    """warn_at above fail_at (both fractions, or both counts) would make warn unreachable."""
    for section in ("null_check", "duplicate_check", "outlier_check", "delay_check"):
        settings = getattr(config, section)
        warn, fail = settings.warn_at, settings.fail_at
        if warn is None or fail is None or (warn < 1) != (fail < 1):
            continue
        if warn > fail:
            raise ConfigError(
                f"bad thresholds in {origin}: {section}.warn_at ({warn}) is above "
                f"{section}.fail_at ({fail}); warn_at must not exceed fail_at"
            )


def to_dict(config: Config) -> dict[str, Any]:
    return dataclasses.asdict(config)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections at the top level")
    return data


def _apply(config: Config, data: dict[str, Any], origin: str) -> None:
    sections = {
        f.name
        for f in dataclasses.fields(config)
        if dataclasses.is_dataclass(getattr(config, f.name))
    }
    for section, values in data.items():
        if section not in sections:
            raise ConfigError(
                f"unknown section '{section}' in {origin}; known sections: {', '.join(sorted(sections))}"
            )
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"section '{section}' in {origin} must be a mapping of keys")
        for key, value in values.items():
            _set_dotted(config, f"{section}.{key}", value, origin)


def _set_dotted(config: Config, dotted: str, value: Any, origin: str) -> None:
    section_name, _, key = dotted.partition(".")
    section = getattr(config, section_name, None)
    if section is None or not dataclasses.is_dataclass(section):
        raise ConfigError(f"unknown config key '{dotted}' in {origin}")
    hints = typing.get_type_hints(type(section))
    if key not in hints:
        known = ", ".join(sorted(hints))
        raise ConfigError(
            f"unknown key '{dotted}' in {origin}; known keys in '{section_name}': {known}"
        )
    coerced = _coerce(value, hints[key], dotted, origin)
    _validate(dotted, coerced, origin)
    setattr(section, key, coerced)


def _coerce(value: Any, hint: Any, key: str, origin: str) -> Any:
    """Check `value` against the field's type; strings from the environment are converted."""
    args = typing.get_args(hint)
    origin_type = typing.get_origin(hint)
    if origin_type in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key, origin)
    bad = ConfigError(f"bad value for '{key}' in {origin}: {value!r} is not {_describe(hint)}")
    if origin_type is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            raise bad
        return [_coerce(v, args[0], key, origin) for v in value]
    if origin_type is dict:
        if not isinstance(value, dict):
            raise bad
        return {str(k): _coerce(v, args[1], key, origin) for k, v in value.items()}
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in (
            "1",
            "true",
            "yes",
            "on",
            "0",
            "false",
            "no",
            "off",
        ):
            return value.lower() in ("1", "true", "yes", "on")
        raise bad
    if hint is int:
        if isinstance(value, bool):
            raise bad
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                raise bad from None
        raise bad
    if hint is float:
        if isinstance(value, bool):
            raise bad
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise bad from None
        raise bad
    if hint is str:
        if isinstance(value, str):
            return value
        raise bad
    raise bad


def _describe(hint: Any) -> str:
    origin_type = typing.get_origin(hint)
    if origin_type in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if origin_type is list:
        return f"a list of {_describe(typing.get_args(hint)[0])}"
    if origin_type is dict:
        return "a mapping"
    names = {bool: "true/false", int: "a whole number", float: "a number", str: "a string"}
    return names.get(hint, "null" if hint is type(None) else str(hint))


def parse_time(text: str) -> datetime | None:
    """An ISO 8601 time as an aware UTC datetime (naive times are UTC), or None if it is not one."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _validate(key: str, value: Any, origin: str) -> None:
    if value is None:
        return
    if key in _CHOICES and value not in _CHOICES[key]:
        raise ConfigError(
            f"bad value for '{key}' in {origin}: {value!r}; choose one of {', '.join(_CHOICES[key])}"
        )
    if key in _NON_NEGATIVE and value < 0:
        raise ConfigError(f"bad value for '{key}' in {origin}: {value!r} must be 0 or more")
    if key in _POSITIVE and value <= 0:
        raise ConfigError(f"bad value for '{key}' in {origin}: {value!r} must be more than 0")
    if key == "delay_check.as_of" and parse_time(value) is None:
        raise ConfigError(
            f"bad value for '{key}' in {origin}: {value!r} is not an ISO 8601 time such as 2024-01-31T06:00:00Z"
        )
    if key == "input.separator" and (len(value) != 1 or value in '"\r\n'):
        raise ConfigError(
            f"bad value for '{key}' in {origin}: {value!r}; use one character such as ',' ';' or '\\t'"
        )
    if key == "limits.max_memory":
        try:
            parse_size(value)
        except ConfigError as exc:
            raise ConfigError(f"bad value for '{key}' in {origin}: {exc.message}") from None
    if key == "columns.timezone":
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                f"bad value for '{key}' in {origin}: {value!r} is not a time zone such as Europe/Berlin"
            ) from None
    if key == "columns.timestamp_format" and "%" not in value:
        raise ConfigError(
            f"bad value for '{key}' in {origin}: {value!r} is not a strptime format such as "
            "'%m/%d/%Y %H:%M'"
        )
    if key == "structure_check.text_numeric_min_share" and not 0 < value <= 1:
        raise ConfigError(f"bad value for '{key}' in {origin}: {value!r} must be in (0, 1]")
