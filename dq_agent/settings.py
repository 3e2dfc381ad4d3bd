"""Config sections and their validation rules, declared on the fields themselves.

A section is a dataclass; a field that needs more than its type declares a rule with `setting`
(`positive`, `non_negative`, `fraction`, `choice(...)`, ...). The run-level sections live here;
each check declares its own section next to its plan (`checks/*.py`), and `config.py` assembles
them all from the catalogue. Values from YAML, the environment and the CLI go through `coerce`
and `check_rule`, so every error names the key and where the value came from.
"""

from __future__ import annotations

import codecs
import dataclasses
import math
import types
import typing
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from dq_agent.errors import ConfigError
from dq_agent.limits import parse_size
from dq_agent.timeparse import parse_iso_time

Rule = Callable[[Any], str | None]
"""A rule returns what is wrong with a value (read after "must"), or None when it is fine."""

_RULE = "rule"


def setting(default: Any = dataclasses.MISSING, *, factory: Any = None, rule: Rule) -> Any:
    """A section field with a validation rule (`field` with the rule in its metadata)."""
    if factory is not None:
        return field(default_factory=factory, metadata={_RULE: rule})
    return field(default=default, metadata={_RULE: rule})


def positive(value: Any) -> str | None:
    return "be more than 0" if value <= 0 else None


def non_negative(value: Any) -> str | None:
    return "be 0 or more" if value < 0 else None


def fraction(value: Any) -> str | None:
    return "be in (0, 1]" if not 0 < value <= 1 else None


def choice(*options: str) -> Rule:
    def rule(value: Any) -> str | None:
        return f"be one of {', '.join(options)}" if value not in options else None

    return rule


def iso_time(value: Any) -> str | None:
    if parse_iso_time(value) is None:
        return "be an ISO 8601 time such as 2024-01-31T06:00:00Z"
    return None


def one_character(value: Any) -> str | None:
    if len(value) != 1 or value in '"\r\n':
        return "be one character such as ',' ';' or '\\t'"
    return None


def text_encoding(value: Any) -> str | None:
    try:
        info = codecs.lookup(str(value))
    except LookupError:
        return "be a text encoding such as utf-8, cp1252, latin-1 or utf-16"
    if not getattr(info, "_is_text_encoding", True):
        return f"be a text encoding ({info.name} converts bytes to bytes)"
    return None


def memory_size(value: Any) -> str | None:
    try:
        parse_size(value)
    except ConfigError as exc:
        return f"be a memory size: {exc.message}"
    return None


def time_zone(value: Any) -> str | None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return "be a time zone such as Europe/Berlin"
    return None


def strptime_format(value: Any) -> str | None:
    if value is not None and "%" not in value:
        return "be a strptime format such as '%m/%d/%Y %H:%M'"
    return None


@dataclass(frozen=True)
class ReadingSettings:
    """What the loader takes from the checks' sections: which texts and numbers mean "missing",
    and how many numbers a text column needs to be read as numbers (`Config.reading`)."""

    missing_markers: list[str]
    sentinels: list[float]
    text_numeric_min_share: float


@dataclass
class ColumnsConfig:
    timestamp: str | None = None
    entity: list[str] | None = None
    values: list[str] | None = None
    angles: list[str] | None = None
    """Value columns that hold angles in degrees, which wrap from 359 to 0 (a wind direction):
    None finds those named like a direction whose readings lie within 0 to 360
    (`loading.angles`)."""
    positions: list[str] | None = None
    """Value columns that hold a position (a vehicle's latitude and longitude), held while the
    asset stands still: None finds those named like one whose readings lie within its degrees
    (`loading.positions`); [] takes none."""
    quality: list[str] | None = None
    """The columns of the source's own quality flags (OPC `StatusCode`, `Quality: Good/Bad`):
    readings marked bad are read as missing. None finds those named like one whose values all
    decode (`loading.quality`); [] reads none."""
    ingest_time: str | None = None
    timezone: str = setting("UTC", rule=time_zone)
    timestamp_format: str | None = setting(None, rule=strptime_format)
    """A strptime format for a text timestamp column (e.g. '%m/%d/%Y %H:%M'): then the only one."""
    order_by: str | None = None
    """A column whose values give the order the rows arrived in (a sequence number, an offset):
    out-of-order rows are judged in its order instead of the rows' positions. A frame or a
    DuckDB table has no reader row order, so without it their order is not evaluated."""


@dataclass
class InputConfig:
    separator: str | None = setting(None, rule=one_character)
    decimal_comma: bool | None = None
    encoding: str = setting("utf-8", rule=text_encoding)
    """The CSV files' text encoding; another than UTF-8 is converted first (`loading.transcode`)."""
    units_row: bool | None = None
    """A row of units under the header: None detects it (`loading.unitsrow`), true skips the
    first row after the header, false reads it as data."""


@dataclass
class AgentConfig:
    enabled: bool = True
    model: str = "qwen2.5:7b"
    host: str = "http://127.0.0.1:11434"
    # A CPU-only machine running a 7B model: a 1,500-token first prompt takes minutes there.
    timeout_seconds: float = setting(300.0, rule=positive)
    num_ctx: int = setting(8192, rule=positive)
    temperature: float = 0.0
    seed: int = 42
    # Tokens a reply may take: a turn of tool calls, and the account (or a repair or merge).
    num_predict_tools: int = setting(200, rule=positive)
    num_predict_answer: int = setting(900, rule=positive)
    # eval-model samples the model's behaviour: this temperature, and a new seed per run.
    eval_temperature: float = 0.7
    max_steps: int = setting(20, rule=positive)
    max_sentinel_rounds: int = setting(3, rule=positive)
    sentinel: bool = True
    fallback_merge: bool = True
    require: bool = False


@dataclass
class HistoryConfig:
    enabled: bool = True
    path: str | None = None
    baseline_runs: int = setting(7, rule=positive)
    dataset_name: str | None = None


@dataclass
class LimitsConfig:
    max_memory: str | None = setting(None, rule=memory_size)


def check_rule(section: Any, key: str, value: Any, dotted: str, origin: str) -> None:
    """Apply the rule declared on `section`'s field `key` (None is always allowed)."""
    if value is None:
        return
    for spec in dataclasses.fields(section):
        rule = spec.metadata.get(_RULE) if spec.name == key else None
        problem = rule(value) if rule is not None else None
        if problem is not None:
            raise ConfigError(f"bad value for '{dotted}' in {origin}: {value!r} must {problem}")


def coerce(value: Any, hint: Any, key: str, origin: str) -> Any:
    """Check `value` against the field's type; strings from the environment are converted."""
    args = typing.get_args(hint)
    origin_type = typing.get_origin(hint)
    if origin_type in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return coerce(value, inner[0], key, origin)
    bad = ConfigError(f"bad value for '{key}' in {origin}: {value!r} is not {_describe(hint)}")
    if origin_type is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            raise bad
        return [coerce(v, args[0], key, origin) for v in value]
    if origin_type is dict:
        if not isinstance(value, dict):
            raise bad
        return {str(k): coerce(v, args[1], key, origin) for k, v in value.items()}
    if hint is bool:
        return _boolean(value, bad)
    if hint is int or hint is float:
        return _number(value, hint, bad)
    if hint is str and isinstance(value, str):
        return value
    if hint is str and isinstance(value, datetime | date):
        # An unquoted YAML time (`as_of: 2024-03-04T08:10:00Z`) or a Python datetime: the
        # same time written as text, checked by the field's rule like any other.
        return value.isoformat()
    raise bad


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _boolean(value: Any, bad: ConfigError) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in (*_TRUE, *_FALSE):
        return value.lower() in _TRUE
    raise bad


def _number(value: Any, hint: type, bad: ConfigError) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise bad
    if hint is int and isinstance(value, float):
        raise bad
    try:
        number: int | float = hint(value)
    except ValueError:
        raise bad from None
    # NaN compares false with every limit, so it would slip through every rule: never a setting.
    if isinstance(number, float) and not math.isfinite(number):
        raise bad
    return number


def _describe(hint: Any) -> str:
    origin_type = typing.get_origin(hint)
    if origin_type in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if origin_type is list:
        return f"a list of {_describe(typing.get_args(hint)[0])}"
    if origin_type is dict:
        return "a mapping"
    names = {bool: "true/false", int: "a whole number", float: "a finite number", str: "a string"}
    return names.get(hint, "null" if hint is type(None) else str(hint))
