"""What the sweep routes do, as plain functions: validate a submission, and cancel.

A submission's spec is validated once, with what it points at, before anything is
stored; the sweep is then stored ``pending`` in one committed write, or not at all
(``submissions``), and the reconciler submits it to Ray afterwards, so a refused or
failed submission leaves nothing on the cluster and nothing half-written in the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from search_spaces.checks import dataset_issues, model_issues, spec_size
from search_spaces.data_roots import confined_roots
from search_spaces.errors import SpecError, SpecIssue
from search_spaces.plural import counted
from search_spaces.resolve import resolve_submission
from search_spaces.spec import SweepSpec
from sweep_service.api.errors import ApiError
from sweep_service.runner import Runner, job_id
from sweep_service.settings import ServiceSettings
from sweep_service.store import Sweep, SweepDraft, SweepStatus, transition_sweep


def validate_submission(
    settings: ServiceSettings,
    submitted: Mapping[str, Any],
    owner: str,
    runner: Runner | None = None,
) -> SweepDraft:
    """What storing ``submitted``, a spec of ``owner``, would store, once it is validated.

    Raises:
        SpecError: an invalid spec (``settings.max_trials`` caps its trials), a catalogue
            data set whose files are missing from ``settings.datasets_dir``, a local
            folder that is not in ``owner``'s own data folders or the shared ones
            (``data_roots``: one message for missing and outside), or a model that cannot
            be loaded: a folder without its config, a hub id neither cached nor on the
            hub; resources per trial that no node of ``runner``'s cluster has.
        ApiError: ``spec_too_large``, a resolved spec over ``settings.max_spec_bytes``.
    """
    submission = resolve_submission(submitted, max_trials=settings.max_trials)
    resolved = submission.spec
    size = spec_size(resolved)
    if size > settings.max_spec_bytes:
        raise ApiError(
            "spec_too_large",
            f"the resolved spec has {size} bytes; the limit is {settings.max_spec_bytes} "
            "(DICESWEEP_MAX_SPEC_BYTES)",
        )
    datasets_dir = _datasets_dir(settings)
    roots = data_roots(settings, owner)
    issues = model_issues(resolved, datasets_dir, roots) + dataset_issues(
        resolved, datasets_dir, roots
    )
    if runner is not None:
        issues += resource_issues(resolved, runner.nodes())
    if issues:
        raise SpecError(issues)
    return SweepDraft.from_spec(submitted, submission)


def resource_issues(spec: SweepSpec, nodes: list[dict[str, float]] | None) -> list[SpecIssue]:
    """An issue when no node of the cluster (``nodes``: each one's total resources;
    None: unknown, nothing refused) has the CPUs and GPUs one trial asks for: refused
    at submission, not after a driver started and waited on Ray; and the issues of
    ``precision_issues``."""
    issues = precision_issues(spec, nodes)
    resources = spec.resources
    wanted = {"CPU": resources.cpus_per_trial, "GPU": resources.gpus_per_trial}
    if nodes is None or any(
        all(node.get(kind, 0.0) >= amount for kind, amount in wanted.items()) for node in nodes
    ):
        return issues
    field = "gpus_per_trial" if resources.gpus_per_trial > 0 else "cpus_per_trial"
    has = "; ".join(
        f"{counted(node.get('CPU', 0.0), 'CPU')}, {counted(node.get('GPU', 0.0), 'GPU')}"
        for node in nodes
    )
    return [
        *issues,
        SpecIssue(
            f"resources.{field}",
            f"a trial asks for {counted(wanted['CPU'], 'CPU')} and "
            f"{counted(wanted['GPU'], 'GPU')}; no node of the cluster has them (its nodes: {has})",
        ),
    ]


def precision_issues(spec: SweepSpec, nodes: list[dict[str, float]] | None) -> list[SpecIssue]:
    """An issue naming ``training.precision`` when it is fp16 and a trial would train off
    a GPU: fp16 autocast and its gradient scaler run on a CUDA GPU only
    (``trainables.precision``), so a trial that reserves no GPU, or a cluster with no
    GPU node (``nodes`` as ``resource_issues`` takes them), would fail at its start."""
    if spec.training.precision != "fp16":
        return []
    # A trial that reserves no GPU is refused by the spec's own rules (spec.py).
    if nodes is None or any(node.get("GPU", 0.0) > 0 for node in nodes):
        return []
    rule = "no node of the cluster has one"
    return [SpecIssue("training.precision", f"fp16 needs a GPU: {rule}; on CPUs use bf16 or fp32")]


def data_roots(settings: ServiceSettings, owner: str) -> list[Path]:
    """The folders a submission of ``owner``'s local data set or model folder may lie
    in, in lookup order: its job's driver's and trials' own
    (``search_spaces.data_roots.confined_roots``)."""
    return confined_roots(_datasets_dir(settings), settings.home, settings.data_roots, owner)


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
    message = (
        "cancelled before it started"
        if target is SweepStatus.CANCELLED
        else "cancel requested: stopping its trials"
    )
    changed = transition_sweep(session, sweep.id, target, message=message)
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
