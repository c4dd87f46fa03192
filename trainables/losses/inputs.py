"""The losses' two input forms, told apart by shape, flattened to one row per position.

- binary: ``logits.shape == target.shape`` (MRC start/end over positions, one-logit
  classifiers). ``p = sigmoid(z)``; ``target`` holds 0/1; ``mask`` (same shape)
  marks the positions that count.
- multi-class: ``logits`` is ``[..., C]`` and ``target`` is integer ``[...]``.
  ``P = softmax(z)``; positions labelled ``-100`` are ignored, and so are those
  where ``mask`` (shape of ``target``) is false.

Logits at invalid positions are replaced by zeros (``torch.where``) before any
arithmetic, so whatever they hold changes neither the loss nor any gradient.
Half-precision logits are computed in float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
import torch.nn.functional as F
from torch import Tensor

IGNORE_INDEX = -100


@dataclass(frozen=True)
class Flat:
    """Inputs flattened to one row per position."""

    logits: Tensor  # (N, C), float32 or float64, zeros at invalid rows; C = 1 for binary
    target: Tensor  # (N,) long class (multi-class) or float 0/1 (binary); 0 at invalid rows
    valid: Tensor  # (N,) bool
    binary: bool

    @cached_property
    def weight(self) -> Tensor:
        """``(N,)``: 1 at valid rows, 0 elsewhere, in the logits' dtype."""
        return self.valid.to(self.logits.dtype)

    @cached_property
    def n_valid(self) -> Tensor:
        """Number of valid positions, at least 1 so an all-ignored batch gives loss 0."""
        return self.weight.sum().clamp_min(1)

    def sum_over_valid(self, per_position: Tensor) -> Tensor:
        """The ``(N,)`` or ``(N, C)`` per-position values summed over valid rows. The
        invalid rows hold finite values (their logits are zeros), so weighting them by
        0 removes them exactly."""
        return self.weight @ per_position

    def mean_over_valid(self, per_position: Tensor) -> Tensor:
        """The per-position values summed over valid rows, over ``N_v``."""
        return self.sum_over_valid(per_position) / self.n_valid


@dataclass(frozen=True)
class Probabilities:
    """Each class's probability, its log and ``log(1 - p)``, and one-hot targets,
    ``(N, C)`` each (``C = 1`` for binary inputs)."""

    p: Tensor
    log_p: Tensor
    log1m_p: Tensor  # never log of a subtraction: finite where p rounds to 1
    y: Tensor


def flatten_inputs(logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Flat:
    """Check shapes, tell binary from multi-class, and flatten to ``(N, C)``.

    Raises:
        ValueError: the shapes fit neither form, ``mask`` has another shape than
            ``target``, or a multi-class target is not integer.
    """
    if mask is not None and mask.shape != target.shape:
        raise ValueError(
            f"mask must have the shape of target {tuple(target.shape)}, got {tuple(mask.shape)}"
        )
    binary = logits.shape == target.shape
    if not binary and not (logits.dim() >= 1 and logits.shape[:-1] == target.shape):
        raise ValueError(
            "logits and target fit neither form: binary needs equal shapes, multi-class needs "
            f"logits [..., C] and target [...]; got logits {tuple(logits.shape)}, "
            f"target {tuple(target.shape)}"
        )
    if not binary and target.is_floating_point():
        raise ValueError("multi-class target must hold integer class indices")
    n_classes = 1 if binary else logits.shape[-1]
    if not binary and n_classes < 2:
        raise ValueError(f"multi-class logits need at least 2 classes, got {n_classes}")
    valid = target != IGNORE_INDEX
    if mask is not None:
        valid = valid & mask.bool()
    valid = valid.reshape(-1)
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    z = torch.where(valid.unsqueeze(-1), logits.reshape(-1, n_classes).to(dtype), 0.0)
    flat_target = target.reshape(-1)
    t = flat_target.to(dtype) if binary else flat_target.long()
    # Out-of-range classes are caught by one_hot / cross_entropy themselves.
    return Flat(logits=z, target=torch.where(valid, t, 0), valid=valid, binary=binary)


def probabilities(flat: Flat) -> Probabilities:
    """``p``, ``log p``, ``log(1 - p)`` and one-hot targets of every class.

    Binary: ``log(1 - p) = logsigmoid(-z)``. Multi-class: at most one class a row has
    ``p > 1/2``; every other class gets ``log1p(-p)`` (no cancellation below 1/2),
    and that one gets the log of the other classes' mass,
    ``logsumexp_{k != top} log p_k``, exact where its ``p`` rounds to 1. So
    ``(1 - p)^alpha`` and its gradient stay finite at any logit.
    """
    z = flat.logits
    if flat.binary:
        log_p = F.logsigmoid(z)
        return Probabilities(log_p.exp(), log_p, F.logsigmoid(-z), flat.target.unsqueeze(-1))
    log_p = _log_softmax(z)
    p = log_p.exp()
    is_top = p > 0.5  # at most one class a row
    log1m_rest = torch.log1p(-torch.where(is_top, 0.0, p))  # 0 at the top: no log(0) there
    log1m_top = torch.logsumexp(log_p.masked_fill(is_top, -torch.inf), dim=-1, keepdim=True)
    log1m_p = torch.where(is_top, log1m_top, log1m_rest)
    y = F.one_hot(flat.target, z.shape[-1]).to(z.dtype)
    return Probabilities(p, log_p, log1m_p, y)


def _log_softmax(z: Tensor) -> Tensor:
    """``log_softmax`` over the last axis, written out: torch's CPU kernel takes about
    20 times longer along a short last axis (9 tags) than these four steps."""
    shifted = z - z.amax(dim=-1, keepdim=True).detach()
    return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
