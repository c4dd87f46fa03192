"""The paper's losses as pure functions of ``(logits, target, mask)``.

Li et al., "Dice Loss for Data-imbalanced NLP Tasks" (ACL 2020), section 3 and
Table 2. Two input forms, told apart by shape:

- binary: ``logits.shape == target.shape`` (MRC start/end over positions, one-logit
  classifiers). ``p = sigmoid(z)``; ``target`` holds 0/1; ``mask`` (same shape)
  marks the positions that count.
- multi-class: ``logits`` is ``[..., C]`` and ``target`` is integer ``[...]``.
  ``P = softmax(z)``; positions labelled ``-100`` are ignored, and so are those
  where ``mask`` (shape of ``target``) is false. Each class is a one-vs-rest
  binary problem and the dice family averages the per-class losses (macro).

Internally every input is flattened to ``(N, C)`` (``C = 1`` for binary) with a
boolean ``valid`` of shape ``(N,)``. Logits at invalid positions are replaced by
zeros before any arithmetic, so whatever they hold changes neither the loss nor
any gradient. Half-precision logits are computed in float32.

``1 - p`` is never formed by subtraction where a power of it is taken: it comes
from log-probabilities (``logsigmoid(-z)``, or a log-sum-exp over the other
classes), so ``(1 - p) ** alpha`` stays finite, with finite gradients, at logits
of +-100 in every dtype (the official code's NaN once ``p`` rounds to 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

Scope = Literal["example", "set"]
IGNORE_INDEX = -100


@dataclass(frozen=True)
class _Flat:
    """Inputs flattened to one row per position."""

    logits: Tensor  # (N, C), float32 or float64, zeros at invalid rows
    target: Tensor  # (N,) long class index for multi-class; (N,) float 0/1 for binary
    valid: Tensor  # (N,) bool
    binary: bool

    @property
    def n_valid(self) -> Tensor:
        """Number of valid positions, at least 1 so an all-ignored batch gives loss 0."""
        return self.valid.sum().clamp_min(1).to(self.logits.dtype)


def _compute_dtype(logits: Tensor) -> torch.dtype:
    return torch.float64 if logits.dtype == torch.float64 else torch.float32


def flatten_inputs(logits: Tensor, target: Tensor, mask: Tensor | None = None) -> _Flat:
    """Check shapes, tell binary from multi-class, and flatten to ``(N, C)``.

    Raises:
        ValueError: if the shapes fit neither form, or ``mask`` has another shape
            than ``target``.
    """
    if mask is not None and mask.shape != target.shape:
        raise ValueError(
            f"mask must have the shape of target {tuple(target.shape)}, got {tuple(mask.shape)}"
        )
    dtype = _compute_dtype(logits)
    if logits.shape == target.shape:
        valid = target != IGNORE_INDEX
        if mask is not None:
            valid = valid & mask.bool()
        valid = valid.reshape(-1)
        z = logits.reshape(-1, 1).to(dtype)
        y = target.reshape(-1).to(dtype)
        z = torch.where(valid.unsqueeze(-1), z, torch.zeros_like(z))
        y = torch.where(valid, y, torch.zeros_like(y))
        return _Flat(logits=z, target=y, valid=valid, binary=True)
    if logits.dim() >= 1 and logits.shape[:-1] == target.shape:
        if target.is_floating_point():
            raise ValueError("multi-class target must hold integer class indices")
        n_classes = logits.shape[-1]
        if n_classes < 2:
            raise ValueError(f"multi-class logits need at least 2 classes, got {n_classes}")
        valid = target != IGNORE_INDEX
        if mask is not None:
            valid = valid & mask.bool()
        valid = valid.reshape(-1)
        z = logits.reshape(-1, n_classes).to(dtype)
        t = target.reshape(-1).long()
        # Out-of-range classes are caught by one_hot / cross_entropy themselves; an
        # explicit check here would cost a device sync on every call.
        z = torch.where(valid.unsqueeze(-1), z, torch.zeros_like(z))
        t = torch.where(valid, t, torch.zeros_like(t))
        return _Flat(logits=z, target=t, valid=valid, binary=False)
    raise ValueError(
        "logits and target fit neither form: binary needs equal shapes, multi-class needs "
        f"logits [..., C] and target [...]; got logits {tuple(logits.shape)}, "
        f"target {tuple(target.shape)}"
    )


def _probs(flat: _Flat) -> tuple[Tensor, Tensor]:
    """Per-class probabilities ``p`` and one-hot targets ``y``, each ``(N, C)``."""
    z = flat.logits
    if flat.binary:
        return torch.sigmoid(z), flat.target.unsqueeze(-1)
    p, _ = _softmax(z)
    return p, _one_hot(flat.target, p)


def _softmax(z: Tensor) -> tuple[Tensor, Tensor]:
    """``softmax(z)`` and ``log_softmax(z)`` along the last axis, ``(N, C)`` each.

    Written out because torch's CPU softmax kernels are slow along a short last axis
    (C = 9 tags: ~10x the cost of these five element-wise operations).
    """
    shifted = z - z.amax(dim=-1, keepdim=True).detach()
    e = shifted.exp()
    total = e.sum(dim=-1, keepdim=True)
    return e / total, shifted - total.log()


def _one_hot(target: Tensor, like: Tensor) -> Tensor:
    return torch.zeros_like(like).scatter_(-1, target.unsqueeze(-1), 1.0)


class _SelfAdjustedProbability(torch.autograd.Function):
    """``q = (1 - p)^alpha p`` from logits ``(N, C)``, with an analytic, stable backward.

    Multi-class (``binary=False``): ``p = softmax(z)``. ``1 - p_c`` is the mass of
    the other classes, ``O_c / S`` with ``e = exp(z - max z)``, ``S = sum(e)`` and
    ``O_c = S - e_c``; for a class with ``p > 1/2`` (at most one a row), whose
    ``1 - p`` rounds to 0 once it dominates (a logit gap of ~17 in float32), ``O_c``
    is summed from the other classes instead: no cancellation, and exact until they
    underflow (a gap of ~87 in float32), where it is held at the smallest normal
    number. With ``w_c = g_c q_c ((1 - p_c) - alpha p_c)`` the gradient is
    ``dz_k = w_k - e_k sum_{c != k} w_c / O_c``: finite where ``p`` is 1.

    Binary: ``p = sigmoid(z)``, ``log(1 - p) = logsigmoid(-z)`` and
    ``dq/dz = q ((1 - p) - alpha p)``.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, z: Tensor, alpha: float, binary: bool
    ) -> Tensor:
        if binary:
            p = torch.sigmoid(z)
            one_minus_p = torch.sigmoid(-z)  # not 1 - p: exact where p rounds to 1
            q = one_minus_p.pow(alpha) * p
            ctx.save_for_backward(p, one_minus_p, q)
        else:
            e = (z - z.amax(dim=-1, keepdim=True)).exp()  # (N, C)
            total = e.sum(dim=-1, keepdim=True)
            p = e / total
            dominant = p > 0.5
            below = e.masked_fill(dominant, 0.0).sum(dim=-1, keepdim=True)
            tiny = torch.finfo(z.dtype).tiny
            others = torch.where(dominant, below, total - e).clamp_min(tiny)  # O_c
            one_minus_p = others / total  # > 0: the power below stays finite
            q = one_minus_p.pow(alpha) * p
            ctx.save_for_backward(p, one_minus_p, q, e, others, dominant)
        ctx.alpha, ctx.binary = alpha, binary  # type: ignore[attr-defined]
        return q

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: Tensor
    ) -> tuple[Tensor, None, None]:
        saved = ctx.saved_tensors  # type: ignore[attr-defined]
        p, one_minus_p, q = saved[:3]
        w = grad * q * (one_minus_p - ctx.alpha * p)  # type: ignore[attr-defined]
        if ctx.binary:  # type: ignore[attr-defined]
            return w, None, None
        e, others, dominant = saved[3:]
        ratio = w / others  # (N, C); large only for a dominant class
        rest = ratio.masked_fill(dominant, 0.0).sum(dim=-1, keepdim=True)
        top = ratio.masked_fill(~dominant, 0.0).sum(dim=-1, keepdim=True)
        # The sum over c != k of w_c / O_c, never subtracting a dominant class's term.
        excluded = torch.where(dominant, rest, rest - ratio + top)
        return w - e * excluded, None, None


def _mean_over_valid(per_position: Tensor, flat: _Flat) -> Tensor:
    """Sum the ``(N,)`` per-position losses over valid positions and divide by ``N_v``."""
    kept = torch.where(flat.valid, per_position, torch.zeros_like(per_position))
    return kept.sum() / flat.n_valid


@dataclass(frozen=True)
class _Overlap:
    """How a dice-family loss builds its numerator and denominator from ``u`` and ``y``.

    ``n = k u y``; ``d = u^2 + y`` (``square``) or ``d = u (a + b y) + c y``. Dice and
    dsc: ``k = 2`` and linear ``a = 1, b = 0, c = 1``; Tversky: ``k = 1, a = alpha,
    b = 1 - alpha - beta, c = beta`` (``p y + alpha p (1 - y) + beta (1 - p) y``).
    """

    k: float
    square: bool = False
    a: float = 1.0
    b: float = 0.0
    c: float = 1.0

    def terms(self, u: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        numer = self.k * u * y
        if self.square:
            return numer, u * u + y  # y * y == y for 0/1 targets
        return numer, u * (self.a + self.b * y) + self.c * y

    def d_denominator(self, u: Tensor, y: Tensor) -> Tensor:
        return 2.0 * u if self.square else self.a + self.b * y


class _OverlapLoss(torch.autograd.Function):
    """``1 - (n + s) / (d + s)`` averaged per scope, with a hand-written backward.

    The terms, the ratio and its reduction are most of the dice family's
    operations; one fused backward, ``dL/du = w / (d + s) (ratio dd/du - dn/du)``,
    keeps the family near the cost of cross-entropy. ``u`` and ``y`` are ``(N, C)``;
    ``weight`` is ``(N, 1)``: valid / ``N_v`` for ``scope="example"``, valid (0/1)
    for ``scope="set"``.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        u: Tensor,
        y: Tensor,
        weight: Tensor,
        smooth: float,
        per_example: bool,
        form: _Overlap,
    ) -> Tensor:
        numer, denom = form.terms(u, y)
        n_classes = u.shape[-1]
        tiny = torch.finfo(u.dtype).tiny
        if per_example:
            inv = 1.0 / (denom + smooth).clamp_min(tiny)  # (N, C)
            ratio = (numer + smooth) * inv
            loss = (weight * (1.0 - ratio)).sum() / n_classes
        else:
            num = (weight * numer).sum(dim=0, keepdim=True)  # (1, C)
            inv = 1.0 / ((weight * denom).sum(dim=0, keepdim=True) + smooth).clamp_min(tiny)
            ratio = (num + smooth) * inv
            loss = (1.0 - ratio).sum() / n_classes
        ctx.save_for_backward(u, y, weight, inv, ratio)
        ctx.form = form  # type: ignore[attr-defined]
        return loss

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: Tensor
    ) -> tuple[Tensor, None, None, None, None, None]:
        u, y, weight, inv, ratio = ctx.saved_tensors  # type: ignore[attr-defined]
        form: _Overlap = ctx.form  # type: ignore[attr-defined]
        scale = grad * weight * (inv / inv.shape[-1])  # (N, C)
        grad_u = scale * (ratio * form.d_denominator(u, y) - form.k * y)
        return grad_u, None, None, None, None, None


def _overlap_loss(
    u: Tensor, y: Tensor, form: _Overlap, smooth: float, scope: Scope, flat: _Flat
) -> Tensor:
    """``1 - (n + s) / (d + s)`` of ``form``, reduced per scope, averaged over classes.

    ``scope="example"`` takes the ratio per position and averages over valid
    positions; ``scope="set"`` sums numerator and denominator over valid positions
    first (the paper's footnote 3). The denominator is kept above 0 so that
    ``smooth=0`` gives its limit (a negative contributes a constant 1), not 0/0.
    """
    valid = flat.valid.unsqueeze(-1).to(u.dtype)  # (N, 1)
    per_example = scope == "example"
    weight = valid / flat.n_valid if per_example else valid
    loss: Tensor = _OverlapLoss.apply(u, y, weight, smooth, per_example, form)
    return loss


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
        return _mean_over_valid(nll, flat)
    t = torch.where(flat.valid, flat.target, torch.full_like(flat.target, IGNORE_INDEX))
    w = None if weights is None else weights.to(z.dtype)
    return F.cross_entropy(z, t, weight=w, reduction="sum") / flat.n_valid


def focal_loss(
    logits: Tensor, target: Tensor, mask: Tensor | None = None, gamma: float = 2.0
) -> Tensor:
    """Focal loss (Lin et al. 2017; the paper's FL): ``-(1 - p_t)^gamma log p_t``.

    ``(1 - p_t)^gamma`` is ``exp(gamma * log(1 - p_t))`` with the log taken from
    log-probabilities, so ``gamma < 1`` stays finite at ``p_t = 1``; ``gamma = 0``
    gives exactly cross-entropy.
    """
    flat = flatten_inputs(logits, target, mask)
    z = flat.logits
    if flat.binary:
        signed = z.squeeze(-1) * (2.0 * flat.target - 1.0)  # logit of p_t
        log_pt, log1m_pt = F.logsigmoid(signed), F.logsigmoid(-signed)
    else:
        p, log_p = _softmax(z)  # (N, C)
        is_t = torch.zeros_like(z, dtype=torch.bool).scatter_(-1, flat.target.unsqueeze(-1), True)
        log_pt = log_p.gather(-1, flat.target.unsqueeze(-1)).squeeze(-1)
        # 1 - p_t as the sum of the other probabilities: no cancellation where p_t rounds
        # to 1; held at the smallest normal number once they all underflow.
        others = p.masked_fill(is_t, 0.0).sum(dim=-1)
        log1m_pt = others.clamp_min(torch.finfo(z.dtype).tiny).log()
    modulator = torch.exp(gamma * log1m_pt)
    return _mean_over_valid(-modulator * log_pt, flat)


def dice_loss(
    logits: Tensor,
    target: Tensor,
    mask: Tensor | None = None,
    smooth: float = 1.0,
    square: bool = True,
    scope: Scope = "example",
) -> Tensor:
    """Dice loss, eq. 7 (squared denominator) or eq. 6 (``square=False``).

    Per position and class: ``1 - (2 p y + s) / (p^2 + y^2 + s)``, or with the
    linear denominator ``p + y + s``.
    """
    flat = flatten_inputs(logits, target, mask)
    p, y = _probs(flat)
    return _overlap_loss(p, y, _Overlap(k=2.0, square=square), smooth, scope, flat)


def tversky_loss(
    logits: Tensor,
    target: Tensor,
    mask: Tensor | None = None,
    alpha: float = 0.5,
    beta: float = 0.5,
    smooth: float = 1.0,
    scope: Scope = "example",
) -> Tensor:
    """Tversky loss, eq. 9: ``1 - (p y + s) / (p y + alpha p (1-y) + beta (1-p) y + s)``.

    ``alpha`` weighs false positives, ``beta`` false negatives. With
    ``alpha = beta = 0.5`` it equals linear dice with smoothing ``2 s``.
    """
    flat = flatten_inputs(logits, target, mask)
    p, y = _probs(flat)
    form = _Overlap(k=1.0, a=alpha, b=1.0 - alpha - beta, c=beta)
    return _overlap_loss(p, y, form, smooth, scope, flat)


def dsc_loss(
    logits: Tensor,
    target: Tensor,
    mask: Tensor | None = None,
    alpha: float = 1.0,
    smooth: float = 1.0,
    square: bool = False,
    scope: Scope = "example",
) -> Tensor:
    """Self-adjusting dice, eq. 11/12: ``1 - (2 q y + s) / (q + y + s)``, ``q = (1-p)^alpha p``.

    ``square=True`` uses ``q^2 + y^2`` in the denominator. ``alpha = 0`` gives
    linear dice. For a positive the loss is lowest at ``p = 1 / (1 + alpha)``.
    The official code's recipe is ``alpha=0.01, smooth=1, square=True, scope="set"``.
    """
    flat = flatten_inputs(logits, target, mask)
    q: Tensor = _SelfAdjustedProbability.apply(flat.logits, alpha, flat.binary)
    y = flat.target.unsqueeze(-1) if flat.binary else _one_hot(flat.target, q)
    return _overlap_loss(q, y, _Overlap(k=2.0, square=square), smooth, scope, flat)
