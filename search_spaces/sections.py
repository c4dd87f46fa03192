"""The sections of a sweep spec that its trials receive too (``training``, ``seeds``
until decided), the trial config contract (``TrialConfig``) and what every section is
built of; each a closed pydantic model (unknown keys are errors).

The other sections are in ``search_spaces.sweep_sections``; rules that span sections
live on ``search_spaces.spec.SweepSpec``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from search_spaces.dataset_refs import (
    BoundedPath,
    DatasetRef,
    check_known,
    dataset_label,
    is_binary,
)
from search_spaces.datasets import TaskKind, Variant
from search_spaces.errors import ClosedModel, SpecError, rule_error
from search_spaces.losses import LossSpec
from search_spaces.mrc_ner import Formulation, MrcNerSpec

if TYPE_CHECKING:
    from search_spaces.sequential.rule import SeedsUntilDecided

Precision = Literal["auto", "fp32", "bf16", "fp16"]
# eval_span_f1: NER as reading comprehension's official per-query span F1 (mrc_ner).
Metric = Literal[
    "eval_f1",
    "eval_precision",
    "eval_recall",
    "eval_accuracy",
    "eval_exact_match",
    "eval_span_f1",
]
Int = Annotated[int, Field(strict=True)]  # strict: true/false are not numbers
Float = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class Section(ClosedModel):
    """A closed, immutable part of a spec: unknown keys are errors."""


class DecaySpec(Section):
    """How the learning rate falls after warm-up (``training.decay``).

    ``linear``: to 0 at the last planned step. ``polynomial``: from the peak to
    ``end_factor`` × the peak as ``(1 - progress) ** power``, then held there (Hugging
    Face ``get_polynomial_decay_schedule_with_warmup`` with ``lr_end = end_factor × lr``);
    power 1 and end factor 0 is the linear decay.
    """

    kind: Literal["linear", "polynomial"] = "linear"
    power: Float = Field(1.0, gt=0, le=10)
    end_factor: Float = Field(0.0, ge=0, lt=1)  # the final rate as a share of the peak

    @model_validator(mode="after")
    def _linear_takes_no_shape(self) -> DecaySpec:
        if self.kind == "linear" and (self.power != 1.0 or self.end_factor != 0.0):
            raise rule_error(
                "linear decay ends at 0 with power 1: set kind polynomial for another "
                "power or end_factor",
                "kind",
            )
        return self

    def text(self) -> str:
        """The decay as a table's setup block says it."""
        if self.kind == "linear":
            return "linear to 0"
        return f"polynomial (power {self.power:g}) to {self.end_factor:g} × the peak rate"


# Which evaluation's model a trial reports (``training.checkpoint``): its last, or the
# one best on the evaluation split by the sweep's search metric.
CheckpointChoice = Literal["last", "best"]


class TrainingSpec(Section):
    """Fine-tuning settings shared by every trial of a sweep (never searched)."""

    # Every number has a range a fine-tune can mean (docs/sweeps.md lists them): a
    # value outside is a typo or a unit mistake, refused before anything runs.
    epochs: Int = Field(3, ge=1, le=1000)
    # Optimiser steps to train, epochs then ignored (Hugging Face Trainer's rule): the
    # data is cycled, epoch after epoch, until the last step. None: ``epochs`` epochs.
    max_steps: Int | None = Field(None, ge=1, le=100_000_000)
    # Stop once the search metric has not improved by more than ``min_delta`` for this
    # many evaluations in a row; the trial then reports its best evaluation. None: never.
    early_stopping_patience: Int | None = Field(None, ge=1, le=10_000)
    min_delta: Float = Field(0.0, ge=0, le=100)  # in the metric's units (percent)
    learning_rate: Float = Field(3e-5, ge=1e-9, le=1.0)
    batch_size: Int = Field(16, ge=1, le=65_536)  # examples per forward pass (micro-batch)
    # Micro-batches whose gradients are summed into one optimiser step (their mean: each
    # micro-batch's loss is divided by this); an epoch's last step takes what is left.
    grad_accumulation: Int = Field(1, ge=1, le=4096)
    max_seq_length: Int = Field(128, ge=8, le=4096)  # tokens
    warmup_ratio: Float = Field(0.1, ge=0, lt=1)  # fraction of all optimiser steps
    decay: DecaySpec = Field(default_factory=DecaySpec)  # after warm-up
    weight_decay: Float = Field(0.01, ge=0, le=1.0)
    adam_epsilon: Float = Field(1e-8, gt=0, le=1e-2)  # AdamW's eps
    grad_clip: Float | None = Field(1.0, gt=0, le=1e6)  # max gradient norm; None: no clipping
    eval_every_steps: Int | None = Field(None, ge=1, le=10_000_000)  # None: once per epoch
    # Evaluations spread evenly over each epoch's optimiser steps, the last at its end
    # (Lightning's val_check_interval 1/k); None: eval_every_steps' rule.
    evaluations_per_epoch: Int | None = Field(None, ge=1, le=1000)
    # The model a trial reports: its last evaluation's, or the best one's on the
    # evaluation split by the search metric (its weights kept for the test split).
    checkpoint: CheckpointChoice = "last"
    # Score the reported model on the data set's test split once training ends
    # (``test_*`` metrics beside ``eval_*``; capped by max_eval_examples). A stage-1
    # trial of ``tune`` never reads it.
    score_test: Annotated[bool, Field(strict=True)] = False
    # The task head's initial weights: PyTorch's default for its layers ("torch"), or the
    # encoder's own ``_init_weights`` (BERT: N(0, 0.02) weights, zero biases).
    head_init: Literal["torch", "encoder"] = "torch"
    max_train_examples: Int | None = Field(None, ge=1, le=1_000_000_000)  # None: whole split
    max_eval_examples: Int | None = Field(None, ge=1, le=1_000_000_000)
    doc_stride: Int = Field(128, ge=1, le=4096)  # MRC: tokens two neighbouring windows share
    # Batches of similar lengths (shuffled in groups of 50 batches, each group sorted
    # by length): less padding, the same examples each epoch; false: a plain shuffle.
    group_by_length: bool = True
    # Autocast dtype of the forward pass (losses are always computed in fp32). auto: bf16
    # on a CUDA GPU with bf16, fp16 with a gradient scaler on one without; fp32 on a CPU,
    # where bf16 is asked for (trainables.precision); fp16 needs a GPU.
    precision: Precision = "auto"

    @model_validator(mode="before")
    @classmethod
    def _old_bf16_flag(cls, data: Any) -> Any:
        """``bf16: true | false | auto``, the key before ``precision``, read as
        ``precision: bf16 | fp32 | auto``: stored and published specs stay valid."""
        if not isinstance(data, Mapping) or "bf16" not in data:
            return data
        if "precision" in data:
            raise rule_error("bf16 is the older name of precision: give only precision", "bf16")
        flag, rest = data["bf16"], {k: v for k, v in data.items() if k != "bf16"}
        if flag is not True and flag is not False and flag != "auto":
            raise rule_error(f"must be true, false or 'auto', got {flag!r}", "bf16")
        return {**rest, "precision": {True: "bf16", False: "fp32"}.get(flag, "auto")}

    @model_validator(mode="after")
    def _one_evaluation_rule(self) -> TrainingSpec:
        if self.evaluations_per_epoch is not None and self.eval_every_steps is not None:
            raise rule_error(
                "give evaluations_per_epoch or eval_every_steps, not both",
                "evaluations_per_epoch",
            )
        if (
            self.score_test
            and self.early_stopping_patience is not None
            and self.checkpoint != "best"
        ):
            raise rule_error(
                "with early stopping a trial reports its best evaluation: score_test "
                "scores that model, so set checkpoint: best",
                "score_test",
            )
        return self

    @model_validator(mode="after")
    def _delta_needs_patience(self) -> TrainingSpec:
        if self.min_delta > 0 and self.early_stopping_patience is None:
            raise rule_error(
                "min_delta applies to early stopping: set early_stopping_patience too",
                "min_delta",
            )
        return self

    def steps_per_epoch(self, examples: int) -> int:
        """Optimiser steps in one epoch of ``examples`` training examples: its
        micro-batches of ``batch_size``, ``grad_accumulation`` to a step, the last step
        taking the rest."""
        micro_batches = math.ceil(examples / self.batch_size)
        return math.ceil(micro_batches / self.grad_accumulation)

    def evaluates_at(self, step: int, steps_per_epoch: int) -> bool:
        """Whether optimiser step ``step`` (1-based) ends with an evaluation: every
        epoch's end, and ``evaluations_per_epoch`` or ``eval_every_steps``' steps."""
        within = step % steps_per_epoch
        if within == 0:
            return True
        if self.evaluations_per_epoch is not None:
            k = self.evaluations_per_epoch
            return any(round(j * steps_per_epoch / k) == within for j in range(1, k))
        return self.eval_every_steps is not None and step % self.eval_every_steps == 0

    def total_steps(self, steps_per_epoch: int) -> int:
        """The optimiser steps a trial plans (warm-up and decay span them): ``max_steps``,
        else ``epochs × steps_per_epoch``; early stopping may end it sooner."""
        return self.max_steps if self.max_steps is not None else self.epochs * steps_per_epoch


class SeedsUntil(Section):
    """``seeds: {min, max, until: decided, looks, alpha, delta_min}``: each loss runs seeds
    ``0 … max − 1`` in rounds, paired with the baseline at the same seeds, until the
    rule (``search_spaces.sequential``) decides its difference, finds it futile, or
    reaches ``max``. ``looks`` rise from ``min`` to ``max``; ``alpha`` is two-sided over
    all looks; ``delta_min`` is the metric's difference below which none is of interest.

    Raises (as pydantic errors, field and rule named):
        every rule ``SeedsUntilDecided`` checks.
    """

    min: Int = 3
    max: Int = 10
    until: Literal["decided"]
    looks: list[Int] = Field(default_factory=lambda: [3, 5, 7, 10])
    alpha: Float = 0.05
    delta_min: Float = 0.0

    @model_validator(mode="after")
    def _a_rule(self) -> SeedsUntil:
        try:
            self.rule()
        except SpecError as error:
            issue = error.issues[0]
            raise rule_error(issue.message, issue.path.removeprefix("seeds").lstrip(".")) from None
        return self

    def rule(self) -> SeedsUntilDecided:
        """The rule's settings as ``search_spaces.sequential`` takes them.

        Raises:
            SpecError: a broken rule, its field ``seeds.<name>``.
        """
        # Imported here: the rule's module loads SciPy, which only this needs of a spec.
        from search_spaces.sequential.rule import SeedsUntilDecided

        return SeedsUntilDecided(
            min=self.min,
            max=self.max,
            looks=tuple(self.looks),
            alpha=self.alpha,
            delta_min=self.delta_min,
        )

    def seeds(self) -> list[int]:
        """Every seed a loss may run, in the order the rounds run them."""
        return list(range(self.max))

    def describe(self) -> str:
        """``"until decided: looks 3, 5, 7, 10; alpha 0.05; delta_min 0.5"``, the setup
        field ``seeds`` (``search_spaces.setup``), read back by ``parse``."""
        looks = ", ".join(map(str, self.looks))
        return f"until decided: looks {looks}; alpha {self.alpha:g}; delta_min {self.delta_min:g}"

    @classmethod
    def parse(cls, text: str) -> SeedsUntil | None:
        """``describe``'s text back as the rule; None for any other text (a fixed list)."""
        found = re.fullmatch(
            r"until decided: looks ([\d, ]+); alpha ([^;]+); delta_min (.+)", text.strip()
        )
        if found is None:
            return None
        looks = [int(n) for n in found.group(1).split(",")]
        return cls(
            min=looks[0],
            max=looks[-1],
            until="decided",
            looks=looks,
            alpha=float(found.group(2)),
            delta_min=float(found.group(3)),
        )


class TrackingLink(Section):
    """Where a sweep's trials are logged: its MLflow store, experiment and parent run."""

    tracking_uri: str = Field(min_length=1)
    experiment_id: str = Field(min_length=1)
    parent_run_id: str = Field(min_length=1)


def loss_key(loss: Mapping[str, Any]) -> str:
    """A loss spec as one string: the key of each loss's chosen settings."""
    return json.dumps(dict(loss), sort_keys=True)


def trial_training(config: Mapping[str, Any]) -> dict[str, Any]:
    """A trial config's training settings: in stage 2 of a two-stage sweep, its loss's
    chosen settings (``tuned_by_loss``, keyed by ``loss_key``) over the spec's. Stage
    2's param space carries them as one constant, which Tune keeps when it restores the
    experiment."""
    chosen = (config.get("tuned_by_loss") or {}).get(loss_key(config["loss"])) or {}
    return {**dict(config.get("training") or {}), **chosen}


class TrialConfig(Section):
    """The config each Ray Tune trial receives: one data set, variant, loss and seed.
    The sweep's driver logs what the trial reports (``trainables.driver.tracking``).

    ``stage`` is ``final`` for every trial of a sweep without ``tune``. With ``tune``
    (``search_spaces.tuning``), ``holdout`` is the share of the training file a ``tune``
    trial holds out, chosen by ``holdout_seed``: it trains on the rest and is scored on
    it; a ``final`` trial trains on the whole training file and is scored on dev;
    ``tuned`` names the ``training`` settings stage 1 chose, ``tune_grid`` the values
    it chose among (``search_spaces.setup`` flags a choice at the grid's edge).
    """

    sweep_id: str
    dataset: DatasetRef
    kind: TaskKind | None = None  # needed by a local data set; a catalogue name has its own
    variant: Variant
    # The scored class of a binary set; None: its training file's minority, which
    # the trainable resolves where it reads the file (``trainables.trial_data``).
    positive_label: Literal[0, 1] | None = None
    formulation: Formulation = "tagger"  # ner: a tagger, or reading comprehension
    mrc: MrcNerSpec | None = None  # formulation mrc: its settings (None: the defaults)
    model: BoundedPath
    loss: LossSpec
    seed: Int = Field(ge=0)
    training: TrainingSpec
    stage: Literal["tune", "final"] = "final"
    holdout: Float | None = Field(None, gt=0, le=0.5)  # None: the whole training file
    holdout_seed: Int = Field(0, ge=0)
    tuned: list[Literal["learning_rate", "warmup_ratio", "epochs"]] = Field(default_factory=list)
    # The values stage 1 chose among for each tuned setting (a distribution: its ends).
    tune_grid: dict[str, list[Float | Int]] = Field(default_factory=dict)
    metric: Metric = "eval_f1"  # the sweep's search metric, which early stopping watches
    # The sweep's seeds-until-decided rule (None: a fixed list of seeds), which its
    # table follows (``search_spaces.reports.rule``) and its setup names.
    seeds_until: SeedsUntil | None = None

    @model_validator(mode="before")
    @classmethod
    def _training_of_its_loss(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "tuned_by_loss" in data:
            training = trial_training(data)
            data = {key: value for key, value in data.items() if key != "tuned_by_loss"}
            data["training"] = training
        return data

    @field_validator("dataset")
    @classmethod
    def _known(cls, value: DatasetRef) -> DatasetRef:
        return check_known(value)

    @model_validator(mode="after")
    def _variant_of_a_binary_set(self) -> TrialConfig:
        if self.variant != "original" and not is_binary(self.dataset, self.kind):
            raise rule_error(
                f"{dataset_label(self.dataset)} is not binary: its only variant is 'original'",
                "variant",
            )
        return self

    @model_validator(mode="after")
    def _tune_needs_holdout(self) -> TrialConfig:
        if self.stage == "tune" and self.holdout is None:
            raise rule_error("a tune trial is scored on a held-out split: set holdout", "holdout")
        return self
