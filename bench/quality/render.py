"""Write a canonical frame as the file(s) a user would have: layout, names, formats, splits."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from bench.quality.generate import DEVICE, TIME, Canon
from bench.quality.shapes import Shape

SPLIT_FILES = 12
_ROW = "__row"
TIME_NAMES = ("timestamp", "time", "Timestamp", "datetime")
_FORMATS = {
    "iso": "%Y-%m-%dT%H:%M:%S",
    "iso_z": "%Y-%m-%dT%H:%M:%SZ",
    "dmy": "%d.%m.%Y %H:%M",
    "us": "%m/%d/%Y %H:%M",
}


def time_column(shape: Shape) -> str:
    if shape.ts_format == "epoch_ms":
        return "epoch_ms"
    if shape.ts_format == "epoch_s":
        return "unix_time"
    if shape.ts_format == "date_time":
        return "date"
    return TIME_NAMES[shape.seed % len(TIME_NAMES)]


def entity_value(shape: Shape, device: int) -> str:
    """A device as written in the file (and as a report names it)."""
    if shape.entity_name == "serial":
        return str(100_000 + device * 7)
    if shape.entity_name == "Asset Name":
        return f"Pump {device + 1}"
    if shape.entity_name == "Gerät":
        return f"Sensor-{device + 1:02d}"
    return f"dev-{device + 1:04d}"


def entity_expr(shape: Shape) -> pl.Expr:
    device = pl.col(DEVICE)
    if shape.entity_name == "serial":
        return 100_000 + device * 7
    if shape.entity_name == "Asset Name":
        return pl.format("Pump {}", device + 1)
    if shape.entity_name == "Gerät":
        return pl.format("Sensor-{}", (device + 1).cast(pl.String).str.zfill(2))
    return pl.format("dev-{}", (device + 1).cast(pl.String).str.zfill(4))


def is_parquet(shape: Shape, canon: Canon) -> bool:
    return shape.file_format == "parquet" or canon.force_parquet


def render(shape: Shape, canon: Canon, folder: Path) -> Path:
    """Write the data under `folder`; the path to inspect (a file or a directory)."""
    table = to_table(shape, canon)
    parquet = is_parquet(shape, canon)
    suffix = ".parquet" if parquet else ".csv.gz" if shape.dialect == "gzip" else ".csv"
    write = _write_parquet if parquet else _write_csv
    if shape.split == "single":
        path = folder / f"data{suffix}"
        write(table.drop(_ROW, "__part"), path, shape)
        return path
    target = folder / "data"
    target.mkdir()
    for part in range(SPLIT_FILES):
        piece = table.filter(pl.col("__part") == part).drop(_ROW, "__part")
        if canon.odd_file is not None and part == SPLIT_FILES // 2:
            piece = _odd(piece, canon.odd_file, canon.sensors)
        if piece.height:
            write(piece, target / f"day_{part + 1}{suffix}", shape)
    return target


ODD_COLUMN = "note"


def _odd(piece: pl.DataFrame, how: str, sensors: list[str]) -> pl.DataFrame:
    """The one file of a split whose schema differs from the others'."""
    if how == "extra_column":
        return piece.with_columns(pl.lit("ok").alias(ODD_COLUMN))
    if how == "float32":
        return piece.with_columns(
            pl.col(c).cast(pl.Float32) for c in (*sensors, "value") if c in piece.columns
        )
    temporal = [c for c, t in piece.schema.items() if isinstance(t, pl.Datetime)]
    return piece.with_columns(pl.col(c).dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ") for c in temporal)


def _write_parquet(frame: pl.DataFrame, path: Path, shape: Shape) -> None:
    if shape.dialect == "float32":
        frame = frame.with_columns(pl.col(pl.Float64).cast(pl.Float32))
    elif shape.dialect == "categorical":
        # Names as a dataframe library's category dtype writes them (dictionary-encoded).
        names = [shape.entity_name, "variable"]
        frame = frame.with_columns(
            pl.col(c).cast(pl.Categorical)
            for c, t in frame.schema.items()
            if c in names and t == pl.String
        )
    frame.write_parquet(path)


def _write_csv(frame: pl.DataFrame, path: Path, shape: Shape) -> None:
    """CSV as exporters write it: plain, European, with a comment line, a trailing
    delimiter, quoted thousands separators, or gzip-compressed."""
    dialect = shape.dialect
    if dialect == "gzip":
        frame.write_csv(path, compression="gzip")
        return
    if dialect == "semicolon_comma":
        frame.write_csv(path, separator=";", decimal_comma=True)
        return
    if dialect == "thousands_quoted":
        frame = frame.with_columns(_thousands(pl.col(pl.Float64)))
    text = frame.write_csv()
    if dialect == "trailing_delimiter":
        text = text.replace("\n", ",\n")
    elif dialect == "comment_line":
        text = "# exported by plant historian 4.2 (UTC)\n" + text
    path.write_text(text, encoding="utf-8")


def _thousands(x: pl.Expr) -> pl.Expr:
    """1013.254 -> "1,013.254", 1e9 -> "1,000,000,000.0": one separator per pass."""
    text = x.round(3).cast(pl.String)
    for _ in range(3):
        text = text.str.replace(r"^(-?\d+)(\d{3})([.,]|$)", "${1},${2}${3}")
    return text


def to_table(shape: Shape, canon: Canon) -> pl.DataFrame:
    """The file's columns in file order, plus `__row` (canonical row) and `__part` (split file)."""
    frame = canon.frame.with_row_index(_ROW)
    span = frame.select(pl.col(TIME).min().alias("a"), pl.col(TIME).max().alias("b")).row(0)
    width = max((span[1] - span[0]).total_seconds(), 1.0) / SPLIT_FILES
    part = ((pl.col(TIME) - span[0]).dt.total_seconds() / width).floor().clip(0, SPLIT_FILES - 1)
    columns: list[pl.Expr] = [pl.col(_ROW), part.cast(pl.Int64).alias("__part")]
    columns += _time_exprs(shape, canon)
    if shape.entity_name is not None:
        columns.append(entity_expr(shape).alias(shape.entity_name))
    parquet = is_parquet(shape, canon)
    # Long: the sensors become one `value` column, Decimal when any of them is.
    decimal = set(canon.sensors) if shape.layout == "long" and canon.decimal_columns else None
    for sensor in canon.sensors:
        expr = _value_expr(canon, sensor, parquet, decimal or canon.decimal_columns)
        columns.append(expr.alias(sensor))
    extras = [c for c in canon.frame.columns if c not in (DEVICE, TIME, *canon.sensors)]
    for extra in extras:
        expr = pl.col(extra)
        if frame.schema[extra] == pl.Datetime("us", "UTC"):
            expr = expr.dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        columns.append(expr.alias(extra))
    table = frame.select(columns)
    if canon.nested_column is not None and is_parquet(shape, canon):
        table = table.with_columns(
            pl.struct(pl.lit("2.1.0").alias("firmware"), pl.lit(True).alias("calibrated")).alias(
                canon.nested_column
            )
        )
    if shape.layout == "long":
        table = _melt(table, canon.sensors)
    return table


def _time_exprs(shape: Shape, canon: Canon) -> list[pl.Expr]:
    ts = pl.col(TIME)
    if canon.local_timezone is not None:
        ts = ts.dt.convert_time_zone(canon.local_timezone).dt.replace_time_zone(None)
    name = time_column(shape)
    fmt = shape.ts_format
    if fmt == "native":
        return [ts.alias(name)]
    if fmt == "epoch_ms":
        return [ts.dt.epoch("ms").alias(name)]
    if fmt == "epoch_s":
        return [ts.dt.epoch("s").alias(name)]
    if fmt == "date_time":
        date = _with_text(ts.dt.strftime("%Y-%m-%d"), canon.time_text)
        return [date.alias("date"), ts.dt.strftime("%H:%M:%S").alias("time")]
    return [_with_text(ts.dt.strftime(_FORMATS[fmt]), canon.time_text).alias(name)]


def _with_text(expr: pl.Expr, cells: dict[int, str]) -> pl.Expr:
    if not cells:
        return expr
    rows = pl.Series(list(cells), dtype=pl.UInt32)
    texts = pl.Series(list(cells.values()), dtype=pl.String)
    return (
        pl.when(pl.col(_ROW).is_in(rows.implode()))
        .then(pl.col(_ROW).replace_strict(rows, texts, default=None))
        .otherwise(expr)
    )


def _value_expr(canon: Canon, sensor: str, parquet: bool, decimal: set[str]) -> pl.Expr:
    x = pl.col(sensor)
    if sensor in canon.text_cells:
        return _with_text(x.cast(pl.String), canon.text_cells[sensor])
    if sensor in decimal and parquet:
        return x.cast(pl.Decimal(15, 3))
    return x


def _melt(table: pl.DataFrame, sensors: list[str]) -> pl.DataFrame:
    """variable/value rows, one per reading and sensor, in the order of the wide rows."""
    if any(table.schema[s] == pl.String for s in sensors):
        table = table.with_columns(pl.col(s).cast(pl.String) for s in sensors)
    ids = [c for c in table.columns if c not in sensors]
    order = {s: i for i, s in enumerate(sensors)}
    long = table.unpivot(index=ids, on=sensors, variable_name="variable", value_name="value")
    long = long.with_columns(pl.col("variable").replace_strict(order).alias("__v"))
    return long.sort([_ROW, "__v"]).drop("__v")
