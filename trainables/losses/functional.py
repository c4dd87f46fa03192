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

Internally the inputs are flattened to ``(N, C)`` (``C = 1`` for binary) with a
boolean ``valid`` of shape ``(N,)``. Logits at invalid positions are replaced by
zeros before any arithmetic, so whatever they hold changes neither the loss nor
any gradient. Half-precision logits are computed in float32.

On binary inputs ``focal``, ``dice``, ``tversky`` and ``dsc`` take a fused path
(:class:`_BinaryFocalLoss`, :class:`_BinaryOverlapLoss`): one autograd node from
the logits to the loss, on flat ``(N,)`` vectors, with an analytic backward. On
an MRC batch (``[32, 384]``) the number of kernels and autograd nodes, not their
arithmetic, sets the time, and the fused path needs far fewer of both than the
equations composed op by op; values and gradients are the same up to rounding.

``1 - p`` is never formed by subtraction where a power of it is taken: it is
``sigmoid(-z)`` for binary inputs and a sum over the other classes for
multi-class ones, so ``(1 - p) ** alpha`` stays finite, with finite gradients, at
logits of +-100 in every dtype (the official code's NaN once ``p`` rounds to 1).
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


def _check_mask(target: Tensor, mask: Tensor | None) -> None:
    if mask is not None and mask.shape != target.shape:
        raise ValueError(
            f"mask must have the shape of target {tuple(target.shape)}, got {tuple(mask.shape)}"
        )


def flatten_inputs(logits: Tensor, target: Tensor, mask: Tensor | None = None) -> _Flat:
    """Check shapes, tell binary from multi-class, and flatten to ``(N, C)``.

    Raises:
        ValueError: if the shapes fit neither form, or ``mask`` has another shape
            than ``target``.
    """
    _check_mask(target, mask)
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
    """Multi-class: probabilities ``p = softmax(z)`` and one-hot targets ``y``, ``(N, C)`` each."""
    p, _ = _softmax(flat.logits)
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


def _row_sum(x: Tensor) -> Tensor:
    """``x.sum(dim=-1, keepdim=True)`` of an ``(N, C)`` tensor, as a matrix-vector product.

    On CPU about twice as fast as ``sum`` along a short last axis (C = 9 tags).
    """
    return x @ x.new_ones(x.shape[-1], 1)


def _one_hot(target: Tensor, like: Tensor) -> Tensor:
    return torch.zeros_like(like).scatter_(-1, target.unsqueeze(-1), 1.0)


class _SelfAdjustedProbability(torch.autograd.Function):
    """Multi-class ``q = (1 - p)^alpha p`` from logits ``(N, C)``, with a stable backward.

    ``p = softmax(z)``. ``1 - p_c`` is the mass of the other classes, ``O_c / S``
    with ``e = exp(z - max z)``, ``S = sum(e)`` and ``O_c = S - e_c``; for a class
    with ``p > 1/2`` (at most one a row), whose ``1 - p`` rounds to 0 once it
    dominates (a logit gap of ~17 in float32), ``O_c`` is summed from the other
    classes instead: no cancellation, and exact until they underflow (a gap of ~87
    in float32), where it is held at the smallest normal number. With
    ``w_c = g_c q_c ((1 - p_c) - alpha p_c)`` the gradient is
    ``dz_k = w_k - e_k sum_{c != k} w_c / O_c``: finite where ``p`` is 1.

    Binary inputs take :class:`_BinaryOverlapLoss` instead.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, z: Tensor, alpha: float
    ) -> Tensor:
        e = (z - z.amax(dim=-1, keepdim=True)).exp()  # (N, C)
        total = _row_sum(e)
        p = e / total
        # The masks are 0/1 floats, not booleans: multiplying by them selects exactly as
        # masked_fill / where would (every term is finite), at a fraction of the cost.
        dominant = torch.gt(p, 0.5, out=torch.empty_like(p))
        rest = 1.0 - dominant
        below = _row_sum(e * rest)
        tiny = torch.finfo(z.dtype).tiny
        # O_c: below where dominant, total - e elsewhere.
        others = torch.addcmul((total - e).mul_(rest), below, dominant).clamp_min_(tiny)
        one_minus_p = others / total  # > 0: the power below stays finite
        q = one_minus_p.pow(alpha).mul_(p)
        ctx.save_for_backward(p, one_minus_p, q, e, others, dominant, rest)
        ctx.alpha = alpha  # type: ignore[attr-defined]
        return q

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: Tensor
    ) -> tuple[Tensor, None]:
        saved = ctx.saved_tensors  # type: ignore[attr-defined]
        p, one_minus_p, q, e, others, dominant, rest = saved
        w = torch.add(one_minus_p, p, alpha=-ctx.alpha).mul_(q).mul_(grad)  # type: ignore[attr-defined]
        ratio = w / others  # (N, C); large only for a dominant class
        below = _row_sum(ratio * rest)
        top = _row_sum(ratio * dominant)
        # The sum over c != k of w_c / O_c, never subtracting a dominant class's term:
        # below for the dominant class, below + (top - ratio) for the others.
        excluded = (top - ratio).mul_(rest).add_(below)
        return w.addcmul_(e, excluded, value=-1.0), None


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
        """Numerator ``n`` and denominator ``d``, as new tensors the caller may overwrite.

        Written with as few kernels as the form allows (``u + y`` for dice): on
        small inputs each one costs more than its arithmetic.
        """
        numer = torch.mul(u, y)
        if self.k != 1.0:
            numer.mul_(self.k)
        if self.square:
            return numer, torch.addcmul(y, u, u)  # u^2 + y; y * y == y for 0/1 targets
        cy = y if self.c == 1.0 else y * self.c
        if self.b == 0.0:
            return numer, torch.add(cy, u, alpha=self.a)
        return numer, torch.addcmul(cy, u, y * self.b + self.a)

    def slope(self, u: Tensor, y: Tensor, ratio: Tensor) -> Tensor:
        """``ratio dd/du - dn/du``, a new tensor: ``dL/du = slope / (d + s)``.

        ``ratio`` is ``(n + s) / (d + s)``, per position or one per class (set scope).
        """
        slope = y * -self.k
        if self.square:
            return slope.addcmul_(u, ratio, value=2.0)  # dd/du = 2 u
        if self.b == 0.0:
            return slope.add_(ratio, alpha=self.a)  # dd/du = a
        return slope.addcmul_(ratio, y * self.b + self.a)  # dd/du = a + b y


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
        grad_u = form.slope(u, y, ratio).mul_(scale)
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


@dataclass(frozen=True)
class _Binary:
    """Binary targets and mask flattened to ``(N,)``, for the fused binary losses.

    The logits are not part of it: the fused functions take them as given (any
    shape and float dtype) and zero the invalid positions inside their one autograd
    node, so that no reshape, cast or ``where`` of their own is recorded.
    """

    target: Tensor  # (N,) compute dtype, 0/1, zeros at invalid positions
    valid: Tensor  # (N,) bool
    weight: Tensor  # (N,) compute dtype: ``valid`` as 0/1

    @property
    def n_valid(self) -> Tensor:
        """Number of valid positions, at least 1 so an all-ignored batch gives loss 0.

        A float sum of 0/1 weights: exact up to 2^24 positions in float32.
        """
        return self.weight.sum().clamp_min_(1.0)


def _binary_inputs(logits: Tensor, target: Tensor, mask: Tensor | None) -> _Binary | None:
    """Targets and mask of the binary form as ``(N,)`` vectors; ``None`` for multi-class.

    Targets at invalid positions are zeroed by multiplying with the 0/1 weight, so
    they may hold ``-100`` or any other finite number.

    Raises:
        ValueError: if ``mask`` has another shape than ``target``.
    """
    _check_mask(target, mask)
    if logits.shape != target.shape:
        return None
    dtype = _compute_dtype(logits)
    valid = target != IGNORE_INDEX
    if mask is not None:
        valid.logical_and_(mask)
    valid = valid.reshape(-1)
    # Through uint8: the same 0/1 values, but CPU casts from bool are several times slower.
    weight = valid.view(torch.uint8).to(dtype)
    return _Binary(target=target.reshape(-1).to(dtype) * weight, valid=valid, weight=weight)


def _masked_logits(logits: Tensor, valid: Tensor, dtype: torch.dtype) -> Tensor:
    """``logits`` as a new ``(N,)`` tensor of ``dtype``, zeros at invalid positions."""
    z = torch.where(valid, logits.reshape(-1), 0.0)
    return z if z.dtype == dtype else z.to(dtype)


class _BinaryOverlapLoss(torch.autograd.Function):
    """The dice family on binary inputs, from logits to loss in one autograd node.

    ``u = p = sigmoid(z)`` (dice, eq. 6/7; Tversky, eq. 9) or ``u = q = (1 - p)^alpha p``
    (dsc, eq. 11/12), where ``1 - p = sigmoid(-z)`` is exact where ``p`` rounds to 1,
    so the power and its gradient stay finite. Then ``L = 1 - (n + s) / (d + s)``
    with the terms of ``form``: averaged over valid positions (``scope="example"``,
    ``weight`` = valid, divided by ``n_valid``) or from sums over them
    (``scope="set"``). Backward: ``dL/dz = w slope / (d + s) du/dz`` with
    ``slope = ratio dd/du - dn/du`` (:meth:`_Overlap.slope`), ``dp/dz = p (1 - p)``
    and ``dq/dz = q ((1 - p) - alpha p)``; zero at invalid positions, where ``w = 0``.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        logits: Tensor,
        y: Tensor,
        valid: Tensor,
        weight: Tensor,
        n_valid: Tensor | None,
        form: _Overlap,
        smooth: float,
        alpha: float | None,
    ) -> Tensor:
        z = _masked_logits(logits, valid, y.dtype)
        p = torch.sigmoid(z)
        u, one_minus_p = p, None
        if alpha is not None:
            one_minus_p = torch.sigmoid(z.neg_())  # not 1 - p: exact where p rounds to 1
            u = one_minus_p.pow(alpha).mul_(p)
        numer, denom = form.terms(u, y)
        tiny = torch.finfo(u.dtype).tiny
        if n_valid is not None:  # scope="example"
            inv = denom.add_(smooth)
            if smooth < tiny:  # only then can d + s reach 0
                inv.clamp_min_(tiny)
            inv.reciprocal_()
            ratio = numer.add_(smooth).mul_(inv)
            loss = torch.dot(weight, torch.rsub(ratio, 1.0)) / n_valid
        else:  # scope="set": one ratio from sums over the valid positions
            inv = (torch.dot(weight, denom) + smooth).clamp_min_(tiny).reciprocal_()
            ratio = (torch.dot(weight, numer) + smooth).mul_(inv)
            loss = torch.rsub(ratio, 1.0)
        ctx.save_for_backward(u, y, weight, n_valid, p, one_minus_p, inv, ratio)
        ctx.form, ctx.alpha = form, alpha  # type: ignore[attr-defined]
        ctx.shape, ctx.dtype = logits.shape, logits.dtype  # type: ignore[attr-defined]
        return loss

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: Tensor
    ) -> tuple[Tensor | None, ...]:
        saved = ctx.saved_tensors  # type: ignore[attr-defined]
        u, y, weight, n_valid, p, one_minus_p, inv, ratio = saved
        grad_z = ctx.form.slope(u, y, ratio)  # type: ignore[attr-defined]
        if n_valid is not None:
            grad_z.mul_(inv)
            scale = grad / n_valid
        else:
            scale = grad * inv
        grad_z.mul_(weight)
        if one_minus_p is None:
            grad_z.mul_(p).mul_(torch.rsub(p, 1.0))  # dp/dz = p (1 - p)
        else:  # dq/dz = q ((1 - p) - alpha p)
            grad_z.mul_(torch.add(one_minus_p, p, alpha=-ctx.alpha).mul_(u))  # type: ignore[attr-defined]
        grad_z.mul_(scale)
        grad_logits = grad_z.view(ctx.shape).to(ctx.dtype)  # type: ignore[attr-defined]
        return grad_logits, None, None, None, None, None, None, None


def _binary_overlap_loss(
    logits: Tensor,
    binary: _Binary,
    form: _Overlap,
    smooth: float,
    scope: Scope,
    alpha: float | None = None,
) -> Tensor:
    """A dice-family loss on binary inputs: ``u = sigmoid(z)``, or ``q`` for an ``alpha``."""
    n_valid = binary.n_valid if scope == "example" else None
    loss: Tensor = _BinaryOverlapLoss.apply(
        logits, binary.target, binary.valid, binary.weight, n_valid, form, smooth, alpha
    )
    return loss


class _BinaryFocalLoss(torch.autograd.Function):
    """Focal loss on binary inputs, from logits to loss in one autograd node.

    With ``t = (2 y - 1) z``, the logit of ``p_t``: ``L = -(1 - p_t)^gamma log p_t``
    averaged over valid positions, ``log p_t = logsigmoid(t)`` and
    ``1 - p_t = sigmoid(-t)``, exact where ``p_t`` rounds to 1 (``gamma < 1`` stays
    finite there). Backward: ``dL/dt = (1 - p_t)^gamma (gamma p_t log p_t - (1 - p_t))``,
    ``-(1 - p_t)`` for ``gamma = 0`` (cross-entropy's).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        logits: Tensor,
        y: Tensor,
        valid: Tensor,
        weight: Tensor,
        n_valid: Tensor,
        gamma: float,
    ) -> Tensor:
        sign = torch.mul(y, 2.0).sub_(1.0)  # dt/dz
        t = _masked_logits(logits, valid, y.dtype).mul_(sign)
        log_pt = F.logsigmoid(t)
        one_minus_pt = torch.sigmoid(-t)
        modulator = one_minus_pt.pow(gamma) if gamma != 0.0 else None
        per_position = log_pt if modulator is None else modulator * log_pt
        # 0 - x rather than -x: +0, not -0, when every position is ignored.
        loss = torch.rsub(torch.dot(weight, per_position), 0.0).div_(n_valid)
        ctx.save_for_backward(t, log_pt, one_minus_pt, modulator, sign, weight, n_valid)
        ctx.gamma = gamma  # type: ignore[attr-defined]
        ctx.shape, ctx.dtype = logits.shape, logits.dtype  # type: ignore[attr-defined]
        return loss

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: Tensor
    ) -> tuple[Tensor | None, ...]:
        saved = ctx.saved_tensors  # type: ignore[attr-defined]
        t, log_pt, one_minus_pt, modulator, sign, weight, n_valid = saved
        if modulator is None:
            grad_z = torch.neg(one_minus_pt)
        else:
            grad_z = torch.sigmoid(t).mul_(log_pt).mul_(ctx.gamma)  # type: ignore[attr-defined]
            grad_z.sub_(one_minus_pt).mul_(modulator)
        grad_z.mul_(sign).mul_(weight).mul_(grad / n_valid)
        grad_logits = grad_z.view(ctx.shape).to(ctx.dtype)  # type: ignore[attr-defined]
        return grad_logits, None, None, None, None, None


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

    ``1 - p_t`` is never formed by subtraction: ``sigmoid(-t)`` for binary inputs
    (``t`` the logit of ``p_t``), the sum of the other classes' probabilities for
    multi-class ones, so ``gamma < 1`` stays finite at ``p_t = 1``; ``gamma = 0``
    gives exactly cross-entropy.
    """
    binary = _binary_inputs(logits, target, mask)
    if binary is not None:
        loss: Tensor = _BinaryFocalLoss.apply(
            logits, binary.target, binary.valid, binary.weight, binary.n_valid, gamma
        )
        return loss
    flat = flatten_inputs(logits, target, mask)
    z = flat.logits
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
    form = _Overlap(k=2.0, square=square)
    binary = _binary_inputs(logits, target, mask)
    if binary is not None:
        return _binary_overlap_loss(logits, binary, form, smooth, scope)
    flat = flatten_inputs(logits, target, mask)
    p, y = _probs(flat)
    return _overlap_loss(p, y, form, smooth, scope, flat)


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
    form = _Overlap(k=1.0, a=alpha, b=1.0 - alpha - beta, c=beta)
    binary = _binary_inputs(logits, target, mask)
    if binary is not None:
        return _binary_overlap_loss(logits, binary, form, smooth, scope)
    flat = flatten_inputs(logits, target, mask)
    p, y = _probs(flat)
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
    form = _Overlap(k=2.0, square=square)
    binary = _binary_inputs(logits, target, mask)
    if binary is not None:
        return _binary_overlap_loss(logits, binary, form, smooth, scope, alpha=alpha)
    flat = flatten_inputs(logits, target, mask)
    q: Tensor = _SelfAdjustedProbability.apply(flat.logits, alpha)
    return _overlap_loss(q, _one_hot(flat.target, q), form, smooth, scope, flat)
