"""What a trial's nested MLflow run carries (its tags, name and params, read from the
trial's config) and how a run is found again by its tags."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search_spaces.contract import (
    DATASET_TAG,
    LOSS_LABEL_TAG,
    LOSS_TAG,
    MODEL_TAG,
    ROLE_TAG,
    SEED_TAG,
    STAGE_TAG,
    SWEEP_TAG,
    TRIAL_TAG,
    VARIANT_TAG,
)
from search_spaces.dataset_refs import dataset_label, is_binary
from search_spaces.reports import loss_label
from search_spaces.sections import TrialConfig
from search_spaces.setup import setup_params, trial_setup


def trial_tags(trial: TrialConfig, trial_id: str) -> dict[str, str]:
    """The tags that identify a trial's run and let the MLflow UI group them."""
    loss = trial.loss.model_dump(exclude_none=True, exclude_unset=True)
    return {
        SWEEP_TAG: trial.sweep_id,
        TRIAL_TAG: trial_id,
        ROLE_TAG: "trial",
        LOSS_TAG: str(loss["name"]),
        LOSS_LABEL_TAG: loss_label(loss),
        SEED_TAG: str(trial.seed),
        DATASET_TAG: dataset_label(trial.dataset),
        VARIANT_TAG: trial.variant,
        MODEL_TAG: trial.model,
        STAGE_TAG: trial.stage,
    }


def trial_run_name(trial: TrialConfig, with_dataset: bool = False) -> str:
    """``"tversky(alpha=0.3,beta=0.7) seed=2 original"``, what the MLflow UI lists a trial
    by: its loss as the table labels it, seed and variant, and ``" · conll2003"`` after
    them ``with_dataset`` (a sweep over several data sets)."""
    loss = trial.loss.model_dump(exclude_none=True, exclude_unset=True)
    name = f"{loss_label(loss)} seed={trial.seed} {trial.variant}"
    if trial.stage == "tune":  # the stage-1 trials of a loss differ by their settings
        setting = ",".join(f"{key}={getattr(trial.training, key):g}" for key in trial.tuned)
        name = f"tune {name} {setting}"
    return f"{name} · {dataset_label(trial.dataset)}" if with_dataset else name


def trial_params(trial: TrialConfig) -> dict[str, str]:
    """Flat params: ``loss`` and ``loss.<param>``, the data, the seed, the training
    settings and the trial's setup as its rows carry it (``setup.<field>``,
    ``search_spaces.setup``).

    Every parameter of the trial's loss is a param, defaults included, so the runs
    table and charts line up ``loss.alpha`` of a tversky trial that left it at 0.5
    with one that set it; a loss without the parameter (``ce``) logs none rather than
    a made-up value, and MLflow shows the cell empty. A binary set's ``positive_label``
    is the spec's, or ``minority`` when the trial resolves it from its training file
    (the label it took is the trial's metric ``positive_label``).
    """
    loss = trial.loss.model_dump(exclude_none=True)
    params = {"loss": str(loss.pop("name"))}
    params.update({f"loss.{key}": str(value) for key, value in loss.items()})
    params.update(dataset=dataset_label(trial.dataset), variant=trial.variant, model=trial.model)
    if is_binary(trial.dataset, trial.kind):
        named = trial.positive_label
        params["positive_label"] = "minority" if named is None else str(named)
    params["seed"] = str(trial.seed)
    for key, value in trial.training.model_dump().items():
        params[f"training.{key}"] = str(value)
    for key in trial.tuned:  # what stage 1 tried or chose
        params[f"tuned.{key}"] = str(getattr(trial.training, key))
    if trial.holdout is not None:  # enough to carve the tuning split again
        params.update(holdout=str(trial.holdout), holdout_seed=str(trial.holdout_seed))
    return params | setup_params(trial_setup(trial.model_dump()))


def find_run(client: Any, experiment_id: str, tags: Mapping[str, str]) -> str | None:
    """The id of the run carrying all ``tags``, or None."""
    query = " and ".join(f"tags.`{key}` = '{value}'" for key, value in tags.items())
    runs = client.search_runs([experiment_id], filter_string=query, max_results=1)
    return runs[0].info.run_id if runs else None
