"""The fidelity tables of the presets that claim an official script: the ``en_conll03``
ones (the CoNLL-2003 scripts, NER as reading comprehension) and the ``squad_v1`` ones
(the SQuAD v1.1 scripts) of ShannonAI/dice_loss_for_NLP. Each setting, its value there
and the file that sets it, the preset's value, and ``same`` or the reason they differ.

    python scripts/preset_fidelity.py            # print the table
    python scripts/preset_fidelity.py --write    # put it into docs/sweeps.md

The official values are written here once, in this project's terms; the presets'
values are read from the resolved presets. A setting whose two values differ without
a reason (``Family.reasons``) is an undeclared departure: ``departures`` lists them,
and ``--write`` refuses to write a table holding one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from search_spaces.datasets import get_dataset
from search_spaces.mrc_ner import MrcNerSpec
from search_spaces.reports.tables import loss_label
from search_spaces.resolve import resolve_spec
from search_spaces.spec import SweepSpec, expand_losses
from trainables.tasks.span import MAX_ANSWER_TOKENS, N_BEST

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "sweeps.md"
BEGIN = "<!-- fidelity table: scripts/preset_fidelity.py -->"
END = "<!-- end of the fidelity table -->"
# Each en_conll03 preset and the official script it claims.
NER_PRESETS = {
    "en_conll03": "scripts/ner_enconll03/bert_dice.sh",
    "en_conll03-focal": "scripts/ner_enconll03/bert_focal.sh",
    "en_conll03-bce": "scripts/ner_enconll03/bert_dice.sh, LOSS_TYPE bce",
}
DICE, FOCAL, BCE = NER_PRESETS


@dataclass(frozen=True)
class Setting:
    """One row: its name, where the official code sets it, its official value per
    preset (one text for all three, or one each) and how to read a preset's value
    (``None``: the training setting's reader, ``TRAINING_READS``)."""

    name: str
    source: str
    official: str | dict[str, str]
    read: Callable[[SweepSpec], str] | None = None

    def official_value(self, preset: str) -> str:
        return self.official if isinstance(self.official, str) else self.official[preset]

    def value(self, spec: SweepSpec) -> str:
        """``spec``'s value of this setting, as the table shows it."""
        return (self.read or TRAINING_READS[self.name])(spec)


def _mrc(spec: SweepSpec) -> MrcNerSpec:
    assert spec.task.mrc is not None  # every en_conll03 preset is MRC
    return spec.task.mrc


def _loss_positions(spec: SweepSpec) -> str:
    mrc = spec.task.mrc
    assert mrc is not None
    if expand_losses(spec)[0]["name"] in ("dice", "dsc") and mrc.dice_positions == "all":
        return "every position of the batch"
    if mrc.labels == "official":
        return "the context sub-tokens and the last [SEP]"
    return "the context words' first sub-tokens"


def _checkpoint(spec: SweepSpec) -> str:
    if spec.training.checkpoint == "last":
        return "the last"
    return f"the best on dev by {spec.search.metric}"


# How a preset's value of each training setting reads, the same for every family.
TRAINING_READS: dict[str, Callable[[SweepSpec], str]] = {
    "head initialisation": lambda s: s.training.head_init,
    "epochs": lambda s: str(s.training.epochs),
    "learning rate": lambda s: f"{s.training.learning_rate:g}",
    "batch": lambda s: str(s.training.batch_size),
    "gradient accumulation": lambda s: str(s.training.grad_accumulation),
    "max length": lambda s: str(s.training.max_seq_length),
    "warm-up": lambda s: f"{s.training.warmup_ratio:g}",
    "decay": lambda s: s.training.decay.text(),
    "weight decay": lambda s: f"{s.training.weight_decay:g}",
    "AdamW epsilon": lambda s: f"{s.training.adam_epsilon:g}",
    "gradient clip": lambda s: f"{s.training.grad_clip:g}",
    "evaluations an epoch": lambda s: str(s.training.evaluations_per_epoch or 1),
    "checkpoint reported": _checkpoint,
    "test split": lambda s: "scored" if s.training.score_test else "not scored",
    "batch order": lambda s: (
        "grouped by length" if s.training.group_by_length else "a plain shuffle"
    ),
    "precision": lambda s: s.training.precision,
    "seed": lambda s: ",".join(map(str, s.seeds)),
    # Evaluation runs at the training batch.
    "evaluation batch": lambda s: str(s.training.batch_size),
}


SPAN_F1 = "the best on dev by eval_span_f1"
MASK = "the context sub-tokens and the last [SEP]"
NER_SETTINGS = [
    Setting("model", "BERT_DIR", "bert-large-cased", lambda s: s.model),
    Setting(
        "loss",
        "LOSS_TYPE, DICE_*, FOCAL_GAMMA; loss/dice_loss.py, loss/focal_loss.py",
        {
            DICE: "dsc(alpha=0.01,scope=set,smooth=1,square=true)",
            FOCAL: "focal(gamma=3,prob_offset=0.0001)",
            BCE: "ce",
        },
        lambda s: loss_label(expand_losses(s)[0]),
    ),
    Setting(
        "start/end loss positions",
        "tasks/mrc_ner/train.py compute_loss",
        {DICE: "every position of the batch", FOCAL: MASK, BCE: MASK},
        _loss_positions,
    ),
    Setting(
        "end target",
        "datasets/mrc_ner_dataset.py",
        "the last sub-token of the entity's last word",
        lambda s: {
            "official": "the last sub-token of the entity's last word",
            "words": "the first sub-token of the entity's last word",
        }[_mrc(s).labels],
    ),
    Setting(
        "repeated entity strings",
        "datasets/mrc_ner_dataset.py _improve_answer_span",
        "at the string's first occurrence",
        lambda s: "each at its own position",
    ),
    Setting(
        "entities ending a sentence",
        "tasks/mrc_ner/data_preprocess/label_utils.py get_span_labels",
        "dropped",
        lambda s: "kept",
    ),
    Setting(
        "decoding",
        "metrics/functional/ner_span_f1.py extract_flat_spans",
        "official",
        lambda s: _mrc(s).decoding,
    ),
    Setting(
        "queries",
        "tasks/mrc_ner/data_preprocess/query_map.py",
        "en_conll03 default",
        lambda s: "en_conll03 default" if _official_queries(s) else "the project's",
    ),
    Setting(
        "span head",
        "--construct_entity_span start_and_end",
        "none",
        lambda s: "span-match head" if _mrc(s).span_head else "none",
    ),
    Setting("span weight", "W_SPAN", "0.3", lambda s: f"{_mrc(s).span_weight:g}"),
    Setting(
        "answerability head",
        "--pred_answerable",
        "train_infer",
        lambda s: _mrc(s).answerable,
    ),
    Setting(
        "answerability weight",
        "--answerable_task_ratio",
        {DICE: "0.4", FOCAL: "0.2", BCE: "0.4"},
        lambda s: f"{_mrc(s).answerable_weight:g}",
    ),
    Setting("dropout", "BERT_DROPOUT", "0.2", lambda s: f"{_mrc(s).dropout:g}"),
    Setting("head initialisation", "models/bert_query_ner.py init_weights()", "encoder"),
    Setting("epochs", "MAX_EPOCH", "10"),
    Setting("learning rate", "LR", {DICE: "3e-05", FOCAL: "2e-05", BCE: "3e-05"}),
    Setting("batch", "TRAIN_BATCH_SIZE", {DICE: "36", FOCAL: "18", BCE: "36"}),
    Setting("gradient accumulation", "ACC_GRAD", {DICE: "8", FOCAL: "4", BCE: "8"}),
    Setting("max length", "MAX_LENGTH", "256"),
    Setting("warm-up", "WARMUP_PROPORTION", {DICE: "0.01", FOCAL: "0.06", BCE: "0.01"}),
    Setting(
        "decay",
        "LR_SCHEDULE polydecay (lr_end = lr / 4)",
        "polynomial (power 1) to 0.25 × the peak rate",
    ),
    Setting("weight decay", "WEIGHT_DECAY", {DICE: "0.01", FOCAL: "0.002", BCE: "0.01"}),
    Setting("AdamW epsilon", "utils/get_parser.py --adam_epsilon", "1e-06"),
    Setting("gradient clip", "GRAD_CLIP", "1"),
    Setting("evaluations an epoch", "VAL_CHECK_INTERVAL 0.25", "4"),
    Setting("checkpoint reported", "ModelCheckpoint(monitor=val_f1)", SPAN_F1),
    Setting("test split", "trainer.test with the best checkpoint", "scored"),
    Setting("batch order", "RandomSampler", "a plain shuffle"),
    Setting("precision", "PRECISION 16", "fp16"),
    Setting("seed", "utils/random_seed.py", "2333"),
    Setting("evaluation batch", "EVAL_BATCH_SIZE", "1"),
]

# Why an en_conll03 preset's value is not the script's, per setting.
NER_REASONS: dict[str, str | dict[str, str]] = {
    "model": "BERT-base cased, as the paper-scale studies run it; "
    "`model: bert-large-cased` is the script's",
    "repeated entity strings": "this project's rule: a target is where its entity is",
    "entities ending a sentence": "this project's rule: the official loader loses them "
    "(718 of CoNLL-2003's 23,499 training entities)",
    "evaluation batch": "the training batch; padded positions are masked, so only float "
    "rounding differs",
}

# The official en_conll03 queries (tasks/mrc_ner/data_preprocess/query_map.py, "default").
OFFICIAL_QUERIES = {
    "ORG": "organization entities are limited to named corporate, governmental, or other "
    "organizational entities.",
    "PER": "person entities are named persons or family.",
    "LOC": "location entities are the name of politically or geographically defined locations "
    "such as cities, provinces, countries, international regions, bodies of water, mountains, "
    "etc.",
    "MISC": "examples of miscellaneous entities include events, nationalities, products and "
    "works of art.",
}


def _official_queries(spec: SweepSpec) -> bool:
    return _mrc(spec).queries == OFFICIAL_QUERIES


@dataclass(frozen=True)
class Family:
    """The presets that claim one task's official scripts: each preset's script, the
    settings compared, and why a preset's value differs from its script's, per setting
    (one reason for every preset of the family, or one for each preset it concerns)."""

    presets: dict[str, str]
    settings: list[Setting]
    reasons: dict[str, str | dict[str, str]]

    def reason(self, setting: str, preset: str) -> str:
        """The declared reason of ``preset``'s ``setting``, or ``""``."""
        given = self.reasons.get(setting, "")
        return given if isinstance(given, str) else given.get(preset, "")


EN_CONLL03 = Family(NER_PRESETS, NER_SETTINGS, NER_REASONS)


# Each squad_v1 preset and the official script it claims.
SQUAD_PRESETS = {
    "squad_v1": "scripts/mrc_squad1/bert_large_dice.sh",
    "squad_v1-ce": "scripts/mrc_squad1/bert_large_ce.sh",
    "squad_v1-focal": "scripts/mrc_squad1/bert_large_focal.sh",
}
SQ_DICE, SQ_CE, SQ_FOCAL = SQUAD_PRESETS
CONTEXT = "[CLS] and the context"
OFFICIAL_MASK = "[CLS], the context and its closing [SEP]"
LENGTHS = "scripts/squad_lengths.py"


def _squad_data(spec: SweepSpec) -> str:
    info = get_dataset(spec.task.dataset[0])
    if info.split_by_article_from:
        return "SQuAD v1.1 dev, split by article into train and eval"
    return "SQuAD v1.1 train, scored on dev"


def _span_positions(spec: SweepSpec) -> str:
    if expand_losses(spec)[0]["name"] == "ce":
        return f"a softmax over {CONTEXT}"
    return CONTEXT


SQUAD_SETTINGS = [
    Setting(
        "model",
        "BERT_DIR, --do_lower_case",
        {SQ_DICE: "bert-large-uncased", SQ_CE: "bert-large-uncased", SQ_FOCAL: "bert-base-uncased"},
        lambda s: s.model,
    ),
    Setting(
        "data",
        "DATA_DIR: train-v1.1.json, dev-v1.1.json",
        "SQuAD v1.1 train, scored on dev",
        _squad_data,
    ),
    Setting(
        "loss",
        "LOSS_TYPE, DICE_*, FOCAL_GAMMA; loss/dice_loss.py, loss/focal_loss.py",
        {
            SQ_DICE: "dsc(alpha=0.01,ohem_ratio=0.1,ohem_rule=official,scope=set,smooth=1,"
            "square=true)",
            SQ_CE: "ce",
            SQ_FOCAL: "focal(gamma=2)",
        },
        lambda s: loss_label(expand_losses(s)[0]),
    ),
    Setting(
        "start/end loss positions",
        "tasks/squad/train.py compute_loss; datasets/squad_dataset.py label_mask",
        {
            SQ_DICE: OFFICIAL_MASK,
            SQ_CE: "a softmax over every position of the window",
            SQ_FOCAL: OFFICIAL_MASK,
        },
        _span_positions,
    ),
    Setting(
        "decoding",
        "metrics/functional/squad/postprocess_predication.py",
        {
            SQ_DICE: "the best span by summed sigmoid probabilities",
            SQ_CE: "the best span by summed softmax probabilities",
            SQ_FOCAL: "the best span by summed softmax probabilities",
        },
        lambda s: "the best span by summed logits",
    ),
    Setting(
        "span candidates",
        "--n_best_size, --max_answer_length",
        "20 starts and ends, answers up to 30 tokens",
        lambda s: f"{N_BEST} starts and ends, answers up to {MAX_ANSWER_TOKENS} tokens",
    ),
    Setting(
        "question length",
        "MAX_QUERY_LEN",
        "64 tokens, longer questions cut",
        lambda s: "the whole question",
    ),
    Setting("max length", "MAX_SEQ_LEN", "384"),
    Setting(
        "doc stride",
        "DOC_STRIDE (transformers' squad_convert_examples_to_features)",
        "128 tokens between two windows' starts",
        lambda s: f"{s.training.doc_stride} tokens two windows share",
    ),
    Setting(
        "dropout",
        "BERT_DROPOUT; models/bert_qa.py",
        "0.1 in the encoder and before the head",
        lambda s: "0.1 in the encoder (the model's own), none before the head",
    ),
    Setting("head initialisation", "models/bert_qa.py init_weights()", "encoder"),
    Setting(
        "optimiser",
        "OPTIMIZER (tasks/squad/train.py configure_optimizers)",
        {
            SQ_DICE: "AdamW (torch)",
            SQ_CE: "AdamW (transformers)",
            SQ_FOCAL: "AdamW (transformers)",
        },
        lambda s: "AdamW (torch)",
    ),
    Setting("epochs", "MAX_EPOCH", {SQ_DICE: "5", SQ_CE: "2", SQ_FOCAL: "2"}),
    Setting("learning rate", "LR", {SQ_DICE: "2e-05", SQ_CE: "3e-05", SQ_FOCAL: "3e-05"}),
    Setting(
        "batch",
        "TRAIN_BATCH_SIZE, --gpus",
        {SQ_DICE: "2", SQ_CE: "4", SQ_FOCAL: "4 on each of 3 GPUs"},
    ),
    Setting("gradient accumulation", "ACC_GRAD", {SQ_DICE: "20", SQ_CE: "6", SQ_FOCAL: "6"}),
    Setting("warm-up", "WARMUP_PROPORTION", {SQ_DICE: "0.06", SQ_CE: "0.002", SQ_FOCAL: "0.002"}),
    Setting(
        "decay",
        "LR_SCHEDULE",
        {
            SQ_DICE: "polynomial (power 1) to 0.25 × the peak rate",
            SQ_CE: "linear to 0",
            SQ_FOCAL: "one cycle: up from lr / 25, linearly down to lr / 25e4",
        },
    ),
    Setting("weight decay", "WEIGHT_DECAY", "0.002"),
    Setting("AdamW epsilon", "utils/get_parser.py --adam_epsilon", "1e-06"),
    Setting("gradient clip", "GRAD_CLIP", "1"),
    Setting("evaluations an epoch", "VAL_CHECK_INTERVAL 0.125", "8"),
    Setting(
        "checkpoint reported",
        "validation_epoch_end: predictions_<epoch>_<step>.json",
        "one evaluation's dev predictions, chosen among all",
    ),
    Setting("test split", "test_dataloader: dev again", "not scored"),
    Setting("batch order", "RandomSampler", "a plain shuffle"),
    Setting("precision", "PRECISION 16", "fp16"),
    Setting("seed", "set_random_seed(0); utils/get_parser.py --seed", "0, the shuffle 2333"),
    Setting("evaluation batch", "utils/get_parser.py --eval_batch_size", "1"),
]

# Why a squad_v1 preset's value is not the script's, per setting.
SQUAD_REASONS: dict[str, str | dict[str, str]] = {
    "model": {
        SQ_FOCAL: "the script's BERT_DIR is the base model under FILE_NAME focal_large; the "
        "paper's focal row is BERT-large's"
    },
    "data": "only dev-v1.1.json is shipped: `squad_v1` splits it by article, no article in both",
    "start/end loss positions": {
        SQ_DICE: "the closing [SEP] is never an answer: one negative position fewer a window",
        SQ_CE: "the query, [SEP] and padding are never an answer: the softmax is over those "
        "that can be",
        SQ_FOCAL: "the closing [SEP] is never an answer: one negative position fewer a window",
    },
    "decoding": "start and end logits summed for every loss, as BERT's own SQuAD code ranks spans",
    "question length": f"no SQuAD v1.1 dev question is longer than 64 tokens ({LENGTHS})",
    "doc stride": "a fast tokenizer's stride, as Hugging Face's run_qa.py reads doc_stride; 183 "
    f"of SQuAD v1.1 dev's 10,570 questions need a second window at 384 tokens ({LENGTHS})",
    "dropout": "Hugging Face's BertForQuestionAnswering head, which has no dropout of its own",
    "optimiser": {
        SQ_CE: "the same update; transformers' AdamW decays the weights after Adam's step, "
        "torch's before it",
        SQ_FOCAL: "the same update; transformers' AdamW decays the weights after Adam's step, "
        "torch's before it",
    },
    "batch": {SQ_FOCAL: "three GPUs' batches accumulated on one (gradient accumulation)"},
    "gradient accumulation": {
        SQ_FOCAL: "6 on each of 3 GPUs: the same 72 windows an optimiser step on one"
    },
    "decay": {
        SQ_FOCAL: "one-cycle is not offered: warm-up starts at 0, not lr / 25, over 0.2% of the "
        "steps, and Adam's β1 stays 0.9 (OneCycleLR cycles it between 0.95 and 0.85)"
    },
    "checkpoint reported": "the best by eval F1 is kept and reported; the script writes every "
    "evaluation's predictions and its ModelCheckpoint keeps the three lowest val_loss",
    "seed": "one seed draws the weights' and the shuffle's randomness",
    "evaluation batch": "the training batch; padded positions are masked, so only float "
    "rounding differs",
}

SQUAD_V1 = Family(SQUAD_PRESETS, SQUAD_SETTINGS, SQUAD_REASONS)
FAMILIES = [EN_CONLL03, SQUAD_V1]
# Every preset that claims an official script, and the script.
PRESETS = {preset: script for family in FAMILIES for preset, script in family.presets.items()}


@dataclass(frozen=True)
class Row:
    """One setting of one preset in the table."""

    setting: str
    source: str
    official: str
    preset: str
    verdict: str  # "same", a reason, or "" for an undeclared departure


def family_of(preset: str) -> Family:
    """The family ``preset`` (a key of ``PRESETS``) belongs to."""
    return next(family for family in FAMILIES if preset in family.presets)


def rows(preset: str) -> list[Row]:
    """The table's rows for ``preset`` (a key of ``PRESETS``)."""
    family = family_of(preset)
    spec = resolve_spec({"extends": preset})
    found = []
    for setting in family.settings:
        official, ours = setting.official_value(preset), setting.value(spec)
        verdict = "same" if official == ours else family.reason(setting.name, preset)
        found.append(Row(setting.name, setting.source, official, ours, verdict))
    return found


def departures() -> list[str]:
    """``preset: setting`` for every value that differs from the script's without a
    declared reason (none, for a table that may be published)."""
    return [
        f"{preset}: {row.setting}" for preset in PRESETS for row in rows(preset) if not row.verdict
    ]


def table() -> str:
    """The fidelity tables of every preset of ``PRESETS``, in Markdown."""
    lines = [BEGIN]
    for preset, script in PRESETS.items():
        lines += [
            "",
            f"`{preset}` against the official `{script}`:",
            "",
            "| setting | official value | set by (official code) | preset value | same? |",
            "|---|---|---|---|---|",
        ]
        for r in rows(preset):
            verdict = r.verdict or "UNDECLARED"
            lines.append(f"| {r.setting} | {r.official} | {r.source} | {r.preset} | {verdict} |")
    return "\n".join([*lines, "", END])


def with_table(text: str) -> str:
    """``text`` (docs/sweeps.md) with its fidelity table replaced by ``table()``.

    Raises:
        ValueError: ``text`` has no table markers.
    """
    if BEGIN not in text or END not in text:
        raise ValueError(f"{DOC.name} has no fidelity table markers ({BEGIN} ... {END})")
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    return before + table() + after


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write it into docs/sweeps.md")
    args = parser.parse_args(argv)
    undeclared = departures()
    if args.write:
        if undeclared:
            raise SystemExit(f"undeclared departures: {', '.join(undeclared)}")
        DOC.write_text(with_table(DOC.read_text(encoding="utf-8")), encoding="utf-8")
        return
    print(table())
    if undeclared:
        print(f"undeclared departures: {', '.join(undeclared)}", file=sys.stderr)


if __name__ == "__main__":
    main()
