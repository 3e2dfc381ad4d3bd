"""The run's one temporary folder: the files dq-agent writes for itself while it runs (data
handed over to an engine as Parquet, data spilled out of memory), removed when the process
exits. It is made on first use, under the system's temporary folder (`TMPDIR`), so a run that
needs none leaves no trace, and a run of this process never shares it with another's.
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from pathlib import Path

_FOLDER: list[Path] = []
_NAMES = itertools.count()


def scratch_folder() -> Path:
    """This process's temporary folder, made on first use and removed at exit."""
    if not _FOLDER:
        folder = Path(tempfile.mkdtemp(prefix="dq-agent-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _FOLDER.append(folder)
    return _FOLDER[0]


def scratch_path(stem: str, suffix: str) -> Path:
    """A new file name in the scratch folder (`stem-N.suffix`), not yet written."""
    return scratch_folder() / f"{stem}-{next(_NAMES)}{suffix}"
