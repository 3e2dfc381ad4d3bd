"""`dq-agent init`: a commented YAML configuration suggested from the data, so a user starts
from their data instead of a blank file.

What it writes as settings is what loading detected or the data shows plainly (the column roles,
the columns, a sampling interval shared by every entity, suspect limits a margin outside each
value column's observed range); what needs a person's judgement is written as comments to
confirm (fail limits, each entity's interval when they differ, sentinel-looking values seen).
The settings are chosen so that `inspect --config` of the file on the same clean data passes:
they describe it as it is.

Only suspect limits come from the data, never fail limits: a range seen in one file says what is
usual, not what is impossible. They lie `LIMIT_MARGIN` of the observed span outside the observed
min and max, rounded outwards, and never beyond a unit default's physical bound (humidity
0-100, Kelvin >= 0: `checks.ranges.unit_limits`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from dq_agent.checks import delays, nulls, ranges, structure
from dq_agent.checks.base import entity_key
from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.loading.transcode import USUAL_LEGACY, UTF8, UTF16_HINT, canonical
from dq_agent.zone_hint import ZoneHint, zone_hint

MAX_LISTED_ENTITIES = 12
# Numbers that often mean "no reading" in sensor exports, reported when seen (not configured).
CANDIDATE_SENTINELS = (-999.0, -9999.0, -200.0, -99.0, 9999.0, 99999.0, -32768.0, 32767.0, 65535.0)
# The suspect limits lie this share of the observed span outside the observed min and max: the
# same data passes, a reading well beyond anything the file showed warns.
LIMIT_MARGIN = 0.25
_STEP = "__step"
_ENTITY = "__entity"


@dataclass(frozen=True)
class ValueRange:
    column: str
    low: float | None
    high: float | None
    p01: float | None
    p99: float | None
    sentinels: dict[float, int]


@dataclass(frozen=True)
class Suggestion:
    dataset: Dataset
    intervals: dict[str, float]
    """Median positive step per entity, in seconds."""
    ranges: list[ValueRange]
    rows: int
    read_as: str | None = None
    """The encoding init read the file in by itself (UTF-16 without a byte order mark, which
    read as UTF-8 gives no usable column at all), or None."""
    zone: ZoneHint | None = None
    """What the times say of their zone, when they carry none (`zone_hint`)."""


def _yaml(value: Any) -> str:
    """A scalar or list as YAML: JSON is valid YAML, and it quotes any name safely."""
    return json.dumps(value, ensure_ascii=True)


def suggest(path: str, config: Config) -> Suggestion:
    dataset = load(path, config)
    read_as = _looks_utf16(dataset, config)
    if read_as is not None:
        # Every suggestion below is made from the columns: read them as the text they are.
        dataset = load(path, replace(config, input=replace(config.input, encoding=read_as)))
    ts = dataset.roles.timestamp
    key = entity_key(dataset)
    intervals: dict[str, float] = {}
    if ts is not None:
        entity = (key if key is not None else pl.lit("(all rows)")).alias(_ENTITY)
        steps = (
            dataset.frame.select(entity, pl.col(ts))
            .drop_nulls(ts)
            .sort([_ENTITY, ts])
            .with_columns(pl.col(ts).diff().over(_ENTITY).dt.total_microseconds().alias(_STEP))
            .filter(pl.col(_STEP) > 0)
            .group_by(_ENTITY)
            .agg((pl.col(_STEP).median() / 1_000_000).alias(_STEP))
            .sort(_ENTITY)
            .collect()
        )
        intervals = {str(e): float(s) for e, s in steps.iter_rows()}
    schema = dataset.frame.collect_schema()
    numeric = [c for c in dataset.roles.values if schema[c].is_numeric()]
    exprs: list[pl.Expr] = [pl.len().alias("rows")]
    for i, name in enumerate(numeric):
        clean = dataset.clean(name)
        raw = pl.col(name).cast(pl.Float64)
        exprs += [
            clean.min().alias(f"min{i}"),
            clean.max().alias(f"max{i}"),
            clean.quantile(0.01).alias(f"p01_{i}"),
            clean.quantile(0.99).alias(f"p99_{i}"),
            *[(raw == s).sum().alias(f"s{i}_{j}") for j, s in enumerate(CANDIDATE_SENTINELS)],
        ]
    row = dataset.frame.select(exprs).collect().row(0, named=True)
    ranges = [
        ValueRange(
            name,
            row[f"min{i}"],
            row[f"max{i}"],
            row[f"p01_{i}"],
            row[f"p99_{i}"],
            {
                s: int(row[f"s{i}_{j}"])
                for j, s in enumerate(CANDIDATE_SENTINELS)
                if row[f"s{i}_{j}"]
            },
        )
        for i, name in enumerate(numeric)
    ]
    zone = zone_hint(dataset, config.columns.timezone)
    return Suggestion(dataset, intervals, ranges, int(row["rows"]), read_as, zone)


def _looks_utf16(dataset: Dataset, config: Config) -> str | None:
    """The UTF-16 encoding a file read as UTF-8 by default looks like (`transcode.legacy_hint`:
    a NUL byte in most pairs of bytes, or a UTF-16 byte order mark), else None."""
    if config.origin_of("input.encoding") != "the defaults":
        return None
    for note in dataset.load_notes:
        if note.key == UTF16_HINT and note.examples:
            return str(note.examples[0]["encoding"])
    return None


def _number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.6g}"


def _seconds(value: float) -> str:
    return f"{value:g} s" if value < 120 else f"{value / 60:g} min"


def render_suggestion(suggestion: Suggestion, config: Config) -> str:
    sentinels = config.section(nulls.NullCheckConfig).sentinels
    dataset = suggestion.dataset
    roles = dataset.roles
    lines = [
        f"# dq-agent configuration suggested by `dq-agent init` from {json.dumps(dataset.path)}",
        f"# ({suggestion.rows:,} rows). Check each line; `configs/default.yaml` lists every key.",
        "# Use it with: dq-agent inspect PATH --config THIS_FILE",
        "",
        *_input_lines(dataset, config, suggestion.read_as),
        "columns:",
        "  # The roles dq-agent detected; set them here so a renamed or new column cannot change them.",
        *_timestamp_lines(dataset),
        f"  entity: {_yaml(list(roles.entity))}",
        f"  values: {_yaml(list(roles.values))}",
        f"  ingest_time: {_yaml(roles.ingest_time)}",
        *_timezone_lines(suggestion.zone, config.columns.timezone),
        "",
        f"{nulls.SPEC.name}:",
        f"  sentinels: {_yaml(list(sentinels))}   # numbers that mean 'no reading'",
    ]
    seen = [
        (r.column, value, count) for r in suggestion.ranges for value, count in r.sentinels.items()
    ]
    if seen:
        lines.append("  # Sentinel-looking values seen (add them above if they mean 'no reading'):")
        lines += [
            f"  #   {json.dumps(column)}: {_number(value)} x {count:,}"
            + (" (already a sentinel)" if value in sentinels else "")
            for column, value, count in seen
        ]
    else:
        lines.append(
            "  # No sentinel-looking value (-999, 9999, 65535 ...) seen in the value columns."
        )
    lines += ["", f"{delays.SPEC.name}:"]
    lines += _interval_lines(suggestion.intervals)
    lines += ["", *_range_lines(suggestion.ranges, config)]
    lines += [
        "",
        f"{structure.SPEC.name}:",
        "  # The columns as found: a missing one is then a problem; set allow_unexpected: false",
        "  # to make a new one a problem too.",
        f"  expected_columns: {_yaml(_file_columns(dataset))}",
        "  allow_unexpected: true",
        "",
        *_maintenance_lines(suggestion),
    ]
    return "\n".join(lines)


def _input_lines(dataset: Dataset, config: Config, read_as: str | None) -> list[str]:
    """How the files were read, where init was told (its config) or the data says: without the
    encoding the file alone would read a cp1252 file's names wrong, and miss its columns."""
    given = replace(config.input, encoding=read_as) if read_as else config.input
    lines = [
        f"  {key}: {_yaml(value)}"
        for key, value in (
            ("encoding", given.encoding if canonical(given.encoding) != UTF8 else None),
            ("separator", given.separator),
            ("decimal_comma", given.decimal_comma),
        )
        if value is not None
    ]
    if read_as:
        # Read so by init itself: said, with the setting that does it.
        lines.insert(
            0,
            f"  # Not UTF-8: read as {read_as}, which it looks like (a NUL byte in most pairs of "
            "bytes, or a byte order mark); the suggestions below come from reading it so.",
        )
    if lines:
        return ["input:", *lines, ""]
    if any(note.key == "encoding_hint" for note in dataset.load_notes):
        return [
            f"# The file is not UTF-8 but reads cleanly as {USUAL_LEGACY}: if that is its encoding,",
            "# uncomment (latin-1, utf-16 and others are accepted too):",
            "# input:",
            f"#   encoding: {_yaml(USUAL_LEGACY)}",
            "",
        ]
    return []


def _timezone_lines(hint: ZoneHint | None, timezone: str) -> list[str]:
    """The zone the times are read in: the one their repeated hour names, or the configured
    one, said as read without an offset when nothing names it."""
    if hint is None:
        return [f"  timezone: {_yaml(timezone)}"]
    if hint.zone is not None and hint.repeated is not None:
        hour = hint.repeated.replace(tzinfo=None)
        return [
            f"  # The times carry no offset and repeat the hour of {hour:%Y-%m-%d %H:00}, as",
            f"  # clocks in {hint.zone} and zones with its rules do when daylight saving time",
            "  # ends: read as UTC, those readings would be conflicting duplicates.",
            f"  timezone: {_yaml(hint.zone)}",
        ]
    return [
        f"  timezone: {_yaml(timezone)}   # the times carry no offset and were read as UTC; if the"
        " loggers write local time, name their zone (e.g. Europe/Berlin)",
    ]


def _timestamp_lines(dataset: Dataset) -> list[str]:
    """The timestamp role, or for a date and a time column read together, what detection found
    (`columns.timestamp` names one column: the pair is found again on each run)."""
    if not dataset.time_parts:
        return [f"  timestamp: {_yaml(dataset.roles.timestamp)}"]
    date, time = dataset.time_parts[0], dataset.time_parts[-1]
    return [
        f"  # The time is read from the date column {_yaml(date)} and the time column "
        f"{_yaml(time)}: found again",
        "  # on each run (columns.timestamp names one column).",
        "  timestamp: null",
    ]


def _file_columns(dataset: Dataset) -> list[str]:
    """The file's own columns: not the timestamp read from a date and a time column."""
    made = dataset.roles.timestamp if dataset.time_parts else None
    return [name for name in dataset.columns if name != made]


def suspect_limits(r: ValueRange, unit: ranges.Limits | None) -> tuple[float, float] | None:
    """Suspect limits `LIMIT_MARGIN` of the observed span outside the observed range, rounded
    outwards to a round step, within the unit default's bounds; None without a spread."""
    low, high = r.low, r.high
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    if high <= low:
        return None
    margin = LIMIT_MARGIN * (high - low)
    exponent = math.floor(math.log10(margin))
    step = 10.0**exponent
    digits = max(0, -exponent)
    suspect_min = round(math.floor((low - margin) / step) * step, digits)
    suspect_max = round(math.ceil((high + margin) / step) * step, digits)
    # Never looser than a physical bound the check already knows.
    if unit is not None and unit.suspect_min is not None:
        suspect_min = max(suspect_min, unit.suspect_min)
    if unit is not None and unit.suspect_max is not None:
        suspect_max = min(suspect_max, unit.suspect_max)
    return suspect_min, suspect_max


def _range_lines(found: list[ValueRange], config: Config) -> list[str]:
    settings = config.section(ranges.RangeCheckConfig)
    lines = [
        f"{ranges.SPEC.name}:",
        "  # Suspect limits (a warning, never a failure), to confirm: "
        f"{LIMIT_MARGIN:.0%} of the observed span",
        "  # outside the observed range of the clean values (sentinels left out), rounded outwards,",
        "  # so this data passes and a reading well beyond anything it showed warns. Fail limits",
        "  # (min, max: impossible values) are not suggested: a file shows what is usual, not what",
        "  # is impossible; add them where you know them, e.g. min: 0.",
        "  # Observed: min .. max (1st .. 99th percentile).",
    ]
    entries: list[str] = []
    for r in found:
        observed = (
            f"observed {_number(r.low)} .. {_number(r.high)} ({_number(r.p01)} .. {_number(r.p99)})"
        )
        unit = ranges.unit_limits(r.column) if settings.unit_defaults else None
        limits = suspect_limits(r, unit)
        if limits is None:
            entries.append(f"    # {json.dumps(r.column)}: {observed}: no spread, no limits")
            continue
        beyond = unit is not None and (
            (unit.suspect_min is not None and r.low is not None and r.low < unit.suspect_min)
            or (unit.suspect_max is not None and r.high is not None and r.high > unit.suspect_max)
        )
        if beyond and unit is not None:
            entries += [
                f"    # {json.dumps(r.column)} goes beyond its {unit.source}; those readings warn:",
                "    # a fault, or a column the default does not fit (a signed percentage, say):",
                "    # then set the limits you know here.",
            ]
        entries.append(
            f"    {json.dumps(r.column)}: "
            f'{{"suspect_min": {limits[0]:.10g}, "suspect_max": {limits[1]:.10g}}}'
            f"   # {observed}"
        )
    if not found:
        lines.append("  # (no numeric value columns)")
    if any(not e.lstrip().startswith("#") for e in entries):
        lines += ["  limits:", *entries]
    else:
        lines += [*[e.replace("    #", "  #", 1) for e in entries], "  limits: {}"]
    return lines


def _maintenance_lines(suggestion: Suggestion) -> list[str]:
    """A commented example: only a person knows when a device was in maintenance."""
    if suggestion.dataset.roles.timestamp is None:
        return []
    device = next(iter(suggestion.intervals), None)
    who = (
        f'    device: {_yaml(device)}   # a device, a glob such as "pump-*", or none: every device'
        if device is not None
        else "    # device: left out: every device"
    )
    return [
        "# Maintenance windows: readings inside are excused from the value and timing checks, and",
        "# the report says how many each window excused. Times without an offset are read in",
        "# columns.timezone.",
        "# maintenance:",
        "#   - " + who.strip(),
        "#     start: 2024-01-31T06:00:00Z",
        "#     end: 2024-01-31T08:00:00Z",
        "#     reason: calibration",
        "",
    ]


def _interval_lines(intervals: dict[str, float]) -> list[str]:
    if not intervals:
        return [
            "  # No timestamp, or too few rows per entity: no sampling interval seen.",
            "  expected_interval_seconds: null",
        ]
    distinct = sorted(set(intervals.values()))
    if len(distinct) == 1:
        return [
            f"  # Every entity samples every {_seconds(distinct[0])} (median step).",
            f"  expected_interval_seconds: {distinct[0]:g}",
        ]
    lines = [
        "  # The entities sample at different intervals (median step), so each keeps its own:",
    ]
    for entity, seconds in list(intervals.items())[:MAX_LISTED_ENTITIES]:
        lines.append(f"  #   {json.dumps(entity)}: {_seconds(seconds)}")
    if len(intervals) > MAX_LISTED_ENTITIES:
        lines.append(f"  #   ... {len(intervals) - MAX_LISTED_ENTITIES} more")
    lines.append("  expected_interval_seconds: null")
    return lines
