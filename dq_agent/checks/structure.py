"""structure_check: the shape of the data rather than its values.

Expected and unexpected columns, configured dtypes, numbers stored as text, timestamps the loader
could not parse, mixed timestamp formats and time zones, encoding damage (U+FFFD left by the
lossy UTF-8 reader, a BOM), empty data, blank or repeated header names, constant columns.

What the loader could not use is found by comparing the data as read (`dataset.raw`) with the
normalised frame (`dataset.frame`) row by row, side by side; only the columns the loader
converts are read again as read, the others are the frame's own. A value counts as unparseable
when it is present as read and null once normalised, so a typed timestamp column only counts
values outside the range a timestamp can hold.

Format families and offsets are worked out once per distinct timestamp text rather than per row:
a fleet of devices repeats each timestamp once per device.

Dataset-level facts (columns, header, BOM) do not depend on the scope; `scope.column` narrows the
column-level ones and `scope.entity`/`start`/`end` the rows they are counted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from dq_agent.checks.base import CheckPlan, Scope, plural, shown_value
from dq_agent.config import Config, StructureCheckConfig
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status

# `_parse_one` is timeparse's own single-format parser: reusing it keeps the families exactly the
# loader's formats. `format_family_exprs` gives the same answer but rebuilds every earlier format's
# parse inside each family (about 5x the parsing); see `format_family` below.
from dq_agent.timeparse import TIMESTAMP_FORMATS, _parse_one

TOOL = "structure_check"
MAX_FINDINGS = 20
MAX_EXAMPLES = 5
# Examples are drawn from the first matching values only, so a column that is all bad stays cheap.
_EXAMPLE_POOL = 1_000
REPLACEMENT_CHARACTER = "\ufffd"
_ZONE_FAMILY = "iso8601+zone"
_OFFSET_PATTERN = r"(Z|[+-]\d{2}(?::?\d{2})?)$"
_RAW = "__raw::"
_ROW = "__row"
_UNPARSEABLE_MAJORITY = 0.5
_DTYPE_ALIASES = {"utf8": "string", "str": "string", "float": "float64", "int": "int64"}
_UNORDERED = (pl.Categorical, pl.Enum, pl.Object, pl.Null, pl.List, pl.Array, pl.Struct)


@dataclass(frozen=True)
class _Columns:
    """Which columns each part of the check looks at, within the scope."""

    scoped: list[str]
    text: list[str]
    text_numeric: list[str]
    constant_candidates: list[str]
    floats: set[str]
    timestamp: str | None


def plan_structure_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    scoped = scope.columns(dataset.columns)
    unknown = [c for c in scoped if c not in dataset.columns]
    if unknown:
        raise ValueError(
            f"column {unknown[0]!r} does not exist; columns: {', '.join(dataset.columns)}"
        )
    columns = _select_columns(dataset, scope, scoped)
    queries = [_counts_query(dataset, scope, columns)]
    timestamp = columns.timestamp
    text_timestamp = timestamp is not None and timestamp in columns.text
    if timestamp is not None:
        frame = _side_by_side(dataset, scope, [timestamp], [timestamp], row_index=True)
        if text_timestamp:
            queries.append(_text_timestamp_query(frame, timestamp, config.columns.timezone))
        else:
            queries.append(_typed_timestamp_query(frame, timestamp))
    settings = config.structure_check
    whole = scope.entity is None and scope.start is None and scope.end is None

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        builder = _Report(dataset, settings, columns, whole_rows=whole)
        builder.add_counts(frames[0].row(0, named=True))
        if timestamp is not None:
            builder.add_timestamps(frames[1], text_timestamp)
        return builder.result()

    return CheckPlan(TOOL, queries, finish)


def _select_columns(dataset: Dataset, scope: Scope, scoped: list[str]) -> _Columns:
    raw_schema = dataset.raw.collect_schema()
    entity_scoped = scope.entity is not None
    constant = [
        c
        for c in scoped
        if not isinstance(raw_schema[c], _UNORDERED)
        # Within one entity its key columns are constant by construction.
        and not (entity_scoped and c in dataset.roles.entity)
    ]
    timestamp = dataset.roles.timestamp
    return _Columns(
        scoped=scoped,
        text=[c for c in scoped if raw_schema[c] == pl.String],
        text_numeric=[c for c in dataset.text_numeric_columns if c in scoped],
        constant_candidates=constant,
        floats={c for c in scoped if raw_schema[c].is_float()},
        timestamp=timestamp if timestamp is not None and timestamp in scoped else None,
    )


def _converted(dataset: Dataset) -> set[str | None]:
    """The columns the loader converts (times, numbers stored as text: `load._normalise`): only
    in these do the data as read and the normalised frame differ."""
    return {dataset.roles.timestamp, dataset.roles.ingest_time, *dataset.text_numeric_columns}


def _side_by_side(
    dataset: Dataset,
    scope: Scope,
    normalised: Sequence[str],
    as_read: Sequence[str],
    row_index: bool = False,
) -> pl.LazyFrame:
    """The `as_read` columns (prefixed) next to the `normalised` ones and those the scope filters
    on, limited to the scope (with the row index in the file, if asked for).

    Columns the loader left alone are taken as read from the frame, which the runner holds in
    memory, so only the converted ones are read again. A projection is not pushed through a
    side-by-side concat: each side selects what it needs.
    """
    converted = _converted(dataset)
    wanted = [*normalised, *(dataset.roles.entity if scope.entity is not None else [])]
    timestamp = dataset.roles.timestamp
    if timestamp is not None and (scope.start is not None or scope.end is not None):
        wanted.append(timestamp)
    frame = dataset.frame.select(
        *dict.fromkeys(wanted),
        *[pl.col(c).alias(_RAW + c) for c in as_read if c not in converted],
    )
    raw = dataset.raw.select(pl.col(c).alias(_RAW + c) for c in as_read if c in converted)
    if row_index:
        raw = raw.with_row_index(_ROW)
    combined = pl.concat([frame, raw], how="horizontal") if raw.collect_schema() else frame
    return scope.filter(replace(dataset, frame=combined))


def _raw(column: str) -> pl.Expr:
    return pl.col(_RAW + column)


def _dropped(column: str) -> pl.Expr:
    """Present as read, null once normalised: the loader could not use the value."""
    return _raw(column).is_not_null() & pl.col(column).is_null()


def _examples(values: pl.Expr) -> pl.Expr:
    return values.head(_EXAMPLE_POOL).unique(maintain_order=True).head(MAX_EXAMPLES).implode()


def _counts_query(dataset: Dataset, scope: Scope, columns: _Columns) -> pl.LazyFrame:
    """One row: rows, invalid UTF-8 per text column, numbers stored as text, constant columns.

    Only the numbers stored as text need the values as read next to the normalised ones. Over
    the whole data the other figures are taken from one side alone (converted columns from the
    data as read, the others from the frame), so no wide side-by-side is built; a scope that
    leaves out rows is applied to the side-by-side data."""
    as_read = list(dict.fromkeys([*columns.text, *columns.constant_candidates]))
    converted = _converted(dataset)
    exprs: dict[str, list[pl.Expr]] = {"raw": [], "frame": [], "paired": [pl.len().alias("rows")]}

    def side(name: str) -> list[pl.Expr]:
        # Text read as numbers is read once, beside its numbers, and every figure of it taken
        # there: decoding the text is the costly part.
        if name in columns.text_numeric:
            return exprs["paired"]
        return exprs["raw"] if name in converted else exprs["frame"]

    for i, name in enumerate(columns.text):
        damaged = _raw(name).str.contains(REPLACEMENT_CHARACTER, literal=True).fill_null(False)
        side(name).extend(
            [
                damaged.sum().alias(f"utf8_{i}"),
                _examples(_raw(name).filter(damaged)).alias(f"utf8_examples_{i}"),
            ]
        )
    for i, name in enumerate(columns.text_numeric):
        exprs["paired"] += [
            _raw(name).count().alias(f"numeric_values_{i}"),
            _dropped(name).sum().alias(f"numeric_bad_{i}"),
            _examples(_raw(name).filter(_dropped(name))).alias(f"numeric_examples_{i}"),
        ]
    for i, name in enumerate(columns.constant_candidates):
        # Values as stored, so no column needs parsing for this. min == max is a cheaper
        # constancy test than counting distinct values; NaN counts as missing.
        values = _raw(name).fill_nan(None) if name in columns.floats else _raw(name)
        side(name).extend(
            [
                values.count().alias(f"const_count_{i}"),
                (values.min() == values.max()).alias(f"const_same_{i}"),
                values.min().cast(pl.String).alias(f"const_value_{i}"),
            ]
        )
    if scope.filters_rows():
        together = _side_by_side(
            dataset,
            scope,
            columns.text_numeric,
            list(dict.fromkeys([*as_read, *columns.text_numeric])),
        )
        return together.select(exprs["paired"] + exprs["frame"] + exprs["raw"])
    paired_as_read = [c for c in [*as_read, *columns.text_numeric] if c in columns.text_numeric]
    paired = (
        _side_by_side(dataset, scope, columns.text_numeric, list(dict.fromkeys(paired_as_read)))
        if columns.text_numeric
        else dataset.frame
    )
    counts = paired.select(exprs["paired"])
    if exprs["frame"]:
        frame = dataset.frame.select(
            pl.col(c).alias(_RAW + c) for c in as_read if c not in converted
        )
        counts = counts.join(frame.select(exprs["frame"]), how="cross")
    if exprs["raw"]:
        raw = dataset.raw.select(
            pl.col(c).alias(_RAW + c)
            for c in as_read
            if c in converted and c not in columns.text_numeric
        )
        counts = counts.join(raw.select(exprs["raw"]), how="cross")
    return counts


def _text_timestamp_query(frame: pl.LazyFrame, timestamp: str, timezone: str) -> pl.LazyFrame:
    """Per (format family, offset): values, values the loader dropped, examples of those."""
    raw = _raw(timestamp)
    family = format_family(raw, timezone)
    offset = pl.when(family == _ZONE_FAMILY).then(
        raw.str.strip_chars().str.extract(_OFFSET_PATTERN, 1)
    )
    return (
        frame.filter(raw.is_not_null())
        .group_by(raw)
        .agg(
            pl.len().alias("values"),
            pl.col(timestamp).is_null().sum().alias("dropped"),
            pl.col(_ROW).min(),
        )
        .with_columns(family.alias("family"), offset.alias("offset"))
        .group_by("family", "offset")
        .agg(
            pl.col("values").sum(),
            pl.col("dropped").sum(),
            # Example values in file order: first appearance, each value once.
            pl.struct(_ROW, raw.alias("value"))
            .filter(pl.col("dropped") > 0)
            .sort_by(pl.col(_ROW).filter(pl.col("dropped") > 0))
            .head(MAX_EXAMPLES)
            .alias("examples"),
        )
    )


def _typed_timestamp_query(frame: pl.LazyFrame, timestamp: str) -> pl.LazyFrame:
    raw = _raw(timestamp)
    counts = frame.select(
        pl.lit(None, dtype=pl.String).alias("family"),
        pl.lit(None, dtype=pl.String).alias("offset"),
        raw.count().alias("values"),
        _dropped(timestamp).sum().alias("dropped"),
    )
    # A query of its own, so the stream stops at the fifth example; cast after filtering:
    # turning every timestamp into text would cost more than the whole check.
    examples = (
        frame.filter(_dropped(timestamp))
        .head(MAX_EXAMPLES)
        .select(pl.struct(_ROW, raw.cast(pl.String).alias("value")).implode().alias("examples"))
    )
    return counts.join(examples, how="cross")


def format_family(column: pl.Expr, timezone: str = "UTC") -> pl.Expr:
    """The label of the first accepted format that parses each value (null when none does).

    Equal to the family whose `timeparse.format_family_exprs` flag is true, with each format
    parsed once: a single-series file has as many distinct timestamps as rows.
    """
    return pl.coalesce(
        [
            pl.when(_parse_one(column, fmt, timezone).is_not_null()).then(pl.lit(label))
            for label, fmt in TIMESTAMP_FORMATS
        ]
    )


def normalise_offset(offset: str) -> str:
    """'Z', '+0200' and '+02' as '+00:00' and '+02:00', so one zone written two ways is one."""
    if offset == "Z":
        return "+00:00"
    digits = offset[1:].replace(":", "")
    return f"{offset[0]}{digits[:2]}:{digits[2:4] or '00'}"


def dtype_matches(expected: str, actual: pl.DataType) -> bool:
    """`expected` names `actual`: by base name ('Datetime') or in full ('Datetime(time_unit=...')."""
    want = _dtype_name(expected)
    full = _dtype_name(str(actual))
    return want == full if "(" in want else want == full.split("(", 1)[0]


def _dtype_name(name: str) -> str:
    compact = name.replace(" ", "").lower()
    return _DTYPE_ALIASES.get(compact, compact)


class _Report:
    """Collects the metrics and findings; pure Python over the small collected frames."""

    def __init__(
        self, dataset: Dataset, settings: StructureCheckConfig, columns: _Columns, whole_rows: bool
    ) -> None:
        self.dataset = dataset
        self.settings = settings
        self.columns = columns
        self.whole_rows = whole_rows
        self.metrics: dict[str, Any] = {}
        self.findings: list[Finding] = []
        self.labels: list[str] = []
        self._add_dataset_facts()

    def _flag(self, finding: Finding, label: str) -> None:
        self.findings.append(finding)
        self.labels.append(label)

    def _add_dataset_facts(self) -> None:
        dataset, settings = self.dataset, self.settings
        present = dataset.columns
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
                    what=f"{plural(len(damaged_names), 'column name')} with invalid UTF-8 bytes",
                    count=len(damaged_names),
                    examples=[{"column": name} for name in damaged_names[:MAX_EXAMPLES]],
                ),
                "invalid UTF-8 in the header",
            )
        if dataset.has_bom:
            self._flag(
                Finding(what="file starts with a UTF-8 byte order mark (BOM)", count=1), "BOM"
            )

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
            self._flag(
                Finding(
                    what=f"{plural(values, 'number')} stored as text in column {name} "
                    f"({plural(bad, 'value')} not a number)",
                    count=values,
                    column=name,
                    examples=[{"value": v} for v in counts[f"numeric_examples_{i}"]],
                ),
                f"numbers as text in {name} ({bad} unparseable)",
            )
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
                    what=f"{plural(damaged, 'value')} with invalid UTF-8 bytes in column {name}",
                    count=damaged,
                    column=name,
                    examples=[{"value": v} for v in counts[f"utf8_examples_{i}"]],
                ),
                f"{damaged} invalid UTF-8 values in {name}",
            )
        self.metrics["invalid_utf8_values"] = sum(by_column.values())
        self.metrics["invalid_utf8_by_column"] = by_column

    def _add_constant(self, counts: dict[str, Any]) -> None:
        constant: dict[str, Any] = {}
        for i, name in enumerate(self.columns.constant_candidates):
            if counts[f"const_count_{i}"] > 1 and counts[f"const_same_{i}"]:
                constant[name] = shown_value(counts[f"const_value_{i}"])
        self.metrics["constant_columns"] = list(constant)
        if constant:
            names = ", ".join(constant)
            self._flag(
                Finding(
                    what=f"{plural(len(constant), 'constant column')} (one value only): {names}",
                    count=len(constant),
                    column=next(iter(constant)) if len(constant) == 1 else None,
                    examples=[
                        {"column": c, "value": v} for c, v in list(constant.items())[:MAX_EXAMPLES]
                    ],
                ),
                f"constant columns {names}",
            )

    def add_timestamps(self, groups: pl.DataFrame, is_text: bool) -> None:
        column = self.columns.timestamp
        values = int(groups.get_column("values").sum())
        dropped = int(groups.get_column("dropped").sum())
        examples = sorted(
            (e for group in groups.get_column("examples").to_list() for e in group),
            key=lambda e: e[_ROW],
        )
        families: dict[str, int] = {}
        offsets: dict[str, int] = {}
        without_offset = 0
        for group in groups.iter_rows(named=True):
            family = group["family"]
            if family is None:
                continue
            families[family] = families.get(family, 0) + group["values"]
            if group["offset"] is not None:
                key = normalise_offset(group["offset"])
                offsets[key] = offsets.get(key, 0) + group["values"]
            elif family != _ZONE_FAMILY:
                without_offset += group["values"]
        families = dict(sorted(families.items(), key=lambda kv: (-kv[1], kv[0])))
        offsets = dict(sorted(offsets.items(), key=lambda kv: (-kv[1], kv[0])))
        mixed_zones = (bool(offsets) and without_offset > 0) or len(offsets) > 1
        self.metrics.update(
            {
                "timestamp_values": values,
                "unparseable_timestamps": dropped,
                "timestamp_formats": families,
                "mixed_timestamp_formats": len(families) > 1,
                "timezone_offsets": offsets,
                "timestamps_without_offset": without_offset if is_text else None,
                "mixed_time_zones": mixed_zones,
            }
        )
        if dropped:
            majority = dropped > _UNPARSEABLE_MAJORITY * values
            share = dropped / values
            self._flag(
                Finding(
                    what=f"{plural(dropped, 'timestamp')} the loader could not parse "
                    f"({share:.1%} of {values:,})",
                    count=dropped,
                    severity=Status.FAIL if majority else Status.WARN,
                    column=column,
                    examples=[
                        {"row": e[_ROW], "value": e["value"]} for e in examples[:MAX_EXAMPLES]
                    ],
                ),
                f"{dropped} unparseable timestamps ({share:.1%})",
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
        if mixed_zones:
            parts = [f"{offset} ({count:,})" for offset, count in offsets.items()]
            if without_offset:
                parts.append(f"no offset ({without_offset:,})")
            counts = [*offsets.values()] + ([without_offset] if without_offset else [])
            self._flag(
                Finding(
                    what="timestamps mix time zones (daylight saving time in one zone also "
                    f"shows as two offsets): {', '.join(parts)}",
                    count=sum(counts) - max(counts),
                    column=column,
                ),
                "mixed time zones",
            )

    def result(self) -> CheckResult:
        self.metrics.setdefault("unparseable_timestamps", 0)
        self.metrics.setdefault("timestamp_formats", {})
        self.metrics.setdefault("mixed_timestamp_formats", False)
        self.metrics.setdefault("timezone_offsets", {})
        self.metrics.setdefault("mixed_time_zones", False)
        ranked = sorted(
            zip(self.findings, self.labels, strict=True),
            key=lambda pair: 0 if pair[0].severity is Status.FAIL else 1,
        )
        findings = [f for f, _ in ranked][:MAX_FINDINGS]
        status = _worst(findings)
        scope = f"{self.metrics['columns']} columns, {self.metrics['rows']:,} rows"
        if not findings:
            summary = f"no structural problems in {scope}"
        else:
            labels = [label for _, label in ranked]
            shown = "; ".join(labels[:4]) + (
                f"; +{len(labels) - 4} more" if len(labels) > 4 else ""
            )
            summary = f"{plural(len(labels), 'structural problem')} in {scope}: {shown}"
        return CheckResult(TOOL, status, summary, metrics=self.metrics, findings=findings)


def _worst(findings: Sequence[Finding]) -> Status:
    if any(f.severity is Status.FAIL for f in findings):
        return Status.FAIL
    return Status.WARN if findings else Status.PASS
