"""The paper's six losses: ``ce``, ``wce``, ``focal``, ``dice``, ``tversky``, ``dsc``.

Build one with :func:`build_loss` (``{"name": "dsc", "alpha": 0.1}``) and call it
as ``loss(logits, target, mask=None)``. See docs/losses.md for the equations.
"""

from trainables.losses.functional import (
    IGNORE_INDEX,
    ce_loss,
    dice_loss,
    dsc_loss,
    focal_loss,
    tversky_loss,
    wce_loss,
)
from trainables.losses.modules import (
    CELoss,
    DiceLoss,
    DicesweepLoss,
    DSCLoss,
    FocalLoss,
    TverskyLoss,
    WCELoss,
    wce_weights,
)
from trainables.losses.registry import LOSSES, build_loss, loss_parameters

__all__ = [
    "IGNORE_INDEX",
    "LOSSES",
    "CELoss",
    "DSCLoss",
    "DiceLoss",
    "DicesweepLoss",
    "FocalLoss",
    "TverskyLoss",
    "WCELoss",
    "build_loss",
    "ce_loss",
    "dice_loss",
    "dsc_loss",
    "focal_loss",
    "loss_parameters",
    "tversky_loss",
    "wce_loss",
    "wce_weights",
]
