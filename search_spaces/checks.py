"""Submission checks that need more than the spec itself: the data sets' files (under
the data-sets root, or a local folder), the model path, the size of the resolved spec.
The service runs them before it stores a sweep, ``dicesweep run`` before it starts one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from search_spaces.datasets import LocalDataset, Split, get_dataset, resolve_inside
from search_spaces.errors import SpecIssue
from search_spaces.spec import SweepSpec

# The splits a trial reads (trainables.trial_data); a missing test split harms nothing.
TRIAL_SPLITS: tuple[Split, ...] = ("train", "eval")


def dataset_issues(
    spec: SweepSpec, datasets_dir: Path, roots: Sequence[Path] | None = None
) -> list[SpecIssue]:
    """One issue per data set of ``spec`` whose trial files are missing or not allowed.

    Catalogue files must lie under ``datasets_dir``. A local folder must hold a train
    and a dev (or validation) file of its format; with ``roots`` (the service) it must
    also lie under one of them once every symlink is followed, and may not name
    ``..``; without (the command line) any folder is read. Messages name the data
    set and its path as the spec gave it, never where the data-sets folder is.
    """
    issues = []
    for index, dataset in enumerate(spec.task.dataset):
        path = f"task.dataset[{index}]"
        if isinstance(dataset, LocalDataset):
            problem = _local_problem(dataset, datasets_dir, roots)
            if problem is not None:
                issues.append(SpecIssue(f"{path}.path", f"data set {dataset.label!r}: {problem}"))
            continue
        for split in TRIAL_SPLITS:
            relative = get_dataset(dataset).files.get(split)
            if relative is None:
                continue
            problem = _file_problem(datasets_dir, relative)
            if problem is not None:
                issues.append(SpecIssue(path, f"data set {dataset!r}: {relative} {problem}"))
                break
    return issues


def _local_problem(
    dataset: LocalDataset, datasets_dir: Path, roots: Sequence[Path] | None
) -> str | None:
    if roots is not None:
        if ".." in PurePosixPath(dataset.path.replace("\\", "/")).parts:
            return "'..' is not allowed in a data set path"
        folder = dataset.folder(datasets_dir).resolve()
        if not any(folder.is_relative_to(root.resolve()) for root in roots):
            return (
                f"{dataset.path} is not under the data-sets folder or another allowed root "
                "(DICESWEEP_DATASETS_DIR, DICESWEEP_DATA_ROOTS); symlinks are followed"
            )
    if not dataset.folder(datasets_dir).is_dir():
        return f"{dataset.path} is not a folder"
    found = dataset.split_files(datasets_dir)
    for split in TRIAL_SPLITS:
        if split not in found:
            return f"{dataset.path} has no {split} file (one of: {dataset.expected_files(split)})"
    return None


def _file_problem(datasets_dir: Path, relative: str) -> str | None:
    try:
        target = resolve_inside(datasets_dir, relative)
    except ValueError:
        return "lies outside the data-sets folder"
    if not target.is_file():
        return "is missing from the data-sets folder (DICESWEEP_DATASETS_DIR)"
    return None


def model_path_issues(spec: SweepSpec) -> list[SpecIssue]:
    """An issue when ``spec.model`` names a path that could leave the workers' working
    folder: absolute, from a home folder (``~``) or through ``..``. Hub ids
    (``org/name``) and relative paths pass."""
    model = spec.model.replace("\\", "/")
    parts = PurePosixPath(model).parts
    escapes = model.startswith(("/", "~")) or ":" in model.split("/")[0] or ".." in parts
    if not escapes:
        return []
    rule = (
        "a model is a hub id (org/name), 'tiny-bert' or a relative path inside the "
        "workers' folder: absolute paths, '~' and '..' are refused"
    )
    return [SpecIssue("model", rule)]


def spec_size(spec: SweepSpec) -> int:
    """The size in bytes of ``spec`` as it is stored and sent to the cluster (JSON)."""
    return len(json.dumps(spec.model_dump(mode="json")).encode())
