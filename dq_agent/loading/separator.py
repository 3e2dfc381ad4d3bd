"""Which separator a CSV file uses, judged on its header and first data lines.

The header alone misleads: Excel in a German locale writes `Zeitstempel;Druck, bar;...`, whose
commas are as many as its semicolons. The separator is the one that splits the header and every
data line of the sample into the same number (more than one) of fields. A `;` file with decimal
commas in fixed columns (`65,0;3,998`) splits evenly at its commas too; then the fields decide:
the right separator leaves numbers and times (`65,0`, `26.10.2024 00:00:00`), the wrong one cuts
them into pieces that are neither (`26.10.2024 00:00:00;65`). Only when no candidate splits the
lines evenly (ragged lines, a header alone) does the header's most frequent candidate decide,
as it always did.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

SEPARATORS = (",", ";", "\t", "|")
"""The candidates, in order of preference when nothing else tells them apart."""
# A value a sensor export writes: a number (decimal point or comma, exponent), a date or time
# (`26.10.2024 00:00:00`, `2024-03-04T10:00:00Z`, `3/9/2024 11:59:00 PM`), a boolean, or nothing.
_TYPED = re.compile(
    r"\s*(?:[-+]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][-+]?\d+)?"
    r"|\d[\d\-./: T]*(?:[AaPp][Mm])?(?:Z|[+-]\d\d:?\d\d)?"
    r"|true|false|)\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SeparatorGuess:
    separator: str
    reason: str
    """Why, for the report's `guessed:`; empty when there is nothing to say (a comma, the CSV
    default, that no other candidate rivalled)."""


_NAMES = {",": "the comma", ";": "the semicolon", "\t": "the tab", "|": "the bar"}


def shown(separator: str) -> str:
    """The separator as the report names it (a tab is invisible)."""
    return "tab" if separator == "\t" else separator


def guess_separator(lines: list[str]) -> SeparatorGuess:
    """The separator of a file whose header is `lines[0]`, followed by whole data lines."""
    header = lines[0] if lines else ""
    data = "\n".join(lines[1:])
    even: dict[str, tuple[int, float]] = {}
    for separator in SEPARATORS:
        split = _even_split(header, data, separator)
        if split is not None:
            even[separator] = split
    if not even:
        # Ties go to the comma: the order of SEPARATORS is the preference.
        chosen = max(SEPARATORS, key=lambda s: (header.count(s), -SEPARATORS.index(s)))
        if chosen == ",":
            return SeparatorGuess(chosen, "")
        return SeparatorGuess(
            chosen, "the most frequent of , ; tab | in the header (the lines do not split evenly)"
        )
    # The most fields that read as values, then the most fields, then the preference.
    chosen = max(even, key=lambda s: (even[s][1], even[s][0], -SEPARATORS.index(s)))
    fields, _ = even[chosen]
    rows = len([line for line in lines[1:] if line.strip()])
    reason = f"splits the header and the {rows} lines after it into {fields} fields each"
    rivals = [_NAMES[s] for s in even if s != chosen]
    if rivals:
        reason += (
            f"; {' and '.join(rivals)} {'does' if len(rivals) == 1 else 'do'} too, but cuts "
            "numbers and times apart"
        )
    elif chosen == ",":
        return SeparatorGuess(chosen, "")
    return SeparatorGuess(chosen, reason)


def _even_split(header: str, data: str, separator: str) -> tuple[int, float] | None:
    """How many fields `separator` splits the header and each data line into, and the share
    of data fields that read as values; None unless that number is the same on every line and
    more than one. One empty field more on a data line is its trailing separator."""
    try:
        names = next(csv.reader(io.StringIO(header), delimiter=separator), [])
        rows = [row for row in csv.reader(io.StringIO(data), delimiter=separator) if row]
    except csv.Error:
        # A NUL or a bare carriage return: this candidate cannot be judged on these lines.
        return None
    width = len(names)
    if width < 2 or not rows:
        return None
    if any(len(row) != width and (len(row) != width + 1 or row[-1]) for row in rows):
        return None
    fields = [field for row in rows for field in row[:width]]
    typed = sum(1 for field in fields if _TYPED.fullmatch(field))
    return width, typed / len(fields)
