"""The sections only a sweep spec holds: which data (``task``), how the space is
searched (``search``), which trials stop early (``scheduler``) and what each trial
reserves (``resources``); each a closed pydantic model (unknown keys are errors).

A trial's config (``search_spaces.sections.TrialConfig``) takes one data set and
variant, and the search metric, from them; rules that span sections live on
``search_spaces.spec.SweepSpec``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from search_spaces.dataset_refs import DatasetRef, check_known, dataset_label, is_binary
from search_spaces.datasets import DATASETS, VARIANTS, TaskKind, Variant
from search_spaces.errors import rule_error
from search_spaces.mrc_ner import Formulation, MrcNerSpec
from search_spaces.sections import Float, Int, Metric, Section


class TaskSpec(Section):
    """Which data: one or more data sets and Table 8 variants (a grid of both), each
    given as one value or a list.

    A data set is a catalogue name, a local folder ``{path, format}``
    (``search_spaces.datasets.LocalDataset``) or a hub id ``{hub, config}``
    (``HubDataset``). ``kind`` is optional for catalogue names (given, every data set
    must be of that kind) and required with a folder or a hub id. Variants other
    than ``original`` exist only for binary data sets.
    ``positive_label`` is the scored class of a binary (``pi``) set: F1 is the F1
    of that label and the Table 8 variants are built around it
    (``trainables.data.variants``). Unset, each trial takes its training file's
    minority class (label 1 when the file is exactly balanced), as the paper's QQP
    duplicates (37%): on MRPC label 0, "not paraphrase" (32.6%). The trial reports
    the label it scored (``trainables.data.classes``).
    """

    kind: TaskKind | None = None
    dataset: list[DatasetRef]  # a single one is read as a one-element list
    variant: list[Variant] = Field(default_factory=lambda: list(VARIANTS[:1]))  # original
    positive_label: Literal[0, 1] | None = None  # binary sets only; unset: the minority
    # NER as a token tagger, or as reading comprehension (search_spaces.mrc_ner); ``mrc``
    # holds the latter's settings (unset: their defaults).
    formulation: Formulation = "tagger"
    mrc: MrcNerSpec | None = None

    @field_validator("dataset", "variant", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str | dict) else value

    @field_validator("dataset")
    @classmethod
    def _known_unique(cls, datasets: list[DatasetRef]) -> list[DatasetRef]:
        if not datasets:
            raise rule_error("at least one data set is needed")
        for index, dataset in enumerate(datasets):
            check_known(dataset, f"[{index}]")
        labels = [dataset_label(dataset) for dataset in datasets]
        if len(set(labels)) < len(labels):
            raise rule_error(f"data sets repeat (give local ones distinct names): {labels}")
        return datasets

    @field_validator("variant")
    @classmethod
    def _variants_unique(cls, variants: list[Variant]) -> list[Variant]:
        if not variants or len(set(variants)) < len(variants):
            raise rule_error(f"variants must be one or more, none repeated: {variants}")
        return variants

    @model_validator(mode="after")
    def _matches_catalogue(self) -> TaskSpec:
        for dataset in self.dataset:
            if not isinstance(dataset, str):
                if self.kind is None:
                    raise rule_error(
                        "a local or hub data set needs task.kind (pi, ner, pos or mrc)", "kind"
                    )
                continue
            kind = DATASETS[dataset].kind
            if self.kind is not None and kind != self.kind:
                raise rule_error(f"{dataset} is a {kind!r} data set, not {self.kind!r}", "kind")
        non_binary = [dataset_label(d) for d in self.dataset if not is_binary(d, self.kind)]
        if non_binary and self.positive_label is not None:
            raise rule_error(
                "positive_label applies to binary (pi) data sets only; "
                f"{', '.join(non_binary)} score every class",
                "positive_label",
            )
        if self.formulation == "mrc" and any(self.kind_of(d) != "ner" for d in self.dataset):
            raise rule_error("formulation 'mrc' applies to ner data sets only", "formulation")
        if self.mrc is not None and self.formulation != "mrc":
            raise rule_error("mrc settings need formulation: mrc", "mrc")
        if non_binary and self.variant != ["original"]:
            raise rule_error(
                "the Table 8 variants apply to binary data sets only (pi: mrpc, qqp or a local "
                f"pairs set); {', '.join(non_binary)} take 'original'",
                "variant",
            )
        return self

    def kind_of(self, dataset: DatasetRef) -> TaskKind:
        """The task kind of one of the spec's data sets."""
        if isinstance(dataset, str):
            return DATASETS[dataset].kind
        assert self.kind is not None  # checked when the spec was read
        return self.kind


class SearchSpec(Section):
    """How the search space is explored.

    ``grid`` runs every grid point once per seed (``num_samples`` stays unset or 1).
    ``random`` and ``tpe`` (Optuna) draw ``num_samples`` configurations, each run once
    per seed. Every metric is higher-is-better, so ``mode`` is always ``max``.
    """

    algorithm: Literal["grid", "random", "tpe"] = "grid"
    num_samples: Int | None = Field(None, ge=1, le=100_000)
    metric: Metric = "eval_f1"
    mode: Literal["max"] = "max"
    # random/tpe: makes the sampled configurations repeatable (numpy's seeding range)
    sampler_seed: Int | None = Field(None, ge=0, le=2**32 - 1)

    @field_validator("metric", mode="before")
    @classmethod
    def _not_training_loss(cls, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("train"):
            raise rule_error(
                f"{value!r} cannot rank trials: the training loss differs between losses; "
                "use an eval metric",
            )
        return value


class SchedulerSpec(Section):
    """Early stopping of trials; times are evaluations (Ray's ``training_iteration``).

    ``asha``, ``halving`` and ``median`` compare the search metric (an eval metric),
    never the training loss. ``halving`` is synchronous successive halving
    (``trainables.driver.halving``): at ``grace_period × reduction_factor^k`` evaluations
    every trial waits for the others, then the best ``1/reduction_factor`` go on, so a
    bad setting stops after its first evaluations whatever order the trials run in.
    ``per_loss`` compares a trial only with trials of the same loss name, since the
    losses learn at different speeds. ``reduction_factor`` is ASHA's and halving's.
    """

    kind: Literal["fifo", "asha", "halving", "median"] = "fifo"
    grace_period: Int = Field(1, ge=1, le=10_000)  # evaluations before a trial may be stopped
    reduction_factor: Float = Field(3.0, gt=1, le=100)
    per_loss: Annotated[bool, Field(strict=True)] = True


class ResourcesSpec(Section):
    """What one trial reserves on the Ray cluster, and how many run at once."""

    cpus_per_trial: Float = Field(1.0, ge=0.01, le=256)
    # At most one: a trial trains on one device (no data-parallel trials); fractions
    # let several trials share a GPU.
    gpus_per_trial: Float = Field(0.0, ge=0, le=8)
    max_concurrent_trials: Int | None = Field(None, ge=1, le=10_000)  # None: as many as fit

    @field_validator("cpus_per_trial", "gpus_per_trial")
    @classmethod
    def _whole_above_one(cls, value: float) -> float:
        # Ray accepts fractions of one unit only; above one it needs whole units.
        if value > 1 and not float(value).is_integer():
            raise rule_error(f"above 1 a resource must be a whole number, got {value}")
        return value

    @field_validator("gpus_per_trial")
    @classmethod
    def _one_device(cls, value: float) -> float:
        if value > 1:
            raise rule_error(
                f"a trial trains on one GPU (multi-GPU data-parallel trials are not "
                f"supported), got {value:g}: use 1, or a fraction to share one GPU between "
                "trials, and run more trials at once instead"
            )
        return value
