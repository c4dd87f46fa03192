"""The spec a driver runs, as its command line names it: a resolved spec the service
stored (``--resolved-spec``, validated again as it is, its local folders checked again
inside its owner's and the shared data folders), or a spec file or a preset resolved
here; model folders made absolute, since the trials run in other folders (a service's
trials look their data sets up in the same folders, in the same order)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from search_spaces.checks import dataset_issues, local_file_issues, model_folder, model_issues
from search_spaces.data_roots import allowed_roots
from search_spaces.dataset_refs import LocalDataset
from search_spaces.errors import SpecError
from search_spaces.resolve import resolve_spec, validate_spec
from search_spaces.settings import DicesweepSettings
from search_spaces.spec import SweepSpec
from search_spaces.spec_file import read_spec_file


def load_spec(args: argparse.Namespace, settings: DicesweepSettings) -> SweepSpec:
    """The spec the arguments name: a stored resolved spec is validated as it is; a
    spec file or a preset is resolved against the presets first.

    Raises:
        SpecError: an invalid spec.
    """
    if args.resolved_spec:
        # Checked by the service; a model folder is relative to the owner's or a shared
        # data folder.
        spec = validate_spec(read_spec_file(args.resolved_spec), max_trials=None)
        roots = allowed_roots(settings)
        # What lies on disk may have changed since: checked again before trials open it.
        issues = [] if roots is None else local_file_issues(spec, settings.datasets_dir, roots)
        if issues:
            raise SpecError(issues)
        return with_absolute_model(spec, settings.datasets_dir, roots)
    raw = {"extends": args.preset} if args.preset else read_spec_file(args.spec)
    spec = with_absolute_folders(resolve_spec(raw, max_trials=settings.max_trials))
    # The service's checks, before anything starts; any local folder may be read here.
    issues = model_issues(spec, Path.cwd()) + dataset_issues(spec, settings.datasets_dir)
    if issues:
        raise SpecError(issues)
    return spec


def with_absolute_model(
    spec: SweepSpec, base: Path, roots: Sequence[Path] | None = None
) -> SweepSpec:
    """``spec`` with a model folder made absolute (the trials run in other folders):
    relative to ``base``, or with ``roots`` looked up in them (``model_folder``); a hub
    id or ``tiny-bert`` stays as it is."""
    folder = model_folder(spec.model, base, roots)
    return spec if folder is None else spec.model_copy(update={"model": str(folder)})


def with_absolute_folders(spec: SweepSpec) -> SweepSpec:
    """``spec`` with its local data sets' and model folder's relative paths taken from
    the current folder (the trials run in other folders)."""
    spec = with_absolute_model(spec, Path.cwd())
    datasets = [
        dataset.model_copy(update={"path": str(Path(dataset.path).expanduser().absolute())})
        if isinstance(dataset, LocalDataset)
        else dataset
        for dataset in spec.task.dataset
    ]
    task = spec.task.model_copy(update={"dataset": datasets})
    return spec.model_copy(update={"task": task})
