"""The MRC-NER loss totals against the official code's ``compute_loss`` (its
tasks/mrc_ner/train.py, loss/dice_loss.py and loss/focal_loss.py, their arithmetic
re-derived here) on a fixed batch in the official layout: start and end heads, the
answerability head, no span head (its CoNLL-2003 scripts), to 1e-6."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from search_spaces.mrc_ner import MrcNerSpec
from trainables.losses import build_loss
from trainables.tasks.mrc_ner_loss import mrc_ner_losses
from trainables.tasks.mrc_ner_model import MrcNerOutput

B, L = 4, 12
ANSWERABLE_RATIO = 0.4


def official_batch() -> dict[str, Tensor]:
    """Four windows of 12 positions: ``[CLS] q q [SEP]`` then context sub-tokens, the
    last ``[SEP]`` and padding; 7 starts, 4 ends, 3 answerable windows."""
    context = [(4, 10), (4, 9), (4, 8), (4, 11)]  # context sub-tokens, then the last [SEP]
    mask = torch.zeros(B, L, dtype=torch.long)
    for row, (first, sep) in enumerate(context):
        mask[row, first : sep + 1] = 1  # token_type_ids == 1: context and the last [SEP]
    start = torch.zeros(B, L, dtype=torch.long)
    end = torch.zeros(B, L, dtype=torch.long)
    for row, col in [(0, 4), (0, 6), (0, 8), (1, 5), (1, 7), (3, 4), (3, 9)]:
        start[row, col] = 1
    for row, col in [(0, 5), (1, 8), (3, 4), (3, 10)]:
        end[row, col] = 1
    answerable = torch.tensor([1, 1, 0, 1])
    return {"word_mask": mask, "start_labels": start, "end_labels": end, "answerable": answerable}


def logits(seed: int) -> MrcNerOutput:
    """Random logits in float64: the check is of the arithmetic, not of float32's
    rounding (the official focal forms ``1 - sigmoid(z)`` by subtraction)."""
    generator = torch.Generator().manual_seed(seed)
    shape = (B, L)
    start, end = (3 * torch.randn(shape, generator=generator, dtype=torch.float64) for _ in "se")
    answerable = 2 * torch.randn(B, generator=generator, dtype=torch.float64)
    return MrcNerOutput(start, end, None, answerable)


# The official arithmetic.


def official_bce(logit: Tensor, label: Tensor, mask: Tensor | None) -> Tensor:
    loss = F.binary_cross_entropy_with_logits(
        logit.view(-1), label.view(-1).float(), reduction="none"
    )
    if mask is None:
        return loss.mean()
    mask = mask.view(-1).float()
    return (loss * mask).sum() / mask.sum()


def official_two_dimensions(x: Tensor) -> Tensor:
    """``FocalLoss.convert_binary_pred_to_two_dimension``."""
    probs = torch.sigmoid(x).unsqueeze(-1)
    return torch.log(torch.cat([1 - probs, probs], dim=-1) + 1e-4)


def official_focal(logit: Tensor, label: Tensor, mask: Tensor | None, gamma: float) -> Tensor:
    inputs, target = official_two_dimensions(logit.view(-1)), label.view(-1).unsqueeze(-1)
    pt = F.softmax(inputs, dim=-1).gather(1, target).squeeze(-1)
    logpt = F.log_softmax(inputs, dim=-1).gather(1, target).squeeze(-1)
    loss = -1 * (1 - pt) ** gamma * logpt
    if mask is None:
        return loss.mean()
    mask = mask.view(-1).float()
    return (loss * mask).sum() / mask.sum()


def official_dice(logit: Tensor, label: Tensor, ohem: float, alpha: float = 0.01) -> Tensor:
    """``DiceLoss(with_logits=True, smooth=1, ohem_ratio=ohem, alpha=alpha,
    square_denominator=True)`` on ``(N, 1)`` logits and labels, no mask."""
    target = label.view(-1, 1)
    flat_input = torch.sigmoid(logit.view(-1))
    flat_target = target.view(-1).float()
    mask = torch.ones_like(target)
    if ohem > 0:
        pos_example, neg_example = target > 0.5, target <= 0.5
        pos_num = pos_example.sum() - (pos_example & (mask <= 0.5)).sum()
        keep_num = min(int(pos_num * ohem), neg_example.sum())
        neg_scores = torch.masked_select(flat_input, neg_example.bool())  # broadcasts to (N, N)
        threshold = torch.sort(neg_scores).values[-keep_num + 1]
        kept = torch.where((flat_input > threshold) | pos_example.view(-1), 1, 0)
        flat_input, flat_target = flat_input * kept, flat_target * kept
    flat_input = ((1 - flat_input) ** alpha) * flat_input
    intersection = torch.sum(flat_input * flat_target, -1)
    denominator = torch.sum(torch.square(flat_input), -1) + torch.sum(torch.square(flat_target), -1)
    return 1 - (2 * intersection + 1) / (denominator + 1)


def official_total(kind: str, out: MrcNerOutput, batch: dict[str, Tensor], **params: Any) -> Tensor:
    """``compute_loss`` and ``training_step``'s sum: start + end + 0.4 × answerable."""
    mask = batch["word_mask"]
    assert out.answerable_logits is not None
    pairs = [(out.start_logits, batch["start_labels"]), (out.end_logits, batch["end_labels"])]
    answerable = (out.answerable_logits, batch["answerable"])
    if kind == "bce":
        start, end = (official_bce(x, y, mask) for x, y in pairs)
        extra = official_bce(*answerable, None)
    elif kind == "focal":
        start, end = (official_focal(x, y, mask, params["gamma"]) for x, y in pairs)
        extra = official_focal(*answerable, None, params["gamma"])
    else:
        start, end = (official_dice(x, y, params["ohem"]) for x, y in pairs)
        extra = official_dice(*answerable, params["ohem"])
    return start + end + ANSWERABLE_RATIO * extra


DICE = {"name": "dsc", "alpha": 0.01, "smooth": 1, "square": True, "scope": "set"}
CASES = [
    ("bce", {"name": "ce"}, {}),
    ("dice", DICE, {"ohem": 0.0}),
    ("dice", {**DICE, "ohem_ratio": 0.3, "ohem_rule": "official"}, {"ohem": 0.3}),
    ("focal", {"name": "focal", "gamma": 3, "prob_offset": 1e-4}, {"gamma": 3}),
]


@pytest.mark.parametrize(
    ("kind", "spec", "params"), CASES, ids=["bce", "dice", "dice-ohem", "focal"]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_total_equals_the_official_compute_loss(
    kind: str, spec: dict[str, Any], params: dict[str, Any], seed: int
) -> None:
    batch, out = official_batch(), logits(seed)
    dice = spec["name"] == "dsc"
    settings = MrcNerSpec(
        span_head=False,
        answerable="train_infer",
        answerable_weight=ANSWERABLE_RATIO,
        labels="official",
        dice_positions="all" if dice else "context",
    )
    ours = mrc_ner_losses(out, batch, build_loss(spec), settings, None).total(settings)
    expected = official_total(kind, out, batch, **params)
    assert float(ours) == pytest.approx(float(expected), abs=1e-6, rel=0)


def test_official_ohem_keeps_no_negative_from_two_to_keep_on() -> None:
    """7 starts: ``int(7 × 0.3) = 2`` negatives to keep, and the official rule keeps none:
    the start term is the dice of the positives alone; 4 ends keep 1, and the rule keeps
    every negative above the lowest probability."""
    batch, out = official_batch(), logits(0)
    loss = build_loss({**DICE, "ohem_ratio": 0.3, "ohem_rule": "official"})
    positives = batch["start_labels"].bool()
    alone = build_loss(DICE)(out.start_logits[positives], batch["start_labels"][positives].float())
    assert float(loss(out.start_logits, batch["start_labels"].float())) == pytest.approx(
        float(alone), abs=1e-6
    )
    hardest = build_loss({**DICE, "ohem_ratio": 0.3})
    assert (
        abs(float(hardest(out.start_logits, batch["start_labels"].float())) - float(alone)) > 1e-3
    )
    p = torch.sigmoid(out.end_logits)
    lowest = p == p.min()
    kept = ~lowest | batch["end_labels"].bool()
    expected = build_loss(DICE)(out.end_logits[kept], batch["end_labels"][kept].float())
    got = loss(out.end_logits, batch["end_labels"].float())
    assert float(got) == pytest.approx(float(expected), abs=1e-6)


def test_official_ohem_is_for_binary_inputs() -> None:
    loss = build_loss({**DICE, "ohem_ratio": 0.3, "ohem_rule": "official"})
    with pytest.raises(ValueError, match="binary inputs only"):
        loss(torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2]))
