"""Configuration: defaults, YAML file, environment and CLI, resolved in one place.

Precedence is CLI > environment > YAML > defaults (`resolve`). The sections are the run-level
ones (`settings.py`) and one per check (declared by the check, listed by the catalogue); YAML
keys are their field names. An unknown key or a bad value is an error that names the key and
where it came from; the rules are declared on the fields (`settings.setting`).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from dq_agent.catalogue import CATALOGUE, CHECK_NAMES
from dq_agent.checks.delays import AS_OF_KEY
from dq_agent.checks.nulls import NullCheckConfig
from dq_agent.checks.structure_report import StructureCheckConfig
from dq_agent.engines.names import ENGINE_NAMES
from dq_agent.errors import ConfigError
from dq_agent.maintenance import SECTION as MAINTENANCE
from dq_agent.maintenance import Excusal, MaintenanceWindow, parse_windows, resolve_windows
from dq_agent.settings import (
    AgentConfig,
    ColumnsConfig,
    HistoryConfig,
    InputConfig,
    LimitsConfig,
    ReadingSettings,
    check_rule,
    choice,
    coerce,
    setting,
)

T = TypeVar("T")


def _check_sections() -> dict[str, Any]:
    return {spec.name: spec.settings() for spec in CATALOGUE}


def _known_checks(value: Any) -> str | None:
    unknown = [name for name in value if name not in CHECK_NAMES]
    if unknown:
        return f"name only checks of the catalogue ({', '.join(CHECK_NAMES)})"
    return None if value else "name at least one check"


@dataclass
class RunConfig:
    checks: list[str] | None = setting(None, rule=_known_checks)  # noqa: RUF009
    """The checks to run, by name; None runs every check of the catalogue. A run that leaves
    some out says which (the audit's expected tools are the selected ones)."""
    engine: str = setting("polars", rule=choice(*ENGINE_NAMES))
    """Where the checks run (`dq_agent.engines`): the data is read by dq-agent's own loader
    whatever the engine, then handed over; a check not yet ported there runs on Polars."""


@dataclass
class Config:
    """The run-level sections as fields; each check's section, keyed by its name, in `checks`.

    A check reads its own section with `config.section(ItsSettings)`; `config.<check name>` also
    works (the YAML spelling), typed `Any`.
    """

    input: InputConfig = field(default_factory=InputConfig)
    columns: ColumnsConfig = field(default_factory=ColumnsConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    run: RunConfig = field(default_factory=RunConfig)
    checks: dict[str, Any] = field(default_factory=_check_sections)
    maintenance: list[MaintenanceWindow] = field(default_factory=list)
    """Maintenance windows (`maintenance.py`): a list at the top level of the YAML."""
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    """Where each key that is not a default was set (a file path, 'option --as-of'): for errors
    found only once the data is loaded, such as a setting naming a column it does not have."""

    def origin_of(self, key: str) -> str:
        """Where `key` was set, for an error message: a file, an option, or the defaults."""
        return self.origins.get(key, "the defaults")

    def section(self, kind: type[T]) -> T:
        for settings in self.checks.values():
            if type(settings) is kind:
                return settings
        raise KeyError(f"no config section of type {kind.__name__}")

    def selected_checks(self) -> tuple[str, ...]:
        """The names of the checks this run runs, in catalogue order."""
        chosen = self.run.checks
        return tuple(n for n in CHECK_NAMES if chosen is None or n in chosen)

    def reading(self) -> ReadingSettings:
        nulls = self.section(NullCheckConfig)
        structure = self.section(StructureCheckConfig)
        return ReadingSettings(
            missing_markers=list(nulls.markers),
            sentinels=list(nulls.sentinels),
            text_numeric_min_share=structure.text_numeric_min_share,
        )

    def excusal(self) -> Excusal | None:
        """The maintenance windows resolved to UTC, or None when there are none."""
        if not self.maintenance:
            return None
        windows = resolve_windows(
            self.maintenance, self.columns.timezone, self.origin_of(MAINTENANCE)
        )
        return Excusal(windows)

    def __getattr__(self, name: str) -> Any:
        checks = self.__dict__.get("checks")
        if checks is not None and name in checks:
            return checks[name]
        raise AttributeError(name)


# Environment variables and the config key each one sets.
ENVIRONMENT = {
    "OLLAMA_HOST": "agent.host",
    "DQ_AGENT_MODEL": "agent.model",
    "DQ_AGENT_MODEL_TIMEOUT": "agent.timeout_seconds",
    "DQ_AGENT_FALLBACK_MERGE": "agent.fallback_merge",
    "DQ_AGENT_HISTORY": "history.enabled",
    "DQ_AGENT_MAX_MEMORY": "limits.max_memory",
    "DQ_AGENT_ENGINE": "run.engine",
}

# Command-line options and the config key each one sets (for error messages).
CLI_OPTIONS = {
    "agent.enabled": "--no-agent",
    "agent.model": "--model",
    "agent.host": "--host",
    "agent.timeout_seconds": "--model-timeout",
    "agent.require": "--require-agent",
    AS_OF_KEY: "--as-of",
    "history.enabled": "--no-history",
    "limits.max_memory": "--max-memory",
    "run.checks": "--checks",
    "run.engine": "--engine",
    "columns.order_by": "--order-by",
}


# Where settings given as a mapping in code came from (`dq_agent.inspect(config={...})`).
MAPPING_ORIGIN = "the config mapping"


def resolve(
    config_file: Path | None = None,
    cli: dict[str, Any] | None = None,
    environ: typing.Mapping[str, str] | None = None,
    mapping: typing.Mapping[str, Any] | None = None,
) -> Config:
    """Build the effective configuration: CLI > environment > YAML > defaults. `mapping` holds
    the YAML's sections and keys given in code instead of a file (the library's `config=`)."""
    config = Config()
    if config_file is not None:
        _apply(config, _read_yaml(config_file), origin=str(config_file))
    if mapping is not None:
        _apply(config, dict(mapping), origin=MAPPING_ORIGIN)
    env = os.environ if environ is None else environ
    for variable, key in ENVIRONMENT.items():
        if env.get(variable, "") != "":
            _set_dotted(config, key, env[variable], origin=f"environment variable {variable}")
    for key, value in (cli or {}).items():
        if value is not None:
            _set_dotted(config, key, value, origin=f"option {CLI_OPTIONS.get(key, key)}")
    origin = str(config_file) if config_file else MAPPING_ORIGIN if mapping else "the defaults"
    _check_threshold_order(config, origin)
    # An end before its start is found here, once columns.timezone is known (naive times).
    config.excusal()
    return config


def _sections(config: Config) -> dict[str, Any]:
    """Every section by its YAML name: the run-level fields, then the checks in catalogue order."""
    run = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name not in ("checks", "origins", MAINTENANCE)
    }
    return {**run, **config.checks}


def _check_threshold_order(config: Config, origin: str) -> None:
    """warn_at above fail_at (both fractions, or both counts) would make warn unreachable."""
    for name, settings in _sections(config).items():
        warn, fail = getattr(settings, "warn_at", None), getattr(settings, "fail_at", None)
        if warn is None or fail is None or (warn < 1) != (fail < 1):
            continue
        if warn > fail:
            raise ConfigError(
                f"bad thresholds in {origin}: {name}.warn_at ({warn}) is above "
                f"{name}.fail_at ({fail}); warn_at must not exceed fail_at"
            )


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
    sections = _sections(config)
    for section, values in data.items():
        if section == MAINTENANCE:
            config.maintenance = parse_windows(values, origin)
            config.origins[MAINTENANCE] = origin
            continue
        if section not in sections:
            raise ConfigError(
                f"unknown section '{section}' in {origin}; known sections: "
                f"{', '.join(sorted([*sections, MAINTENANCE]))}"
            )
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"section '{section}' in {origin} must be a mapping of keys")
        for key, value in values.items():
            _set_dotted(config, f"{section}.{key}", value, origin)


def set_value(config: Config, dotted: str, value: Any, origin: str) -> None:
    """Set one key (`agent.model`) as YAML would, with the same checks; `origin` names where
    the value came from in errors."""
    _set_dotted(config, dotted, value, origin)


def _set_dotted(config: Config, dotted: str, value: Any, origin: str) -> None:
    section_name, _, key = dotted.partition(".")
    section = _sections(config).get(section_name)
    if section is None:
        raise ConfigError(f"unknown config key '{dotted}' in {origin}")
    hints = typing.get_type_hints(type(section))
    if key not in hints:
        known = ", ".join(sorted(hints))
        raise ConfigError(
            f"unknown key '{dotted}' in {origin}; known keys in '{section_name}': {known}"
        )
    coerced = coerce(value, hints[key], dotted, origin)
    check_rule(section, key, coerced, dotted, origin)
    setattr(section, key, coerced)
    config.origins[dotted] = origin
