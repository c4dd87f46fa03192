"""What the sweep routes do, as plain functions: validate a submission, and cancel.

A submission's spec is validated once, with what it points at, before anything is
stored; the sweep is then stored ``pending`` in one committed write, or not at all
(``submissions``), and the reconciler submits it to Ray afterwards, so a refused or
failed submission leaves nothing on the cluster and nothing half-written in the store.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy.orm import Session

from search_spaces.datasets import Split, get_dataset, resolve_inside
from search_spaces.errors import SpecError, SpecIssue
from search_spaces.presets import resolve_spec
from search_spaces.spec import SweepSpec
from sweep_service.api.errors import ApiError
from sweep_service.runner import Runner, job_id
from sweep_service.settings import ServiceSettings
from sweep_service.store import Sweep, SweepDraft, SweepStatus, transition_sweep

# The splits a trial reads (trainables.trial_data); a missing test split harms nothing.
TRIAL_SPLITS: tuple[Split, ...] = ("train", "eval")


def validate_submission(settings: ServiceSettings, submitted: Mapping[str, Any]) -> SweepDraft:
    """What storing ``submitted`` would store, once it is validated.

    Raises:
        SpecError: an invalid spec (``settings.max_trials`` caps its trials), a data set
            whose files are not under ``settings.datasets_dir``, or a model path that
            leaves the workers' folder.
    """
    resolved = resolve_spec(submitted, max_trials=settings.max_trials)
    issues = model_path_issues(resolved) + dataset_issues(resolved, _datasets_dir(settings))
    if issues:
        raise SpecError(issues)
    return SweepDraft.from_spec(submitted, resolved)


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


# What a data-set file's check found, for this long: every submission checks its files,
# and a file that appears or goes is seen within seconds.
FILE_CHECK_TTL_S = 5.0
_file_checks: dict[tuple[Path, str], tuple[float, str | None]] = {}


def _file_problem(datasets_dir: Path, relative: str) -> str | None:
    key = (datasets_dir, relative)
    known = _file_checks.get(key)
    if known is not None and known[0] > time.monotonic():
        return known[1]
    problem = _check_file(datasets_dir, relative)
    _file_checks[key] = (time.monotonic() + FILE_CHECK_TTL_S, problem)
    return problem


def _check_file(datasets_dir: Path, relative: str) -> str | None:
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


def _datasets_dir(settings: ServiceSettings) -> Path:
    # Set by the settings' validator; a settings object built without it has no data.
    return settings.datasets_dir or settings.home / "datasets"


def cancel_sweep(session: Session, runner: Runner, sweep: Sweep) -> Sweep:
    """Mark ``sweep`` cancelling (cancelled when it was never submitted), committed,
    then ask the runner to stop its current job; the reconciler marks it cancelled
    once the job has stopped.

    Raises:
        InvalidTransitionError: the sweep has finished.
        ApiError: ``runner_unavailable`` when the stop request failed; the sweep keeps
            its new status (the reconciler stops a cancelling sweep's job too), and a
            cancelling sweep may be cancelled again.
    """
    target = (
        SweepStatus.CANCELLED if sweep.status is SweepStatus.PENDING else SweepStatus.CANCELLING
    )
    changed = transition_sweep(session, sweep.id, target, message="cancel requested")
    # Stopped even when it was pending: the reconciler may have submitted it between
    # the read above and the change; stopping a job that does not exist is a no-op.
    job = job_id(changed.id, changed.resubmissions)
    try:
        runner.stop(job)
    except Exception as error:  # the runner's client raises what its transport raises
        raise ApiError(
            "runner_unavailable",
            f"sweep {changed.id} is {changed.status}; stopping job {job} "
            f"failed ({error}); ask again",
        ) from error
    return changed
