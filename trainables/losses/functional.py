"""The paper's losses as pure functions of ``(logits, target, mask)``, in plain autograd.

Li et al., "Dice Loss for Data-imbalanced NLP Tasks" (ACL 2020), section 3 and
Table 2; docs/losses.md. The two input forms (binary, multi-class) and their masks
are described in :mod:`trainables.losses.inputs`. A loss's parameters arrive as its
validated model from ``search_spaces.losses`` (``spec``), where each is declared and
described. Each class is a one-vs-rest binary problem; the dice family reduces its
per-class losses as ``classes`` says (``_over_classes``).

Numerical safeguards: ``1 - p`` is never formed by subtraction where a power of
it is taken (``log(1 - p)`` comes from ``logsigmoid(-z)`` or the other classes'
log-mass, and powers are ``exp(alpha * log(1 - p))``), so ``(1 - p)^alpha`` stays
finite, with finite gradients, at logits of +-100 in every dtype (the official
code's NaN once ``p`` rounds to 1); a ratio whose numerator is exactly 0 is 0 even
where its denominator underflows (``smooth=0``).

OHEM (``ohem_ratio > 0``, the dice family): per class, the positions that count are
the valid positives and the ``floor(ohem_ratio x positives)`` valid negatives with
the highest probability of that class (the hardest; ``ohem_rule: hardest``); the
others count as masked. ``ohem_rule: official`` keeps what the official binary OHEM
keeps instead (``_official_ohem_weight``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from search_spaces.losses import DiceSpec, DscSpec, FocalSpec, OverlapSpec, TverskySpec
from trainables.losses.inputs import (
    IGNORE_INDEX,
    Flat,
    Probabilities,
    flatten_inputs,
    probabilities,
)


def ce_loss(logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
    """Cross-entropy, eq. 1: ``-log p_t`` averaged over valid positions."""
    return wce_loss(logits, target, mask, weights=None)


def wce_loss(
    logits: Tensor, target: Tensor, mask: Tensor | None = None, weights: Tensor | None = None
) -> Tensor:
    """Weighted cross-entropy, eq. 2: ``-w_y log p_t``, divided by ``N_v``.

    Unlike ``torch.nn.CrossEntropyLoss(weight=...)``, which divides by the sum of
    the weights, this divides by the number of valid positions, as the paper does.
    ``weights`` is ``(C,)`` (``(2,)`` = ``[w_negative, w_positive]`` for binary).
    """
    flat = flatten_inputs(logits, target, mask)
    z = flat.logits
    if flat.binary:
        nll = F.binary_cross_entropy_with_logits(z.squeeze(-1), flat.target, reduction="none")
        if weights is not None:
            w = weights.to(z.dtype)
            nll = nll * (w[0] + (w[1] - w[0]) * flat.target)
        return flat.mean_over_valid(nll)
    t = torch.where(flat.valid, flat.target, IGNORE_INDEX)
    w = None if weights is None else weights.to(z.dtype)
    return F.cross_entropy(z, t, weight=w, reduction="sum") / flat.n_valid


def focal_loss(
    logits: Tensor, target: Tensor, mask: Tensor | None = None, *, spec: FocalSpec
) -> Tensor:
    """Focal loss (Lin et al. 2017; the paper's FL): ``-(1 - p_t)^gamma log p_t``,
    averaged over valid positions. With ``prob_offset`` ε > 0, ``p_t`` is read as
    ``(p_t + ε) / (1 + C ε)`` and ``1 - p_t`` as ``(1 - p_t + ε) / (1 + C ε)`` (``C = 2``
    for binary inputs).
    """
    flat = flatten_inputs(logits, target, mask)
    if flat.binary:  # p_t is p for a positive, 1 - p for a negative: sigmoid(+-z)
        signed = flat.logits[:, 0] * (2 * flat.target - 1)
        log_pt, log1m_pt = F.logsigmoid(signed), F.logsigmoid(-signed)
    else:
        probs = probabilities(flat)
        at_target = flat.target.unsqueeze(-1)
        log_pt = probs.log_p.gather(-1, at_target).squeeze(-1)
        log1m_pt = probs.log1m_p.gather(-1, at_target).squeeze(-1)
    if spec.prob_offset > 0:
        classes = 2 if flat.binary else flat.logits.shape[-1]
        norm = math.log1p(classes * spec.prob_offset)
        log_pt = torch.log(torch.exp(log_pt) + spec.prob_offset) - norm
        log1m_pt = torch.log(torch.exp(log1m_pt) + spec.prob_offset) - norm
    return flat.mean_over_valid(-torch.exp(spec.gamma * log1m_pt) * log_pt)


def dice_loss(
    logits: Tensor, target: Tensor, mask: Tensor | None = None, *, spec: DiceSpec
) -> Tensor:
    """Dice loss, eq. 7 (squared denominator) or eq. 6 (``square=False``): per position
    and class ``1 - (2 p y + s) / (p^2 + y^2 + s)``, or ``p + y + s`` below the line."""
    flat = flatten_inputs(logits, target, mask)
    probs = probabilities(flat)
    numer, denom = _dice_terms(probs.p, probs.y, spec.square)
    return _overlap(numer, denom, flat, probs, spec)


def tversky_loss(
    logits: Tensor, target: Tensor, mask: Tensor | None = None, *, spec: TverskySpec
) -> Tensor:
    """Tversky loss, eq. 9: ``1 - (p y + s) / (p y + alpha p (1-y) + beta (1-p) y + s)``.

    With ``alpha = beta = 0.5`` it equals linear dice with smoothing ``2 s``.
    ``square=True`` squares the soft false positive and false negative,
    ``alpha p^2 (1-y) + beta (1-p)^2 y``: since ``p^2 + y^2 = 2 p y + p^2 (1-y) +
    (1-p)^2 y`` for ``y`` in {0, 1}, ``alpha = beta = 0.5`` is then squared dice with
    smoothing ``2 s``.
    """
    flat = flatten_inputs(logits, target, mask)
    probs = probabilities(flat)
    p, y = probs.p, probs.y
    power = 2 if spec.square else 1
    true_positive = p * y
    false_positive = p**power * (1 - y)
    false_negative = torch.exp(power * probs.log1m_p) * y  # (1 - p)^power, never 1 - p
    denom = true_positive + spec.alpha * false_positive + spec.beta * false_negative
    return _overlap(true_positive, denom, flat, probs, spec)


def dsc_loss(
    logits: Tensor, target: Tensor, mask: Tensor | None = None, *, spec: DscSpec
) -> Tensor:
    """Self-adjusting dice, eq. 11/12: ``1 - (2 q y + s) / (q + y + s)``, ``q = (1-p)^alpha p``.

    ``square=True`` uses ``q^2 + y^2`` in the denominator. ``alpha = 0`` gives
    linear dice. For a positive the loss is lowest at ``p = 1 / (1 + alpha)``.
    ``q = exp(alpha log(1 - p) + log p)``: finite, with a finite gradient, at any logit.
    """
    flat = flatten_inputs(logits, target, mask)
    probs = probabilities(flat)
    q = torch.exp(spec.alpha * probs.log1m_p + probs.log_p)
    numer, denom = _dice_terms(q, probs.y, spec.square)
    return _overlap(numer, denom, flat, probs, spec)


def _dice_terms(u: Tensor, y: Tensor, square: bool) -> tuple[Tensor, Tensor]:
    """Numerator ``2 u y`` and denominator ``u^2 + y^2`` or ``u + y``, ``(N, C)`` each."""
    return 2 * u * y, (u * u + y * y) if square else (u + y)


def _ohem_weight(flat: Flat, probs: Probabilities, spec: OverlapSpec) -> Tensor | None:
    """``(N, C)``: 1 where a position counts for a class under OHEM, else 0; ``None``
    when OHEM is off (``ohem_ratio`` 0: every valid position counts for every class).

    ``hardest``, per class: every valid positive, and the ``floor(ratio x positives)``
    valid negatives with the highest ``log p`` (ties to the lower index); invalid
    positions are never chosen. ``official``: ``_official_ohem_weight``. The choice is
    discrete, so it carries no gradient.

    Raises:
        ValueError: ``official`` on multi-class inputs.
    """
    ratio = spec.ohem_ratio
    if ratio == 0:
        return None
    if spec.ohem_rule == "official":
        return _official_ohem_weight(flat, probs, ratio)
    valid = flat.valid.unsqueeze(-1)
    positive = valid & (probs.y > 0.5)
    negative = valid & (probs.y <= 0.5)
    # The epsilon keeps a product like 10 x 0.7 = 7.000000000000001 or 100 x 0.29 =
    # 28.999999999999996 from losing one negative to binary rounding.
    allowed = torch.floor(positive.sum(0).double() * ratio + 1e-9).long()
    keep = torch.minimum(allowed, negative.sum(0))
    hardness = probs.log_p.detach().masked_fill(~negative, -torch.inf)
    order = torch.sort(hardness, dim=0, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(
        0, order, torch.arange(order.shape[0], device=order.device).unsqueeze(-1).expand_as(order)
    )
    kept = positive | (negative & (rank < keep))
    return kept.to(flat.logits.dtype)


def _official_ohem_weight(flat: Flat, probs: Probabilities, ratio: float) -> Tensor:
    """``(N, 1)``: what the official binary OHEM (its ``DiceLoss._binary_class``) keeps,
    over the valid positions.

    It keeps every positive and each position whose ``p`` is above a threshold read
    from its negatives' scores. Those scores are selected with a ``(N,)`` row of every
    position's ``p`` against a ``(N, 1)`` column of negatives, which broadcasts to
    ``N x N``: the negatives' count of copies of every position's ``p``, sorted. With
    ``k = int(positives x ratio)`` (in float32, as its tensors compute it), at most the
    negatives' count, the threshold is the sorted copies' entry ``1 - k``:

    - ``k >= 2``: the ``k - 1``-th largest copy, the highest ``p`` of all: no position
      is above it, so no negative counts (dice over the positives alone);
    - ``k = 1``, or ``k = 0`` with two negatives or more: the lowest ``p``: every
      negative above it counts;
    - ``k = 0`` with one negative: the second lowest ``p``.

    Raises:
        ValueError: multi-class inputs (the official multi-class OHEM is another rule),
            or no valid negative (the official code fails indexing an empty sort).
    """
    if not flat.binary:
        raise ValueError("ohem_rule 'official' is the official binary OHEM: binary inputs only")
    valid = flat.valid.unsqueeze(-1)
    positive = valid & (probs.y > 0.5)
    negatives = int((valid & (probs.y <= 0.5)).sum())
    if negatives == 0:
        raise ValueError("the official OHEM needs a negative among the valid positions")
    positives = torch.tensor(int(positive.sum()), dtype=torch.long)
    keep = min(int(positives * ratio), negatives)
    scores = probs.p.detach()[valid]  # every valid position's p, in order
    ranked = torch.sort(scores).values
    if keep >= 2:
        threshold = ranked[-1]
    elif keep == 1 or negatives >= 2:
        threshold = ranked[0]
    else:
        threshold = ranked[1] if len(ranked) > 1 else ranked[0]
    kept = positive | (valid & (probs.p.detach() > threshold))
    return kept.to(flat.logits.dtype)


def _overlap(
    numer: Tensor, denom: Tensor, flat: Flat, probs: Probabilities, spec: OverlapSpec
) -> Tensor:
    """``1 - (n + s) / (d + s)`` per class, from ``(N, C)`` terms, reduced over classes.

    ``scope="example"`` takes the ratio per position and averages it over valid
    positions; ``scope="set"`` sums numerator and denominator over valid positions
    first (the paper's footnote 3). OHEM's ``(N, C)`` choice (``_ohem_weight``) narrows
    the valid positions per class.
    """
    smooth, counted = spec.smooth, _ohem_weight(flat, probs, spec)
    if counted is None:
        if spec.scope == "example":
            per_class = flat.mean_over_valid(1 - _ratio(numer + smooth, denom + smooth))
        else:
            total_numer, total_denom = flat.sum_over_valid(numer), flat.sum_over_valid(denom)
            per_class = 1 - _ratio(total_numer + smooth, total_denom + smooth)
    elif spec.scope == "example":
        per_position = 1 - _ratio(numer + smooth, denom + smooth)
        per_class = (counted * per_position).sum(0) / counted.sum(0).clamp_min(1)
    else:
        total_numer, total_denom = (counted * numer).sum(0), (counted * denom).sum(0)
        per_class = 1 - _ratio(total_numer + smooth, total_denom + smooth)
    return _over_classes(per_class, flat.binary, spec)


def _over_classes(per_class: Tensor, binary: bool, spec: OverlapSpec) -> Tensor:
    """The ``(C,)`` per-class losses reduced as ``classes`` says: their mean, their sum,
    or the mean without the background class's.

    Raises:
        ValueError: ``"foreground"`` on multi-class inputs without a background class
            index (no ``labels``), or with one outside ``0..C-1``.
    """
    if spec.classes == "sum":
        return per_class.sum()
    if spec.classes == "mean" or binary:  # binary: the one class is the foreground
        return per_class.mean()
    n_classes, background = per_class.shape[0], spec.background_index
    if background is None or not 0 <= background < n_classes:
        raise ValueError(
            "classes='foreground' on multi-class logits needs the background's class "
            f"index in 0..{n_classes - 1}, got {background}"
        )
    keep = torch.arange(n_classes, device=per_class.device) != background
    return per_class[keep].mean()


def _ratio(numer: Tensor, denom: Tensor) -> Tensor:
    """``numer / denom``, and exactly 0 where ``numer`` is 0: with ``smooth=0`` a
    negative's denominator can underflow to 0, and 0/0 would poison the gradient."""
    return numer / torch.where(numer == 0, 1.0, denom)
