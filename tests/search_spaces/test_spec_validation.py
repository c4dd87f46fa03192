"""A sweep spec is refused at the boundary with the field path and the rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from search_spaces.errors import SpecError
from search_spaces.presets import deep_merge
from search_spaces.resolve import resolve_spec, trial_count
from search_spaces.spec import SweepSpec, expand_losses


def make_spec(**overrides: Any) -> dict[str, Any]:
    """A small valid grid spec over MRPC, updated by ``overrides`` (deep-merged)."""
    base = {
        "name": "probe",
        "task": {"dataset": "mrpc"},
        "search_space": {"losses": [{"name": "ce"}, {"name": "dsc", "alpha": 0.1}]},
        "seeds": [0, 1],
    }
    return deep_merge(base, overrides)


def losses(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"losses": list(entries)}


def issue_for(data: dict[str, Any], **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(SpecError) as caught:
        resolve_spec(data, presets={}, **kwargs)
    first = caught.value.issues[0]
    assert str(first) in str(caught.value)
    return first.path, first.message


INVALID = {
    "unknown loss": (
        {"search_space": losses({"name": "bce"})},
        "search_space.losses[0].name",
        "unknown loss 'bce'; valid: ce, dice, dsc, focal, tversky, wce",
    ),
    "parameter of another loss": (
        {"search_space": losses({"name": "ce"}, {"name": "dsc", "gamma": 2})},
        "search_space.losses[1].gamma",
        "loss 'dsc' has no parameter 'gamma'; "
        "valid: alpha, background, classes, ohem_ratio, ohem_rule, scope, smooth, square",
    ),
    "background without the foreground average": (
        {"search_space": losses({"name": "tversky", "classes": ["mean"], "background": "O"})},
        "search_space.losses[0]",
        "tversky: background names the tag that classes 'foreground' leaves out; "
        "with classes 'mean' it has no use",
    ),
    "a foreground average whose background a pairs set lacks": (
        {"search_space": losses({"name": "tversky", "classes": "foreground"})},
        "search_space.losses[0]",
        "tversky: classes 'foreground' leaves out the background tag 'O', which mrpc (pi) "
        "does not have: its classes are 0, 1; name one of its classes as background",
    ),
    "a foreground average over POS tags, which have no O": (
        {
            "task": {"dataset": "ud_en_ewt"},
            "search_space": losses({"name": "dsc", "classes": ["mean", "foreground"]}),
        },
        "search_space.losses[0]",
        "dsc: classes 'foreground' leaves out the background tag 'O', which ud_en_ewt (pos) "
        "does not have: its tags have no O",
    ),
    "parameter of no loss": (
        {"search_space": losses({"name": "dsc", "temperature": 2})},
        "search_space.losses[0].temperature",
        "unknown key; valid: name, alpha, smooth, square, scope, classes",
    ),
    "misspelt parameter": (
        {"search_space": losses({"name": "focal", "gama": 2})},
        "search_space.losses[0].gama",
        "unknown key; did you mean 'gamma'?",
    ),
    "alpha out of range": (
        {"search_space": losses({"name": "ce"}, {"name": "focal"}, {"name": "dsc", "alpha": 1.5})},
        "search_space.losses[2].alpha",
        "alpha=1.5 is invalid for dsc: Input should be less than or equal to 1",
    ),
    "alpha out of range in a list": (
        {"search_space": losses({"name": "tversky", "alpha": [0.5, -0.1]})},
        "search_space.losses[0].alpha",
        "alpha=-0.1 is invalid for tversky: Input should be greater than or equal to 0",
    ),
    "boolean for a number": (
        {"search_space": losses({"name": "focal", "gamma": True})},
        "search_space.losses[0].gamma",
        "Input should be a valid number",
    ),
    "wce k not positive": (
        {"search_space": losses({"name": "wce", "k": 0})},
        "search_space.losses[0].k",
        "k=0 is invalid for wce: Input should be greater than 0",
    ),
    "class counts in a spec": (
        {"search_space": losses({"name": "wce", "class_counts": [10, 2]})},
        "search_space.losses[0].class_counts",
        "computed by the trainable from the training data",
    ),
    "empty list of values": (
        {"search_space": losses({"name": "dsc", "alpha": []})},
        "search_space.losses[0].alpha",
        "a list of values must not be empty",
    ),
    "malformed distribution": (
        {"search_space": losses({"name": "dsc", "alpha": {"normal": [0, 1]}})},
        "search_space.losses[0].alpha",
        'a parameter value is a scalar, a list of values, {"uniform": [lo, hi]}',
    ),
    "uniform bounds reversed": (
        {"search_space": losses({"name": "dsc", "alpha": {"uniform": [0.5, 0.1]}})},
        "search_space.losses[0].alpha.uniform",
        "uniform needs lo < hi",
    ),
    "grid with a distribution": (
        {"search_space": losses({"name": "ce"}, {"name": "dsc", "alpha": {"uniform": [0, 1]}})},
        "search_space.losses[1].alpha",
        "distributions need search.algorithm random or tpe",
    ),
    "empty grid": (
        {"search_space": {"losses": []}},
        "search_space.losses",
        "at least one loss is needed: an empty grid runs nothing",
    ),
    "repeated loss": (
        {"search_space": losses({"name": "dsc"}, {"name": "dsc", "alpha": 1.0})},
        "search_space.losses[1]",
        "repeats the loss",
    ),
    "unknown dataset": (
        {"task": {"dataset": ["mrpc", "imdb"]}},
        "task.dataset[1]",
        "unknown dataset 'imdb'; valid: conll2003, ctb5_pos, ctb6_pos, mrpc, msra_ner, "
        "ontonotes4_zh, qqp, quoref, squad_v1, squad_v2, ud_en_ewt, ud_en_ewt_sample, ud_zh_gsd",
    ),
    "variant on a non-binary data set": (
        {"task": {"dataset": "conll2003", "variant": ["original", "+positive"]}},
        "task.variant",
        "the Table 8 variants apply to binary data sets only",
    ),
    "positive label on a tagging set": (
        {"task": {"dataset": "conll2003", "positive_label": 1}},
        "task.positive_label",
        "positive_label applies to binary (pi) data sets only; conll2003 score every class",
    ),
    "positive label out of 0/1": (
        {"task": {"dataset": "mrpc", "positive_label": 2}},
        "task.positive_label",
        "unknown positive_label 2; valid: 0, 1",
    ),
    "unknown variant": (
        {"task": {"variant": ["original", "+neutral"]}},
        "task.variant[1]",
        "unknown variant '+neutral'; valid: original, +positive, +negative, -negative",
    ),
    "kind against the catalogue": (
        {"task": {"dataset": "conll2003", "kind": "pos"}},
        "task.kind",
        "conll2003 is a 'ner' data set, not 'pos'",
    ),
    "unknown top-level key": ({"bogus": 3}, "bogus", "unknown key; valid: name, description"),
    "misspelt top-level key": (
        {"trainig": {"epochs": 1}},
        "trainig",
        "unknown key; did you mean 'training'?",
    ),
    "misspelt section key": (
        {"training": {"epocs": 1}},
        "training.epocs",
        "unknown key; did you mean 'epochs'?",
    ),
    "max_seq_length too short": (
        {"training": {"max_seq_length": 4}},
        "training.max_seq_length",
        "Input should be greater than or equal to 8",
    ),
    "warmup ratio of one": (
        {"training": {"warmup_ratio": 1.0}},
        "training.warmup_ratio",
        "Input should be less than 1",
    ),
    "learning rate zero": (
        {"training": {"learning_rate": 0}},
        "training.learning_rate",
        "Input should be greater than or equal to 0.000000001",
    ),
    "bf16 not a flag": (
        {"training": {"bf16": "yes"}},
        "training.bf16",
        "must be true, false or 'auto'",
    ),
    "training loss as the metric": (
        {"search": {"metric": "train_loss"}},
        "search.metric",
        "the training loss differs between losses",
    ),
    "exact match outside mrc": (
        {"search": {"metric": "eval_exact_match"}},
        "search.metric",
        "eval_exact_match exists for mrc data sets only",
    ),
    "grid with num_samples": (
        {"search": {"num_samples": 4}},
        "search.num_samples",
        "grid search runs each grid point once per seed",
    ),
    "tpe without num_samples": (
        {"search": {"algorithm": "tpe"}},
        "search.num_samples",
        "tpe search needs num_samples",
    ),
    "tpe over two loss entries": (
        {"search": {"algorithm": "tpe", "num_samples": 4}},
        "search_space.losses",
        "tpe search takes exactly one, got 2",
    ),
    "random over two data sets": (
        {
            "task": {"dataset": ["mrpc", "qqp"]},
            "search_space": losses({"name": "dsc", "alpha": {"loguniform": [0.01, 1]}}),
            "search": {"algorithm": "random", "num_samples": 4},
        },
        "task.dataset",
        "random search takes exactly one, got 2",
    ),
    "tpe with nothing to sample": (
        {
            "search_space": losses({"name": "dsc", "alpha": 0.1}),
            "search": {"algorithm": "tpe", "num_samples": 4},
        },
        "search_space.losses[0]",
        "tpe search needs a parameter to sample",
    ),
    "repeated seeds": ({"seeds": [0, 1, 1]}, "seeds", "seeds repeat: [0, 1, 1]"),
    "negative seed": ({"seeds": [-1]}, "seeds", "seeds must lie in [0, 4294967295]"),
    "no seeds": ({"seeds": []}, "seeds", "at least one seed is needed"),
    "too many gpus": (
        {"resources": {"gpus_per_trial": 9}},
        "resources.gpus_per_trial",
        "Input should be less than or equal to 8",
    ),
    "several gpus per trial": (
        {"resources": {"gpus_per_trial": 2}},
        "resources.gpus_per_trial",
        "a trial trains on one GPU (multi-GPU data-parallel trials are not supported), got 2",
    ),
    "fractional gpus above one": (
        {"resources": {"gpus_per_trial": 1.5}},
        "resources.gpus_per_trial",
        "above 1 a resource must be a whole number, got 1.5",
    ),
    "no cpus": (
        {"resources": {"cpus_per_trial": 0}},
        "resources.cpus_per_trial",
        "Input should be greater than or equal to 0.01",
    ),
    "no concurrency": (
        {"resources": {"max_concurrent_trials": 0}},
        "resources.max_concurrent_trials",
        "Input should be greater than or equal to 1",
    ),
    "grace period past the last evaluation": (
        {"scheduler": {"kind": "asha", "grace_period": 3}, "training": {"epochs": 3}},
        "scheduler.grace_period",
        "asha with grace_period 3 can stop nothing in 3 epochs",
    ),
    "bad name": ({"name": "my sweep!"}, "name", "String should match pattern"),
    "no steps": (
        {"training": {"max_steps": 0}},
        "training.max_steps",
        "Input should be greater than or equal to 1",
    ),
    "no patience": (
        {"training": {"early_stopping_patience": 0}},
        "training.early_stopping_patience",
        "Input should be greater than or equal to 1",
    ),
    "min_delta without early stopping": (
        {"training": {"min_delta": 0.5}},
        "training.min_delta",
        "min_delta applies to early stopping: set early_stopping_patience too",
    ),
    "a negative min_delta": (
        {"training": {"min_delta": -1.0, "early_stopping_patience": 2}},
        "training.min_delta",
        "Input should be greater than or equal to 0",
    ),
    # Caught before any trial starts, `dicesweep run` included (not only by the service).
    "fp16 on a trial without a GPU": (
        {"training": {"precision": "fp16"}},
        "training.precision",
        "fp16 needs a GPU: a trial reserves none (set resources.gpus_per_trial above 0)",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_spec_names_the_field_and_the_rule(case: str) -> None:
    overrides, expected_path, rule = INVALID[case]
    path, message = issue_for(make_spec(**overrides))
    assert path == expected_path
    assert rule in message


# A mistake in a value of a union (a data set is a name, a folder or a hub id; a task
# kind, a format and a loss are each one of a list) is one line naming the one field.
UNION_MISTAKES = {
    "format": (
        {"task": {"kind": "ner", "dataset": [{"path": "mine", "format": "conl"}]}},
        "task.dataset[0].format: unknown format 'conl'; "
        "valid: conll, conllu, pairs-tsv, squad-json, jsonl",
    ),
    "loss name": (
        {"search_space": losses({"name": "dics"})},
        "search_space.losses[0].name: unknown loss 'dics'; "
        "valid: ce, dice, dsc, focal, tversky, wce",
    ),
    "task kind": (
        {"task": {"kind": "nerr"}},
        "task.kind: unknown kind 'nerr'; valid: pi, ner, pos, mrc",
    ),
    "data set kind": (
        {"task": {"kind": "ner", "dataset": [7]}},
        "task.dataset[0]: a data set is a catalogue name, a local folder "
        "{path, format[, name]} or a hub data set {hub[, config, name]}",
    ),
    "folder key": (
        {"task": {"kind": "ner", "dataset": [{"pth": "mine", "format": "conll"}]}},
        "task.dataset[0].pth: unknown key; did you mean 'path'?",
    ),
    "hub key": (
        {"task": {"kind": "pi", "dataset": [{"hub": "glue", "confg": "mrpc"}]}},
        "task.dataset[0].confg: unknown key; did you mean 'config'?",
    ),
    "catalogue name": (
        {"task": {"dataset": ["mrpc", "qqq"]}},
        "task.dataset[1]: unknown dataset 'qqq'; valid: conll2003, ctb5_pos",
    ),
}


@pytest.mark.parametrize("case", sorted(UNION_MISTAKES))
def test_a_union_mistake_is_one_line(case: str) -> None:
    overrides, line = UNION_MISTAKES[case]
    with pytest.raises(SpecError) as caught:
        resolve_spec(make_spec(**overrides), presets={})
    assert len(caught.value.issues) == 1
    assert str(caught.value).startswith(f"invalid sweep spec: {line}")
    assert "\n" not in str(caught.value)


def test_a_foreground_average_over_tags_the_data_sets_have_is_accepted() -> None:
    tagger = make_spec(
        task={"dataset": "conll2003"},
        search_space=losses({"name": "tversky", "alpha": 0.6, "classes": "foreground"}),
    )
    pairs = make_spec(
        search_space=losses({"name": "dice", "classes": "foreground", "background": "0"})
    )
    for data in (tagger, pairs):
        SweepSpec.model_validate(data)


def test_more_trials_than_the_cap_names_the_count_and_the_cap() -> None:
    data = make_spec(
        search_space=losses({"name": "dsc", "alpha": [1, 0.5, 0.1, 0.05, 0.01]}), seeds=[0, 1]
    )
    assert trial_count(resolve_spec(data, presets={})) == 10
    path, message = issue_for(data, max_trials=8)
    assert path == ""
    assert "10 trials (losses × datasets × variants × seeds = 5 × 1 × 1 × 2)" in message
    assert "exceed the cap of 8" in message


def test_default_cap_is_a_thousand() -> None:
    data = make_spec(seeds=list(range(501)))  # 2 losses × 501 seeds = 1002
    _, message = issue_for(data)
    assert "1002 trials" in message
    assert "cap of 1000" in message


def test_every_field_error_is_reported_at_once() -> None:
    data = make_spec(task={"dataset": "imdb"}, training={"epochs": 0}, bogus=1)
    with pytest.raises(SpecError) as caught:
        resolve_spec(data, presets={})
    assert {issue.path for issue in caught.value.issues} == {
        "task.dataset[0]",
        "training.epochs",
        "bogus",
    }


def test_a_spec_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(SpecError, match="a sweep spec is a mapping, got list"):
        resolve_spec([], presets={})  # type: ignore[arg-type]


def test_extends_deep_merges_and_lists_replace() -> None:
    presets = {
        "base": make_spec(training={"epochs": 5, "batch_size": 20}, seeds=[0, 1, 2]),
    }
    spec = resolve_spec(
        {"extends": "base", "training": {"epochs": 2}, "seeds": [7]}, presets=presets
    )
    assert spec.extends == "base"
    assert (spec.training.epochs, spec.training.batch_size) == (2, 20)
    assert spec.seeds == [7]
    assert [entry.name for entry in spec.search_space.losses] == ["ce", "dsc"]


def test_extends_an_unknown_preset_lists_the_valid_ones() -> None:
    with pytest.raises(SpecError) as caught:
        resolve_spec({"extends": "table9"}, presets={"table8": {}, "smoke": {}})
    assert caught.value.issues[0].path == "extends"
    assert caught.value.issues[0].message == "unknown preset 'table9'; valid: smoke, table8"


def test_presets_extending_in_a_cycle_are_refused() -> None:
    presets = {"a": {"extends": "b"}, "b": {"extends": "a"}}
    with pytest.raises(SpecError, match="in a cycle: a -> b -> a"):
        resolve_spec({"extends": "a"}, presets=presets)


def test_deep_merge_leaves_its_inputs_alone() -> None:
    base = {"training": {"epochs": 3}, "seeds": [0, 1]}
    snapshot = copy.deepcopy(base)
    assert deep_merge(base, {"training": {"batch_size": 8}, "seeds": [5]}) == {
        "training": {"epochs": 3, "batch_size": 8},
        "seeds": [5],
    }
    assert base == snapshot


def test_a_dump_validates_back_to_the_same_spec() -> None:
    data = make_spec(
        search_space=losses(
            {"name": "dsc", "alpha": {"loguniform": [0.001, 1]}, "square": [True, False]}
        ),
        search={"algorithm": "tpe", "num_samples": 3},
    )
    spec = resolve_spec(data, presets={})
    dumped = spec.model_dump(mode="json")
    assert dumped["search_space"]["losses"] == [
        {"name": "dsc", "alpha": {"loguniform": [0.001, 1.0]}, "square": [True, False]}
    ]
    assert SweepSpec.model_validate(dumped) == spec


def test_trial_count_of_a_grid_multiplies_every_dimension() -> None:
    data = make_spec(
        task={"dataset": "mrpc", "variant": ["original", "+positive", "-negative"]},
        search_space=losses(
            {"name": "ce"}, {"name": "tversky", "alpha": [0.3, 0.5], "smooth": [1, 0.1]}
        ),
        seeds=[0, 1],
    )
    # (1 + 2 × 2) losses × 1 data set × 3 variants × 2 seeds
    assert trial_count(resolve_spec(data, presets={})) == 30


def test_trial_count_of_a_search_is_samples_times_seeds() -> None:
    data = make_spec(
        search_space=losses({"name": "focal", "gamma": {"uniform": [0, 4]}}),
        search={"algorithm": "random", "num_samples": 5},
        seeds=[0, 1, 2],
    )
    assert trial_count(resolve_spec(data, presets={})) == 15


def test_expand_losses_is_canonical() -> None:
    data = make_spec(
        search_space=losses(
            {"name": "ce"},
            {"name": "tversky", "alpha": [0.1 + 0.2, 0.5], "beta": 0.7},
            {"name": "wce", "k": 2},
        )
    )
    assert expand_losses(resolve_spec(data, presets={})) == [
        {"name": "ce"},
        {"name": "tversky", "alpha": 0.3, "beta": 0.7},
        {"name": "tversky", "alpha": 0.5, "beta": 0.7},
        {"name": "wce", "k": 2.0},
    ]


def test_expand_losses_refuses_a_sampled_search() -> None:
    data = make_spec(
        search_space=losses({"name": "focal", "gamma": {"uniform": [0, 4]}}),
        search={"algorithm": "tpe", "num_samples": 5},
    )
    with pytest.raises(ValueError, match="tpe search samples its loss"):
        expand_losses(resolve_spec(data, presets={}))


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({"training": {"epochs": 10**30}}, "training.epochs"),
        ({"training": {"batch_size": 10**9}}, "training.batch_size"),
        ({"training": {"weight_decay": 1e308}}, "training.weight_decay"),
        ({"training": {"learning_rate": 1e-320}}, "training.learning_rate"),
        ({"training": {"grad_clip": 1e300}}, "training.grad_clip"),
        ({"training": {"eval_every_steps": 10**12}}, "training.eval_every_steps"),
        ({"training": {"max_steps": 10**12}}, "training.max_steps"),
        ({"training": {"early_stopping_patience": 10**9}}, "training.early_stopping_patience"),
        ({"training": {"min_delta": 1e9, "early_stopping_patience": 2}}, "training.min_delta"),
        ({"resources": {"cpus_per_trial": 1e6}}, "resources.cpus_per_trial"),
        ({"resources": {"max_concurrent_trials": 10**9}}, "resources.max_concurrent_trials"),
        ({"max_failures": 10**9}, "max_failures"),
        ({"scheduler": {"kind": "asha", "reduction_factor": 1e9}}, "scheduler.reduction_factor"),
        ({"search": {"algorithm": "random", "num_samples": 10**9}}, "search.num_samples"),
    ],
)
def test_every_number_has_a_documented_range(overrides: dict[str, Any], path: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_spec(make_spec(**overrides))
    (issue,) = [issue for issue in caught.value.issues if issue.path == path]
    assert "less than" in issue.message or "greater than" in issue.message
