"""The losses of NER as reading comprehension, as the official ``tasks/mrc_ner/train.py``
applies its losses (``compute_loss``), each through our ``build_loss`` module.

- start, end: binary per position (``p = sigmoid(z)``), over ``word_mask``: the context
  words, or with ``mrc.labels: official`` the official label mask (every context
  sub-token and the last ``[SEP]``), over which the official BCE and focal take their
  masked means. Its DiceLoss is called without the mask, every position of the batch
  counting (query, ``[SEP]`` and padding included): ``dice_positions: all`` does the
  same for ``dice`` and ``dsc``.
- span: binary per (start, end) pair, over the candidates only (``span_candidates``).
- answerable: binary per window, every window counting.

The total is ``start + end + span_weight * span + answerable_weight * answerable``.
``ce`` is binary cross-entropy here (the official ``bce``): a query may have several
answers, so start and end are not one softmax over positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from search_spaces.mrc_ner import MrcNerSpec, SpanCandidates
from trainables.losses import DicesweepLoss
from trainables.tasks.base import Batch
from trainables.tasks.mrc_ner_model import MrcNerOutput

# The losses whose official counterpart is its DiceLoss, called without the label mask.
UNMASKED_OFFICIALLY = ("dice", "dsc")


@dataclass(frozen=True)
class MrcNerLosses:
    """One batch's loss terms (scalars); ``None`` where the model has no such head."""

    start: Tensor
    end: Tensor
    span: Tensor | None
    answerable: Tensor | None

    def total(self, settings: MrcNerSpec) -> Tensor:
        """The weighted sum the optimiser minimises."""
        total = self.start + self.end
        if self.span is not None:
            total = total + settings.span_weight * self.span
        if self.answerable is not None:
            total = total + settings.answerable_weight * self.answerable
        return total


def span_labels(batch: Batch, length: int) -> Tensor:
    """``(B, L, L)`` float: 1 where a gold entity starts at i and ends at j (token
    positions, ``batch["spans"]``)."""
    labels = torch.zeros(len(batch["spans"]), length, length, device=batch["input_ids"].device)
    for row, spans in enumerate(batch["spans"]):
        for start, end in spans:
            labels[row, start, end] = 1.0
    return labels


def span_candidates(
    start_logits: Tensor,
    end_logits: Tensor,
    batch: Batch,
    how: SpanCandidates,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``(B, L, L)`` bool: the (start, end) pairs the span loss is computed on.

    Always pairs of context words with start <= end. ``all``: every such pair;
    ``gold_pred``: those whose start and end are both gold start and end positions or
    both predicted ones (logit > 0); ``gold_pred_random``: those and each other pair
    with probability 1/2 (the official Bernoulli draw of uniform probabilities, whose
    marginal is 1/2), from ``generator`` or torch's global generator.
    """
    words = batch["word_mask"].bool()  # (B, L)
    valid = torch.triu(words.unsqueeze(2) & words.unsqueeze(1))  # (B, L, L), i <= j
    if how == "all":
        return valid
    gold = batch["start_labels"].bool().unsqueeze(2) & batch["end_labels"].bool().unsqueeze(1)
    predicted = (start_logits > 0).unsqueeze(2) & (end_logits > 0).unsqueeze(1)
    chosen = gold | predicted
    if how == "gold_pred_random":
        device = generator.device if generator is not None else valid.device
        draw = torch.rand(valid.shape, generator=generator, device=device).to(valid.device)
        chosen = chosen | (draw < 0.5)
    return valid & chosen


def mrc_ner_losses(
    outputs: MrcNerOutput,
    batch: Batch,
    loss_fn: DicesweepLoss,
    settings: MrcNerSpec,
    candidates: Tensor | None,
) -> MrcNerLosses:
    """The loss terms of one batch; ``candidates`` (``span_candidates``) where the model
    has a span head.

    Raises:
        ValueError: a span head without ``candidates``.
    """
    everywhere = settings.dice_positions == "all" and loss_fn.key in UNMASKED_OFFICIALLY
    mask = None if everywhere else batch["word_mask"].bool()
    start = loss_fn(outputs.start_logits, batch["start_labels"].float(), mask)
    end = loss_fn(outputs.end_logits, batch["end_labels"].float(), mask)
    span = None
    if outputs.span_logits is not None:
        if candidates is None:
            raise ValueError("a span head's loss needs its candidates")
        labels = span_labels(batch, outputs.span_logits.shape[-1])
        span = loss_fn(outputs.span_logits, labels, candidates)
    answerable = None
    if outputs.answerable_logits is not None:
        answerable = loss_fn(outputs.answerable_logits, batch["answerable"].float())
    return MrcNerLosses(start, end, span, answerable)
