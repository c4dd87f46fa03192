"""The paper-scale NER presets: the official bert_dice.sh settings (en_conll03's) in
the MRC formulation, and the optimiser steps their comments and docs/sweeps.md state,
recomputed from the data's sizes (CoNLL-2003's from study 3's published steps)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from search_spaces.losses import OFFICIAL_RECIPES
from search_spaces.resolve import get_preset, resolve_spec, trial_count
from search_spaces.spec import expand_losses

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ROOT / "search_spaces" / "presets"
SENTENCES = 14_041  # CoNLL-2003's training sentences
ENTITY_TYPES = 4  # PER, LOC, ORG, MISC: one MRC window each


def steps(examples: int, batch: int, epochs: int, accumulation: int = 1) -> int:
    """Optimiser steps of a trial: each epoch's last batch kept, partial, and its last
    step taking the micro-batches left."""
    return math.ceil(math.ceil(examples / batch) / accumulation) * epochs


def test_the_sentence_count_is_the_one_study_3_trained_on() -> None:
    rows = pd.read_csv(ROOT / "docs" / "results" / "study3-conll-tversky-a0.4-trials.csv")
    assert set(rows["optimizer_steps"]) == {steps(SENTENCES, 16, 2)} == {1756}


@pytest.mark.parametrize("name", ["study-losses-full", "study-table10-full"])
def test_ner_full_presets_run_bert_dice_sh_as_mrc(name: str) -> None:
    spec, official = resolve_spec({"extends": name}), get_preset("en_conll03")
    assert spec.task.formulation == "mrc" and spec.task.dataset == ["conll2003"]
    assert spec.task.mrc == official.task.mrc
    assert spec.model == official.model == "bert-base-cased"
    keys = ("epochs", "learning_rate", "batch_size", "max_seq_length", "warmup_ratio")
    for key in (*keys, "weight_decay", "grad_clip", "grad_accumulation", "decay"):
        assert getattr(spec.training, key) == getattr(official.training, key), key
    assert spec.training.max_train_examples is None and spec.training.max_eval_examples is None
    assert spec.seeds == [0, 1, 2] and spec.resources.gpus_per_trial == 1
    training = spec.training
    per_trial = steps(
        SENTENCES * ENTITY_TYPES, training.batch_size, training.epochs, training.grad_accumulation
    )
    total = per_trial * trial_count(spec)
    comment = (PRESETS / f"{name}.yaml").read_text()
    stated = (
        f"{per_trial:,} a trial over 10 epochs, {total:,} for the\n# {trial_count(spec)} trials"
    )
    assert stated in comment
    assert f"GPU-hours are a formula: {total:,} / (3,600 ×" in comment
    sweeps = " ".join((ROOT / "docs" / "sweeps.md").read_text().split())
    assert f"| {trial_count(spec)} | {per_trial:,} a trial, {total:,} in all |" in sweeps


def test_losses_full_holds_the_official_binary_dsc() -> None:
    spec = get_preset("study-losses-full")
    assert OFFICIAL_RECIPES["binary"] in expand_losses(spec)
    assert "official code's binary loss settings" in spec.description


def test_table8_full_steps_from_the_variants_pair_counts() -> None:
    spec = get_preset("study-table8-full")
    pairs = {
        name: int(count.replace(",", ""))
        for name, count in re.findall(r"([-+&a-z]+) ([0-9,]+) pairs", spec.description)
    }
    assert len(pairs) == 5
    batch, epochs = spec.training.batch_size, spec.training.epochs
    per_variant = {name: steps(n, batch, epochs) for name, n in pairs.items()}
    total = sum(per_variant.values()) * len(expand_losses(spec)) * len(spec.seeds)
    assert total == 60_840
    comment = " ".join((PRESETS / "study-table8-full.yaml").read_text().replace("#", "").split())
    for name, count in per_variant.items():
        assert (
            f"{count:,} ({name}, {pairs[name]:,}" in comment
            or f"{count:,} ({name}, {pairs[name]:,} pairs)" in comment
        ), name
    assert f"formula: {total:,} / (3,600 × s)" in comment
