"""Submission checks that need more than the spec itself: the data sets' files under
the data-sets root, the model path, the size of the resolved spec. The service runs
them before it stores a sweep, ``dicesweep run`` before it starts one.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from search_spaces.datasets import Split, get_dataset, resolve_inside
from search_spaces.errors import SpecIssue
from search_spaces.spec import SweepSpec

# The splits a trial reads (trainables.trial_data); a missing test split harms nothing.
TRIAL_SPLITS: tuple[Split, ...] = ("train", "eval")


def dataset_issues(spec: SweepSpec, datasets_dir: Path) -> list[SpecIssue]:
    """One issue per data set of ``spec`` whose trial files are missing or lie outside
    ``datasets_dir``. Messages name the data set and its path relative to the folder,
    never where the folder is."""
    issues = []
    for index, name in enumerate(spec.task.dataset):
        for split in TRIAL_SPLITS:
            relative = get_dataset(name).files.get(split)
            if relative is None:
                continue
            problem = _file_problem(datasets_dir, relative)
            if problem is not None:
                path = f"task.dataset[{index}]"
                issues.append(SpecIssue(path, f"data set {name!r}: {relative} {problem}"))
                break
    return issues


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
