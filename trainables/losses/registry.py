"""Name-to-class registry of the losses and the ``build_loss`` factory."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

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


def loss_parameters(name: str) -> dict[str, Any]:
    """The parameters of loss ``name`` with their defaults (``None`` where required)."""
    cls = _lookup(name)
    signature = inspect.signature(cls.__init__)
    return {
        param.name: (None if param.default is inspect.Parameter.empty else param.default)
        for param in list(signature.parameters.values())[1:]
    }


def _lookup(name: object) -> type[DicesweepLoss]:
    if not isinstance(name, str) or name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; valid: {', '.join(sorted(LOSSES))}")
    return LOSSES[name]


def build_loss(spec: Mapping[str, Any]) -> DicesweepLoss:
    """Build a loss from ``{"name": ..., **params}``.

    Raises:
        ValueError: no or an unknown ``name``, an unknown parameter (the message lists
            the valid ones), or a value out of range (the message names the parameter
            and the rule).
    """
    if "name" not in spec:
        raise ValueError(f"a loss spec needs a 'name'; valid: {', '.join(sorted(LOSSES))}")
    params = dict(spec)
    name = params.pop("name")
    cls = _lookup(name)
    valid = loss_parameters(name)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        listed = ", ".join(sorted(valid)) or "none"
        raise ValueError(f"unknown parameter(s) {unknown} for loss {name!r}; valid: {listed}")
    return cls(**params)
