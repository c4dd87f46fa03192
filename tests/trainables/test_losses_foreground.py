"""The dice family's foreground average (``classes: foreground``) and Tversky's
``square`` and ``ohem_ratio``, against values computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from search_spaces.losses import LossSpecError
from search_spaces.settings import DicesweepSettings
from trainables.losses import build_loss
from trainables.train import run_trial

TAGS = ("B-PER", "I-PER", "O")
# Two words, softmax probabilities chosen as logits' logs:
#   word 0: P = [0.5, 0.25, 0.25], gold B-PER;  word 1: P = [0.25, 0.25, 0.5], gold O.
LOGITS = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.25, 0.5]], dtype=torch.float64))
TARGET = torch.tensor([0, 2])
# Tversky alpha 0.6, beta 0.4, s = 1, set scope, per class (TP, FP, FN are sums over words):
#   B-PER: TP 0.5, FP 0.25, FN 0.5 -> 1 - 1.5 / (0.5 + 0.15 + 0.2 + 1) = 0.35 / 1.85 = 7/37
#   I-PER: TP 0,   FP 0.5,  FN 0   -> 1 - 1 / (0.3 + 1)              = 3/13
#   O:     TP 0.5, FP 0.25, FN 0.5 -> 7/37
B_PER, I_PER, O_TERM = 7 / 37, 3 / 13, 7 / 37
TVERSKY = {"name": "tversky", "alpha": 0.6, "beta": 0.4, "scope": "set"}


def test_foreground_leaves_out_the_o_term() -> None:
    foreground = build_loss({**TVERSKY, "classes": "foreground"}, labels=TAGS)
    every_tag = build_loss(TVERSKY, labels=TAGS)
    assert foreground(LOGITS, TARGET).item() == pytest.approx((B_PER + I_PER) / 2, abs=1e-12)
    assert every_tag(LOGITS, TARGET).item() == pytest.approx(
        (B_PER + I_PER + O_TERM) / 3, abs=1e-12
    )


def test_foreground_leaves_out_the_tag_the_spec_names() -> None:
    spec = {**TVERSKY, "classes": "foreground", "background": "I-PER"}
    value = build_loss(spec, labels=TAGS)(LOGITS, TARGET).item()
    assert value == pytest.approx((B_PER + O_TERM) / 2, abs=1e-12)


def test_foreground_by_hand_on_example_level_squared_dice() -> None:
    # Squared dice, s = 1, per word then averaged over the 2 words, per class:
    #   B-PER: word 0 (y 1, p 0.5): 1 - 2/2.25 = 1/9;    word 1 (y 0, p 0.25): 1 - 1/1.0625 = 1/17
    #   I-PER: word 0 (y 0, p 0.25): 1/17;               word 1 (y 0, p 0.25): 1/17
    #   O:     word 0 (y 0, p 0.25): 1/17;               word 1 (y 1, p 0.5): 1/9
    # foreground: ((1/9 + 1/17)/2 + 1/17) / 2
    spec = {"name": "dice", "classes": "foreground"}
    value = build_loss(spec, labels=TAGS)(LOGITS, TARGET).item()
    assert value == pytest.approx(((1 / 9 + 1 / 17) / 2 + 1 / 17) / 2, abs=1e-12)


@pytest.mark.parametrize(
    "loss",
    [
        {"name": "dice"},
        {"name": "dice", "square": False, "scope": "set", "ohem_ratio": 1.0},
        {"name": "tversky", "alpha": 0.9, "beta": 0.1, "scope": "set"},
        {"name": "tversky", "alpha": 0.3, "beta": 0.7, "square": True},
        {"name": "dsc", "alpha": 0.1, "scope": "set"},
    ],
    ids=lambda spec: ",".join(f"{k}={v}" for k, v in spec.items()),
)
def test_foreground_is_the_mean_without_the_background_term(loss: dict[str, object]) -> None:
    # The O term on its own is a binary problem: p = P(O) as sigmoid(log(p / (1 - p))).
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 7, 4, generator=gen, dtype=torch.float64) * 2
    target = torch.randint(0, 4, (3, 7), generator=gen)
    target[2, 5:] = -100
    labels = ("B-LOC", "O", "I-LOC", "B-ORG")  # O is class 1
    every_tag = build_loss(loss, labels=labels)(logits, target).item()
    foreground = build_loss({**loss, "classes": "foreground"}, labels=labels)(logits, target)
    p_o = torch.softmax(logits, -1)[..., 1]
    y_o = torch.where(target == -100, -100, (target == 1).long()).double()
    o_term = build_loss(loss)(torch.log(p_o / (1 - p_o)), y_o).item()
    assert foreground.item() == pytest.approx((4 * every_tag - o_term) / 3, abs=1e-10)


def test_foreground_of_binary_inputs_is_the_positive_class() -> None:
    # One logit a position (MRC start/end): its one class is the foreground already.
    logits = torch.tensor([0.0, math.log(3.0)], dtype=torch.float64)
    target = torch.tensor([1.0, 0.0], dtype=torch.float64)
    for loss in ({"name": "dice"}, TVERSKY, {"name": "dsc", "alpha": 0.01, "scope": "set"}):
        plain = build_loss(loss)(logits, target).item()
        assert build_loss({**loss, "classes": "foreground"})(logits, target).item() == plain


@pytest.mark.parametrize(
    ("spec", "labels", "message"),
    [
        (
            {**TVERSKY, "background": "O"},
            TAGS,
            "background names the tag that classes 'foreground' leaves out; with classes "
            "'mean' it has no use",
        ),
        (
            {**TVERSKY, "classes": "foreground"},
            ("0", "1"),
            "background 'O' is not a tag of the task: classes 'foreground' leaves out one "
            "of its labels \\(0, 1\\)",
        ),
        (
            {**TVERSKY, "classes": "foreground", "background": "B-MISC"},
            TAGS,
            "background 'B-MISC' is not a tag of the task",
        ),
        ({**TVERSKY, "classes": "foreground", "background": ""}, TAGS, "tversky.background"),
        ({"name": "dice", "classes": "macro"}, TAGS, "dice.classes: Input should be 'mean'"),
    ],
)
def test_bad_foreground_specs_name_the_field_and_the_rule(
    spec: dict[str, object], labels: tuple[str, ...], message: str
) -> None:
    with pytest.raises(LossSpecError, match=message):
        build_loss(spec, labels=labels)


def test_multiclass_foreground_without_labels_says_what_it_needs() -> None:
    loss_fn = build_loss({**TVERSKY, "classes": "foreground"})
    with pytest.raises(ValueError, match=r"needs the background's class index in 0\.\.2"):
        loss_fn(LOGITS, TARGET)


# Tversky's square and ohem_ratio. Binary golden inputs: logits [0, ln 3] -> p = [0.5,
# 0.75], y = [1, 0]; alpha 0.3, beta 0.7, s = 1, squared: beta (1-p)^2 y, alpha p^2 (1-y).
Z = torch.tensor([0.0, math.log(3.0)], dtype=torch.float64)
Y = torch.tensor([1.0, 0.0], dtype=torch.float64)
SQUARED = {"name": "tversky", "alpha": 0.3, "beta": 0.7, "square": True}


def test_squared_tversky_by_hand() -> None:
    # pos0: TP 0.5, FN 0.7 * 0.25 = 0.175 -> 1 - 1.5/1.675 = 0.175/1.675 = 0.1044776
    # pos1: TP 0,   FP 0.3 * 0.5625 = 0.16875 -> 1 - 1/1.16875 = 0.1443850;  mean 0.1244313
    assert build_loss(SQUARED)(Z, Y).item() == pytest.approx(0.1244313, abs=1e-6)
    # set: 1 - 1.5 / (0.5 + 0.16875 + 0.175 + 1) = 0.34375 / 1.84375 = 0.1864407
    set_level = build_loss({**SQUARED, "scope": "set"})(Z, Y).item()
    assert set_level == pytest.approx(0.1864407, abs=1e-6)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("scope", ["example", "set"])
def test_squared_tversky_half_half_is_squared_dice_with_double_smoothing(
    scope: str, binary: bool
) -> None:
    # p^2 + y^2 = 2py + p^2 (1-y) + (1-p)^2 y for y in {0, 1}.
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(4, 6, 5, generator=gen, dtype=torch.float64) * 3
    target = torch.randint(0, 5, (4, 6), generator=gen)
    target[:, 4:] = -100
    if binary:
        logits = logits[..., 0]
        target = torch.where(target == -100, -100, (target > 2).long()).double()
    tversky = {"name": "tversky", "square": True, "scope": scope, "smooth": 0.4}
    dice = {"name": "dice", "square": True, "scope": scope, "smooth": 0.8}
    assert build_loss(tversky)(logits, target).item() == pytest.approx(
        build_loss(dice)(logits, target).item(), rel=1e-12
    )


@pytest.mark.parametrize("square", [False, True])
def test_tversky_ohem_by_hand(square: bool) -> None:
    # Positives 0, 5; negatives ranked by p: 7 (logit 3), 2 (2), 9 (1), ... Ratio 1 keeps
    # 2 x 1 = 2 negatives: 7 and 2. Set level, alpha 0.6, beta 0.4, s = 1, over
    # positions 0, 5, 7, 2 only; squared: p^2 for the negatives, (1-p)^2 for the positives.
    logits = torch.tensor([0.2, 0.0, 2.0, -1.0, 0.5, -0.3, -2.0, 3.0, -0.5, 1.0]).double()
    target = torch.tensor([1, 0, 0, 0, 0, 1, 0, 0, 0, 0]).double()
    p = torch.sigmoid(logits)
    power = 2 if square else 1
    tp = p[0] + p[5]
    fp = p[7] ** power + p[2] ** power
    fn = (1 - p[0]) ** power + (1 - p[5]) ** power
    expected = 1 - (tp + 1) / (tp + 0.6 * fp + 0.4 * fn + 1)
    value = build_loss({**TVERSKY, "ohem_ratio": 1.0, "square": square})(logits, target)
    assert value.item() == pytest.approx(expected.item(), abs=1e-12)


class _Reports:
    """A reporter that keeps nothing: the trial's final metrics are what is checked."""

    def latest_checkpoint(self) -> Path | None:
        return None

    def report(self, metrics: dict[str, float], checkpoint_dir: Path) -> None:
        pass

    def progress(self, step: int, total: int, loss: float) -> None:
        pass


def _toy_trial(loss: dict[str, object]) -> dict[str, object]:
    return {
        "sweep_id": "test",
        "dataset": "conll2003",  # the toy CoNLL-style set: O, B-PER, I-PER, B-LOC
        "variant": "original",
        "model": "tiny-bert",
        "loss": loss,
        "seed": 0,
        "training": {
            "epochs": 2,
            "learning_rate": 2e-3,
            "batch_size": 16,
            "max_seq_length": 32,
            "warmup_ratio": 0.0,
        },
    }


def test_a_tagging_trial_leaves_out_its_tasks_o(toy_home: DicesweepSettings) -> None:
    # The trainable hands the task's tags to build_loss, so the spec names a tag, not an index.
    loss = {"name": "tversky", "alpha": 0.3, "beta": 0.7, "scope": "set", "classes": "foreground"}
    assert run_trial(_toy_trial(loss), _Reports(), toy_home)["eval_f1"] > 50.0
    with pytest.raises(LossSpecError, match="background 'B-MISC' is not a tag of the task"):
        run_trial(_toy_trial({**loss, "background": "B-MISC"}), _Reports(), toy_home)
