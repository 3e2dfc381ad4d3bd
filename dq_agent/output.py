"""Writing outputs atomically: a run killed at any moment leaves the old file or the new one.

Every file a run writes (the report, the flags, the trace) is checked before the run, one way
(`check_outputs`): not an input, not a folder, in a folder that exists, and no two the same;
the report and the flags are written here, with the mode a plain write would give.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from dq_agent.errors import UsageError


def refuse_input_overwrite(output: Path, inputs: Iterable[Path]) -> None:
    """The input is never written to: an --output that names an input file is a usage error."""
    target = output.resolve()
    for source in inputs:
        if source.resolve() == target:
            raise UsageError(f"{output} is the input file; write the report or trace elsewhere")


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def check_outputs(outputs: Mapping[str, Path | None], inputs: Iterable[Path]) -> None:
    """Before a (possibly long) run, fail fast on an output that cannot be written: an input
    file, a folder, a file in a folder that does not exist, or two options naming one file
    (the later write would replace the earlier). `outputs` maps each option to its path."""
    sources = list(inputs)
    seen: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        refuse_input_overwrite(path, sources)
        target = path.resolve()
        if target in seen:
            raise UsageError(
                f"{seen[target]} and {option} both name {path}: give each its own file"
            )
        seen[target] = option
        _writable(path)


def _writable(path: Path) -> Path:
    """The folder `path` is written in; a usage error when it cannot be."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a folder; name a file in it")
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: folder {folder} does not exist")
    return folder


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file in the same folder and an atomic rename."""
    write_atomic_with(path, lambda handle: handle.write(text.encode("utf-8")))


def write_atomic_with(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """`write(handle)` into a temporary file in the same folder as `path`, then an atomic
    rename onto it; any failure to write is a usage error naming the file."""
    folder = _writable(path)
    try:
        fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        # mkstemp creates the file 0600; an output should get the mode a plain write would give
        # (an existing file keeps its own).
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
