"""The paper's six losses: ``ce``, ``wce``, ``focal``, ``dice``, ``tversky``, ``dsc``.

Build one with :func:`build_loss` (``{"name": "dsc", "alpha": 0.1}``) and call it
as ``loss(logits, target, mask=None)``. The parameters' schema is
``search_spaces.losses``; the math is here. See docs/losses.md for the equations.
"""

from search_spaces.losses import OFFICIAL_RECIPES, loss_parameters, wce_weights
from trainables.losses.functional import (
    ce_loss,
    dice_loss,
    dsc_loss,
    focal_loss,
    tversky_loss,
    wce_loss,
)
from trainables.losses.inputs import IGNORE_INDEX
from trainables.losses.modules import (
    CELoss,
    DiceLoss,
    DicesweepLoss,
    DSCLoss,
    FocalLoss,
    TverskyLoss,
    WCELoss,
)
from trainables.losses.registry import LOSSES, build_loss

__all__ = [
    "IGNORE_INDEX",
    "LOSSES",
    "OFFICIAL_RECIPES",
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
