"""Thin ``nn.Module`` wrappers over :mod:`trainables.losses.functional`.

Each module validates its parameters once, at construction, and is called as
``loss(logits, target, mask=None) -> scalar``; see the functional module for the
two input forms (binary and multi-class) and their shapes.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import Tensor, nn

from trainables.losses import functional as fn


def _check_unit_interval(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")


def _check_non_negative(name: str, value: float) -> None:
    if not (value >= 0.0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")


def _check_scope(scope: str) -> None:
    if scope not in ("example", "set"):
        raise ValueError(f"scope must be 'example' or 'set', got {scope!r}")


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


class DicesweepLoss(nn.Module, abc.ABC):
    """Base class: ``forward(logits, target, mask=None)`` returns a scalar tensor."""

    key: ClassVar[str]

    @abc.abstractmethod
    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        """The loss averaged as its ``scope`` says; shapes as in the functional module."""


class CELoss(DicesweepLoss):
    """Cross-entropy (eq. 1)."""

    key = "ce"

    def __init__(self) -> None:
        super().__init__()  # no parameters; an explicit signature for the registry

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.ce_loss(logits, target, mask)


def wce_weights(class_counts: Sequence[int], k: float) -> list[float]:
    """Class weights of eq. 2: ``w_t = log10((n - n_t) / n_t + K)`` from training counts.

    Raises:
        ValueError: fewer than 2 classes, a count that is not a positive integer, or a
            ``k`` that makes a weight <= 0 (``K < 1`` can, for the majority class).
    """
    counts = list(class_counts)
    if len(counts) < 2:
        raise ValueError(f"class_counts needs a count per class (>= 2), got {counts}")
    for index, count in enumerate(counts):
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ValueError(
                f"class_counts[{index}] must be a positive integer (a class absent from the "
                f"training set has no defined weight), got {count!r}"
            )
    _check_non_negative("k", k)
    total = sum(counts)
    weights = [math.log10((total - n_t) / n_t + k) for n_t in counts]
    for index, weight in enumerate(weights):
        if weight <= 0:
            raise ValueError(
                f"k={k} makes the weight of class {index} (count {counts[index]} of {total}) "
                f"{weight:.4g} <= 0: k must exceed 1 - (n - n_t)/n_t = "
                f"{1 - (total - counts[index]) / counts[index]:.4g}"
            )
    return weights


class WCELoss(DicesweepLoss):
    """Weighted cross-entropy (eq. 2), divided by the number of valid positions."""

    key = "wce"

    def __init__(self, class_counts: Sequence[int] | None = None, k: float = 1.0) -> None:
        super().__init__()
        if class_counts is None:
            raise ValueError("wce needs class_counts: per-class counts of the training set")
        self.k = k
        self.register_buffer(
            "weights", torch.tensor(wce_weights(class_counts, k), dtype=torch.float32)
        )

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        expected = 2 if logits.shape == target.shape else logits.shape[-1]
        if self.weights.numel() != expected:
            raise ValueError(
                f"wce has {self.weights.numel()} class weights but the logits have "
                f"{expected} classes"
            )
        return fn.wce_loss(logits, target, mask, weights=self.weights)


class FocalLoss(DicesweepLoss):
    """Focal loss: ``-(1 - p_t)^gamma log p_t``."""

    key = "focal"

    def __init__(self, gamma: float = 2.0) -> None:
        super().__init__()
        _check_non_negative("gamma", gamma)
        self.gamma = gamma

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.focal_loss(logits, target, mask, gamma=self.gamma)


class DiceLoss(DicesweepLoss):
    """Dice loss (eq. 7, or eq. 6 with ``square=False``)."""

    key = "dice"

    def __init__(self, smooth: float = 1.0, square: bool = True, scope: str = "example") -> None:
        super().__init__()
        _check_non_negative("smooth", smooth)
        _check_bool("square", square)
        _check_scope(scope)
        self.smooth, self.square, self.scope = smooth, square, scope

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.dice_loss(
            logits, target, mask, smooth=self.smooth, square=self.square, scope=self.scope
        )


class TverskyLoss(DicesweepLoss):
    """Tversky loss (eq. 9): ``alpha`` weighs false positives, ``beta`` false negatives."""

    key = "tversky"

    def __init__(
        self, alpha: float = 0.5, beta: float = 0.5, smooth: float = 1.0, scope: str = "example"
    ) -> None:
        super().__init__()
        _check_unit_interval("alpha", alpha)
        _check_unit_interval("beta", beta)
        _check_non_negative("smooth", smooth)
        _check_scope(scope)
        self.alpha, self.beta, self.smooth, self.scope = alpha, beta, smooth, scope

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.tversky_loss(
            logits,
            target,
            mask,
            alpha=self.alpha,
            beta=self.beta,
            smooth=self.smooth,
            scope=self.scope,
        )


class DSCLoss(DicesweepLoss):
    """Self-adjusting dice (eq. 11/12) with ``q = (1 - p)^alpha p``.

    The official code (ShannonAI/dice_loss_for_NLP) is this loss with
    ``alpha=0.01, smooth=1, square=True, scope="set"``.
    """

    key = "dsc"

    def __init__(
        self,
        alpha: float = 1.0,
        smooth: float = 1.0,
        square: bool = False,
        scope: str = "example",
    ) -> None:
        super().__init__()
        _check_unit_interval("alpha", alpha)
        _check_non_negative("smooth", smooth)
        _check_bool("square", square)
        _check_scope(scope)
        self.alpha, self.smooth, self.square, self.scope = alpha, smooth, square, scope

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.dsc_loss(
            logits,
            target,
            mask,
            alpha=self.alpha,
            smooth=self.smooth,
            square=self.square,
            scope=self.scope,
        )
