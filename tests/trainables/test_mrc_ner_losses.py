"""NER as reading comprehension, loss side: on fixed batches, our start, end, span and
answerability losses for ce, focal, dice and dsc equal the official code's
(ShannonAI/dice_loss_for_NLP ``tasks/mrc_ner/train.py::compute_loss`` with
``loss/dice_loss.py`` and ``loss/focal_loss.py``), written here from its definitions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from search_spaces.losses import OFFICIAL_RECIPES
from search_spaces.mrc_ner import MrcNerSpec
from trainables.losses import build_loss
from trainables.tasks.base import Batch
from trainables.tasks.mrc_ner_loss import mrc_ner_losses, span_candidates
from trainables.tasks.mrc_ner_model import MrcNerOutput

# Three windows of 12 positions: [CLS], a 2-token query, [SEP], the sentence's words,
# [SEP], padding. Row 0: 6 words, entities (4, 5) and (8, 8); row 1: 4 words, none;
# row 2: 7 words (10 = the last, no padding), one entity (5, 9).
LENGTHS = [11, 9, 12]
WORDS = [range(4, 10), range(4, 8), range(4, 11)]
SPANS = [[(4, 5), (8, 8)], [], [(5, 9)]]
L = 12


def fixed_batch() -> Batch:
    rows = range(len(LENGTHS))
    word_mask = torch.zeros(3, L, dtype=torch.long)
    starts, ends = torch.zeros(3, L, dtype=torch.long), torch.zeros(3, L, dtype=torch.long)
    for row in rows:
        word_mask[row, list(WORDS[row])] = 1
        for start, end in SPANS[row]:
            starts[row, start], ends[row, end] = 1, 1
    return {
        "input_ids": torch.ones(3, L, dtype=torch.long),
        "word_mask": word_mask,
        "start_labels": starts,
        "end_labels": ends,
        "spans": SPANS,
        "answerable": torch.tensor([int(bool(SPANS[row])) for row in rows]),
    }


def fixed_outputs() -> MrcNerOutput:
    gen = torch.Generator().manual_seed(7)
    z = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64) * 3  # noqa: E731
    return MrcNerOutput(z(3, L), z(3, L), z(3, L, L), z(3))


def fixed_candidates(outputs: MrcNerOutput, batch: Batch) -> Tensor:
    gen = torch.Generator().manual_seed(11)
    return span_candidates(
        outputs.start_logits, outputs.end_logits, batch, "gold_pred_random", generator=gen
    )


# The official definitions, each on float64 tensors.


def official_masked_mean(per_position: Tensor, mask: Tensor) -> Tensor:
    """``(loss * mask).sum() / mask.sum()``, as ``compute_loss`` reduces BCE and focal."""
    m = mask.reshape(-1).double()
    return (per_position.reshape(-1) * m).sum() / m.sum()


def official_bce(z: Tensor, y: Tensor) -> Tensor:
    """``BCEWithLogitsLoss(reduction="none")`` per position."""
    return F.binary_cross_entropy_with_logits(
        z.reshape(-1), y.reshape(-1).double(), reduction="none"
    )


def official_focal(z: Tensor, y: Tensor, gamma: float, eps: float = 0.0) -> Tensor:
    """``FocalLoss(gamma, reduction="none")`` over ``convert_binary_pred_to_two_dimension``:
    log-probabilities ``log([1 - p, p] + eps)``, re-normalised by the softmax. The
    official ``eps`` is 1e-4 (against fp16's rounding to 0); ours computes exact
    log-probabilities, so the formula is compared at ``eps = 0``."""
    p = torch.sigmoid(z.reshape(-1))
    log_two = torch.log(torch.stack([1 - p, p], dim=-1) + eps)
    target = y.reshape(-1).long().unsqueeze(-1)
    pt = torch.softmax(log_two, dim=-1).gather(1, target).squeeze(-1)
    log_pt = torch.log_softmax(log_two, dim=-1).gather(1, target).squeeze(-1)
    return -((1 - pt) ** gamma) * log_pt


def official_dice(z: Tensor, y: Tensor, alpha: float, mask: Tensor | None = None) -> Tensor:
    """``DiceLoss(with_logits=True, smooth=1, square_denominator=True, alpha)`` on one-logit
    inputs (``_binary_class``): probabilities and targets times the mask where one is
    given, then one squared-denominator score over every position."""
    p, t = torch.sigmoid(z.reshape(-1)), y.reshape(-1).double()
    if mask is not None:
        p, t = p * mask.reshape(-1), t * mask.reshape(-1)
    q = (1 - p) ** alpha * p
    return 1 - (2 * (q * t).sum() + 1) / ((q * q).sum() + (t * t).sum() + 1)


Official = Callable[[Tensor, Tensor, Tensor | None], Tensor]


def official_terms(
    name: str, outputs: MrcNerOutput, batch: Batch, candidates: Tensor, masked_dice: bool
) -> dict[str, Tensor]:
    """The four terms of ``compute_loss`` for loss ``name``: start and end, the span term
    over ``torch.masked_select`` of the candidates, answerability over the windows."""
    words = batch["word_mask"]
    span_y = torch.zeros(3, L, L, dtype=torch.float64)
    for row, spans in enumerate(SPANS):
        for start, end in spans:
            span_y[row, start, end] = 1
    chosen = candidates.reshape(-1)
    span_z = torch.masked_select(outputs.span_logits.reshape(-1), chosen)  # type: ignore[union-attr]
    span_t = torch.masked_select(span_y.reshape(-1), chosen)
    answer_z, answer_y = outputs.answerable_logits, batch["answerable"]
    assert answer_z is not None
    if name == "ce":  # the official "bce"
        per = lambda z, y: official_bce(z, y)  # noqa: E731
        mean = lambda z, y: official_bce(z, y).mean()  # noqa: E731
    elif name == "focal":
        per = lambda z, y: official_focal(z, y, 2.0)  # noqa: E731
        mean = lambda z, y: official_focal(z, y, 2.0).mean()  # noqa: E731
    else:
        alpha = 0.0 if name == "dice" else 0.01
        mask = words if masked_dice else None
        return {
            "start": official_dice(outputs.start_logits, batch["start_labels"], alpha, mask),
            "end": official_dice(outputs.end_logits, batch["end_labels"], alpha, mask),
            "span": official_dice(span_z, span_t, alpha),
            "answerable": official_dice(answer_z, answer_y, alpha),
        }
    return {
        "start": official_masked_mean(per(outputs.start_logits, batch["start_labels"]), words),
        "end": official_masked_mean(per(outputs.end_logits, batch["end_labels"]), words),
        "span": mean(span_z, span_t),
        "answerable": mean(answer_z, answer_y),
    }


OURS = {
    "ce": {"name": "ce"},
    "focal": {"name": "focal", "gamma": 2.0},
    "dice": {"name": "dice", "smooth": 1.0, "square": True, "scope": "set"},
    "dsc": OFFICIAL_RECIPES["binary"],  # alpha 0.01, smooth 1, squared, one set score
}


@pytest.mark.parametrize("dice_positions", ["all", "context"])
@pytest.mark.parametrize("name", list(OURS))
def test_start_end_span_and_answerable_losses_equal_the_official_formulas(
    name: str, dice_positions: str
) -> None:
    """``all`` is the official script (its dice unmasked); ``context`` is the official
    DiceLoss given the label mask it supports but the script does not pass."""
    batch, outputs = fixed_batch(), fixed_outputs()
    candidates = fixed_candidates(outputs, batch)
    settings = MrcNerSpec(dice_positions=dice_positions, answerable="train_infer")
    ours = mrc_ner_losses(outputs, batch, build_loss(OURS[name]), settings, candidates)
    official = official_terms(name, outputs, batch, candidates, dice_positions == "context")
    for term, expected in official.items():
        assert getattr(ours, term).item() == pytest.approx(expected.item(), abs=1e-6), term
    # training_step: start + end + weight_span * span + answerable_task_ratio * answerable
    total = official["start"] + official["end"] + 0.3 * official["span"]
    total = total + 0.4 * official["answerable"]
    assert ours.total(settings).item() == pytest.approx(total.item(), abs=1e-6)


def test_dice_over_every_position_differs_from_the_masked_one() -> None:
    """The option matters on these batches: the query, [SEP] and padding count as
    negatives in the official start/end dice."""
    batch, outputs = fixed_batch(), fixed_outputs()
    loss, candidates = build_loss(OURS["dice"]), fixed_candidates(outputs, batch)
    terms = {
        where: mrc_ner_losses(outputs, batch, loss, MrcNerSpec(dice_positions=where), candidates)
        for where in ("all", "context")
    }
    assert abs(terms["all"].start.item() - terms["context"].start.item()) > 1e-3


def test_the_official_focal_epsilon_is_the_one_departure_and_a_small_one() -> None:
    """The official focal adds 1e-4 to the probabilities before the log (fp16's
    rounding to 0); ours is exact. On these logits (up to about +-9) that moves the
    start loss by 2.9e-3, where confident positions' log p_t is clipped near log 1e-4."""
    batch, outputs = fixed_batch(), fixed_outputs()
    words = batch["word_mask"]
    exact = official_focal(outputs.start_logits, batch["start_labels"], 2.0)
    shifted = official_focal(outputs.start_logits, batch["start_labels"], 2.0, eps=1e-4)
    gap = official_masked_mean(exact, words) - official_masked_mean(shifted, words)
    assert 1e-4 < abs(gap.item()) < 5e-3


def test_span_candidates_are_the_official_gold_and_predicted_pairs() -> None:
    batch, outputs = fixed_batch(), fixed_outputs()
    words = batch["word_mask"].bool()
    valid = torch.triu(
        words.unsqueeze(-1).expand(-1, -1, L) & words.unsqueeze(-2).expand(-1, L, -1)
    )
    predicted = (outputs.start_logits > 0).unsqueeze(-1) & (outputs.end_logits > 0).unsqueeze(-2)
    gold = batch["start_labels"].bool().unsqueeze(-1) & batch["end_labels"].bool().unsqueeze(-2)
    expected = valid & (predicted | gold)
    assert torch.equal(
        span_candidates(outputs.start_logits, outputs.end_logits, batch, "gold_pred"), expected
    )
    assert torch.equal(
        span_candidates(outputs.start_logits, outputs.end_logits, batch, "all"), valid
    )
    drawn = fixed_candidates(outputs, batch)
    assert torch.equal(drawn & expected, expected) and torch.equal(drawn & valid, drawn)
    others = valid & ~expected
    share = (drawn & others).sum().item() / others.sum().item()
    assert 0.3 < share < 0.7  # each other valid pair with probability 1/2


def test_a_span_head_without_candidates_is_refused() -> None:
    batch, outputs = fixed_batch(), fixed_outputs()
    with pytest.raises(ValueError, match="candidates"):
        mrc_ner_losses(outputs, batch, build_loss({"name": "ce"}), MrcNerSpec(), None)
