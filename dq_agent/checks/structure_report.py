"""structure_check, the finish: the collected frames as the check's result.

Pure Python over the small frames the queries of `structure` collect, with the dataset-level
facts (columns, header, BOM) that need no query: the metrics, the findings and the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from dq_agent.checks.base import ROW, plural, share_text, shown_value
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, left_out
from dq_agent.settings import fraction, setting

TOOL = "structure_check"


# Base names of Polars dtypes (lower case) and the aliases `dtype_matches` accepts.
_DTYPE_NAMES = {
    *(f"int{b}" for b in (8, 16, 32, 64, 128)),
    *(f"uint{b}" for b in (8, 16, 32, 64, 128)),
    "float16",
    "float32",
    "float64",
    "decimal",
    "boolean",
    "bool",
    "string",
    "utf8",
    "str",
    "float",
    "int",
    "binary",
    "date",
    "datetime",
    "time",
    "duration",
    "categorical",
    "enum",
    "list",
    "array",
    "struct",
    "null",
    "object",
}
_DTYPE_EXAMPLES = ("Float64", "Int64", "String", "Datetime", "Boolean")


def known_dtype(name: str) -> bool:
    """`name` is a dtype `dtypes` can compare with: a Polars name, in full
    ('Datetime(time_unit="us")') or by its base ('datetime'), any case."""
    return name.strip().split("(", 1)[0].strip().lower() in _DTYPE_NAMES


def known_dtypes(value: dict[str, str]) -> str | None:
    """The rule for `structure_check.dtypes`: every value names a dtype."""
    for column, name in value.items():
        if not known_dtype(name):
            return (
                f"name dtypes, but {name!r} (column {column!r}) is none; use a Polars name "
                f"such as {', '.join(_DTYPE_EXAMPLES)}"
            )
    return None


@dataclass
class StructureCheckConfig:
    expected_columns: list[str] | None = None
    allow_unexpected: bool = True
    # `setting` returns a dataclasses field with a default factory: no shared mutable default.
    dtypes: dict[str, str] = setting(factory=dict, rule=known_dtypes)  # noqa: RUF009
    # A column whose non-empty values are mostly numbers is a numeric column; its other values
    # are reported as text in a numeric column.
    text_numeric_min_share: float = setting(0.5, rule=fraction)


MAX_FINDINGS = 20
MAX_EXAMPLES = 5
REPLACEMENT_CHARACTER = "\ufffd"
ZONE_FAMILY = "iso8601+zone"
# The timestamps' frame (`add_timestamps`), one row per format family and offset, and the
# counts come back under names of this prefix: a result column named like a column of the data
# would be given its dtype (`engines.base.normalised`).
SHIELD = "__structure::"
VALUES = SHIELD + "values"
DROPPED = SHIELD + "dropped"
FAMILY = SHIELD + "family"
OFFSET = SHIELD + "offset"
IN_ZONE = SHIELD + "in_zone"
SHARED = SHIELD + "shared"
"""Per (family, offset): its texts whose instant is also written with another offset."""
"""Per offset: every text's offset is the configured zone's at its instant (`by_family`)."""
EXAMPLES = SHIELD + "examples"
_UNPARSEABLE_MAJORITY = 0.5
_DTYPE_ALIASES = {
    "utf8": "string",
    "str": "string",
    "float": "float64",
    "int": "int64",
    "bool": "boolean",
}


@dataclass(frozen=True)
class Columns:
    """Which columns each part of the check looks at, within the scope."""

    scoped: list[str]
    text: list[str]
    text_numeric: list[str]
    constant_candidates: list[str]
    nested: list[str]
    floats: set[str]
    timestamp: str | None


def normalise_offset(offset: str) -> str:
    """'Z', '+0200' and '+02' as '+00:00' and '+02:00', so one zone written two ways is one."""
    if offset == "Z":
        return "+00:00"
    digits = offset[1:].replace(":", "")
    return f"{offset[0]}{digits[:2]}:{digits[2:4] or '00'}"


def _daylight_saving_pair(offsets: list[str]) -> bool:
    """Whether `offsets` (normalised, `normalise_offset`) are two an hour or half an hour
    apart, as one zone's standard and daylight saving time are."""
    if len(offsets) != 2:
        return False
    minutes = [(1 if o[0] == "+" else -1) * (int(o[1:3]) * 60 + int(o[4:6] or 0)) for o in offsets]
    return abs(minutes[0] - minutes[1]) in (30, 60)


def dtype_matches(expected: str, actual: pl.DataType) -> bool:
    """`expected` names `actual`: by base name ('Datetime') or in full ('Datetime(time_unit=...')."""
    want = _dtype_name(expected)
    full = _dtype_name(str(actual))
    return want == full if "(" in want else want == full.split("(", 1)[0]


def _dtype_name(name: str) -> str:
    compact = name.replace(" ", "").lower()
    return _DTYPE_ALIASES.get(compact, compact)


class StructureReport:
    """Collects the metrics and findings; pure Python over the small collected frames."""

    def __init__(
        self, dataset: Dataset, settings: StructureCheckConfig, columns: Columns, whole_rows: bool
    ) -> None:
        self.dataset = dataset
        self.settings = settings
        self.columns = columns
        self.whole_rows = whole_rows
        self.metrics: dict[str, Any] = {}
        self.findings: list[Finding] = []
        self.labels: list[str] = []
        self._add_dataset_facts()

    def _bad_bytes(self) -> str:
        """What the reader replaced (U+FFFD) in the encoding the text was read in: a file
        converted from cp1252 holds no invalid UTF-8, only bytes cp1252 leaves undefined."""
        encoding = self.dataset.text_encoding
        if encoding == "utf-8":
            return "invalid UTF-8 bytes"
        return f"bytes {encoding} does not define (input.encoding)"

    def _flag(self, finding: Finding, label: str) -> None:
        self.findings.append(finding)
        self.labels.append(label)

    def _add_dataset_facts(self) -> None:
        dataset, settings = self.dataset, self.settings
        # A timestamp read from a date and a time column is not a column of the file.
        derived = dataset.roles.timestamp if dataset.time_parts else None
        present = [c for c in dataset.columns if c != derived]
        expected = settings.expected_columns
        missing = [c for c in expected or [] if c not in present]
        extra = [c for c in present if c not in expected] if expected is not None else []
        unexpected = [] if settings.allow_unexpected else extra
        header = dataset.header_names
        blank = [i + 1 for i, name in enumerate(header) if not name.strip()]
        seen: dict[str, int] = {}
        for name in header:
            if name.strip():
                seen[name] = seen.get(name, 0) + 1
        repeated = [name for name, times in seen.items() if times > 1]
        damaged_names = [name for name in header if REPLACEMENT_CHARACTER in name]
        self.metrics.update(
            {
                "columns": len(present),
                "missing_columns": missing,
                "unexpected_columns": unexpected,
                "extra_columns": extra,
                "dtype_mismatches": self._dtype_mismatches(),
                "has_bom": dataset.has_bom,
                "blank_column_names": len(blank),
                "blank_column_positions": blank,
                "duplicate_column_names": repeated,
                "invalid_utf8_column_names": damaged_names,
            }
        )
        if missing:
            self._flag(
                Finding(
                    what=f"{plural(len(missing), 'expected column')} missing: {', '.join(missing)}",
                    count=len(missing),
                    severity=Status.FAIL,
                ),
                f"missing columns {', '.join(missing)}",
            )
        if unexpected:
            self._flag(
                Finding(
                    what=f"{plural(len(unexpected), 'unexpected column')}: {', '.join(unexpected)}",
                    count=len(unexpected),
                ),
                plural(len(unexpected), "unexpected column"),
            )
        mismatches = self.metrics["dtype_mismatches"]
        if mismatches:
            self._flag(
                Finding(
                    what=f"{plural(len(mismatches), 'column')} not of the configured dtype",
                    count=len(mismatches),
                    column=mismatches[0]["column"] if len(mismatches) == 1 else None,
                    examples=mismatches[:MAX_EXAMPLES],
                ),
                f"{len(mismatches)} columns of another dtype",
            )
        if blank:
            self._flag(
                Finding(
                    what=f"{plural(len(blank), 'blank column name')} (positions "
                    f"{', '.join(map(str, blank))})",
                    count=len(blank),
                ),
                plural(len(blank), "blank column name"),
            )
        if repeated:
            self._flag(
                Finding(
                    what=f"column names written more than once: {', '.join(repeated)}",
                    count=sum(seen[name] - 1 for name in repeated),
                ),
                f"repeated column names {', '.join(repeated)}",
            )
        if damaged_names:
            self._flag(
                Finding(
                    what=f"{plural(len(damaged_names), 'column name')} with {self._bad_bytes()}",
                    count=len(damaged_names),
                    examples=[{"column": name} for name in damaged_names[:MAX_EXAMPLES]],
                ),
                f"{self._bad_bytes()} in the header",
            )
        nested = self.columns.nested
        self.metrics["nested_columns"] = nested
        if nested:
            kinds = ", ".join(
                f"{c} ({type(dataset.raw.collect_schema()[c]).__name__.lower()})" for c in nested
            )
            self._flag(
                Finding(
                    what=f"{plural(len(nested), 'nested column')} (struct or list values) that "
                    f"no other check reads: {kinds}",
                    count=len(nested),
                    column=nested[0] if len(nested) == 1 else None,
                ),
                f"nested columns {', '.join(nested)}",
            )
        if dataset.has_bom:
            # Excel's "CSV UTF-8" writes one on every file, and the loader reads past it: a
            # note, as a UTF-16 one is (it warned on every clean Excel export).
            self._flag(
                Finding(
                    what="file starts with a UTF-8 byte order mark (BOM), read past",
                    count=1,
                    severity=Status.PASS,
                ),
                "BOM",
            )
        self._add_load_notes()

    def _add_load_notes(self) -> None:
        """What loading found (files that differ, a trailing separator, time columns it could
        not read, nested columns), under their keys in the metrics."""
        by_key: dict[str, list[str]] = {}
        for note in self.dataset.load_notes:
            by_key.setdefault(note.key, []).append(note.what)
            self._flag(
                Finding(
                    what=note.what,
                    count=note.count,
                    severity=note.severity,
                    column=note.column,
                    examples=list(note.examples),
                ),
                note.label,
            )
        self.metrics["load_notes"] = by_key

    def _dtype_mismatches(self) -> list[dict[str, Any]]:
        raw_schema = self.dataset.raw.collect_schema()
        frame_schema = self.dataset.frame.collect_schema()
        mismatches: list[dict[str, Any]] = []
        for column, expected in self.settings.dtypes.items():
            if column not in self.columns.scoped and column in self.dataset.columns:
                continue
            if column not in self.dataset.columns:
                mismatches.append({"column": column, "expected": expected, "actual": None})
                continue
            # The loader's deliberate conversions (parsed timestamps, numbers cast from text)
            # count as the column's dtype; their failures are counted separately.
            raw, normalised = raw_schema[column], frame_schema[column]
            if not (dtype_matches(expected, raw) or dtype_matches(expected, normalised)):
                mismatches.append({"column": column, "expected": expected, "actual": str(raw)})
        return mismatches

    def add_counts(self, counts: dict[str, Any]) -> None:
        rows: int = counts["rows"]
        self.metrics["rows"] = rows
        self.metrics["empty"] = rows == 0
        if rows == 0:
            if self.whole_rows:
                finding = Finding(what="the dataset has no rows", count=0, severity=Status.FAIL)
            else:
                finding = Finding(what="no rows match the entity or time window", count=0)
            self._flag(finding, "no rows")
        self._add_text_numeric(counts)
        self._add_utf8(counts)
        self._add_constant(counts)

    def _add_text_numeric(self, counts: dict[str, Any]) -> None:
        unparseable: dict[str, int] = {}
        for i, name in enumerate(self.columns.text_numeric):
            bad = counts[f"numeric_bad_{i}"]
            values = counts[f"numeric_values_{i}"]
            unparseable[name] = bad
            if bad:
                share = bad / values if values else 0.0
                finding = Finding(
                    what=f"{plural(bad, 'text value')} in numeric column {name} "
                    f"({share_text(share)} of {values:,} values; the rest are read as numbers)",
                    count=bad,
                    column=name,
                    examples=[{"value": v} for v in counts[f"numeric_examples_{i}"]],
                )
                label = f"text in numeric column {name} ({bad}, {share_text(share)})"
            else:
                # Every value is a number (with a unit, thousands separators or spaces): the
                # column is checked as numbers, nothing is lost.
                finding = Finding(
                    what=f"{plural(values, 'number')} stored as text in column {name}: all read "
                    "as numbers",
                    count=values,
                    severity=Status.PASS,
                    column=name,
                )
                label = f"numbers as text in {name}"
            self._flag(finding, label)
        self.metrics["text_numeric_columns"] = list(self.columns.text_numeric)
        self.metrics["text_numeric_unparseable"] = unparseable

    def _add_utf8(self, counts: dict[str, Any]) -> None:
        by_column: dict[str, int] = {}
        for i, name in enumerate(self.columns.text):
            damaged = counts[f"utf8_{i}"]
            if not damaged:
                continue
            by_column[name] = damaged
            self._flag(
                Finding(
                    what=f"{plural(damaged, 'value')} with {self._bad_bytes()} in column {name}",
                    count=damaged,
                    column=name,
                    examples=[{"value": v} for v in counts[f"utf8_examples_{i}"]],
                ),
                f"{damaged} values with {self._bad_bytes()} in {name}",
            )
        self.metrics["invalid_utf8_values"] = sum(by_column.values())
        self.metrics["invalid_utf8_by_column"] = by_column

    def _add_constant(self, counts: dict[str, Any]) -> None:
        constant: dict[str, Any] = {}
        for i, name in enumerate(self.columns.constant_candidates):
            if counts[f"const_count_{i}"] > 1 and counts[f"const_same_{i}"]:
                constant[name] = shown_value(counts[f"const_value_{i}"])
        self.metrics["constant_columns"] = list(constant)
        # A code, label or flag with one value in this file (a long file's only `variable`, an
        # alarm that never fired) is normal and not listed. A value column that never varies is
        # a fact worth a note, not a problem: most often a setpoint or a configured constant,
        # which nothing in the file tells apart from a dead channel. flatline_check says the
        # same of it ("never varies, not called stuck"); a device stuck while the others vary
        # is flatline_check's finding.
        values = set(self.dataset.roles.values)
        constant = {name: value for name, value in constant.items() if name in values}
        if constant:
            names = ", ".join(list(constant)[:MAX_EXAMPLES]) + (
                f" and {len(constant) - MAX_EXAMPLES} more" if len(constant) > MAX_EXAMPLES else ""
            )
            verb = "never varies" if len(constant) == 1 else "never vary"
            self._flag(
                Finding(
                    what=f"{plural(len(constant), 'value column')} {verb} (one value "
                    f"throughout: a setpoint or a constant): {names}",
                    count=len(constant),
                    severity=Status.PASS,
                    column=next(iter(constant)) if len(constant) == 1 else None,
                    examples=[
                        {"column": c, "value": v} for c, v in list(constant.items())[:MAX_EXAMPLES]
                    ],
                ),
                f"{names} {verb}",
            )

    def add_timestamps(self, groups: pl.DataFrame, is_text: bool, timezone: str = "UTC") -> None:
        column = self.columns.timestamp
        values = int(groups.get_column(VALUES).sum())
        dropped = int(groups.get_column(DROPPED).sum())
        examples = sorted(
            (e for group in groups.get_column(EXAMPLES).to_list() for e in group),
            key=lambda e: e[ROW],
        )
        families: dict[str, int] = {}
        offsets: dict[str, int] = {}
        without_offset = 0
        # One zone's daylight saving time written as offsets, in the zone configured.
        zone: str | None = timezone if IN_ZONE in groups.columns else None
        for group in groups.iter_rows(named=True):
            if group[OFFSET] is not None and not group[IN_ZONE]:
                zone = None
            family = group[FAMILY]
            if family is None:
                continue
            families[family] = families.get(family, 0) + group[VALUES]
            if group[OFFSET] is not None:
                key = normalise_offset(group[OFFSET])
                offsets[key] = offsets.get(key, 0) + group[VALUES]
            elif family != ZONE_FAMILY:
                without_offset += group[VALUES]
        families = dict(sorted(families.items(), key=lambda kv: (-kv[1], kv[0])))
        offsets = dict(sorted(offsets.items(), key=lambda kv: (-kv[1], kv[0])))
        one_zone = zone if zone not in (None, "UTC") and offsets and not without_offset else None
        # Two offsets an hour (or, as at Lord Howe, half an hour) apart with every value
        # carrying one: one zone's daylight saving time, each time unambiguous. A note, not a
        # problem: such a file warned as mixed zones, clean, until columns.timezone named it.
        # Two zones an hour apart write the same instants twice, one zone never does.
        shared = int(groups.get_column(SHARED).sum()) if SHARED in groups.columns else 1
        # Only while no zone is configured: offsets outside a configured zone stay a mix.
        daylight_saving = (
            timezone == "UTC"
            and one_zone is None
            and not without_offset
            and not shared
            and _daylight_saving_pair(list(offsets))
        )
        mixed_zones = (
            one_zone is None
            and not daylight_saving
            and ((bool(offsets) and without_offset > 0) or len(offsets) > 1)
        )
        self.metrics.update(
            {
                "timestamp_values": values,
                "unparseable_timestamps": dropped,
                "timestamp_formats": families,
                "mixed_timestamp_formats": len(families) > 1,
                "timezone_offsets": offsets,
                "timestamps_without_offset": without_offset if is_text else None,
                "mixed_time_zones": mixed_zones,
                "timezone_offsets_zone": one_zone,
            }
        )
        if dropped:
            majority = dropped > _UNPARSEABLE_MAJORITY * values
            share = dropped / values
            self._flag(
                Finding(
                    what=f"{plural(dropped, 'timestamp')} the loader could not parse "
                    f"({share_text(share)} of {values:,})",
                    count=dropped,
                    severity=Status.FAIL if majority else Status.WARN,
                    column=column,
                    examples=[self._example(e) for e in examples[:MAX_EXAMPLES]],
                ),
                f"{dropped} unparseable timestamps ({share_text(share)})",
            )
        if len(families) > 1:
            main = next(iter(families))
            listed = ", ".join(f"{name} ({count:,})" for name, count in families.items())
            self._flag(
                Finding(
                    what=f"timestamps mix {len(families)} formats: {listed}",
                    count=sum(families.values()) - families[main],
                    column=column,
                ),
                f"mixed timestamp formats ({', '.join(families)})",
            )
        if daylight_saving:
            parts = [f"{offset} ({count:,})" for offset, count in offsets.items()]
            self._flag(
                Finding(
                    what=f"timestamps carry two offsets, {', '.join(parts)}: one zone's "
                    "daylight saving time, each time unambiguous (set columns.timezone to that "
                    "zone to name it)",
                    count=0,
                    severity=Status.PASS,
                    column=column,
                ),
                "daylight saving offsets",
            )
        if mixed_zones:
            parts = [f"{offset} ({count:,})" for offset, count in offsets.items()]
            if without_offset:
                parts.append(f"no offset ({without_offset:,})")
            counts = [*offsets.values()] + ([without_offset] if without_offset else [])
            self._flag(
                Finding(
                    what="timestamps mix time zones (daylight saving time in one zone also "
                    f"shows as two offsets: set columns.timezone to that zone to say so): "
                    f"{', '.join(parts)}",
                    count=sum(counts) - max(counts),
                    column=column,
                ),
                "mixed time zones",
            )

    def _example(self, example: dict[str, Any]) -> dict[str, Any]:
        """An unparseable timestamp's row and value, and its file when several were read."""
        shown = {"row": example[ROW], "value": example["value"]}
        in_file = self.dataset.file_of_row(example[ROW])
        return {**shown, "file": in_file} if in_file else shown

    def result(self) -> CheckResult:
        self.metrics.setdefault("unparseable_timestamps", 0)
        self.metrics.setdefault("timestamp_formats", {})
        self.metrics.setdefault("mixed_timestamp_formats", False)
        self.metrics.setdefault("timezone_offsets", {})
        self.metrics.setdefault("mixed_time_zones", False)
        self.metrics.setdefault("timezone_offsets_zone", None)
        ranked = sorted(
            zip(self.findings, self.labels, strict=True),
            key=lambda pair: {Status.FAIL: 0, Status.WARN: 1}.get(pair[0].severity, 2),
        )
        findings, self.metrics["findings_left_out"] = left_out([f for f, _ in ranked], MAX_FINDINGS)
        status = _worst(findings)
        scope = f"{self.metrics['columns']} columns, {self.metrics['rows']:,} rows"
        problems = [label for f, label in ranked if f.severity is not Status.PASS]
        notes = [label for f, label in ranked if f.severity is Status.PASS]
        if not problems:
            summary = f"no structural problems in {scope}"
            if notes:
                summary += f" (noted: {'; '.join(notes[:3])})"
        else:
            labels = problems
            shown = "; ".join(labels[:4]) + (
                f"; +{len(labels) - 4} more" if len(labels) > 4 else ""
            )
            summary = f"{plural(len(labels), 'structural problem')} in {scope}: {shown}"
        return CheckResult(TOOL, status, summary, metrics=self.metrics, findings=findings)


def _worst(findings: Sequence[Finding]) -> Status:
    """FAIL or WARN by the worst finding; notes (severity PASS) never raise the status."""
    if any(f.severity is Status.FAIL for f in findings):
        return Status.FAIL
    return Status.WARN if any(f.severity is Status.WARN for f in findings) else Status.PASS
