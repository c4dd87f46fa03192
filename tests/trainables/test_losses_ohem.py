"""OHEM (``ohem_ratio``) of dice, dsc and tversky: which negatives it keeps, on hand-built logits
whose hardest negatives are known, and that it never chooses a masked position."""

from __future__ import annotations

import pytest
import torch

from trainables.losses import build_loss

# Binary, one row of 10 positions: positives at 0 and 5; the negatives' logits are
# distinct, so their order of hardness (highest p first) is 7 (3.0), 2 (2.0), 9 (1.0),
# 4 (0.5), 1 (0.0), 8 (-0.5), 3 (-1.0), 6 (-2.0).
LOGITS = torch.tensor([0.2, 0.0, 2.0, -1.0, 0.5, -0.3, -2.0, 3.0, -0.5, 1.0], dtype=torch.float64)
TARGET = torch.tensor([1, 0, 0, 0, 0, 1, 0, 0, 0, 0], dtype=torch.float64)


def _without_ohem(loss: dict[str, object], keep: list[int]) -> float:
    """The same loss with OHEM off, over only the positions in ``keep``: what OHEM must
    equal when it keeps exactly those."""
    mask = torch.zeros_like(TARGET, dtype=torch.bool)
    mask[keep] = True
    return build_loss({**loss, "ohem_ratio": 0.0})(LOGITS, TARGET, mask).item()


def _kept_by_gradient(loss: dict[str, object], mask: torch.Tensor | None = None) -> set[int]:
    """The positions whose logit moves the loss: those OHEM kept."""
    z = LOGITS.clone().requires_grad_(True)
    build_loss(loss)(z, TARGET, mask).backward()
    assert z.grad is not None
    return {int(i) for i in torch.nonzero(z.grad).flatten()}


@pytest.mark.parametrize(
    ("ratio", "negatives"),
    [
        (0.5, [7]),  # floor(0.5 x 2) = 1: the hardest
        (1.0, [7, 2]),
        (1.5, [7, 2, 9]),  # floor(3.0)
        (1.4, [7, 2]),  # floor(2.8): at most ratio x positives
        (3.5, [7, 2, 9, 4, 1, 8, 3]),
        (100.0, [7, 2, 9, 4, 1, 8, 3, 6]),  # more than there are: every negative
    ],
)
@pytest.mark.parametrize(
    "loss",
    [
        {"name": "dice", "scope": "set"},
        {"name": "dice", "scope": "example"},
        {"name": "dsc", "alpha": 0.01, "square": True, "scope": "set"},
        {"name": "dsc", "alpha": 0.5, "scope": "example"},
        {"name": "tversky", "alpha": 0.6, "beta": 0.4, "scope": "set"},
        {"name": "tversky", "alpha": 0.3, "beta": 0.7, "square": True},
    ],
)
def test_ohem_keeps_the_positives_and_the_hardest_negatives(
    ratio: float, negatives: list[int], loss: dict[str, object]
) -> None:
    spec = {**loss, "ohem_ratio": ratio}
    assert _kept_by_gradient(spec) == {0, 5, *negatives}
    value = build_loss(spec)(LOGITS, TARGET).item()
    assert value == pytest.approx(_without_ohem(loss, [0, 5, *negatives]), abs=1e-12)


def test_ohem_by_hand_on_the_set_level_dice() -> None:
    # ratio 1, two positives: keep negatives 7 (p = sigmoid(3)) and 2 (p = sigmoid(2)).
    p = torch.sigmoid(LOGITS)
    kept_p = p[[0, 5, 7, 2]]
    kept_y = torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    expected = 1 - (2 * (kept_p * kept_y).sum() + 1) / ((kept_p**2).sum() + 2 + 1)
    value = build_loss({"name": "dice", "scope": "set", "ohem_ratio": 1.0})(LOGITS, TARGET)
    assert value.item() == pytest.approx(expected.item(), abs=1e-12)


def test_ohem_never_chooses_a_masked_position() -> None:
    # The two hardest negatives (7 and 2) and positive 5 are masked: OHEM ranks among
    # the valid negatives only, and counts one positive (0), so ratio 2 keeps 9 and 4.
    mask = torch.ones_like(TARGET, dtype=torch.bool)
    mask[[7, 2, 5]] = False
    spec = {"name": "dice", "scope": "set", "ohem_ratio": 2.0}
    assert _kept_by_gradient(spec, mask) == {0, 9, 4}
    huge = LOGITS.clone()
    huge[[7, 2, 5]] = torch.tensor([50.0, 40.0, -50.0], dtype=torch.float64)
    loss_fn = build_loss(spec)
    assert loss_fn(huge, TARGET, mask).item() == pytest.approx(
        loss_fn(LOGITS, TARGET, mask).item(), abs=1e-12
    )
    assert loss_fn(LOGITS, TARGET, mask).item() == pytest.approx(
        _without_ohem({"name": "dice", "scope": "set"}, [0, 9, 4]), abs=1e-12
    )


def test_ohem_with_no_positive_keeps_no_negative() -> None:
    # At most ratio x 0 negatives: nothing counts, and the loss is 0 with no gradient.
    z = LOGITS.clone().requires_grad_(True)
    loss = build_loss({"name": "dice", "scope": "set", "ohem_ratio": 0.3})(
        z, torch.zeros_like(TARGET)
    )
    loss.backward()
    assert loss.item() == 0.0
    assert z.grad is not None and not z.grad.any()


def test_ohem_ratio_zero_is_off() -> None:
    for loss in ({"name": "dice"}, {"name": "dsc", "alpha": 0.1, "scope": "set"}):
        off = build_loss(loss)(LOGITS, TARGET).item()
        assert build_loss({**loss, "ohem_ratio": 0.0})(LOGITS, TARGET).item() == off
        assert _kept_by_gradient(loss) == set(range(10))


def test_ohem_chooses_per_class_on_multiclass_inputs() -> None:
    # Three classes, six rows. Class 0: positives rows 0, 1; its negatives' p_0 order
    # is row 4 (logit 4), row 2 (2), row 5 (1), row 3 (0). Class 2: one positive (row 5)
    # and its hardest negative is row 0 (logit 3 on class 2). With ratio 1 class 0
    # keeps rows 4 and 2; class 2 keeps row 0; class 1 (positives 2, 3, 4) keeps its
    # three hardest negatives.
    logits = torch.tensor(
        [
            [5.0, 0.0, 3.0],
            [5.0, 0.0, 0.0],
            [2.0, 5.0, 0.0],
            [0.0, 5.0, 0.0],
            [4.0, 5.0, 0.0],
            [1.0, 0.0, 5.0],
        ],
        dtype=torch.float64,
    )
    target = torch.tensor([0, 0, 1, 1, 1, 2])
    spec = {"name": "dice", "scope": "set", "classes": "sum"}
    with_ohem = build_loss({**spec, "ohem_ratio": 1.0})(logits, target).item()
    probs = torch.softmax(logits, -1)
    expected = 0.0
    for cls, rows in ((0, [0, 1, 4, 2]), (1, [2, 3, 4, 0, 1, 5]), (2, [5, 0])):
        p, y = probs[rows, cls], (target[rows] == cls).double()
        expected += 1 - (2 * (p * y).sum().item() + 1) / ((p * p).sum() + (y * y).sum() + 1).item()
    assert with_ohem == pytest.approx(expected, abs=1e-12)
