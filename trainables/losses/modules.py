"""Thin ``nn.Module`` wrappers over :mod:`trainables.losses.functional`.

Each is called as ``loss(logits, target, mask=None) -> scalar`` (shapes in
:mod:`trainables.losses.inputs`). Their parameters are validated by the schema in
``search_spaces.losses`` (``build_loss``); a module holds only what the math needs.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import ClassVar, TypedDict

import torch
from torch import Tensor, nn

from search_spaces.losses import DEFAULT_BACKGROUND
from trainables.losses import functional as fn
from trainables.losses.functional import Classes, OhemRule, Scope


class DicesweepLoss(nn.Module, abc.ABC):
    """Base class: ``forward(logits, target, mask=None)`` returns a scalar tensor."""

    key: ClassVar[str]

    @abc.abstractmethod
    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        """The loss averaged as its ``scope`` says; shapes as in ``inputs``."""


def background_index(
    classes: Classes, background: str | None, labels: Sequence[str] | None
) -> int | None:
    """The class index ``classes="foreground"`` leaves out: ``background`` (default
    ``"O"``) among the task's ``labels`` (the schema checked it is one of them).
    ``None`` with another reduction, or without labels (binary inputs need none)."""
    if classes != "foreground" or labels is None:
        return None
    return list(labels).index(DEFAULT_BACKGROUND if background is None else background)


class CELoss(DicesweepLoss):
    """Cross-entropy (eq. 1)."""

    key = "ce"

    def __init__(self) -> None:
        super().__init__()  # no parameters: an explicit signature, as the schema has none

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.ce_loss(logits, target, mask)


def wce_weights(class_counts: Sequence[int], k: float) -> list[float]:
    """Class weights of eq. 2: ``w_t = log10((n - n_t) / n_t + K)`` from training counts
    (validated by ``search_spaces.losses.WceSpec``: every weight > 0)."""
    total = sum(class_counts)
    return [math.log10((total - n_t) / n_t + k) for n_t in class_counts]


class WCELoss(DicesweepLoss):
    """Weighted cross-entropy (eq. 2), divided by the number of valid positions."""

    key = "wce"

    def __init__(self, class_counts: Sequence[int], k: float = 1.0) -> None:
        super().__init__()
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
    """Focal loss: ``-(1 - p_t)^gamma log p_t`` (``prob_offset``: ``fn.focal_loss``)."""

    key = "focal"

    def __init__(self, gamma: float = 2.0, prob_offset: float = 0.0) -> None:
        super().__init__()
        self.gamma, self.prob_offset = gamma, prob_offset

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.focal_loss(logits, target, mask, gamma=self.gamma, prob_offset=self.prob_offset)


class OverlapArgs(TypedDict):
    """The keyword arguments every dice-family ``fn.*_loss`` takes."""

    smooth: float
    square: bool
    scope: Scope
    classes: Classes
    ohem_ratio: float
    ohem_rule: OhemRule
    background: int | None


class OverlapLoss(DicesweepLoss, abc.ABC):
    """The dice family's shared settings: ``smooth``, ``square``, ``scope``, ``classes``
    (with ``background`` among ``labels`` for ``"foreground"``), ``ohem_ratio`` and
    ``ohem_rule``."""

    def __init__(
        self,
        smooth: float,
        square: bool,
        scope: Scope,
        classes: Classes,
        background: str | None,
        ohem_ratio: float,
        labels: Sequence[str] | None,
        ohem_rule: OhemRule = "hardest",
    ) -> None:
        super().__init__()
        self.smooth, self.square, self.scope, self.classes = smooth, square, scope, classes
        self.background, self.ohem_ratio, self.labels = background, ohem_ratio, labels
        self.ohem_rule = ohem_rule
        self.background_index = background_index(classes, background, labels)

    def overlap_kwargs(self) -> OverlapArgs:
        return OverlapArgs(
            smooth=self.smooth,
            square=self.square,
            scope=self.scope,
            classes=self.classes,
            ohem_ratio=self.ohem_ratio,
            ohem_rule=self.ohem_rule,
            background=self.background_index,
        )


class DiceLoss(OverlapLoss):
    """Dice loss (eq. 7, or eq. 6 with ``square=False``)."""

    key = "dice"

    def __init__(
        self,
        smooth: float = 1.0,
        square: bool = True,
        scope: Scope = "example",
        classes: Classes = "mean",
        background: str | None = None,
        ohem_ratio: float = 0.0,
        ohem_rule: OhemRule = "hardest",
        labels: Sequence[str] | None = None,
    ) -> None:
        super().__init__(smooth, square, scope, classes, background, ohem_ratio, labels, ohem_rule)

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.dice_loss(logits, target, mask, **self.overlap_kwargs())


class TverskyLoss(OverlapLoss):
    """Tversky loss (eq. 9): ``alpha`` weighs false positives, ``beta`` false negatives;
    ``square`` squares both (``fn.tversky_loss``)."""

    key = "tversky"

    def __init__(
        self,
        alpha: float = 0.5,
        beta: float = 0.5,
        smooth: float = 1.0,
        square: bool = False,
        scope: Scope = "example",
        classes: Classes = "mean",
        background: str | None = None,
        ohem_ratio: float = 0.0,
        ohem_rule: OhemRule = "hardest",
        labels: Sequence[str] | None = None,
    ) -> None:
        super().__init__(smooth, square, scope, classes, background, ohem_ratio, labels, ohem_rule)
        self.alpha, self.beta = alpha, beta

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.tversky_loss(
            logits, target, mask, alpha=self.alpha, beta=self.beta, **self.overlap_kwargs()
        )


class DSCLoss(OverlapLoss):
    """Self-adjusting dice (eq. 11/12) with ``q = (1 - p)^alpha p``. The official code
    is this loss with ``search_spaces.losses.OFFICIAL_RECIPES``: one recipe for binary
    inputs (set scope) and another for multi-class ones (per example, classes summed)."""

    key = "dsc"

    def __init__(
        self,
        alpha: float = 1.0,
        smooth: float = 1.0,
        square: bool = False,
        scope: Scope = "example",
        classes: Classes = "mean",
        background: str | None = None,
        ohem_ratio: float = 0.0,
        ohem_rule: OhemRule = "hardest",
        labels: Sequence[str] | None = None,
    ) -> None:
        super().__init__(smooth, square, scope, classes, background, ohem_ratio, labels, ohem_rule)
        self.alpha = alpha

    def forward(self, logits: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        return fn.dsc_loss(logits, target, mask, alpha=self.alpha, **self.overlap_kwargs())
