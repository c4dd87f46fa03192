"""Two-stage tuning: the spec's ``tune`` section and the settings each stage runs.

A sweep with ``tune`` tunes shared training settings separately for each loss, with
the same budget, before it compares the losses::

    tune:
      learning_rate: [1.0e-5, 3.0e-5, 1.0e-4]   # a list or a distribution
      trials_per_loss: 6
      holdout: 0.1        # share of the training file held out to choose on

- **Stage 1 (``tune``)**: every loss (each point of the loss grid: a whole loss spec,
  so ``dsc`` with ``alpha: [0.1, 0.01]`` is two losses) trains ``trials_per_loss``
  times, on the training file minus a held-out tuning split, seed ``seeds[0]``, and is
  scored on the tuning split. Every loss gets the same ``trials_per_loss`` settings
  (``stage_one_settings``): the grid of the lists when their product equals the
  budget, else draws at random (seeded by ``seeds[0]``), so the budget curves can
  tell the two apart (``tune_method``).
- **Stage 2 (``final``)**: every seed of every loss trains at that loss's best stage-1
  settings (``choose_settings``: never a constant trial's, unless all of the loss's
  are), on the whole training file (the tuning split only selects), and is reported
  on the dev set.

The split is fixed by ``seeds[0]`` and stratified by class for binary sets
(``trainables.trial_data``). Nothing here imports Ray.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from search_spaces.errors import rule_error
from search_spaces.flags import degenerate_reason
from search_spaces.loss_entries import (
    Choice,
    LogUniform,
    ParamValue,
    Uniform,
    candidates,
    canonical,
)
from search_spaces.sections import Float, Int, Section, TrainingSpec, loss_key

Stage = Literal["tune", "final"]
STAGES: tuple[Stage, ...] = ("tune", "final")
TUNABLE = ("learning_rate", "warmup_ratio", "epochs")  # TrainingSpec fields a spec may tune
TuneMethod = Literal["grid", "random"]


class TuneSpec(Section):
    """The ``tune`` section: which training settings to tune, the budget per loss and
    the share of the training file held out to choose on. Each setting is a list of
    values or a distribution (``{"uniform": [lo, hi]}``, ``{"loguniform": [lo, hi]}``,
    ``{"choice": [...]}``), every value checked against ``training``'s range; a tuned
    setting replaces ``training``'s value in every trial."""

    learning_rate: ParamValue | None = None
    warmup_ratio: ParamValue | None = None
    epochs: ParamValue | None = None
    trials_per_loss: Int = Field(ge=1, le=1000)
    # At most half: the rest must still train the final model.
    holdout: Float = Field(0.1, gt=0, le=0.5)

    @field_validator(*TUNABLE)
    @classmethod
    def _values_in_range(cls, value: ParamValue | None, info: Any) -> ParamValue | None:
        name = info.field_name
        if value is None:  # not tuned (a dumped spec writes it out)
            return None
        if not isinstance(value, list | Uniform | LogUniform | Choice):
            raise rule_error(
                f"a tuned setting is a list or a distribution, got {value!r}; "
                f"a fixed value belongs in training.{name}"
            )
        if isinstance(value, list) and not value:
            raise rule_error("a list of values must not be empty")
        if name == "epochs" and isinstance(value, Uniform | LogUniform):
            raise rule_error("epochs are whole numbers: give a list or a choice")
        for candidate in candidates(value):
            try:
                TrainingSpec.model_validate({name: candidate})
            except ValidationError as error:
                raise rule_error(f"{name}={candidate!r}: {error.errors()[0]['msg']}") from None
        return value

    @model_validator(mode="after")
    def _something_to_tune(self) -> TuneSpec:
        if not self.settings():
            raise rule_error(f"name at least one setting to tune: {', '.join(TUNABLE)}")
        return self

    def settings(self) -> dict[str, ParamValue]:
        """The tuned settings, in ``TUNABLE`` order."""
        return {name: value for name in TUNABLE if (value := getattr(self, name)) is not None}


def tune_method(tune: TuneSpec) -> TuneMethod:
    """``grid`` when every setting is a list (or a choice) and their product is the
    budget (each combination runs once), else ``random`` (independent draws)."""
    values = tune.settings().values()
    discrete = all(isinstance(value, list | Choice) for value in values)
    if discrete and math.prod(len(candidates(v)) for v in values) == tune.trials_per_loss:
        return "grid"
    return "random"


def stage_one_settings(tune: TuneSpec, seed: int) -> list[dict[str, Any]]:
    """The ``trials_per_loss`` settings every loss is tried at in stage 1, in order:
    the grid, or draws from a ``random.Random(seed)`` (lists and choices uniformly,
    ``uniform`` and ``loguniform`` as named), floats rounded like loss parameters."""
    settings = tune.settings()
    if tune_method(tune) == "grid":
        points = itertools.product(*(candidates(value) for value in settings.values()))
        return [
            {name: canonical(v) for name, v in zip(settings, point, strict=True)}
            for point in points
        ]
    rng = random.Random(seed)
    return [
        {name: canonical(_draw(value, rng)) for name, value in settings.items()}
        for _ in range(tune.trials_per_loss)
    ]


def _draw(value: ParamValue, rng: random.Random) -> Any:
    if isinstance(value, Uniform):
        return rng.uniform(*value.uniform)
    if isinstance(value, LogUniform):
        low, high = value.loguniform
        return math.exp(rng.uniform(math.log(low), math.log(high)))
    return rng.choice(candidates(value))


def max_epochs(tune: TuneSpec | None, training: TrainingSpec) -> int:
    """The most epochs a trial of stage 1 may train: ASHA's horizon."""
    if tune is None or tune.epochs is None:
        return training.epochs
    return max(int(value) for value in candidates(tune.epochs))


def halving_rung(level: int, grace_period: int, reduction_factor: float) -> int:
    """The evaluations a trial has run when it reaches rung ``level`` (0, 1, ...) of
    the ``halving`` scheduler: ``grace_period × reduction_factor^level``, rounded, and
    always past the rung below."""
    evaluations = grace_period
    for _ in range(level):
        evaluations = max(evaluations + 1, round(evaluations * reduction_factor))
    return evaluations


def choose_settings(
    results: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    settings: list[dict[str, Any]],
    metric: str,
) -> dict[str, dict[str, Any]]:
    """Each loss's best stage-1 settings: ``{loss_key(loss): {setting: value}}``.

    ``results`` are ``(trial config, last metrics or None for a failed trial)`` in any
    order; ``settings`` are stage 1's (``stage_one_settings``). A loss's best is its
    trial with the highest ``metric`` among those that are not constant
    (``flags.degenerate_reason``: one prediction for ≥ 99% of the tuning split); where
    every trial of the loss is constant, the best of them (``flags.constant_choices``
    names such losses from the trial rows). Among those, a trial that ran to its end
    (its last metrics say why it stopped: ``stop_reason``) beats one a scheduler
    stopped, whose score is from an earlier rung. On a tie, the setting listed first.
    A loss whose every trial failed or reported no ``metric`` has no entry.
    """
    names = list(settings[0]) if settings else []
    rank: dict[str, int] = {}
    for index, setting in enumerate(settings):
        rank.setdefault(json.dumps(setting, sort_keys=True), index)
    best: dict[str, tuple[bool, bool, float, int, dict[str, Any]]] = {}
    for config, metrics in results:
        value = None if metrics is None else metrics.get(metric)
        if metrics is None or value is None or math.isnan(float(value)):
            continue
        setting = {name: config["training"][name] for name in names}
        order = -rank.get(json.dumps(setting, sort_keys=True), len(rank))
        # A trial that learned something beats every constant one, whatever it scored.
        ran_to_end = metrics.get("stop_reason") is not None
        candidate = (degenerate_reason(metrics) is None, ran_to_end, float(value), order)
        key = loss_key(config["loss"])
        if key not in best or candidate > best[key][:4]:
            best[key] = (*candidate, setting)
    return {key: setting for key, (*_, setting) in best.items()}
