"""Every preset resolves alone, and its trial count is the one its description states."""

from __future__ import annotations

import re

import pytest

from search_spaces.losses import OFFICIAL_RECIPES
from search_spaces.presets import load_presets, preset_names, shared_presets
from search_spaces.resolve import (
    PresetInfo,
    UnknownPresetError,
    get_preset,
    list_presets,
    resolve_spec,
    stage_counts,
    trial_count,
)
from search_spaces.spec import expand_losses

EXPECTED_COUNTS = {
    "dsc_alpha": 9,
    "en_conll03": 1,
    "en_conll03-bce": 1,
    "en_conll03-focal": 1,
    "focal_gamma": 15,
    "loss_compare": 18,
    "smoke": 2,
    "squad_v1": 1,
    "squad_v1-ce": 1,
    "squad_v1-focal": 1,
    "study-losses": 42,
    "study-losses-full": 21,
    "study-table10": 54,
    "study-table10-full": 27,
    "study-table8": 60,
    "study-table8-full": 60,
    "table10": 18,
    "table8": 60,
    "wce_k": 12,
}


@pytest.mark.parametrize("name", sorted(EXPECTED_COUNTS))
def test_preset_resolves_with_extends_alone(name: str) -> None:
    spec = resolve_spec({"extends": name})
    stated = re.search(r"\((\d+) trials?\)$", spec.description)
    assert stated is not None, spec.description
    assert trial_count(spec) == int(stated.group(1)) == EXPECTED_COUNTS[name]
    assert spec.name == name
    assert spec.extends == name


def test_list_presets() -> None:
    assert preset_names() == sorted(EXPECTED_COUNTS)
    infos = list_presets()
    assert all(isinstance(info, PresetInfo) for info in infos)
    assert {info.name: info.trial_count for info in infos} == EXPECTED_COUNTS


def test_unknown_preset_lists_the_valid_names() -> None:
    with pytest.raises(UnknownPresetError) as caught:
        get_preset("table9")
    assert str(caught.value) == f"unknown preset 'table9'; valid: {', '.join(preset_names())}"


def test_load_presets_returns_a_fresh_copy() -> None:
    load_presets()["smoke"]["seeds"].append(99)
    assert load_presets()["smoke"]["seeds"] == [0]


def test_table8_is_the_official_dice_mrpc_settings_over_the_five_variants() -> None:
    spec = get_preset("table8")
    assert spec.task.dataset == ["mrpc"]
    assert spec.task.variant == [
        "original",
        "+positive",
        "+negative",
        "-negative",
        "+positive&negative",
    ]
    assert spec.model == "bert-base-cased"  # the official MRPC scripts' encoder
    training = spec.training
    assert (training.learning_rate, training.batch_size, training.epochs) == (3e-5, 20, 5)
    assert training.grad_clip == 1.0
    assert [loss["name"] for loss in expand_losses(spec)] == ["ce", "focal", "dice", "dsc"]
    assert {"name": "focal", "gamma": 2.0} in expand_losses(spec)
    assert spec.seeds == [0, 1, 2]


# en_conll03 and the NER -full presets built on it: tests/search_spaces/test_presets_full.py
@pytest.mark.parametrize(
    "name",
    sorted(
        set(EXPECTED_COUNTS)
        - {"en_conll03", "en_conll03-bce", "en_conll03-focal"}
        - {"squad_v1", "squad_v1-ce", "squad_v1-focal"}
        - {"study-losses-full", "study-table10-full"}
    ),
)
def test_a_preset_says_official_only_of_what_is_official(name: str) -> None:
    """A spec has one training config for every loss, so no presets but the en_conll03
    and squad_v1 ones (one script and one loss each: tests/search_spaces/test_preset_fidelity.py)
    are an official script's recipe;
    "official" may name only a loss entry that is OFFICIAL_RECIPES."""
    spec = get_preset(name)
    assert "official recipe" not in spec.description
    if "official" in spec.description:
        assert "official code's multi-class loss settings" in spec.description
        assert OFFICIAL_RECIPES["multiclass"] in expand_losses(spec)


def test_the_en_conll03_presets_run_one_official_loss_each() -> None:
    """bert_dice.sh's dice (the official binary recipe), bert_focal.sh's focal (γ 3, the
    official log(p + 1e-4)) and bert_dice.sh's bce; every other value is checked
    against the scripts by docs/sweeps.md's fidelity table."""
    losses = {
        name: expand_losses(get_preset(name))
        for name in ("en_conll03", "en_conll03-focal", "en_conll03-bce")
    }
    assert losses == {
        "en_conll03": [OFFICIAL_RECIPES["binary"]],
        "en_conll03-focal": [{"name": "focal", "gamma": 3, "prob_offset": 1e-4}],
        "en_conll03-bce": [{"name": "ce"}],
    }
    for name in losses:
        spec = get_preset(name)
        assert "official" in spec.description and spec.seeds == [2333]
        assert (spec.task.formulation, spec.task.dataset) == ("mrc", ["conll2003"])


def test_the_squad_v1_presets_run_one_official_loss_each() -> None:
    """bert_large_dice.sh's dice (the official binary recipe with its OHEM 0.1),
    bert_large_ce.sh's ce and bert_large_focal.sh's focal (γ 2); every other value is
    checked against the scripts by docs/sweeps.md's fidelity table."""
    names = ("squad_v1", "squad_v1-ce", "squad_v1-focal")
    losses = {name: expand_losses(get_preset(name)) for name in names}
    assert losses == {
        "squad_v1": [{**OFFICIAL_RECIPES["binary"], "ohem_ratio": 0.1, "ohem_rule": "official"}],
        "squad_v1-ce": [{"name": "ce"}],
        "squad_v1-focal": [{"name": "focal", "gamma": 2}],
    }
    for name in losses:
        spec = get_preset(name)
        assert "official" in spec.description
        assert (spec.task.kind, spec.task.dataset) == ("mrc", ["squad_v1"])


def test_table10_has_beta_one_minus_alpha_exactly() -> None:
    points = expand_losses(get_preset("table10"))
    assert [point["alpha"] for point in points] == [n / 10 for n in range(1, 10)]
    for point in points:
        assert point["name"] == "tversky"
        assert point["alpha"] + point["beta"] == 1.0
    assert get_preset("table10").task.dataset == ["conll2003", "squad_v1"]


def test_sweeps_of_one_loss_parameter() -> None:
    gammas = [point["gamma"] for point in expand_losses(get_preset("focal_gamma"))]
    assert gammas == [0, 1, 2, 3, 4]
    ks = [point["k"] for point in expand_losses(get_preset("wce_k"))]
    assert ks == [1, 2, 5, 10]
    assert min(ks) >= 1
    alphas = [point["alpha"] for point in expand_losses(get_preset("dsc_alpha"))]
    assert alphas == [1, 0.1, 0.01]
    # They extend loss_compare: the same data and training.
    base = get_preset("loss_compare")
    for name in ("focal_gamma", "wce_k", "dsc_alpha"):
        spec = get_preset(name)
        assert (spec.task, spec.training, spec.seeds) == (base.task, base.training, base.seeds)
    assert [point["name"] for point in expand_losses(base)] == [
        "ce",
        "wce",
        "focal",
        "dice",
        "tversky",
        "dsc",
    ]


def test_smoke_runs_small_and_offline() -> None:
    spec = get_preset("smoke")
    assert spec.model == "tiny-bert"
    # Part-of-speech tags: a random encoder learns the frequent words' tags in one epoch
    # (MRPC's 64 pairs left it predicting one class, a table of collapsed cells).
    assert (spec.task.kind, spec.task.dataset) == ("pos", ["ud_en_ewt_sample"])
    training = spec.training
    assert (training.max_train_examples, training.max_eval_examples) == (2000, 500)
    assert (training.max_seq_length, training.epochs, training.batch_size) == (64, 1, 32)
    assert [point["name"] for point in expand_losses(spec)] == ["ce", "dsc"]
    assert spec.seeds == [0]
    resources = spec.resources
    assert (resources.cpus_per_trial, resources.gpus_per_trial) == (1, 0)
    assert resources.max_concurrent_trials == 2


def test_a_user_overrides_a_preset() -> None:
    spec = resolve_spec({"extends": "table8", "seeds": [0], "task": {"variant": "original"}})
    assert trial_count(spec) == 4
    assert spec.model == "bert-base-cased"


def test_resolving_leaves_the_shared_presets_as_parsed() -> None:
    before = load_presets()
    for name in before:
        spec = resolve_spec({"extends": name, "seeds": [5, 6]})
        assert spec.seeds == [5, 6]
    assert shared_presets() == before


def test_a_two_stage_sweep_is_described_by_what_both_stages_run() -> None:
    # The smoke preset says "1 seed (2 trials)"; with tune, 2 losses x 3 stage-1
    # trials run before stage 2's 2 trials.
    tune = {"learning_rate": [1e-5, 3e-5, 5e-5], "trials_per_loss": 3}
    spec = resolve_spec({"extends": "smoke", "tune": tune})
    stages = stage_counts(spec)
    assert stages == {"tune": 6, "final": 2}
    assert spec.description.endswith("1 seed (8 trials: 6 in stage 1 + 2 in stage 2)")
    assert trial_count(spec) == 8
