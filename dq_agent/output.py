"""Writing outputs atomically: a run killed at any moment leaves the old file or the new one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

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


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file in the same folder and an atomic rename."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: folder {folder} does not exist")
    try:
        fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        # mkstemp creates the file 0600; a report should get the mode a plain write would give
        # (an existing file keeps its own).
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
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
