"""The torch-free loss schemas: their defaults, and the trainables' registry they mirror."""

from __future__ import annotations

import inspect

import pytest

from search_spaces.loss_entries import PARAMETERS, LossEntry, canonical
from search_spaces.losses import (
    LOSS_SPECS,
    DiceSpec,
    DscSpec,
    LossSpecError,
    TverskySpec,
    WceSpec,
    check_parameter,
    loss_names,
    loss_parameters,
    validate_loss_spec,
)

DEFAULTS = {  # each loss's parameters and their defaults, written out, not read from the schema
    "ce": {},
    "wce": {"k": 1.0},
    "focal": {"gamma": 2.0, "prob_offset": 0.0},
    "dice": {
        "smooth": 1.0,
        "square": True,
        "scope": "example",
        "classes": "mean",
        "background": None,
        "ohem_ratio": 0.0,
        "ohem_rule": "hardest",
    },
    "tversky": {
        "alpha": 0.5,
        "beta": 0.5,
        "smooth": 1.0,
        "square": False,
        "scope": "example",
        "classes": "mean",
        "background": None,
        "ohem_ratio": 0.0,
        "ohem_rule": "hardest",
    },
    "dsc": {
        "alpha": 1.0,
        "smooth": 1.0,
        "square": False,
        "scope": "example",
        "classes": "mean",
        "background": None,
        "ohem_ratio": 0.0,
        "ohem_rule": "hardest",
    },
}


def test_the_six_losses_and_their_defaults() -> None:
    assert loss_names() == ["ce", "dice", "dsc", "focal", "tversky", "wce"]
    assert {name: loss_parameters(name) for name in loss_names()} == DEFAULTS


def test_a_loss_entry_knows_every_parameter_a_spec_may_set() -> None:
    # Read from the schema: a parameter added there is a search-space field at once.
    settable = {
        field
        for model in LOSS_SPECS.values()
        for field in model.model_fields
        if field != "name" and field not in model.from_data
    }
    assert set(PARAMETERS) == settable and "class_counts" not in PARAMETERS
    assert list(LossEntry.model_fields) == ["name", *PARAMETERS]


def test_the_math_takes_exactly_the_schemas_parameters() -> None:
    """Schema and math agree: each loss module holds its own model of the schema as
    ``spec`` (those the trainable supplies included) and the math reads its parameters
    from it, so adding a parameter touches the schema and the math, nothing else."""
    losses = pytest.importorskip("trainables.losses")
    for name, model in LOSS_SPECS.items():
        assert inspect.get_annotations(losses.LOSSES[name], eval_str=True)["spec"] is model
        assert type(losses.build_loss({"name": name}, class_counts=[90, 10]).spec) is model


def test_every_settable_parameter_reaches_the_built_loss() -> None:
    losses = pytest.importorskip("trainables.losses")
    for name in loss_names():
        spec = {"name": name, **loss_parameters(name)}
        built = losses.build_loss(spec, class_counts=[90, 10])
        for parameter, value in loss_parameters(name).items():
            assert getattr(built.spec, parameter) == value, (name, parameter)


def test_validate_a_whole_spec() -> None:
    spec = validate_loss_spec({"name": "dsc", "alpha": 0.01, "square": True, "scope": "set"})
    assert spec == DscSpec(alpha=0.01, square=True, scope="set", smooth=1.0)
    counted = validate_loss_spec({"name": "wce", "k": 2, "class_counts": [90, 10]})
    assert isinstance(counted, WceSpec)
    assert counted.class_counts == (90, 10)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"alpha": 0.1}, "a loss spec needs a 'name'; valid: ce, dice, dsc, focal, tversky, wce"),
        ({"name": "bce"}, "unknown loss 'bce'; valid: ce, dice, dsc, focal, tversky, wce"),
        (
            {"name": "dsc", "beta": 0.5},
            "unknown parameter(s) ['beta'] for loss 'dsc'; valid: alpha, background, classes, "
            "labels, ohem_ratio, ohem_rule, scope, smooth, square",
        ),
        ({"name": "dice", "ohem_ratio": -0.1}, "dice.ohem_ratio: Input should be greater than"),
        ({"name": "dsc", "ohem_ratio": True}, "dsc.ohem_ratio: Input should be a valid number"),
        ({"name": "tversky", "beta": 2}, "tversky.beta: Input should be less than or equal to 1"),
        ({"name": "dice", "scope": "batch"}, "dice.scope: Input should be 'example' or 'set'"),
        ({"name": "wce", "class_counts": [5]}, "class_counts needs one count per class (>= 2)"),
        ({"name": "focal", "gamma": float("inf")}, "focal.gamma: Input should be a finite number"),
    ],
)
def test_invalid_whole_specs(data: dict[str, object], message: str) -> None:
    with pytest.raises(LossSpecError) as caught:
        validate_loss_spec(data)
    assert message in str(caught.value)


def test_the_foreground_average_names_its_background_tag() -> None:
    # Each value alone is valid; the rule across them holds for the whole spec.
    check_parameter("tversky", "background", "B-MISC")
    check_parameter("dsc", "classes", "foreground")
    spec = validate_loss_spec({"name": "tversky", "classes": "foreground", "background": "MISC"})
    assert isinstance(spec, TverskySpec) and spec.background_tag == "MISC"
    default = validate_loss_spec({"name": "dice", "classes": "foreground", "labels": ["O", "B"]})
    assert isinstance(default, DiceSpec) and default.background_tag == "O"
    with pytest.raises(LossSpecError, match="labels"):
        check_parameter("dice", "labels", ["O"])
    with pytest.raises(LossSpecError, match="dsc: background names the tag"):
        validate_loss_spec({"name": "dsc", "classes": "sum", "background": "O"})


def test_check_parameter_refuses_what_the_trainable_supplies() -> None:
    with pytest.raises(LossSpecError, match="class_counts is computed by the trainable"):
        check_parameter("wce", "class_counts", [3, 1])
    check_parameter("wce", "k", 10)


def test_canonical_rounds_binary_noise_only() -> None:
    assert canonical(0.1 + 0.2) == 0.3
    assert canonical(1e-5) == 1e-5
    assert canonical(0.123456789) == 0.123456789
    assert canonical(3) == 3
    assert canonical("set") == "set"


def test_an_ohem_rule_without_a_ratio_names_the_rule() -> None:
    with pytest.raises(LossSpecError, match=r"ohem_rule 'official' .* applies with ohem_ratio > 0"):
        validate_loss_spec({"name": "dsc", "ohem_rule": "official"})
    spec = validate_loss_spec({"name": "dsc", "ohem_ratio": 0.3, "ohem_rule": "official"})
    assert spec.model_dump()["ohem_rule"] == "official"
