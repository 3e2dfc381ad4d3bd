"""A row of units under a CSV header (`,,bar(g),degC,count,`), as historian and SCADA exports
write it: told from the lines after it and skipped, not read as the first row of data.

Read as data, such a row made every numeric column text in one row: a missing value and a
"text in numeric column" finding per column, and a phantom entity (the row's empty device),
on every clean export. It is a units row when, in the first lines:

- it has the header's number of fields and some are not empty;
- each non-empty field is text (no number, no missing marker) in a column the lines after it
  hold numbers in, and those are most of the numeric columns;
- every other field is empty, but the first may name the row (`Unit`, `Einheit`, `EU`).

`input.units_row: false` reads such a row as data, `true` skips the first row after the header
whatever it holds.
"""

from __future__ import annotations

import csv
import io
import re

# The first field of a units row may name it.
_LABEL = re.compile(r"^\[?(units?|einheit(en)?|unit[ée]s?|eu|uom|engineering units)\]?:?$", re.I)
# A field that is a missing marker, not a unit.
_MISSING = re.compile(r"^(#?n/?a|null|none|nan|-|#value!|#ref!|#div/0!|\?+)$", re.I)
# Most of the numeric columns carry a unit in a units row.
_MIN_UNIT_SHARE = 0.5
# A column holds numbers when at least this share of its non-empty fields below are numbers.
_NUMERIC_SHARE = 0.9
_SAMPLE_LINES = 50


def units_row(
    names: list[str], lines: list[str], separator: str, setting: bool | None
) -> list[str] | None:
    """The fields of the units row that `lines` (the data lines after the header) start with,
    or None; `setting` is `input.units_row` (None: detect)."""
    if setting is False or not lines:
        return None
    first = _fields(lines[0], separator)
    if setting is True:
        return first
    if len(first) != len(names) or not any(field for field in first):
        return None
    below = [_fields(line, separator) for line in lines[1 : _SAMPLE_LINES + 1] if line.strip()]
    below = [fields for fields in below if len(fields) == len(names)]
    if not below:
        return None
    numeric = [_numeric_column(below, i) for i in range(len(names))]
    units = 0
    for i, field in enumerate(first):
        if not field:
            continue
        if numeric[i] and not _is_number(field) and not _MISSING.match(field):
            units += 1
        elif not (i == 0 and _LABEL.match(field)):
            return None
    return first if units and units >= _MIN_UNIT_SHARE * sum(numeric) else None


def _fields(line: str, separator: str) -> list[str]:
    try:
        rows = list(csv.reader(io.StringIO(line.rstrip("\r")), delimiter=separator))
    except csv.Error:
        return []
    return [field.strip() for field in rows[0]] if rows else []


def _numeric_column(rows: list[list[str]], index: int) -> bool:
    values = [row[index] for row in rows if row[index]]
    if not values:
        return False
    return sum(_is_number(value) for value in values) >= _NUMERIC_SHARE * len(values)


def _is_number(text: str) -> bool:
    # A decimal comma (`7,462` in a `;` file) is a number too.
    try:
        float(text.replace(",", ".", 1) if text.count(",") == 1 and "." not in text else text)
    except ValueError:
        return False
    return True
