"""The tuning split of a two-stage sweep: carved from the training file for stage 1,
stratified, fixed by its seed, disjoint from dev; stage 2 trains on the whole file."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from search_spaces.datasets import get_dataset
from search_spaces.resolve import resolve_spec
from search_spaces.tuning import loss_key
from trainables.data import PairExample, load_split
from trainables.driver.tune_search import stage_param_space
from trainables.trial_data import DataRequest, holdout_split, read_examples


def pair_key(example: PairExample) -> tuple[str, str]:
    return (example.text_a, example.text_b)


def stage_request(stage: str, holdout: float | None = 0.1, **caps: int | None) -> DataRequest:
    return DataRequest(
        get_dataset("mrpc"),
        "original",
        "tiny-bert",
        32,
        128,
        caps.get("max_train_examples"),
        caps.get("max_eval_examples"),
        holdout=holdout,
        holdout_seed=0,
        stage=stage,
    )


@pytest.mark.data
def test_the_tuning_split_only_selects_stage_two_trains_on_the_whole_file(
    datasets_dir: Path,
) -> None:
    tune_train, tuning_split = read_examples(stage_request("tune"), datasets_dir)
    final_train, dev = read_examples(stage_request("final"), datasets_dir)
    whole = load_split(get_dataset("mrpc"), "train", datasets_dir)
    assert final_train == whole  # the holdout a final trial carries changes nothing
    assert read_examples(stage_request("final", holdout=None), datasets_dir)[0] == whole
    assert len(tuning_split) == pytest.approx(0.1 * len(whole), abs=2)
    assert len(tune_train) + len(tuning_split) == len(whole)
    held = {pair_key(e) for e in tuning_split}
    assert not held & {pair_key(e) for e in tune_train}  # stage 1 never trains on it
    assert held <= {pair_key(e) for e in final_train}
    assert not held & {pair_key(e) for e in dev}
    assert dev == load_split(get_dataset("mrpc"), "eval", datasets_dir)  # reported on dev
    # Stratified: the held-out share of each class is the same (within one pair).
    counts, held_counts = Counter(e.label for e in whole), Counter(e.label for e in tuning_split)
    for label, count in counts.items():
        assert abs(held_counts[label] - 0.1 * count) <= 1, (label, held_counts, counts)


@pytest.mark.data
def test_caps_apply_to_the_remainder_and_to_the_tuning_split(datasets_dir: Path) -> None:
    capped = stage_request("tune", max_train_examples=64, max_eval_examples=32)
    train, tuning_split = read_examples(capped, datasets_dir)
    assert (len(train), len(tuning_split)) == (64, 32)
    _, uncapped_split = read_examples(replace(capped, max_eval_examples=None), datasets_dir)
    assert {pair_key(e) for e in tuning_split} <= {pair_key(e) for e in uncapped_split}
    final_train, _ = read_examples(replace(capped, stage="final"), datasets_dir)
    whole, _ = read_examples(replace(capped, holdout=None), datasets_dir)
    assert final_train == whole  # the cap's subset of the whole file


def test_the_split_is_fixed_by_its_seed_and_keeps_every_example() -> None:
    examples = [PairExample(str(i), f"a{i}", f"b{i}", int(i % 3 == 0)) for i in range(300)]
    rest, held = holdout_split(examples, 0.2, seed=5)
    assert holdout_split(examples, 0.2, seed=5) == (rest, held)
    assert holdout_split(examples, 0.2, seed=6) != (rest, held)
    assert sorted(rest + held, key=lambda e: int(e.guid)) == examples
    assert Counter(e.label for e in held) == {1: 20, 0: 40}  # 20% of 100 and of 200
    assert rest == sorted(rest, key=lambda e: int(e.guid))  # file order kept


def test_only_stage_one_trials_carry_the_holdout() -> None:
    """Stage 2's trial configs hold nothing out: they train on the whole training file."""
    spec = resolve_spec(
        {
            "name": "probe",
            "task": {"dataset": "mrpc"},
            "search_space": {"losses": [{"name": "ce"}]},
            "seeds": [0, 1],
            "tune": {"learning_rate": [1e-5, 3e-5], "trials_per_loss": 2, "holdout": 0.2},
        },
        presets={},
    )
    chosen = {loss_key({"name": "ce"}): {"learning_rate": 3e-5}}
    assert stage_param_space(spec, "tune")["holdout"] == 0.2
    final = stage_param_space(spec, "final", chosen=chosen)
    assert final["holdout"] is None and final["stage"] == "final"
