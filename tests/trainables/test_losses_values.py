"""Golden values computed by hand, the equivalences of docs/losses.md, and parameter errors."""

from __future__ import annotations

import math

import pytest
import torch

from search_spaces.losses import OFFICIAL_RECIPES
from trainables.losses import build_loss, loss_parameters, wce_weights

# Binary golden inputs: logits [0, ln 3] -> p = [0.5, 0.75]; targets y = [1, 0].
Z = torch.tensor([0.0, math.log(3.0)], dtype=torch.float64)
Y = torch.tensor([1.0, 0.0], dtype=torch.float64)

GOLDEN = [
    # ce: (-ln 0.5 - ln 0.25) / 2 = (0.693147 + 1.386294) / 2
    ({"name": "ce"}, 1.0397208),
    # wce, counts [3, 1] (n = 4), K = 1:
    #   w0 = log10(1/3 + 1) = 0.1249387, w1 = log10(3/1 + 1) = 0.6020600
    #   (w1 * 0.693147 + w0 * 1.386294) / 2 = (0.4173167 + 0.1732018) / 2   (divided by N_v)
    ({"name": "wce", "class_counts": [3, 1], "k": 1.0}, 0.2952592),
    # focal gamma 2: (0.5^2 * 0.693147 + 0.75^2 * 1.386294) / 2 = (0.1732868 + 0.7797905) / 2
    ({"name": "focal", "gamma": 2.0}, 0.4765386),
    # dice, squared, s = 1:
    #   pos0: 1 - (2*0.5 + 1) / (0.25 + 1 + 1) = 1 - 2/2.25 = 0.1111111
    #   pos1: 1 - 1 / (0.5625 + 0 + 1) = 1 - 0.64 = 0.36;  mean 0.2355556
    ({"name": "dice"}, 0.2355556),
    # dice, linear: pos0 1 - 2/2.5 = 0.2; pos1 1 - 1/1.75 = 0.4285714; mean 0.3142857
    ({"name": "dice", "square": False}, 0.3142857),
    # dice, squared, set scope: 1 - (2*0.5 + 1) / (0.8125 + 1 + 1) = 1 - 2/2.8125
    ({"name": "dice", "scope": "set"}, 0.2888889),
    # tversky alpha 0.3 beta 0.7, s = 1:
    #   pos0: tp 0.5, denom 0.5 + 0 + 0.7*0.5 = 0.85 -> 1 - 1.5/1.85 = 0.1891892
    #   pos1: tp 0, denom 0.3*0.75 = 0.225 -> 1 - 1/1.225 = 0.1836735;  mean 0.1864313
    ({"name": "tversky", "alpha": 0.3, "beta": 0.7}, 0.1864313),
    # dsc alpha 1, linear: q = (1-p) p
    #   pos0: q = 0.25 -> 1 - (0.5 + 1)/(0.25 + 1 + 1) = 0.3333333
    #   pos1: q = 0.1875 -> 1 - 1/1.1875 = 0.1578947;  mean 0.2456140
    ({"name": "dsc", "alpha": 1.0}, 0.2456140),
]


@pytest.mark.parametrize("spec,expected", GOLDEN, ids=[s["name"] for s, _ in GOLDEN])
def test_binary_golden_values(spec: dict, expected: float) -> None:
    assert build_loss(spec)(Z, Y).item() == pytest.approx(expected, abs=1e-6)


def test_multiclass_dice_is_a_macro_average_over_classes() -> None:
    # logits [0, 0] -> P = [0.5, 0.5], target class 0, squared dice, s = 1:
    #   class 0 (y=1): 1 - 2/2.25 = 0.1111111; class 1 (y=0): 1 - 1/1.25 = 0.2
    #   macro: (0.1111111 + 0.2) / 2 = 0.1555556
    loss = build_loss({"name": "dice"})(torch.zeros(1, 2), torch.tensor([0]))
    assert loss.item() == pytest.approx(0.1555556, abs=1e-6)


def test_wce_divides_by_valid_count_not_weight_sum() -> None:
    logits = torch.randn(4, 3, dtype=torch.float64)
    target = torch.tensor([0, 1, 2, 0])
    counts = [50, 30, 20]
    weights = torch.tensor(wce_weights(counts, 1.0), dtype=torch.float64)
    ours = build_loss({"name": "wce", "class_counts": counts})(logits, target)
    nll = torch.nn.functional.cross_entropy(logits, target, reduction="none")
    assert ours.item() == pytest.approx((weights[target] * nll).sum().item() / 4)
    torch_style = torch.nn.functional.cross_entropy(logits, target, weight=weights)
    assert ours.item() != pytest.approx(torch_style.item())


def test_wce_with_uniform_unit_weights_equals_ce() -> None:
    # Balanced counts [5, 5, 5]: w = log10(10/5 + K); K = 8 gives log10(10) = 1 for all.
    logits = torch.randn(6, 3, dtype=torch.float64)
    target = torch.tensor([0, 1, 2, 2, 1, 0])
    wce = build_loss({"name": "wce", "class_counts": [5, 5, 5], "k": 8.0})
    assert wce(logits, target).item() == pytest.approx(
        build_loss({"name": "ce"})(logits, target).item()
    )


def random_tagging(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(4, 6, 5, generator=gen, dtype=torch.float64) * 3
    target = torch.randint(0, 5, (4, 6), generator=gen)
    target[:, 4:] = -100
    return logits, target


def as_binary(logits: torch.Tensor, target: torch.Tensor):
    """One logit per position and 0/1 targets (classes > 2 positive), -100 kept."""
    binary = torch.where(target == -100, -100, (target > 2).long()).double()
    return logits[..., 0], binary


@pytest.mark.parametrize("binary", [False, True])
def test_focal_with_gamma_zero_equals_ce(binary: bool) -> None:
    logits, target = random_tagging()
    if binary:
        logits, target = logits[..., 0], (target > 2).double()
    focal = build_loss({"name": "focal", "gamma": 0.0})(logits, target)
    ce = build_loss({"name": "ce"})(logits, target)
    assert focal.item() == pytest.approx(ce.item(), rel=1e-12)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("scope", ["example", "set"])
@pytest.mark.parametrize("smooth", [1.0, 0.3])
def test_tversky_half_half_equals_linear_dice_with_double_smoothing(
    scope: str, smooth: float, binary: bool
) -> None:
    logits, target = random_tagging()
    if binary:
        logits, target = as_binary(logits, target)
    tversky = build_loss(
        {"name": "tversky", "alpha": 0.5, "beta": 0.5, "smooth": smooth, "scope": scope}
    )(logits, target)
    dice = build_loss({"name": "dice", "square": False, "smooth": 2 * smooth, "scope": scope})(
        logits, target
    )
    assert tversky.item() == pytest.approx(dice.item(), rel=1e-12)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("square", [False, True])
@pytest.mark.parametrize("scope", ["example", "set"])
def test_dsc_with_alpha_zero_equals_dice(square: bool, scope: str, binary: bool) -> None:
    logits, target = random_tagging(1)
    if binary:
        logits, target = as_binary(logits, target)
    dsc = build_loss({"name": "dsc", "alpha": 0.0, "square": square, "scope": scope})
    dice = build_loss({"name": "dice", "square": square, "scope": scope})
    assert dsc(logits, target).item() == pytest.approx(dice(logits, target).item(), rel=1e-12)


def reference_binary_loss(spec: dict, logits: torch.Tensor, target: torch.Tensor, mask):
    """The equations of docs/losses.md written out plainly, on the valid positions only."""
    keep = (target != -100) & mask
    p, y = torch.sigmoid(logits[keep]), target[keep]
    smooth, square = spec.get("smooth", 1.0), spec.get("square", spec["name"] == "dice")
    if spec["name"] == "focal":
        p_t = torch.where(y == 1, p, 1 - p)
        return (-((1 - p_t) ** spec.get("gamma", 2.0)) * torch.log(p_t)).mean()
    if spec["name"] == "tversky":
        alpha, beta = spec.get("alpha", 0.5), spec.get("beta", 0.5)
        power = 2 if spec.get("square", False) else 1
        numer = p * y
        denom = p * y + alpha * p**power * (1 - y) + beta * (1 - p) ** power * y
    else:
        u = (1 - p) ** spec["alpha"] * p if spec["name"] == "dsc" else p
        numer = 2 * u * y
        denom = u * u + y * y if square else u + y
    if spec.get("scope", "example") == "set":
        return 1 - (numer.sum() + smooth) / (denom.sum() + smooth)
    return (1 - (numer + smooth) / (denom + smooth)).mean()


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "focal", "gamma": 2.0},
        {"name": "focal", "gamma": 0.5},
        {"name": "dice"},
        {"name": "dice", "square": False, "scope": "set", "smooth": 0.5},
        {"name": "tversky", "alpha": 0.3, "beta": 0.7},
        {"name": "tversky", "alpha": 0.8, "beta": 0.4, "scope": "set"},
        {"name": "tversky", "alpha": 0.6, "beta": 0.4, "square": True, "scope": "set"},
        {"name": "dsc", "alpha": 0.1},
        {"name": "dsc", "alpha": 1.0, "square": True},
        {"name": "dsc", "alpha": 0.01, "square": True, "scope": "set"},
    ],
    ids=lambda spec: ",".join(f"{k}={v}" for k, v in spec.items()),
)
def test_fused_binary_path_matches_the_equations(spec: dict) -> None:
    # The binary losses run as one autograd node with a hand-written backward; both
    # the value and the gradient must match the plain equations under autograd.
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(3, 40, generator=gen, dtype=torch.float64) * 3
    target = (torch.rand(3, 40, generator=gen) > 0.8).double()
    target[2, 30:] = -100
    mask = torch.rand(3, 40, generator=gen) > 0.25
    ours_z = logits.clone().requires_grad_()
    ours = build_loss(spec)(ours_z, target, mask)
    ours.backward()
    ref_z = logits.clone().requires_grad_()
    expected = reference_binary_loss(spec, ref_z, target, mask)
    expected.backward()
    assert ours.item() == pytest.approx(expected.item(), rel=1e-12)
    assert ours_z.grad is not None and ref_z.grad is not None
    torch.testing.assert_close(ours_z.grad, ref_z.grad, rtol=1e-10, atol=1e-15)


def test_multiclass_tversky_weights_do_not_cancel() -> None:
    # Pooling all classes into one dice would make alpha and beta cancel out (FP = FN
    # in total under softmax); the per-class macro average keeps them apart.
    logits, target = random_tagging()
    fp_heavy = build_loss({"name": "tversky", "alpha": 0.9, "beta": 0.1})(logits, target)
    fn_heavy = build_loss({"name": "tversky", "alpha": 0.1, "beta": 0.9})(logits, target)
    assert abs(fp_heavy.item() - fn_heavy.item()) > 1e-3


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.1])
def test_dsc_is_lowest_at_one_over_one_plus_alpha_for_a_positive(alpha: float) -> None:
    # q = (1-p)^alpha p peaks at p = 1/(1+alpha); the loss of a positive is lowest there.
    p = torch.linspace(0.01, 0.999, 2000, dtype=torch.float64)
    logits = torch.log(p) - torch.log1p(-p)
    loss_fn = build_loss({"name": "dsc", "alpha": alpha})
    losses = torch.stack(
        [loss_fn(z.reshape(1), torch.ones(1, dtype=torch.float64)) for z in logits]
    )
    best = p[losses.argmin()].item()
    assert best == pytest.approx(1 / (1 + alpha), abs=2e-3)


def test_dsc_alpha_one_pushes_a_confident_negative_up() -> None:
    # For alpha = 1 a negative's loss 1 - s/(q + s) falls as p rises past 0.5, so
    # gradient descent raises p: why F1 collapsed for users with alpha = 1.
    z = torch.tensor([math.log(0.7 / 0.3)], dtype=torch.float64, requires_grad=True)
    build_loss({"name": "dsc", "alpha": 1.0})(z, torch.zeros(1, dtype=torch.float64)).backward()
    assert z.grad is not None and z.grad.item() < 0
    small = torch.tensor([math.log(0.7 / 0.3)], dtype=torch.float64, requires_grad=True)
    build_loss({"name": "dsc", "alpha": 0.01})(
        small, torch.zeros(1, dtype=torch.float64)
    ).backward()
    assert small.grad is not None and small.grad.item() > 0


def _official_dsc_binary(
    logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """The official ``DiceLoss`` on one-logit inputs, as its MRC scripts call it
    (``smooth=1, alpha=0.01, square_denominator=True, with_logits=True``), written
    from its equations: masked probabilities, then one score over every position."""
    m = mask.double().reshape(-1)
    p = torch.sigmoid(logits.reshape(-1)) * m
    y = target.reshape(-1).double() * m
    q = (1 - p) ** 0.01 * p
    return 1 - (2 * (q * y).sum() + 1) / ((q * q).sum() + (y * y).sum() + 1)


def _official_dsc_multiclass(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The official ``DiceLoss`` on ``[N, C]`` logits, as its GLUE/TNEWS scripts call it:
    softmax, one score per row and class, the classes' losses summed, mean over rows."""
    p = torch.softmax(logits, dim=1)
    y = torch.nn.functional.one_hot(target, logits.shape[1]).double()
    total = torch.zeros(logits.shape[0], dtype=torch.float64)
    for c in range(logits.shape[1]):
        q = (1 - p[:, c]) ** 0.01 * p[:, c]
        total = total + 1 - (2 * q * y[:, c] + 1) / (q * q + y[:, c] * y[:, c] + 1)
    return total.mean()


def _value_and_grad(fn, logits: torch.Tensor) -> tuple[float, torch.Tensor]:  # type: ignore[no-untyped-def]
    z = logits.detach().clone().requires_grad_(True)
    loss = fn(z)
    loss.backward()
    assert z.grad is not None
    return loss.item(), z.grad


def test_official_binary_recipe_equals_the_official_loss_in_value_and_gradient() -> None:
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 32, generator=gen, dtype=torch.float64) * 4
    target = (torch.rand(4, 32, generator=gen) > 0.85).double()
    mask = torch.rand(4, 32, generator=gen) > 0.2
    ours = build_loss(OFFICIAL_RECIPES["binary"])
    value, grad = _value_and_grad(lambda z: ours(z, target, mask), logits)
    ref_value, ref_grad = _value_and_grad(lambda z: _official_dsc_binary(z, target, mask), logits)
    assert value == pytest.approx(ref_value, abs=1e-9)
    torch.testing.assert_close(grad, ref_grad, atol=1e-9, rtol=0)


@pytest.mark.parametrize("n_classes", [2, 5])
def test_official_multiclass_recipe_equals_the_official_loss_in_value_and_gradient(
    n_classes: int,
) -> None:
    gen = torch.Generator().manual_seed(n_classes)
    logits = torch.randn(24, n_classes, generator=gen, dtype=torch.float64) * 3
    target = torch.randint(0, n_classes, (24,), generator=gen)
    ours = build_loss(OFFICIAL_RECIPES["multiclass"])
    value, grad = _value_and_grad(lambda z: ours(z, target), logits)
    ref_value, ref_grad = _value_and_grad(lambda z: _official_dsc_multiclass(z, target), logits)
    assert value == pytest.approx(ref_value, abs=1e-9)
    torch.testing.assert_close(grad, ref_grad, atol=1e-9, rtol=0)


def test_the_binary_recipe_is_not_the_official_loss_on_multiclass_inputs() -> None:
    # Why there are two recipes: set scope on a 2-class softmax is another loss.
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(24, 2, generator=gen, dtype=torch.float64) * 3
    target = torch.randint(0, 2, (24,), generator=gen)
    wrong = build_loss(OFFICIAL_RECIPES["binary"])(logits, target).item()
    assert abs(wrong - _official_dsc_multiclass(logits, target).item()) > 1e-3


def test_dsc_at_saturated_softmax_uses_exact_log_of_one_minus_p() -> None:
    # Class 0 leads by 30 nats: p0 = 1 - 2e^-30 rounds to exactly 1 in float32, but
    # 1 - p0 is summed from the other classes, so (1 - p0)^0.01 matches float64.
    logits = torch.tensor([[30.0, 0.0, 0.0], [0.0, 30.0, 0.0]])
    target = torch.tensor([0, 2])
    assert torch.softmax(logits, -1)[0, 0].item() == 1.0
    loss_fn = build_loss({"name": "dsc", "alpha": 0.01})
    assert loss_fn(logits, target).item() == pytest.approx(
        loss_fn(logits.double(), target).item(), rel=1e-5
    )


def test_focal_at_saturated_softmax_keeps_gamma_below_one_exact() -> None:
    logits = torch.tensor([[0.0, 25.0, 0.0]], requires_grad=True)
    loss_fn = build_loss({"name": "focal", "gamma": 0.5})
    loss = loss_fn(logits, torch.tensor([1]))
    assert loss.item() == pytest.approx(
        loss_fn(logits.detach().double(), torch.tensor([1])).item(), rel=1e-5
    )
    loss.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_smooth_zero_has_its_limit_not_nan() -> None:
    # With s = 0 a negative's ratio is 0 / p^2 = 0 for every p: loss exactly 1.
    loss = build_loss({"name": "dice", "smooth": 0.0})(torch.tensor([-100.0]), torch.tensor([0.0]))
    assert loss.item() == 1.0


BAD = [
    ({"name": "focall"}, "unknown loss 'focall'; valid: ce, dice, dsc, focal, tversky, wce"),
    ({}, "needs a 'name'"),
    (
        {"name": "dice", "alpha": 0.5},
        r"unknown parameter\(s\) \['alpha'\] for loss 'dice'; "
        "valid: background, classes, labels, ohem_ratio, ohem_rule, scope, smooth, square",
    ),
    ({"name": "tversky", "alpha": 1.5}, "tversky.alpha: Input should be less than or equal to 1"),
    ({"name": "tversky", "beta": -0.1}, "tversky.beta: Input should be greater than or equal"),
    ({"name": "dsc", "alpha": 2.0}, "dsc.alpha: Input should be less than or equal to 1"),
    ({"name": "focal", "gamma": -1.0}, "focal.gamma: Input should be greater than or equal to 0"),
    ({"name": "focal", "gamma": 1e308}, "focal.gamma: Input should be less than or equal to 100"),
    ({"name": "dice", "smooth": -1.0}, "dice.smooth: Input should be greater than or equal to 0"),
    ({"name": "dice", "scope": "batch"}, "dice.scope: Input should be 'example' or 'set'"),
    (
        {"name": "dice", "classes": "max"},
        "dice.classes: Input should be 'mean', 'sum' or 'foreground'",
    ),
    ({"name": "dsc", "square": "yes"}, "dsc.square: Input should be a valid boolean"),
    ({"name": "wce"}, "wce needs class_counts"),
    (
        {"name": "wce", "class_counts": [10, 0]},
        "wce.class_counts.1: Input should be greater than 0",
    ),
    ({"name": "wce", "class_counts": [10]}, "one count per class"),
    # counts [90, 10], K = 0.5: w0 = log10(10/90 + 0.5) = log10(0.611) < 0
    ({"name": "wce", "class_counts": [90, 10], "k": 0.5}, "k=0.5 makes the weight of class 0"),
]


@pytest.mark.parametrize("spec,message", BAD, ids=[m[:30] for _, m in BAD])
def test_bad_parameters_name_the_parameter_and_the_rule(spec: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_loss(spec)


def test_wce_counts_must_match_the_number_of_classes() -> None:
    loss_fn = build_loss({"name": "wce", "class_counts": [5, 3, 2]})
    with pytest.raises(ValueError, match="3 class weights but the logits have 4 classes"):
        loss_fn(torch.randn(2, 4), torch.tensor([0, 1]))


def test_loss_parameters_lists_defaults() -> None:
    assert loss_parameters("dsc") == {
        "alpha": 1.0,
        "smooth": 1.0,
        "square": False,
        "scope": "example",
        "classes": "mean",
        "background": None,
        "ohem_ratio": 0.0,
        "ohem_rule": "hardest",
    }
    assert loss_parameters("tversky")["beta"] == 0.5
