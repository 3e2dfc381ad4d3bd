"""Numbers written as text: `21.5`, ` 21.5 `, `21.5 °C`, `"1,234.5"` (quoted thousands), and with
a decimal comma `1.234,5`. One expression reads them; what it read is described for the report.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

# A number, then an optional short unit (°C, kWh, m³/h, %, bar) that starts with a letter, a
# degree or a percent sign (a U+FFFD left by a damaged byte is not a unit).
_WITH_UNIT = (
    r"^([-+]?(?:[0-9][0-9.,]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
    r"\s*([\p{L}°%‰][\p{L}\p{N}°%/·.^*-]{0,9})?$"
)
_THOUSANDS_POINT = r"^[-+]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?$"
_THOUSANDS_COMMA = r"^[-+]?[0-9]{1,3}(?:\.[0-9]{3})+(?:,[0-9]+)?$"
_MAX_UNITS_SHOWN = 3


def _parts(column: pl.Expr) -> pl.Expr:
    return column.str.strip_chars().str.extract_groups(_WITH_UNIT)


def parse_number_text(column: pl.Expr, decimal_comma: bool = False) -> pl.Expr:
    """The text as Float64 where it is a number (with a unit or thousands separators), else null."""
    number = _parts(column).struct.field("1")
    if decimal_comma:
        plain = (
            pl.when(number.str.contains(_THOUSANDS_COMMA))
            .then(number.str.replace_all(".", "", literal=True))
            .otherwise(number)
            .str.replace(",", ".", literal=True)
        )
    else:
        plain = (
            pl.when(number.str.contains(_THOUSANDS_POINT))
            .then(number.str.replace_all(",", "", literal=True))
            .otherwise(number)
        )
    # A plain cast first: it also reads what the pattern leaves out ("inf", "1_000" no).
    return pl.coalesce(
        column.str.strip_chars().cast(pl.Float64, strict=False),
        plain.cast(pl.Float64, strict=False),
    )


@dataclass(frozen=True)
class NumberText:
    """How a text column writes its numbers: the share that are numbers, units, separators."""

    share: float
    units: list[str]
    thousands: bool

    def describe(self) -> str:
        parts = [f"{self.share:.0%} of its values are numbers"]
        if self.units:
            parts.append("with unit " + ", ".join(self.units))
        if self.thousands:
            parts.append("with thousands separators")
        return " ".join(parts)


def number_text(sample: pl.DataFrame, name: str, decimal_comma: bool) -> NumberText:
    """How the non-null text values of `name` in the sample write numbers."""
    column = sample.get_column(name).drop_nulls()
    column = column.filter(column.str.strip_chars() != "")
    if column.len() == 0:
        return NumberText(0.0, [], False)
    frame = column.to_frame().select(
        parse_number_text(pl.col(name), decimal_comma).alias("number"),
        _parts(pl.col(name)).struct.field("2").alias("unit"),
        _parts(pl.col(name))
        .struct.field("1")
        .str.contains(_THOUSANDS_COMMA if decimal_comma else _THOUSANDS_POINT)
        .alias("thousands"),
    )
    parsed = frame.filter(pl.col("number").is_not_null())
    units = (
        parsed.get_column("unit").drop_nulls().value_counts(sort=True).get_column("unit").to_list()
    )
    return NumberText(
        share=parsed.height / frame.height,
        units=[str(u) for u in units[:_MAX_UNITS_SHOWN]],
        thousands=bool(parsed.get_column("thousands").fill_null(False).any()),
    )
