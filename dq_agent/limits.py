"""The memory budget: what a run may use, and whether its data is estimated to need more.

A run killed by the OOM killer half-way through a nightly job leaves nothing to read, so the
peak memory of the run is estimated before any data is read and compared with the budget: the
limit set (`--max-memory`, `limits.max_memory`, `DQ_AGENT_MAX_MEMORY`), else
DEFAULT_BUDGET_SHARE of the machine's memory. Data over the budget runs out of core
(`dq_agent.out_of_core`: spilled, checked on DuckDB within the budget); CSV, which loading reads
into memory, is streamed to Parquet first (`loading.csvstream`). A run that asked for Polars
(`--engine polars`) checks in memory: over a limit set it is refused with exit 3 and a message
saying what to do.

The estimate: peak = PROGRAM_BYTES + factor x data size, where the data size is
- Parquet: the uncompressed size the file's own metadata records (sum of the row groups'
  `total_byte_size`), read from the footer only;
- CSV: the file size on disk (CSV is read into memory once, see `load`; a gzip's uncompressed
  size).

Measured as peak RSS (wait4) of `dq-agent inspect --no-agent` on sample_data/generate.py data
(200 devices, 6 columns; 2 CPUs), with the nine checks of 2026-12-01 (the sensor checks and the
robust outlier and delay rules about doubled the five checks' peak of 2026-11-30), then with
each check's queries collected on their own after the shared nodes (issue 12, 23:10-23:22: the
shared nodes stay in memory while the checks run):

    rows    Parquet metadata  peak RSS     CSV file   peak RSS
    1M       20.9 MB          0.85-0.91 GB  64.4 MB    0.90 GB     (before issue 12)
    10M       209 MB          6.23 GB
    1M       20.9 MB          0.99 GB       67.5 MB    1.04 GB     (shared nodes materialised)
    10M       209 MB          7.20-7.41 GB
    10M       209 MB          7.79 GB                              (2026-12-02: rest levels,
    400k      6.9 MB          0.65 GB                               excursions; the slow test)
    1M       20.9 MB          0.88 GB                              (2026-12-02 02:52: the
    10M       209 MB          5.77 GB                               sensor series made lean)
    1M       20.9 MB          0.73 GB       84.9 MB    0.84 GB     (2026-12-03: shared nodes
    10M       209 MB          4.64 GB                               freed after their last
    400k      6.6 MB          0.36 GB                               reader; the slow test's data)
    2M long  18.3 MB          0.62 GB   (2,000 tags in one column, the tag names dictionary-
                                         encoded: the smallest metadata per row)
    1M wide   230 MB          1.29 GB   (30 value columns, 20 devices)

The 400k figure of 2026-12-02 included the test process's own size, inherited at fork: the test
now measures from a small launcher. Over the generated data the peak grows as about 290 MB +
20 x the metadata size (1M and 10M); the factor 24 (lowered from 46 on 2026-12-03) keeps the
estimate 22% or more above every row measured since 2026-12-03. An estimate that overstates sends data that
would fit out of core, 20 to 30 times slower (10M rows: 14.7 s in memory, 399 s at 700M).

The constants below bound every measurement by 15% or more (runs vary by about 10%). They
depend on the checks: `test_estimate_covers_the_measured_peak_rss` fails when the checks
outgrow them (then measure again and update this table).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from dq_agent.errors import ConfigError, InputError

PARQUET_PEAK_FACTOR = 24.0
CSV_PEAK_FACTOR = 13.0
# Python, Polars, pyarrow and the thread pools' arenas: what a small file already costs.
PROGRAM_BYTES = 384 * 2**20

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """A size such as `2G`, `512M`, `1.5GB`, `64MiB` or `1000000` (bytes) as a number of bytes.

    Units are binary (1G = 1024^3 bytes), as in `docker --memory` and `ulimit`. Raises ConfigError
    for anything else, or for a size of zero.
    """
    match = _SIZE.match(text)
    if match is None:
        raise ConfigError(
            f"{text!r} is not a memory size; use a number with K, M, G or T, e.g. 512M or 2G"
        )
    number, unit = match.groups()
    size = int(float(number) * _UNITS[unit.upper()])
    if size <= 0:
        raise ConfigError(f"memory size {text!r} must be more than 0")
    return size


def format_size(size: float) -> str:
    """Bytes for a person: `3.2 GB`, `512 MB` (binary units, like `parse_size`)."""
    for unit, factor in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if size >= factor:
            value = size / factor
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{size:.0f} B"


def parquet_data_bytes(file: Path) -> int:
    """The uncompressed size of the data in a Parquet file, from its footer alone."""
    # pyarrow is imported here: only runs with a memory limit need it, and it is slow to import.
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        metadata = pq.ParquetFile(file).metadata
        groups = range(metadata.num_row_groups)
        return sum(int(metadata.row_group(i).total_byte_size) for i in groups)
    except (pa.ArrowException, OSError, ValueError) as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot read {file} as Parquet: {first_line}") from exc


def csv_data_bytes(file: Path) -> int:
    """The size of the CSV text: a `.gz` file's uncompressed size from its trailer (stored modulo
    4 GiB, so never taken below the compressed size)."""
    size = file.stat().st_size
    if file.suffix.lower() != ".gz" or size < 4:
        return size
    with file.open("rb") as handle:
        handle.seek(-4, 2)
        return max(size, int.from_bytes(handle.read(4), "little"))


def estimate_peak_bytes(dataset_files: list[Path], file_format: str) -> tuple[int, str]:
    """The estimated peak memory of inspecting these files, and how it was estimated."""
    if file_format == "parquet":
        data = sum(parquet_data_bytes(f) for f in dataset_files)
        factor, basis = PARQUET_PEAK_FACTOR, "uncompressed size from the Parquet metadata"
    else:
        try:
            data = sum(csv_data_bytes(f) for f in dataset_files)
        except OSError as exc:
            raise InputError(f"cannot read {exc.filename}: {exc.strerror}") from exc
        factor, basis = CSV_PEAK_FACTOR, "CSV file size"
    peak = int(PROGRAM_BYTES + factor * data)
    program = format_size(PROGRAM_BYTES)
    rule = f"{basis} {format_size(data)} x {factor:g} + {program} for the program"
    return peak, rule


@dataclass(frozen=True)
class OverBudget:
    """A run estimated to need more memory than its budget: it runs out of core
    (`dq_agent.out_of_core`) instead of in memory."""

    peak_bytes: int
    limit_bytes: int
    rule: str
    """How the peak was estimated (`estimate_peak_bytes`)."""
    origin: str
    """Where the budget comes from: the setting, or this machine's memory."""

    def reason(self) -> str:
        return (
            f"the data needs about {format_size(self.peak_bytes)} in memory ({self.rule}), "
            f"more than {self.origin}"
        )


# Without a limit set, the budget is this share of the machine's memory (or of the cgroup's
# limit): data estimated to need more runs out of core instead of meeting the OOM killer.
DEFAULT_BUDGET_SHARE = 0.8
_CGROUP_LIMIT = Path("/sys/fs/cgroup/memory.max")


def machine_memory_bytes() -> int | None:
    """The memory this process may use: the machine's, or its cgroup's limit when lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        text = _CGROUP_LIMIT.read_text(encoding="ascii").strip()
    except OSError:
        return total
    return min(total, int(text)) if text.isdigit() else total


def memory_budget(max_memory: str | None) -> tuple[int, str] | None:
    """The run's memory budget and where it comes from: `limits.max_memory` when set, else
    DEFAULT_BUDGET_SHARE of this machine's memory; None when neither is known."""
    if max_memory is not None:
        limit = parse_size(max_memory)
        return limit, f"the memory limit of {format_size(limit)} (--max-memory)"
    machine = machine_memory_bytes()
    if machine is None:
        return None
    budget = int(DEFAULT_BUDGET_SHARE * machine)
    share = f"{DEFAULT_BUDGET_SHARE:.0%}"
    return budget, f"{format_size(budget)}, {share} of this machine's memory (--max-memory)"


def over_budget(
    dataset_files: list[Path], file_format: str, budget: tuple[int, str] | None
) -> OverBudget | None:
    """The estimate, when the files are estimated to need more than `budget` (`memory_budget`)."""
    if budget is None or not dataset_files:
        return None
    peak, rule = estimate_peak_bytes(dataset_files, file_format)
    limit, origin = budget
    return OverBudget(peak, limit, rule, origin) if peak > limit else None


def check_memory_budget(dataset_files: list[Path], file_format: str, limit_bytes: int) -> None:
    """Raise InputError (exit 3) when the estimated peak memory of the run exceeds `limit_bytes`."""
    if not dataset_files:
        return
    peak, rule = estimate_peak_bytes(dataset_files, file_format)
    if peak <= limit_bytes:
        return
    name = dataset_files[0].name if len(dataset_files) == 1 else f"{len(dataset_files)} files"
    raise InputError(
        f"{name} needs about {format_size(peak)} in memory ({rule}); the limit is "
        f"{format_size(limit_bytes)}: raise --max-memory or inspect a smaller slice"
    )
