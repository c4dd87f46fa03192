"""The sweep spec (docs/sweeps.md, "The spec"): its model, its rules, its grid.

A spec is YAML or JSON of the same shape on the command line and in the REST API::

    extends: table8                  # a preset to start from (deep-merged, lists replace)
    task: {dataset: mrpc, variant: [original, +positive]}
    search_space:
      losses:
        - {name: ce}
        - {name: dsc, alpha: [0.1, 0.01]}   # a list: a grid within this loss
    seeds: [0, 1, 2]                 # replicates: always a grid dimension, never searched
    # or seeds until each loss's difference from ce is decided (search_spaces.sequential):
    # seeds: {min: 3, max: 10, until: decided, looks: [3, 5, 7, 10], delta_min: 0.5}
    search: {algorithm: grid}

``search_spaces.resolve.resolve_spec`` applies ``extends`` and validates with the model
here (``SweepSpec``), raising ``SpecError``, whose issues name the field path
(``search_space.losses[2].alpha``) and the rule. The count of trials and its cap are
``search_spaces.resolve``'s; the Ray Tune side of a spec is in
``trainables.driver.tune_search``.

Random/TPE search space: a search space whose parameters depend on the loss (a
conditional space) cannot be written as one Ray Tune ``param_space`` that Optuna
samples, and Ray Tune refuses ``grid_search`` next to a searcher. So random/TPE search
takes exactly one loss entry, one data set and one variant: the loss's parameters are
scalars (fixed), lists (sampled like ``choice``) or distributions. Compare losses
with a grid; tune one loss with random/TPE; seeds are added by
``trainables.driver.tune_search`` (each suggestion repeated once per seed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Discriminator, Field, field_validator, model_validator

from search_spaces.background import check_background
from search_spaces.dataset_refs import BoundedPath, dataset_label
from search_spaces.errors import rule_error, shape_tag
from search_spaces.loss_entries import LossEntry
from search_spaces.losses import validate_loss_spec
from search_spaces.sections import Int, Section, SeedsUntil, TrainingSpec
from search_spaces.sweep_sections import ResourcesSpec, SchedulerSpec, SearchSpec, TaskSpec
from search_spaces.tuning import TuneSpec, max_epochs

MAX_SEED = 2**32 - 1  # numpy's seeding range
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"  # usable as an MLflow/Ray run name
BASELINE = {"name": "ce"}  # the loss every other is paired with until decided


def _seeds_shape(value: Any) -> str:
    return "seeds until" if isinstance(value, dict | SeedsUntil) else "seed list"


# A list of seeds, or the rule that says how many: told apart by shape, so that an error
# names the one the spec wrote.
Seeds = Annotated[
    Annotated[list[Int], shape_tag("seed list")] | Annotated[SeedsUntil, shape_tag("seeds until")],
    Discriminator(_seeds_shape),
]


class SearchSpaceSpec(Section):
    """What varies between trials: the loss entries (each a whole loss spec)."""

    losses: list[LossEntry]

    @field_validator("losses")
    @classmethod
    def _not_empty(cls, losses: list[LossEntry]) -> list[LossEntry]:
        if not losses:
            raise rule_error("at least one loss is needed: an empty grid runs nothing")
        return losses


class SweepSpec(Section):
    """A whole sweep, validated; see the module docstring for the rules across sections."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    extends: str | None = None  # the preset this spec started from, kept for provenance
    task: TaskSpec
    model: BoundedPath = "bert-base-cased"  # hub id, local path or "tiny-bert"
    training: TrainingSpec = TrainingSpec()
    search_space: SearchSpaceSpec
    seeds: Seeds = Field(default_factory=lambda: [0])
    search: SearchSpec = SearchSpec()
    scheduler: SchedulerSpec = SchedulerSpec()
    resources: ResourcesSpec = ResourcesSpec()
    tune: TuneSpec | None = None  # two-stage tuning per loss (search_spaces.tuning)
    max_failures: Int = Field(0, ge=0, le=100)  # retries of a failed trial

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: list[int] | SeedsUntil) -> list[int] | SeedsUntil:
        if isinstance(seeds, SeedsUntil):
            return seeds
        if not seeds:
            raise rule_error("at least one seed is needed")
        if len(set(seeds)) < len(seeds):
            raise rule_error(f"seeds repeat: {seeds}")
        if any(not 0 <= seed <= MAX_SEED for seed in seeds):
            raise rule_error(f"seeds must lie in [0, {MAX_SEED}], got {seeds}")
        return seeds

    @model_validator(mode="after")
    def _rules_across_sections(self) -> SweepSpec:
        if self.search.algorithm == "grid":
            _check_grid(self)
        else:
            _check_sampled(self)
        _check_metric(self)
        _check_scheduler(self)
        _check_tune(self)
        _check_precision(self)
        _check_seeds_until(self)
        check_background(self.task, self.search_space.losses)
        return self

    @property
    def seed_list(self) -> list[int]:
        """Every seed a trial may run: the list, or ``0 … max − 1`` until decided."""
        return self.seeds.seeds() if isinstance(self.seeds, SeedsUntil) else list(self.seeds)

    @property
    def seeds_until(self) -> SeedsUntil | None:
        """The seeds-until-decided rule, or None for a fixed list of seeds."""
        return self.seeds if isinstance(self.seeds, SeedsUntil) else None


def _check_grid(spec: SweepSpec) -> None:
    if spec.search.num_samples not in (None, 1):
        raise rule_error(
            "grid search runs each grid point once per seed: leave num_samples unset "
            "(add seeds for replicates)",
            "search.num_samples",
        )
    seen: dict[str, int] = {}
    for index, entry in enumerate(spec.search_space.losses):
        sampled = entry.distribution_params()
        if sampled:
            raise rule_error(
                "distributions need search.algorithm random or tpe; "
                "a grid takes a value or a list of values",
                f"search_space.losses[{index}].{sampled[0]}",
            )
        for point in entry.grid():
            # Defaults filled in, so {"name": "dsc"} and {"name": "dsc", "alpha": 1} collide.
            key = json.dumps(validate_loss_spec(point).model_dump(), sort_keys=True)
            if key in seen and seen[key] != index:
                raise rule_error(
                    f"repeats the loss {point} of search_space.losses[{seen[key]}]",
                    f"search_space.losses[{index}]",
                )
            seen[key] = index


def _check_sampled(spec: SweepSpec) -> None:
    algorithm = spec.search.algorithm
    if spec.search.num_samples is None:
        raise rule_error(
            f"{algorithm} search needs num_samples (configurations to draw)", "search.num_samples"
        )
    # Ray Tune refuses grid_search next to a searcher, and the sampled parameters
    # belong to one loss: one loss entry, one data set and one variant per search.
    dimensions = {
        "search_space.losses": (len(spec.search_space.losses), "loss (compare losses with grid)"),
        "task.dataset": (len(spec.task.dataset), "data set"),
        "task.variant": (len(spec.task.variant), "variant"),
    }
    for path, (size, unit) in dimensions.items():
        if size != 1:
            raise rule_error(
                f"{algorithm} search takes exactly one, got {size}: run one sweep per {unit}",
                path,
            )
    if not spec.search_space.losses[0].varying_params():
        raise rule_error(
            f"{algorithm} search needs a parameter to sample (a list or a distribution); "
            "with every value fixed, use grid",
            "search_space.losses[0]",
        )


def _check_metric(spec: SweepSpec) -> None:
    if spec.search.metric == "eval_span_f1" and spec.task.formulation != "mrc":
        raise rule_error(
            "eval_span_f1 is NER as reading comprehension's per-query span F1: it needs "
            "task.formulation mrc",
            "search.metric",
        )
    if spec.search.metric != "eval_exact_match":
        return
    other = [
        dataset_label(dataset)
        for dataset in spec.task.dataset
        if spec.task.kind_of(dataset) != "mrc"
    ]
    if other:
        raise rule_error(
            f"eval_exact_match exists for mrc data sets only, not {other}", "search.metric"
        )


def _check_scheduler(spec: SweepSpec) -> None:
    scheduler, training = spec.scheduler, spec.training
    if scheduler.kind == "fifo" or training.eval_every_steps is not None or training.max_steps:
        return
    # With tune, the scheduler stops stage-1 trials only, which may tune the epochs.
    epochs = max_epochs(spec.tune, training)
    if scheduler.grace_period >= epochs:
        raise rule_error(
            f"{scheduler.kind} with grace_period {scheduler.grace_period} can stop nothing in "
            f"{epochs} epochs evaluated once each: use grace_period < epochs or fifo",
            "scheduler.grace_period",
        )


def _check_precision(spec: SweepSpec) -> None:
    # fp16 autocast and its gradient scaler run on a CUDA GPU only (trainables.precision):
    # a trial that reserves none would fail at its start. Whether the cluster has a GPU
    # node is the service's check at submission (api/operations.py::precision_issues).
    if spec.training.precision == "fp16" and spec.resources.gpus_per_trial == 0:
        raise rule_error(
            "fp16 needs a GPU: a trial reserves none (set resources.gpus_per_trial above 0);"
            " on CPUs use bf16 or fp32",
            "training.precision",
        )


def _check_one_table(spec: SweepSpec, grid_rule: str, each: str) -> None:
    """Refuse a sampled search (``grid_rule``), then several data sets or variants:
    ``each`` loss is done on one of each."""
    if spec.search.algorithm != "grid":
        raise rule_error(grid_rule, "search.algorithm")
    for path, what, count in (
        ("task.dataset", "data set", len(spec.task.dataset)),
        ("task.variant", "variant", len(spec.task.variant)),
    ):
        if count != 1:
            raise rule_error(f"{each} on one {what}: run one sweep per {what}", path)


def _check_tune(spec: SweepSpec) -> None:
    if spec.tune is None:
        return
    # Each loss's settings are chosen for one data set and one variant: several would
    # need a choice per (loss, data set, variant), which the table cannot show as one.
    _check_one_table(
        spec,
        "tune compares the losses of a grid: use search.algorithm grid (tune samples "
        "the training settings itself)",
        "tune chooses each loss's settings",
    )


def runs_until_decided(data: Mapping[str, Any]) -> bool:
    """Whether a spec as stored (resolved) runs seeds until decided: its trial count is
    then a cap, which the rule may stop short of."""
    return isinstance(data.get("seeds"), Mapping)


def _check_seeds_until(spec: SweepSpec) -> None:
    # Each loss is paired with the baseline on one data set and one variant, trial for
    # whole trial: a scheduler that stops one would leave a pair half-trained.
    if spec.seeds_until is None:
        return
    _check_one_table(
        spec,
        "seeds until decided pairs the losses of a grid: use search.algorithm grid",
        "seeds until decided pairs each loss with ce",
    )
    if spec.tune is None and spec.scheduler.kind != "fifo":
        raise rule_error(
            "seeds until decided compares whole trials: a scheduler may stop stage-1 trials "
            "of tune only (use fifo)",
            "scheduler.kind",
        )
    points = expand_losses(spec)
    if BASELINE not in points or len(points) < 2:
        raise rule_error(
            "seeds until decided pairs each loss with the baseline {name: ce}: list ce and at "
            "least one other loss",
            "search_space.losses",
        )


def expand_losses(spec: SweepSpec) -> list[dict[str, Any]]:
    """The grid over whole loss specs, in entry order; each point only names what it sets.

    Example: ``[{"name": "tversky", "alpha": 0.3, "beta": 0.7}, ...]``.

    Raises:
        ValueError: the spec searches with random/TPE (its losses are sampled).
    """
    if spec.search.algorithm != "grid":
        raise ValueError(f"{spec.search.algorithm} search samples its loss; there is no grid")
    return [point for entry in spec.search_space.losses for point in entry.grid()]
