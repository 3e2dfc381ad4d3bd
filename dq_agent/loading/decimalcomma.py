"""A decimal comma found after the first lines: the dialect is decided from the head of the file
(`csvfile.csv_dialect`), but a SCADA export may write whole numbers (`120`) for thousands of
lines before its first `122,41`. Without a decimal comma such a column is text, its numbers
with a comma unread; once the file is read, this finds it over every row, so that the file is
read again with a decimal comma, as when the commas come early.
"""

from __future__ import annotations

import polars as pl

# A number as a decimal-comma locale writes it: `120`, `122,41`, `1.013,25`, perhaps with a
# short unit (`12,5 °C`), as `numbers` reads it.
_NUMBER = (
    r"^\s*[-+]?(?:[0-9]+|[0-9]{1,3}(?:\.[0-9]{3})+)(?:,[0-9]+)?"
    r"(?:\s*[\p{L}°%‰][\p{L}\p{N}°%/·.^*-]{0,9})?\s*$"
)
_COMMA = r"[0-9],[0-9]"
# Between comma separators a decimal comma is quoted, and a comma before exactly three digits
# may group thousands ("1,234"; "1,234.5" does): only other digit counts say decimal comma, as
# the head's test (`csvfile._quoted_decimal_comma`).
_THOUSANDS = r"^\s*[-+]?[0-9]{1,3}(?:,[0-9]{3})+\s*$"
_THOUSANDS_POINT = r"^\s*[-+]?[0-9]{1,3}(?:,[0-9]{3})+\.[0-9]+\s*$"
# The first rows, where the dialect was decided: a column of numbers there is a candidate.
_FIRST_ROWS = 1_000


def late_decimal_comma(
    raw: pl.LazyFrame, min_share: float, *, comma_separated: bool = False
) -> str | None:
    """Why the data has a decimal comma, or None: a text column in which some values are
    numbers with a decimal comma and at least `min_share` of the values are such numbers or
    whole ones (the share `values` needs to read a text column as numbers). In a
    `comma_separated` file a comma before exactly three digits is no evidence (it may group
    thousands), and one column with thousands and a point ("1,234.5") says there is none."""
    schema = raw.collect_schema()
    texts = [name for name, dtype in schema.items() if dtype == pl.String]
    if texts:
        texts = _numbers_first(raw, texts, min_share)
    if not texts:
        return None
    exprs: list[pl.Expr] = []
    for i, name in enumerate(texts):
        col = pl.col(name)
        present = col.is_not_null() & (col.str.strip_chars() != "")
        comma = col.str.contains(_COMMA) & col.str.contains(_NUMBER)
        grouped = pl.lit(0)
        if comma_separated:
            comma = comma & ~col.str.contains(_THOUSANDS)
            grouped = col.str.contains(_THOUSANDS_POINT).sum()
        exprs += [
            present.sum().alias(f"n{i}"),
            col.str.contains(_NUMBER).sum().alias(f"m{i}"),
            comma.sum().alias(f"k{i}"),
            grouped.alias(f"g{i}"),
            # The first such value and its row, for the report.
            col.filter(comma).first().alias(f"e{i}"),
            # Not `arg_max`: on a lazy frame Polars 2.1 may return a later tie's index.
            pl.int_range(pl.len()).filter(comma).first().alias(f"r{i}"),
        ]
    row = raw.select(exprs).collect().row(0, named=True)
    if any(row[f"g{i}"] for i in range(len(texts))):
        return None
    for i, name in enumerate(texts):
        present, numbers, commas = row[f"n{i}"], row[f"m{i}"], row[f"k{i}"]
        if commas and numbers >= min_share * present:
            return (
                f"numbers such as {str(row[f'e{i}']).strip()} in column {name}, the first at "
                f"data row {row[f'r{i}'] + 1:,}"
            )
    return None


def _numbers_first(raw: pl.LazyFrame, texts: list[str], min_share: float) -> list[str]:
    """The text columns whose first rows are numbers (or empty): those the dialect was decided
    on without a decimal comma. Scanning every text column's every value would cost as much as
    half the reading (1M rows with four text columns of times, names and codes: 1.5 s against
    3.3 s); the first rows cost about a millisecond."""
    exprs: list[pl.Expr] = []
    for i, name in enumerate(texts):
        col = pl.col(name)
        present = col.is_not_null() & (col.str.strip_chars() != "")
        exprs += [present.sum().alias(f"n{i}"), col.str.contains(_NUMBER).sum().alias(f"m{i}")]
    row = raw.head(_FIRST_ROWS).select(exprs).collect().row(0, named=True)
    return [name for i, name in enumerate(texts) if row[f"m{i}"] >= min_share * row[f"n{i}"]]
