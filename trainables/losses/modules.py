"""Thin ``nn.Module`` wrappers over :mod:`trainables.losses.functional`.

Each is called as ``loss(logits, target, mask=None) -> scalar`` (shapes in
:mod:`trainables.losses.inputs`) and holds its parameters as ``spec``, the loss's
model in ``search_spaces.losses``, validated by ``build_loss``.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import torch
from torch import Tensor, nn

from search_spaces.losses import (
    CeSpec,
    DiceSpec,
    DscSpec,
    FocalSpec,
    LossSpec,
    TverskySpec,
    WceSpec,
    wce_weights,
)
from trainables.losses import functional as fn


class DicesweepLoss(nn.Module, abc.ABC):
    """Base class: ``forward(logits, target, mask=None)`` returns a scalar tensor."""

    key: ClassVar[str]
    spec: LossSpec

    def __init__(self, spec: LossSpec) -> None:
        super().__init__()
        self.spec = spec

    @abc.abstractmethod
    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        """The loss averaged as its ``scope`` says; shapes as in ``inputs``."""


class CELoss(DicesweepLoss):
    """Cross-entropy (eq. 1)."""

    key = "ce"
    spec: CeSpec

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.ce_loss(logits, target, mask)


class WCELoss(DicesweepLoss):
    """Weighted cross-entropy (eq. 2), divided by the number of valid positions; its
    ``(C,)`` weights are a buffer, so they move with the module.

    Raises (on the call): logits with another number of classes than the weights.
    """

    key = "wce"
    spec: WceSpec

    def __init__(self, spec: WceSpec) -> None:
        super().__init__(spec)
        weights = wce_weights(spec.class_counts or (), spec.k)  # build_loss supplies counts
        self.register_buffer("weights", torch.tensor(weights, dtype=torch.float32))

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
    spec: FocalSpec

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.focal_loss(logits, target, mask, spec=self.spec)


class DiceLoss(DicesweepLoss):
    """Dice loss (eq. 7, or eq. 6 with ``square=False``)."""

    key = "dice"
    spec: DiceSpec

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.dice_loss(logits, target, mask, spec=self.spec)


class TverskyLoss(DicesweepLoss):
    """Tversky loss (eq. 9): ``alpha`` weighs false positives, ``beta`` false negatives."""

    key = "tversky"
    spec: TverskySpec

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.tversky_loss(logits, target, mask, spec=self.spec)


class DSCLoss(DicesweepLoss):
    """Self-adjusting dice (eq. 11/12) with ``q = (1 - p)^alpha p``. The official code
    is this loss with ``search_spaces.losses.OFFICIAL_RECIPES``."""

    key = "dsc"
    spec: DscSpec

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.dsc_loss(logits, target, mask, spec=self.spec)
