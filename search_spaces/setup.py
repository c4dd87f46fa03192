"""The setup a trial's number comes from, derived from its resolved config: every number
travels with its setup (docs/sweeps.md, "The setup a number comes from").

``trial_setup`` is the one builder: the driver's report rows, the MLflow params of a
trial's run (``setup.<field>``), the service's rows read back from them and the
published CSVs all carry these fields as ``setup_<field>`` columns, so that a merged
table can split a cell whose trials differ in any of them (``reports.cells``) and every
table can say in one block what its trials ran (``reports.notes.setup_lines``).

A field is text; a field that does not apply to a trial (``doc_stride`` of a tagger)
is absent. Two fields come from the trial itself rather than its config: what it
trained in (``precision``) and whether its tokenizer lowercases
(``tokenizer_lowercase``, a metric the trainable reports).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from search_spaces.dataset_refs import LocalDataset, dataset_label
from search_spaces.datasets import DATASETS
from search_spaces.losses import validate_loss_spec
from search_spaces.sections import TrainingSpec, TrialConfig

# The seed of the draw that caps a split (``training.max_train_examples``, ...): the
# trainable samples with it (``trainables.trial_data``), the setup says so.
CAP_SEED = 0
PREFIX = "setup_"  # a setup field's column in a trial row
PARAM_PREFIX = "setup."  # ... and its MLflow param
LOWERCASE_METRIC = "tokenizer_lowercase"  # 1.0 when the trial's tokenizer lowercases

# Each field's label in a table's setup block, in the block's order.
FIELD_LABELS: dict[str, str] = {
    "kind": "task",
    "formulation": "formulation",
    "model": "model",
    "tokenizer": "tokenizer",
    "train_data": "training data",
    "eval_data": "evaluated on",
    "test_data": "tested on",
    "loss_positions": "loss over",
    "loss_scope": "dice-family scope",
    "loss_classes": "dice-family class average",
    "loss_square": "dice-family denominator",
    "loss_ohem": "OHEM",
    "mrc_heads": "MRC-NER heads",
    "mrc_labels": "MRC-NER targets",
    "mrc_decoding": "MRC-NER decoding",
    "epochs": "epochs",
    "max_steps": "max steps",
    "learning_rate": "learning rate",
    "warmup_ratio": "warm-up",
    "decay": "decay",
    "batch_size": "batch",
    "grad_accumulation": "gradient accumulation",
    "max_seq_length": "max length",
    "doc_stride": "doc stride",
    "early_stopping": "early stopping",
    "evaluations": "evaluations",
    "checkpoint": "checkpoint reported",
    "adam_epsilon": "AdamW epsilon",
    "head_init": "head initialisation",
    "weight_decay": "weight decay",
    "grad_clip": "gradient clip",
    "precision": "precision",
    "seeds": "seeds",
    "tune_grid": "tuned over",
}
OVERLAP_LOSSES = ("dice", "tversky", "dsc")
UNITS = {"pi": "pair", "ner": "token", "pos": "token"}  # what one softmax scores
FORMULATIONS = {"pi": "pair classifier", "pos": "tagger", "mrc": "span extraction"}


def trial_setup(config: Mapping[str, Any]) -> dict[str, str]:
    """The setup fields of one trial's config (a ``TrialConfig`` as Tune hands it),
    keyed by field name (``FIELD_LABELS``), without the ``setup_`` prefix. The settings
    stage 1 tuned are left out (a row carries them as ``tuned_<name>``); their grid is
    ``tune_grid``.

    Raises:
        pydantic.ValidationError: ``config`` is not a trial config.
    """
    trial = TrialConfig.model_validate(dict(config))
    kind = trial.kind or DATASETS[str(trial.dataset)].kind
    setup = {
        "kind": kind,
        "formulation": trial.formulation if kind == "ner" else FORMULATIONS[kind],
        "model": model_label(trial.model),
        **_data(trial),
        **_loss(trial, kind),
        **_schedule(trial, kind),
    }
    if trial.seeds_until is not None:  # a fixed list's seeds are the rows' own
        setup["seeds"] = trial.seeds_until.describe()
    if trial.tune_grid:
        setup["tune_grid"] = "; ".join(
            f"{name} {{{', '.join(_shown(v) for v in values)}}}"
            for name, values in sorted(trial.tune_grid.items())
        )
    return setup


def parse_tune_grid(text: str) -> dict[str, list[float]]:
    """``tune_grid``'s text back as values: ``"learning_rate {0.0001, 0.0003}"`` ->
    ``{"learning_rate": [0.0001, 0.0003]}``."""
    grids = {}
    for part in filter(None, (piece.strip() for piece in text.split(";"))):
        name, _, values = part.partition(" ")
        grids[name] = [float(value) for value in values.strip("{}").split(",") if value.strip()]
    return grids


def _shown(value: Any) -> str:
    """A number as tables show it (``1e-04`` as ``0.0001``, ``0.1``)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def model_label(model: str) -> str:
    """A model as a table names it: a hub id as it is, a folder by its own name
    (``/tmp/models/minilm-l6`` -> ``minilm-l6``), so that shards run from different
    folders of one model share a label."""
    path = model.rstrip("/")
    looks_local = path.startswith((".", "/", "~")) or path.count("/") > 1
    return path.rsplit("/", 1)[-1] if looks_local else path


def _data(trial: TrialConfig) -> dict[str, str]:
    """The training data and what the trial is scored on: split files, caps and how
    they were drawn. A stage-1 trial's tuning split is held out of the whole training
    file first; its training data and its tuning split are then capped."""
    files = _split_files(trial)
    drawn = "stratified by label" if trial.kind == "pi" or _is_pairs(trial) else "at random"
    training = trial.training

    def capped(name: str, limit: int | None, whole: str = "whole file") -> str:
        if limit is None:
            return f"{name}, {whole}"
        return f"{name}, {limit} drawn {drawn} (seed {CAP_SEED})"

    train = f"{dataset_label(trial.dataset)} {files['train']}"
    if trial.stage == "tune":
        held = f"{_shown(trial.holdout)} of it, drawn with seed {trial.holdout_seed}"
        return {
            "train_data": capped(
                f"{train} less the tuning split ({held})", training.max_train_examples
            ),
            "eval_data": capped(f"the tuning split ({held})", training.max_eval_examples, "all"),
        }
    label = dataset_label(trial.dataset)
    data = {
        "train_data": capped(train, training.max_train_examples),
        "eval_data": capped(f"{label} {files['eval']}", training.max_eval_examples),
    }
    if training.score_test:
        test = files.get("test", "test split")
        data["test_data"] = capped(f"{label} {test}", training.max_eval_examples)
    return data


def _is_pairs(trial: TrialConfig) -> bool:
    return isinstance(trial.dataset, str) and DATASETS[trial.dataset].binary


def _split_files(trial: TrialConfig) -> dict[str, str]:
    """The file each split is read from, as the data set names it."""
    dataset = trial.dataset
    if isinstance(dataset, LocalDataset):
        return {"train": "train file", "eval": "dev file", "test": "test file"}
    if not isinstance(dataset, str):
        return {"train": "train split", "eval": "validation split", "test": "test split"}
    info = DATASETS[dataset]
    if info.split_by_article_from:
        source = info.split_by_article_from.rsplit("/", 1)[-1]
        return {"train": f"{source} (train articles)", "eval": f"{source} (eval articles)"}
    return {split: path.rsplit("/", 1)[-1] for split, path in info.files.items()}


def _loss(trial: TrialConfig, kind: str) -> dict[str, str]:
    """Where the loss is computed and, for the dice family, its recipe with every
    default resolved."""
    loss = validate_loss_spec(trial.loss.model_dump(exclude_none=True)).model_dump()
    mrc = trial.mrc.model_dump() if trial.mrc is not None else None
    if trial.formulation == "mrc":
        official = (mrc or {}).get("labels", "words") == "official"
        positions = "the context sub-tokens and the last [SEP]" if official else "the context words"
        if loss["name"] in OVERLAP_LOSSES and (mrc or {}).get("dice_positions", "context") == "all":
            positions = "every position of the window"
        setup = {"loss_positions": f"start and end, binary at {positions}"}
        if official:
            setup["mrc_labels"] = "official: an entity ends at its last word's last sub-token"
        if (mrc or {}).get("decoding", "strict") == "official":
            setup["mrc_decoding"] = "official (BMES: a start without an end is one position)"
        heads = [f"answerable {(mrc or {}).get('answerable', 'off')}"]
        heads.append("span head" if (mrc or {}).get("span_head", True) else "no span head")
        setup["mrc_heads"] = ", ".join(heads)
    else:
        setup = {"loss_positions": _positions(kind)}
    if loss["name"] not in OVERLAP_LOSSES:
        return setup
    unit = "position" if trial.formulation == "mrc" else UNITS.get(kind, "position")
    scope = {
        "example": f"a ratio per {unit}, averaged over the {unit}s",
        "set": f"one ratio over every {unit} of the batch",
    }[loss["scope"]]
    classes = str(loss["classes"])
    if classes == "foreground":
        classes = f"foreground (all but {loss.get('background') or 'O'})"
    ohem = loss.get("ohem_ratio", 0.0)
    return {
        **setup,
        "loss_scope": scope,
        "loss_classes": classes,
        "loss_square": "squared" if loss["square"] else "linear",
        "loss_ohem": _ohem(ohem, loss.get("ohem_rule", "hardest")),
    }


def _ohem(ratio: float, rule: str) -> str:
    if not ratio:
        return "off"
    if rule == "official":
        return (
            f"the official binary rule (no negative once 2 or more are kept), ratio {_shown(ratio)}"
        )
    return f"hardest negatives, ratio {_shown(ratio)}"


def _positions(kind: str) -> str:
    return {
        "pi": "the pair's class (softmax)",
        "mrc": "start and end (softmax over positions)",
    }.get(kind, "every word's first sub-token (softmax over tags)")


def _schedule(trial: TrialConfig, kind: str) -> dict[str, str]:
    """The optimisation settings, the tuned ones left out."""
    training = trial.training
    tuned = set(trial.tuned)
    plain = {
        "epochs": training.epochs,
        "learning_rate": training.learning_rate,
        "warmup_ratio": training.warmup_ratio,
        "batch_size": training.batch_size,
        "max_seq_length": training.max_seq_length,
        "weight_decay": training.weight_decay,
    }
    setup = {name: _shown(value) for name, value in plain.items() if name not in tuned}
    setup["decay"] = training.decay.text()
    if training.max_steps is not None:
        setup["max_steps"] = str(training.max_steps)
        setup.pop("epochs", None)
    if kind == "mrc":
        setup["doc_stride"] = str(training.doc_stride)
    setup["grad_clip"] = "off" if training.grad_clip is None else _shown(training.grad_clip)
    patience = training.early_stopping_patience
    setup["early_stopping"] = "off" if patience is None else f"patience {patience}"
    setup["evaluations"] = _evaluations(training)
    setup["precision"] = training.precision
    return {**setup, **_added_settings(trial)}


def _evaluations(training: TrainingSpec) -> str:
    if training.evaluations_per_epoch is not None:
        return f"{training.evaluations_per_epoch} an epoch"
    every = training.eval_every_steps
    return "once an epoch" if every is None else f"every {every} steps"


def _added_settings(trial: TrialConfig) -> dict[str, str]:
    """The settings added since the first published results, each where it differs
    from its default (what every earlier trial ran): a published trial and a new one of
    the same setup share a cell."""
    training, defaults = trial.training, TrainingSpec()
    setup = {}
    if training.grad_accumulation != defaults.grad_accumulation:
        steps = training.batch_size * training.grad_accumulation
        setup["grad_accumulation"] = f"{training.grad_accumulation} ({steps} per step)"
    if training.adam_epsilon != defaults.adam_epsilon:
        setup["adam_epsilon"] = _shown(training.adam_epsilon)
    if training.checkpoint != defaults.checkpoint:
        setup["checkpoint"] = f"the best evaluation by {trial.metric}"
    if training.head_init != defaults.head_init:
        setup["head_init"] = "the encoder's _init_weights"
    return setup


def setup_columns(setup: Mapping[str, str]) -> dict[str, str]:
    """``trial_setup``'s fields as a row's columns (``setup_<field>``)."""
    return {f"{PREFIX}{name}": value for name, value in setup.items()}


def setup_params(setup: Mapping[str, str]) -> dict[str, str]:
    """``trial_setup``'s fields as a trial run's MLflow params (``setup.<field>``)."""
    return {f"{PARAM_PREFIX}{name}": value for name, value in setup.items()}


def columns_from_params(params: Mapping[str, str]) -> dict[str, str]:
    """A trial run's ``setup.<field>`` params back as a row's columns."""
    return {
        f"{PREFIX}{key.removeprefix(PARAM_PREFIX)}": value
        for key, value in params.items()
        if key.startswith(PARAM_PREFIX)
    }


def reported_columns(metrics: Mapping[str, Any]) -> dict[str, str]:
    """The setup fields a trial reports of itself: its tokenizer's casing
    (``setup_tokenizer``: ``lowercases (uncased)`` or ``keeps case``) and the precision
    it trained in, which replaces the spec's (``auto`` resolved)."""
    columns = {}
    lowercase = metrics.get(LOWERCASE_METRIC)
    if isinstance(lowercase, int | float) and not math.isnan(lowercase):
        columns[f"{PREFIX}tokenizer"] = "lowercases (uncased)" if lowercase else "keeps case"
    if isinstance(metrics.get("precision"), str):
        columns[f"{PREFIX}precision"] = str(metrics["precision"])
    return columns
