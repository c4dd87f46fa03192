"""Submission checks that need more than the spec itself: the data sets' files (under
the data-sets root, or a local folder), the model (a folder with its config, or a hub
id in the Hugging Face cache or on the hub), the size of the resolved spec. The
service runs them before it stores a sweep, ``dicesweep run`` before it starts one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Literal

from search_spaces.data_roots import (
    escaping_entry,
    is_under,
    local_folder,
    named,
    not_a_folder,
    outside_roots,
)
from search_spaces.dataset_refs import HubDataset, LocalDataset
from search_spaces.datasets import SAMPLES_DIR, Split, get_dataset, resolve_inside
from search_spaces.errors import SpecIssue, brief
from search_spaces.spec import SweepSpec

# The splits a trial reads (trainables.trial_data); a missing test split harms nothing.
TRIAL_SPLITS: tuple[Split, ...] = ("train", "eval")


def dataset_issues(
    spec: SweepSpec, datasets_dir: Path, roots: Sequence[Path] | None = None
) -> list[SpecIssue]:
    """One issue per data set of ``spec`` whose trial files are missing or not allowed.

    Catalogue files must lie under ``datasets_dir``. A local folder must hold a train
    and a dev (or validation) file of its format; with ``roots`` (the service: the
    owner's folders, then the shared ones) a relative path is looked up in them in
    turn, an absolute one must lie under one of them, as written and once every symlink
    is followed, and ``..`` is refused; a folder outside them gets the message of a
    missing one, naming ``roots``. Without (the command line) any folder is read,
    relative paths under ``datasets_dir``. A hub data set must be in
    the Hugging Face cache or on a reachable hub. Messages name the data set and its
    path as the spec gave it; a missing catalogue file names the folder looked in and
    ``DICESWEEP_DATASETS_DIR`` on the command line (``roots`` None) only, never where a
    service's data-sets folder is.
    """
    issues = []
    for index, dataset in enumerate(spec.task.dataset):
        path = f"task.dataset[{index}]"
        if isinstance(dataset, HubDataset):
            problem = _hub_problem(dataset.hub, "dataset")
            if problem is not None:
                issues.append(SpecIssue(f"{path}.hub", f"data set {dataset.label!r}: {problem}"))
            continue
        if isinstance(dataset, LocalDataset):
            issues += _local_issues(index, dataset, datasets_dir, roots)
            continue
        info = get_dataset(dataset)
        for split in TRIAL_SPLITS:
            relative = info.files.get(split)
            if relative is None:
                continue
            problem = _file_problem(info.root(datasets_dir), relative, shown=roots is None)
            if problem is not None:
                issues.append(SpecIssue(path, f"data set {dataset!r}: {relative} {problem}"))
                break
    return issues


def _local_problem(
    dataset: LocalDataset, datasets_dir: Path, roots: Sequence[Path] | None
) -> str | None:
    shown = brief(dataset.path)
    if roots is not None and ".." in PurePosixPath(dataset.path.replace("\\", "/")).parts:
        return "'..' is not allowed in a data set path"
    folder = dataset.folder(datasets_dir) if roots is None else local_folder(dataset.path, roots)
    if folder is None or not folder.is_dir():
        return f"{shown} {'is not a folder' if roots is None else not_a_folder(roots)}"
    found = dataset.split_files(folder)
    for split in TRIAL_SPLITS:
        if split not in found:
            return f"{shown} has no {split} file (one of: {dataset.expected_files(split)})"
    if roots is not None:
        # Each file too: a folder inside the roots may hold a link to any file.
        for file in found.values():
            if not is_under(file, roots):
                return f"{brief(f'{dataset.path}/{file.name}')} {outside_roots(roots)}"
    return None


def _file_problem(folder: Path, relative: str, shown: bool) -> str | None:
    """Why ``relative`` cannot be read under ``folder``, which is named where ``shown``."""
    try:
        target = resolve_inside(folder, relative)
    except ValueError:
        return "lies outside the data-sets folder"
    if target.is_file():
        return None
    if folder == SAMPLES_DIR:
        return f"is missing from the package's samples ({folder}): reinstall dicesweep"
    if shown:
        return f"is missing from the data-sets folder {folder} (DICESWEEP_DATASETS_DIR moves it)"
    return "is missing from the service's data-sets folder (DICESWEEP_DATASETS_DIR moves it)"


def local_file_issues(
    spec: SweepSpec, datasets_dir: Path, roots: Sequence[Path]
) -> list[SpecIssue]:
    """The checks of ``dataset_issues`` and ``model_issues`` on what lies on disk only
    (local data sets, a model folder), no hub asked: a service's driver runs them again
    before its trials open those files, which may have changed since submission."""
    issues = []
    for index, dataset in enumerate(spec.task.dataset):
        if isinstance(dataset, LocalDataset):
            issues += _local_issues(index, dataset, datasets_dir, roots)
    try:
        on_disk = model_folder(spec.model, datasets_dir, roots) is not None
    except OSError:
        on_disk = True  # model_issues says why it cannot be read
    if on_disk:
        issues += model_issues(spec, datasets_dir, roots)
    return issues


def _local_issues(
    index: int, dataset: LocalDataset, datasets_dir: Path, roots: Sequence[Path] | None
) -> list[SpecIssue]:
    try:
        problem = _local_problem(dataset, datasets_dir, roots)
    except OSError as error:  # e.g. a name too long for the file system
        problem = f"{brief(dataset.path)} cannot be read ({error.strerror})"
    if problem is None:
        return []
    return [SpecIssue(f"task.dataset[{index}].path", f"data set {dataset.label!r}: {problem}")]


TINY_BERT = "tiny-bert"  # built at random by the trainables: nothing to find


def model_folder(model: str, base: Path, roots: Sequence[Path] | None = None) -> Path | None:
    """The folder ``model`` names, if there is one: read from ``base`` when relative,
    or with ``roots`` (a service's sweep: a relative path) from the first of them that
    holds it (``model_issues`` checks where it resolves)."""
    if model == TINY_BERT:
        return None
    if roots is not None:
        found = next((root / model for root in roots if (root / model).is_dir()), None)
        return None if found is None else found.absolute()
    folder = base / Path(model).expanduser()
    return folder.absolute() if folder.is_dir() else None


def model_issues(
    spec: SweepSpec, base: Path, roots: Sequence[Path] | None = None
) -> list[SpecIssue]:
    """An issue when ``spec.model`` cannot be loaded: a folder (relative paths from
    ``base``) without ``config.json``, or a hub id neither in the Hugging Face cache
    nor on a reachable hub (refused at once with ``HF_HUB_OFFLINE=1``). With ``roots``
    (the service) a model path may not be absolute, start with ``~`` or name ``..``;
    it is looked up in ``roots`` in turn, and the folder and every file in it must lie
    under one of them once symlinks are followed."""
    model = spec.model
    if model == TINY_BERT:
        return []
    if roots is not None:
        escape = _path_escape(model)
        if escape is not None:
            return [SpecIssue("model", escape)]
    try:
        problem = _model_problem(model, base, roots)
    except OSError as error:  # e.g. a name too long for the file system
        problem = f"model {brief(model)} cannot be read ({error.strerror})"
    return [] if problem is None else [SpecIssue("model", problem)]


def _model_problem(model: str, base: Path, roots: Sequence[Path] | None) -> str | None:
    folder = model_folder(model, base, roots)
    if folder is None:
        problem = _hub_problem(model, "model")
        if problem is not None and roots is not None:
            problem += f" (folders looked in: {named(roots)})"
        return problem
    shown = f"model folder {brief(model)}"
    if roots is not None and not is_under(folder, roots):
        return f"{shown} {outside_roots(roots)}"
    if not (folder / "config.json").is_file():
        return f"{shown} has no config.json (a saved transformers model has)"
    if roots is not None and (escaping := escaping_entry(folder, roots)) is not None:
        return f"{shown}: {escaping} {outside_roots(roots)}"
    return None


def _path_escape(model: str) -> str | None:
    """Why a model path given over REST could read outside the allowed folders."""
    path = model.replace("\\", "/")
    if not (path.startswith(("/", "~")) or ":" in path.split("/")[0] or ".." in path.split("/")):
        return None
    return (
        "a model is a hub id (org/name), 'tiny-bert' or a folder in your own data "
        "folders or the shared ones, given relative to them: absolute paths, '~' and "
        "'..' are refused"
    )


def _hub_problem(repo: str, kind: Literal["model", "dataset"]) -> str | None:
    """Why the hub id ``repo`` (a model or a data set) cannot be loaded, or None when it
    can: it is in the Hugging Face cache, or the hub has it."""
    from huggingface_hub import constants, file_exists, repo_exists
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError:
        return f"{brief(repo)} is neither a folder nor a Hugging Face hub id (org/name)"
    if _cached(repo, kind, Path(constants.HF_HUB_CACHE)):
        return None
    where = "not a folder and not" if kind == "model" else "not"
    not_cached = f"{repo!r} is {where} in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    fix = f"download it first (hf download {repo}"
    fix += ")" if kind == "model" else " --repo-type dataset)"
    fix += " or give a folder with its config.json" if kind == "model" else " or give a folder"
    if constants.HF_HUB_OFFLINE or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return f"{not_cached}, and the hub is off (HF_HUB_OFFLINE=1): {fix}"
    try:
        if kind == "model":
            found = file_exists(repo, "config.json")
        else:
            found = repo_exists(repo, repo_type="dataset")
    except Exception as error:  # the hub's transport errors (DNS, TLS, timeouts, HTTP)
        return f"{not_cached}, and the hub cannot be reached ({type(error).__name__}): {fix}"
    return None if found else f"no {kind} {repo!r} on the Hugging Face hub"


def _cached(repo: str, kind: Literal["model", "dataset"], cache: Path) -> bool:
    """Whether the Hugging Face cache holds ``repo``: a model's config.json, or any
    snapshot file of a data set (as ``datasets`` downloaded it)."""
    if kind == "model":
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo, "config.json", cache_dir=cache), str)
    snapshots = cache / f"datasets--{repo.replace('/', '--')}" / "snapshots"
    return snapshots.is_dir() and any(path.is_file() for path in snapshots.rglob("*"))


def spec_size(spec: SweepSpec) -> int:
    """The size in bytes of ``spec`` as it is stored and sent to the cluster (JSON)."""
    return len(json.dumps(spec.model_dump(mode="json")).encode())
