"""The folders a service's sweep may read: every file a driver or a trial opens for
a local data set or a model folder resolves, symlinks followed, inside its owner's own
folders (``<data-sets folder>/<owner>`` and ``$DICESWEEP_HOME/datasets/<owner>``) or a
shared one of ``DICESWEEP_DATA_ROOTS``. A relative path is looked up in them in that
order. The service checks at submission; the driver and each trial check again before
they open (a folder may change after it was accepted).

A folder outside them is refused exactly as a missing one is (``NOT_A_FOLDER``): the
answer says nothing of another owner's folders, not even whether a path exists.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from search_spaces.settings import DicesweepSettings

# The variable a service sets on each job: the owner whose folders it may read.
DATA_OWNER_ENV = "DICESWEEP_DATA_OWNER"
# A model folder is walked file by file: this many entries at most (a saved model has
# a dozen; a folder with more is refused rather than walked without end).
MAX_MODEL_FILES = 10_000
_WHERE = "your own data folders or the shared ones"
OUTSIDE_ROOTS = f"lies outside {_WHERE} (symlinks are followed)"


def named(roots: Sequence[Path]) -> str:
    """``roots`` as a refusal names them, in lookup order."""
    return ", ".join(str(root) for root in roots) or "none"


def not_a_folder(roots: Sequence[Path]) -> str:
    """The refusal of a local folder that is missing, or lies outside ``roots``, naming
    where it was looked for (the folder to put it in)."""
    return f"is not a folder in {_WHERE} (looked in: {named(roots)}; symlinks are followed)"


def outside_roots(roots: Sequence[Path]) -> str:
    """The refusal of a file that resolves outside ``roots``, naming them."""
    return f"lies outside {_WHERE} ({named(roots)}; symlinks are followed)"


class OutsideRootsError(ValueError):
    """A file or folder that resolves outside the allowed roots. The message names it
    as it was given, never where it points nor anything it holds."""


def owner_folders(datasets_dir: Path, home: Path, owner: str | None) -> list[Path]:
    """``owner``'s own folders: ``<datasets_dir>/<owner>`` and ``<home>/datasets/<owner>``
    (always, so a folder copied under the home is read whatever DICESWEEP_DATASETS_DIR
    says), each once. None without an owner, or for a name that is not one plain folder
    name (``a/b``, ``..``), which could name another's folder."""
    if owner is None or owner in ("", ".", "..") or any(c in owner for c in "/\\\0"):
        return []
    return list(dict.fromkeys([datasets_dir / owner, home / "datasets" / owner]))


def confined_roots(
    datasets_dir: Path, home: Path, shared: Sequence[Path], owner: str | None
) -> list[Path]:
    """The folders reads are confined to, in lookup order, the one list the service
    checks a submission against and its job's driver and trials check again:
    ``owner_folders``, then the ``shared`` ones; each once."""
    return list(dict.fromkeys([*owner_folders(datasets_dir, home, owner), *shared]))


def allowed_roots(settings: DicesweepSettings) -> list[Path] | None:
    """``confined_roots`` of ``settings`` for its ``data_owner`` when reads are confined
    (a service's job, whose environment carries the service's home, data-sets folder,
    shared folders and the sweep's owner), None when any folder may be read
    (``dicesweep run``)."""
    if settings.data_roots is None:
        return None
    return confined_roots(
        settings.datasets_dir, settings.home, settings.data_roots, settings.data_owner
    )


def local_folder(path: str, roots: Sequence[Path]) -> Path | None:
    """The folder ``path`` names inside ``roots``: an absolute one where it lies under
    one of them, as written and once every symlink is followed; a relative one under
    the first root that holds it so. None when there is none: missing and outside are
    one answer."""
    given = Path(path).expanduser()
    candidates = [given] if given.is_absolute() else [root / given for root in roots]
    for candidate in candidates:
        named = any(
            candidate.is_relative_to(root) or candidate.is_relative_to(root.resolve())
            for root in roots
        )
        if named and candidate.is_dir() and is_under(candidate, roots):
            return candidate
    return None


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
