"""Which checkpoint a trial resumes from when the one Tune's state names is gone."""

from __future__ import annotations

from pathlib import Path

from pyarrow.fs import LocalFileSystem

from trainables.driver.recovery import exists, replacement


def trial_folder(tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / "result.json").write_text("{}")
    return tmp_path


def test_the_oldest_checkpoint_written_after_the_missing_one_replaces_it(tmp_path: Path) -> None:
    # checkpoint_000004 may be an upload a kill cut short; 000003 was registered.
    folder = trial_folder(tmp_path, "checkpoint_000003", "checkpoint_000004")
    missing = str(folder / "checkpoint_000002")
    assert not exists(LocalFileSystem(), missing)
    assert replacement(LocalFileSystem(), str(folder), missing) == str(folder / "checkpoint_000003")


def test_no_later_checkpoint_means_none(tmp_path: Path) -> None:
    folder = trial_folder(tmp_path, "checkpoint_000001")
    assert exists(LocalFileSystem(), str(folder / "checkpoint_000001"))
    assert replacement(LocalFileSystem(), str(folder), str(folder / "checkpoint_000002")) is None
    assert replacement(LocalFileSystem(), str(tmp_path / "gone"), str(folder / "x")) is None
