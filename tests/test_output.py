from pathlib import Path

import pytest

from dq_agent.errors import UsageError
from dq_agent.output import refuse_input_overwrite, write_atomic


def test_write_atomic_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    write_atomic(target, "new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_write_atomic_missing_folder_is_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        write_atomic(tmp_path / "nope" / "r.json", "x")


def test_output_may_not_be_the_input(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n")
    with pytest.raises(UsageError, match="is the input file"):
        refuse_input_overwrite(tmp_path / "." / "data.csv", [data])
    refuse_input_overwrite(tmp_path / "other.csv", [data])


def test_new_file_gets_the_umask_mode_and_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    import os

    old = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.json"
        write_atomic(fresh, "x")
        assert fresh.stat().st_mode & 0o777 == 0o644
        kept = tmp_path / "kept.json"
        kept.write_text("old")
        kept.chmod(0o640)
        write_atomic(kept, "new")
        assert kept.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
