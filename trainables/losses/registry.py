"""Name-to-class registry of the losses and the ``build_loss`` factory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from search_spaces.losses import LossSpecError, supplied_by_data, validate_loss_spec
from trainables.losses.modules import (
    CELoss,
    DiceLoss,
    DicesweepLoss,
    DSCLoss,
    FocalLoss,
    TverskyLoss,
    WCELoss,
)

LOSSES: dict[str, type[DicesweepLoss]] = {
    cls.key: cls for cls in (CELoss, WCELoss, FocalLoss, DiceLoss, TverskyLoss, DSCLoss)
}


def build_loss(
    spec: Mapping[str, Any],
    *,
    class_counts: Sequence[int] | None = None,
    labels: Sequence[str] | None = None,
) -> DicesweepLoss:
    """Build a loss from ``{"name": ..., **params}``, validated by the schema in
    ``search_spaces.losses`` into the model the loss holds as ``spec``.
    ``class_counts`` (the training set's count per class) reaches the losses that
    declare they need it (``wce``); ``labels`` (the task's class names, in class-index
    order) the dice family, whose ``classes: foreground`` finds its background tag
    among them; others ignore both.

    Raises:
        LossSpecError (a ValueError): no or an unknown ``name``, an unknown parameter
            (the message lists the valid ones), a value out of range (the message names
            the parameter and the rule), a loss that needs ``class_counts`` without
            them, or a background tag that is not among ``labels``.
    """
    name = spec.get("name")
    supplied = {"class_counts": class_counts, "labels": None if labels is None else list(labels)}
    full = dict(spec)
    for need in supplied_by_data(name) if isinstance(name, str) else ():
        full.setdefault(need, supplied.get(need))
        if full[need] is None and need == "class_counts":  # labels: binary inputs need none
            raise LossSpecError(f"{name} needs {need}: per-class counts of the training set")
    validated = validate_loss_spec(full)
    return LOSSES[validated.name](validated)
