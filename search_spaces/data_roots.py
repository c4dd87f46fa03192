"""The folders a service's sweep may read: every file a driver or a trial opens for
a data set or a model resolves, symlinks followed, inside the data-sets folder or one
of ``DICESWEEP_DATA_ROOTS``. The service checks at submission; the driver and each
trial check again before they open (a folder may change after it was accepted).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from search_spaces.settings import DicesweepSettings


def outside_roots(roots: Sequence[Path]) -> str:
    """The refusal of a path outside ``roots`` at submission, naming them: they are where
    a folder is to be put, so the person submitting needs them."""
    checked = ", ".join(str(root) for root in roots)
    return (
        "is not under the data-sets folder or another allowed root "
        "(DICESWEEP_DATASETS_DIR, $DICESWEEP_HOME/datasets, DICESWEEP_DATA_ROOTS); "
        f"checked: {checked}; symlinks are followed"
    )


OUTSIDE_ROOTS = (
    "is not under the data-sets folder or another allowed root "
    "(DICESWEEP_DATASETS_DIR, $DICESWEEP_HOME/datasets, DICESWEEP_DATA_ROOTS); "
    "symlinks are followed"
)
# A model folder is walked file by file: this many entries at most (a saved model has
# a dozen; a folder with more is refused rather than walked without end).
MAX_MODEL_FILES = 10_000


class OutsideRootsError(ValueError):
    """A file or folder that resolves outside the allowed roots. The message names it
    as it was given, never where it points nor anything it holds."""


def confined_roots(datasets_dir: Path, home: Path, data_roots: Sequence[Path]) -> list[Path]:
    """The folders reads are confined to, the one list the service checks a submission
    against and its job's driver and trials check again: the data-sets folder, the
    home's ``datasets`` folder (always, so a folder copied there is accepted whatever
    DICESWEEP_DATASETS_DIR says) and ``data_roots``; each once, in that order."""
    return list(dict.fromkeys([datasets_dir, home / "datasets", *data_roots]))


def allowed_roots(settings: DicesweepSettings) -> list[Path] | None:
    """``confined_roots`` of ``settings`` when reads are confined (a service's job, whose
    environment carries the service's home, data-sets folder and roots), None when any
    folder may be read (``dicesweep run``)."""
    if settings.data_roots is None:
        return None
    return confined_roots(settings.datasets_dir, settings.home, settings.data_roots)


def is_under(path: Path, roots: Sequence[Path]) -> bool:
    """Whether ``path``, every symlink followed, lies under one of ``roots``."""
    resolved = path.resolve()
    return any(resolved.is_relative_to(root.resolve()) for root in roots)


def inside_roots(path: Path, roots: Sequence[Path], shown: str) -> Path:
    """``path`` resolved (the path to open: no symlink left to follow).

    Raises:
        OutsideRootsError: it resolves outside ``roots``; the message names ``shown``.
    """
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root.resolve()) for root in roots):
        raise OutsideRootsError(f"{shown} {OUTSIDE_ROOTS}")
    return resolved


def escaping_entry(folder: Path, roots: Sequence[Path]) -> str | None:
    """The first entry under ``folder`` (relative to it) that resolves outside
    ``roots``: a model loader opens whatever files its folder holds. None when all
    lie inside."""
    seen = 0
    for parent, folders, files in os.walk(folder):
        for name in sorted([*folders, *files]):
            entry = Path(parent) / name
            seen += 1
            if seen > MAX_MODEL_FILES or not is_under(entry, roots):
                return str(entry.relative_to(folder))
    return None


def confined_folder(folder: Path, roots: Sequence[Path], shown: str) -> Path:
    """``folder`` resolved, once it and every entry under it lie inside ``roots``.

    Raises:
        OutsideRootsError: one of them does not.
    """
    resolved = inside_roots(folder, roots, shown)
    escaping = escaping_entry(resolved, roots)
    if escaping is not None:
        raise OutsideRootsError(f"{shown}/{escaping} {OUTSIDE_ROOTS}")
    return resolved
