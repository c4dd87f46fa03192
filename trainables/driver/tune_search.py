"""The Ray Tune side of a spec: ``param_space``, searcher, scheduler, ``TuneConfig``
arguments, resources: the one module that turns a ``SweepSpec`` into Tune's terms.

Imports Ray (and Optuna) at the top: import this module only where Ray is installed
(the sweep driver); the rest of ``search_spaces`` stays importable without it. Usage::

    tuner = tune.Tuner(
        tune.with_resources(train, trial_resources(spec)),
        param_space=to_param_space(spec, sweep_id=sweep_id),
        tune_config=tune.TuneConfig(**tune_config_kwargs(spec)),
    )

Seeds are replicates: with grid search they are a ``grid_search`` dimension of the
``param_space``; with random/TPE search, ``SeedRepeater`` hands each configuration the
searcher suggests to one trial per seed and reports the seeds' mean back to it.

A spec with ``tune`` runs two ``Tuner``s, one per stage (``search_spaces.tuning``):
``stage_param_space`` and ``tune_config_kwargs(spec, stage)`` give each its own. Seeds
until decided run the (final) stage in rounds, one ``Tuner`` each over the losses and
seeds the rule still needs (``round_param_space``).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import optuna
from ray import tune
from ray.tune.schedulers import (
    ASHAScheduler,
    FIFOScheduler,
    MedianStoppingRule,
    TrialScheduler,
)
from ray.tune.search import Repeater, Searcher
from ray.tune.search.optuna import OptunaSearch
from ray.tune.search.repeater import TRIAL_INDEX

from search_spaces.dataset_refs import DatasetRef
from search_spaces.loss_entries import (
    Choice,
    LogUniform,
    LossEntry,
    Uniform,
    candidates,
    canonical_loss,
)
from search_spaces.mrc_ner import MrcNerSpec
from search_spaces.resolve import stage_counts
from search_spaces.spec import SweepSpec, expand_losses
from search_spaces.tuning import Stage, loss_key, max_epochs, stage_one_settings
from trainables.driver.halving import SyncHalving

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

TIME_ATTR = "training_iteration"  # one per evaluation the trainable reports
MAX_EVALUATIONS = 10_000  # ASHA's horizon when a trial evaluates every N steps or trains max_steps


class SeedRepeater(Repeater):
    """Runs each suggested configuration once per seed, setting ``config["seed"]``.

    The wrapped searcher sees one trial per configuration, scored by the mean of the
    metric over the seeds (``Repeater``'s behaviour). ``num_samples`` in ``TuneConfig``
    must be ``configurations × len(seeds)``.
    """

    def __init__(self, searcher: Searcher, seeds: Sequence[int]) -> None:
        super().__init__(searcher, repeat=len(seeds), set_index=True)
        self.seeds = list(seeds)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        config = super().suggest(trial_id)
        if not isinstance(config, dict):  # None (wait) or Searcher.FINISHED
            return config
        config["seed"] = self.seeds[config.pop(TRIAL_INDEX)]
        return config


class PerLossScheduler(FIFOScheduler):
    """Keeps one scheduler per loss name, so a trial is compared only with trials of
    the same loss (the losses converge at different speeds).

    ``make`` builds a fresh scheduler without metric or mode; those come from
    ``TuneConfig`` through ``set_search_properties``.
    """

    def __init__(
        self,
        make: Callable[..., TrialScheduler],
        group_sizes: dict[str, int] | None = None,
        by_point: bool = False,
    ) -> None:
        super().__init__()
        self._make = make
        # Stage 1 tunes each loss grid point on its own (``loss_key``): its trials are
        # compared only with each other, never with another point's of the same name.
        self._by_point = by_point
        # Each loss's trial count, for a scheduler that must know it (``SyncHalving``).
        self._sizes = group_sizes
        self._by_loss: dict[str, TrialScheduler] = {}
        self._properties: tuple[str | None, str | None] = (None, None)

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        self._properties = (metric, mode)
        self._metric = metric
        return all(s.set_search_properties(metric, mode) for s in self._by_loss.values())

    def _scheduler(self, trial: Trial) -> TrialScheduler:
        loss = trial.config["loss"]
        name = loss_key(loss) if self._by_point else str(loss["name"])
        if name not in self._by_loss:
            sizes = {} if self._sizes is None else {"group_size": self._sizes[name]}
            scheduler = self._make(**sizes)
            scheduler.set_search_properties(*self._properties)
            self._by_loss[name] = scheduler
        return self._by_loss[name]

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        self._scheduler(trial).on_trial_add(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self._scheduler(trial).on_trial_error(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        return str(self._scheduler(trial).on_trial_result(tune_controller, trial, result))

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> None:
        self._scheduler(trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self._scheduler(trial).on_trial_remove(tune_controller, trial)

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        # Each loss's scheduler says which of its trials may run (halving keeps a trial
        # paused at its rung until the loss's others reach it).
        for scheduler in self._by_loss.values():
            trial = scheduler.choose_trial_to_run(tune_controller)
            if trial is not None:
                return trial
        return None

    def debug_string(self) -> str:
        return "\n".join(f"{name}: {s.debug_string()}" for name, s in self._by_loss.items())


def build_search_alg(spec: SweepSpec) -> Searcher | None:
    """``None`` for grid (Ray's own variant generator expands the grid), else an Optuna
    searcher (random or TPE sampler) wrapped in a ``SeedRepeater``."""
    algorithm = spec.search.algorithm
    if algorithm == "grid":
        return None
    seed = spec.search.sampler_seed
    sampler: optuna.samplers.BaseSampler = (
        optuna.samplers.RandomSampler(seed=seed)
        if algorithm == "random"
        else optuna.samplers.TPESampler(seed=seed)
    )
    return SeedRepeater(OptunaSearch(sampler=sampler), spec.seed_list)


def build_scheduler(
    spec: SweepSpec, trials: int | None = None, by_point: bool = False
) -> TrialScheduler:
    """The trial scheduler of ``spec.scheduler``; metric and mode come from ``TuneConfig``.
    ``trials``: how many trials it schedules (default: ``spec``'s without ``tune``), which
    ``halving`` shares among the losses; ``by_point``: ``per_loss`` compares a trial with
    its loss grid point's (stage 1), not with its loss name's."""
    settings = spec.scheduler
    sizes: dict[str, int] | None = None
    make: Callable[..., TrialScheduler]
    if settings.kind == "fifo":
        return FIFOScheduler()
    if settings.kind == "asha":
        training = spec.training
        per_epoch = training.eval_every_steps is None and training.max_steps is None
        max_t = training.epochs if per_epoch else MAX_EVALUATIONS
        make = functools.partial(
            ASHAScheduler,
            time_attr=TIME_ATTR,
            max_t=max_t,
            grace_period=settings.grace_period,
            reduction_factor=settings.reduction_factor,
        )
    elif settings.kind == "halving":
        make = functools.partial(
            SyncHalving,
            time_attr=TIME_ATTR,
            grace_period=settings.grace_period,
            reduction_factor=settings.reduction_factor,
            max_running=spec.resources.max_concurrent_trials,
        )
        total = trials if trials is not None else stage_counts(spec)["final"]
        if not settings.per_loss:
            return make(group_size=total)
        points = expand_losses(spec)
        names = Counter(loss_key(p) if by_point else str(p["name"]) for p in points)
        sizes = {name: total * count // len(points) for name, count in names.items()}
    else:
        # Never pause for lack of samples: a paused function trial without a checkpoint
        # would start over; it only stops once below the median.
        make = functools.partial(
            MedianStoppingRule,
            time_attr=TIME_ATTR,
            grace_period=settings.grace_period,
            min_time_slice=MAX_EVALUATIONS,
        )
    # A partial, not a lambda: Tune pickles the scheduler with the experiment state.
    return PerLossScheduler(make, sizes, by_point) if settings.per_loss else make()


def tune_num_samples(spec: SweepSpec) -> int:
    """``TuneConfig.num_samples``: 1 for grid (the grid holds every trial), else
    ``num_samples × seeds`` (what ``SeedRepeater`` needs)."""
    if spec.search.algorithm == "grid":
        return 1
    return (spec.search.num_samples or 1) * len(spec.seed_list)


def tune_config_kwargs(spec: SweepSpec, stage: Stage = "final") -> dict[str, Any]:
    """Keyword arguments for ``ray.tune.TuneConfig`` (of ``stage``'s ``Tuner`` with
    ``tune``: the scheduler may stop stage-1 trials, never the reported ones of stage 2)."""
    scheduler: TrialScheduler
    if spec.tune is None:
        scheduler = build_scheduler(spec)
    elif stage == "tune":
        epochs = max_epochs(spec.tune, spec.training)
        training = spec.training.model_copy(update={"epochs": epochs})
        tuned = spec.model_copy(update={"training": training})
        scheduler = build_scheduler(tuned, trials=stage_counts(spec)["tune"], by_point=True)
    else:
        scheduler = FIFOScheduler()
    return {
        "metric": spec.search.metric,
        "mode": spec.search.mode,
        "search_alg": build_search_alg(spec),
        "scheduler": scheduler,
        "num_samples": tune_num_samples(spec),
        # halving limits the running trials itself (``SyncHalving``): Tune's limit
        # counts its paused trials too.
        "max_concurrent_trials": (
            None if spec.scheduler.kind == "halving" else spec.resources.max_concurrent_trials
        ),
    }


def trial_resources(spec: SweepSpec) -> dict[str, float]:
    """Resources for ``tune.with_resources``: ``{"cpu": ..., "gpu": ...}`` per trial."""
    return {"cpu": spec.resources.cpus_per_trial, "gpu": spec.resources.gpus_per_trial}


def to_param_space(spec: SweepSpec, *, sweep_id: str = "") -> dict[str, Any]:
    """The Ray Tune ``param_space`` whose every trial config has the contract's shape
    (``search_spaces.sections.TrialConfig``).

    Grid: ``tune.grid_search`` over the expanded losses, the seeds, and the data sets
    and variants when there are several. Random/TPE: ``loss`` holds ``tune.uniform``,
    ``tune.loguniform`` or ``tune.choice`` domains, and there is no ``seed``: the
    searcher of ``trainables.driver.tune_search`` sets it. ``sweep_id`` is a placeholder
    the driver may overwrite.
    """

    def grid(values: list[Any]) -> Any:
        return values[0] if len(values) == 1 else tune.grid_search(values)

    space: dict[str, Any] = {
        "sweep_id": sweep_id,
        "dataset": grid([_plain(dataset) for dataset in spec.task.dataset]),
        "kind": spec.task.kind,
        "variant": grid(list(spec.task.variant)),
        "positive_label": spec.task.positive_label,
        "model": spec.model,
    }
    if spec.task.formulation == "mrc":  # a tagger's configs stay as they were
        space["formulation"] = "mrc"
        space["mrc"] = (spec.task.mrc or MrcNerSpec()).model_dump()
    if spec.search.algorithm == "grid":
        space["loss"] = grid(expand_losses(spec))
        space["seed"] = grid(spec.seed_list)
    else:
        space["loss"] = _sampled_loss(spec.search_space.losses[0])
    space["training"] = spec.training.model_dump()
    space["metric"] = spec.search.metric
    if spec.seeds_until is not None:  # each trial's setup names the rule its table follows
        space["seeds_until"] = spec.seeds_until.model_dump()
    return space


def _plain(dataset: DatasetRef) -> Any:
    """A catalogue name, or a local or hub data set as a plain dict (Tune copies configs)."""
    return dataset if isinstance(dataset, str) else dataset.model_dump(exclude_none=True)


def _sampled_loss(entry: LossEntry) -> dict[str, Any]:
    """``{"name": ..., param: constant or Tune domain}`` for random/TPE search."""
    loss: dict[str, Any] = {"name": entry.name}
    for parameter, value in entry.params().items():
        # Each value goes through the loss's model so that 2 and 2.0 reach trials alike.
        values = [
            canonical_loss({"name": entry.name, parameter: v})[parameter] for v in candidates(value)
        ]
        if isinstance(value, Uniform):
            loss[parameter] = tune.uniform(*values)
        elif isinstance(value, LogUniform):
            loss[parameter] = tune.loguniform(*values)
        elif isinstance(value, list | Choice):
            loss[parameter] = tune.choice(values)
        else:
            loss[parameter] = values[0]
    return loss


def stage_param_space(
    spec: SweepSpec,
    stage: Stage,
    *,
    sweep_id: str = "",
    chosen: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``param_space`` of one stage of a spec with ``tune``.

    ``tune``: every loss × every stage-1 setting (``stage_one_settings``), seed
    ``seeds[0]``. ``final``: every loss that has ``chosen`` settings (``{loss_key:
    {setting: value}}``, from ``search_spaces.tuning.choose_settings``) × every seed,
    its ``training`` at those settings, on the whole training file (no ``holdout``).
    """
    if spec.tune is None:
        raise ValueError("a spec without tune has one stage: use to_param_space")
    space = to_param_space(spec, sweep_id=sweep_id)
    tuned = list(spec.tune.settings())
    # Only stage 1 holds the tuning split out: stage 2 trains on the whole training file.
    holdout = spec.tune.holdout if stage == "tune" else None
    grid = {name: sorted(candidates(value)) for name, value in spec.tune.settings().items()}
    space.update(
        stage=stage, holdout=holdout, holdout_seed=spec.seed_list[0], tuned=tuned, tune_grid=grid
    )
    if stage == "tune":
        settings = stage_one_settings(spec.tune, spec.seed_list[0])
        space["seed"] = spec.seed_list[0]
        space["training"] = tune.grid_search(
            [spec.training.model_copy(update=setting).model_dump() for setting in settings]
        )
        return space
    chosen = chosen or {}
    losses = [loss for loss in expand_losses(spec) if loss_key(loss) in chosen]
    if not losses:
        raise ValueError("no loss has chosen settings: stage 1 had no result to choose on")
    space["loss"] = tune.grid_search(losses)
    # Each loss's chosen settings, one constant the trial applies to its own loss
    # (``sections.trial_training``): each trial's training follows its loss.
    space["tuned_by_loss"] = {key: dict(setting) for key, setting in chosen.items()}
    return space


def round_param_space(
    spec: SweepSpec,
    losses: Sequence[dict[str, Any]],
    seeds: Sequence[int],
    *,
    sweep_id: str = "",
    chosen: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``param_space`` of one round of seeds until decided: ``losses`` × ``seeds``,
    everything else as the (final) stage has it (with ``tune``, at the ``chosen``
    settings).

    Raises:
        ValueError: the spec runs a fixed list of seeds, or the round runs nothing.
    """
    if spec.seeds_until is None:
        raise ValueError("a fixed list of seeds runs in one Tuner: use to_param_space")
    if not losses or not seeds:
        raise ValueError("a round runs at least one loss at one seed")
    if spec.tune is None:
        space = to_param_space(spec, sweep_id=sweep_id)
    else:
        space = stage_param_space(spec, "final", sweep_id=sweep_id, chosen=chosen)
    space["loss"] = tune.grid_search([dict(loss) for loss in losses])
    space["seed"] = tune.grid_search(list(seeds))
    return space
