"""The one schema of the losses' parameters (docs/losses.md): one model per loss.

Each parameter's name, default, type, range and meaning is written here once. The
service and the sweep driver refuse a bad spec with these models before a trial
starts; ``trainables.losses.build_loss`` validates through them and hands the model
itself to the math.
A loss spec is ``{"name": <key>, **params}``; unset parameters take the defaults
below. What a loss needs from the training data (``from_data``, e.g. ``wce``'s
``class_counts``) is declared on its model and supplied by the trainable.

Numbers are strict (``True`` is not ``1.0``, ``"0.5"`` is not ``0.5``), finite and
bounded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

Scope = Literal["example", "set"]
# How the dice family reduces its one-vs-rest losses over classes: their mean (ours,
# a macro average in [0, 1]), their sum (the official code's multi-class scripts), or
# the mean over every class but the background tag (a tagger's entity tags; binary
# inputs have one class, the positive, so there it is the mean).
ClassReduction = Literal["mean", "sum", "foreground"]
# Strict so that a boolean is never read as 0/1; ints are still accepted.
_Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
UnitInterval = Annotated[_Number, Field(ge=0.0, le=1.0)]
Smooth = Annotated[_Number, Field(ge=0.0, le=1e6)]
Flag = Annotated[bool, Field(strict=True)]
# OHEM (the official ``ohem_ratio``): per class, keep every positive and at most
# ``ratio x positives`` negatives, the hardest; 0 keeps every position (off).
OhemRatio = Annotated[_Number, Field(ge=0.0, le=1000.0)]
# Which negatives OHEM keeps: the ``floor(ratio x positives)`` hardest ("hardest", the
# paper's rule), or what the official binary OHEM keeps ("official": its selection mask
# broadcasts to N x N, so with two or more negatives to keep it keeps none; docs/losses.md).
OhemRule = Literal["hardest", "official"]
Tag = Annotated[str, Field(strict=True, min_length=1, max_length=100)]
# The tag ``classes: foreground`` leaves out when the spec names none: BIO's outside tag.
DEFAULT_BACKGROUND = "O"


def wce_weights(class_counts: Sequence[int], k: float) -> list[float]:
    """Class weights of eq. 2, ``w_t = log10((n - n_t)/n_t + k)``, from the training
    set's count of each class."""
    total = sum(class_counts)
    return [math.log10((total - n_t) / n_t + k) for n_t in class_counts]


class LossSpecError(ValueError):
    """A loss spec with an unknown name, an unknown parameter or a value out of range."""


class _LossSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Parameters the trainable computes from the training data; a spec never sets them.
    from_data: ClassVar[tuple[str, ...]] = ()


class CeSpec(_LossSpec):
    """Cross-entropy (eq. 1); no parameters."""

    name: Literal["ce"] = "ce"


class WceSpec(_LossSpec):
    """Weighted cross-entropy (eq. 2): ``w_t = log10((n - n_t)/n_t + k)`` from the
    training set's ``class_counts``, which the trainable supplies. A ``k`` that makes a
    weight <= 0 for those counts (``k < 1`` can, for the majority class) is refused."""

    from_data: ClassVar[tuple[str, ...]] = ("class_counts",)
    name: Literal["wce"] = "wce"
    k: Annotated[_Number, Field(gt=0.0, le=1e6)] = 1.0
    class_counts: tuple[Annotated[int, Field(strict=True, gt=0)], ...] | None = None

    @field_validator("class_counts")
    @classmethod
    def _two_classes_or_more(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None and len(value) < 2:
            raise ValueError(f"class_counts needs one count per class (>= 2), got {list(value)}")
        return value

    @model_validator(mode="after")
    def _positive_weights(self) -> WceSpec:
        counts = self.class_counts or ()
        total = sum(counts)
        weights = wce_weights(counts, self.k)
        for index, (n_t, weight) in enumerate(zip(counts, weights, strict=True)):
            if weight <= 0:
                raise ValueError(
                    f"k={self.k} makes the weight of class {index} (count {n_t} of {total}) "
                    f"<= 0: k must exceed 1 - (n - n_t)/n_t = {1 - (total - n_t) / n_t:.4g}"
                )
        return self


class FocalSpec(_LossSpec):
    """Focal loss ``-(1 - p_t)^gamma log p_t``; ``gamma=0`` equals CE. ``prob_offset``
    ε > 0 reads every class probability as ``(p + ε) / (1 + C ε)`` first (the official
    code's ``log(p + 1e-4)`` taken back through its softmax: ε 1e-4, C 2)."""

    name: Literal["focal"] = "focal"
    gamma: Annotated[_Number, Field(ge=0.0, le=100.0)] = 2.0
    prob_offset: Annotated[_Number, Field(ge=0.0, le=0.1)] = 0.0


class OverlapSpec(_LossSpec):
    """The dice family's shared parameters, each loss declaring them in its own order:

    - ``smooth`` s, added to the numerator and the denominator;
    - ``square``: the denominator ``p^2 + y^2`` rather than ``p + y``;
    - ``scope``: ``"example"`` averages the per-position loss over the valid positions,
      ``"set"`` takes one score from sums over them (the paper's footnote 3);
    - ``classes`` (``ClassReduction``); ``classes: foreground`` averages every class but
      ``background`` (default ``"O"``), a tag of the task's ``labels``, which the
      trainable supplies; a spec names ``background`` only with it;
    - ``ohem_ratio`` and ``ohem_rule`` (``OhemRatio``, ``OhemRule``).

    Raises (on validation): ``ohem_rule: official`` without an ``ohem_ratio``,
    ``background`` without ``classes: foreground``, or a background tag that is not
    among the supplied ``labels``.
    """

    from_data: ClassVar[tuple[str, ...]] = ("labels",)
    if TYPE_CHECKING:  # declared by each loss, in its own parameters' order
        smooth: float
        square: bool
        scope: Scope
        classes: ClassReduction
        background: str | None
        ohem_ratio: float
        ohem_rule: OhemRule
        labels: tuple[str, ...] | None

    @model_validator(mode="after")
    def _rule_needs_a_ratio(self) -> OverlapSpec:
        if self.ohem_rule != "hardest" and self.ohem_ratio == 0:
            raise ValueError(
                f"ohem_rule {self.ohem_rule!r} chooses OHEM's negatives: it applies with "
                "ohem_ratio > 0"
            )
        return self

    @model_validator(mode="after")
    def _background_is_a_tag(self) -> OverlapSpec:
        if self.background is not None and self.classes != "foreground":
            raise ValueError(
                f"background names the tag that classes 'foreground' leaves out; "
                f"with classes {self.classes!r} it has no use: set classes 'foreground' or drop it"
            )
        tag = self.background_tag
        if tag is not None and self.labels is not None and tag not in self.labels:
            raise ValueError(
                f"background {tag!r} is not a tag of the task: classes 'foreground' leaves "
                f"out one of its labels ({', '.join(self.labels)})"
            )
        return self

    @property
    def background_tag(self) -> str | None:
        """The tag ``classes: foreground`` leaves out; ``None`` with another reduction."""
        if self.classes != "foreground":
            return None
        return DEFAULT_BACKGROUND if self.background is None else self.background

    @property
    def background_index(self) -> int | None:
        """The class index ``classes: foreground`` leaves out: ``background_tag`` among
        ``labels``. ``None`` with another reduction, or without labels (binary inputs
        have one class and need none)."""
        tag = self.background_tag
        if tag is None or self.labels is None:
            return None
        return self.labels.index(tag)


class DiceSpec(OverlapSpec):
    """Dice loss (eq. 7; eq. 6 with ``square=False``)."""

    name: Literal["dice"] = "dice"
    smooth: Smooth = 1.0
    square: Flag = True
    scope: Scope = "example"
    classes: ClassReduction = "mean"
    background: Tag | None = None
    ohem_ratio: OhemRatio = 0.0
    ohem_rule: OhemRule = "hardest"
    labels: tuple[Tag, ...] | None = None


class TverskySpec(OverlapSpec):
    """Tversky loss (eq. 9): ``alpha`` weighs false positives, ``beta`` false negatives;
    ``square=True`` squares both soft terms (``alpha p^2 (1-y)``, ``beta (1-p)^2 y``),
    so that ``alpha = beta = 1/2`` is squared dice with smoothing ``2 s``."""

    name: Literal["tversky"] = "tversky"
    alpha: UnitInterval = 0.5
    beta: UnitInterval = 0.5
    smooth: Smooth = 1.0
    square: Flag = False
    scope: Scope = "example"
    classes: ClassReduction = "mean"
    background: Tag | None = None
    ohem_ratio: OhemRatio = 0.0
    ohem_rule: OhemRule = "hardest"
    labels: tuple[Tag, ...] | None = None


class DscSpec(OverlapSpec):
    """Self-adjusting dice (eq. 11/12) with ``q = (1 - p)^alpha p``. The official code's
    recipes are ``OFFICIAL_RECIPES`` (they differ between binary and multi-class inputs)."""

    name: Literal["dsc"] = "dsc"
    alpha: UnitInterval = 1.0
    smooth: Smooth = 1.0
    square: Flag = False
    scope: Scope = "example"
    classes: ClassReduction = "mean"
    background: Tag | None = None
    ohem_ratio: OhemRatio = 0.0
    ohem_rule: OhemRule = "hardest"
    labels: tuple[Tag, ...] | None = None


LossSpec = Annotated[
    CeSpec | WceSpec | FocalSpec | DiceSpec | TverskySpec | DscSpec, Field(discriminator="name")
]

LOSS_SPECS: dict[str, type[_LossSpec]] = {
    model.model_fields["name"].default: model
    for model in (CeSpec, WceSpec, FocalSpec, DiceSpec, TverskySpec, DscSpec)
}

_LOSS_SPEC_ADAPTER: TypeAdapter[LossSpec] = TypeAdapter(LossSpec)

# What the official code (ShannonAI/dice_loss_for_NLP) optimises, as its scripts call
# its DiceLoss (``--dice_smooth 1 --dice_alpha 0.01 --dice_square``, on logits):
# - binary inputs (its MRC/SQuAD scripts): one set-level score over the whole batch;
# - multi-class inputs (its GLUE/TNEWS scripts, e.g. MRPC with a 2-class softmax): a
#   score per example and class, the classes' losses summed, averaged over examples.
OFFICIAL_RECIPES: dict[str, dict[str, Any]] = {
    "binary": {"name": "dsc", "alpha": 0.01, "smooth": 1.0, "square": True, "scope": "set"},
    "multiclass": {
        "name": "dsc",
        "alpha": 0.01,
        "smooth": 1.0,
        "square": True,
        "scope": "example",
        "classes": "sum",
    },
}


def supplied_by_data(name: str) -> tuple[str, ...]:
    """The parameters of loss ``name`` that the trainable computes from the training data.

    Raises:
        LossSpecError: an unknown loss.
    """
    return _lookup(name).from_data


def loss_names() -> list[str]:
    """The registered loss keys, sorted."""
    return sorted(LOSS_SPECS)


def _lookup(name: object) -> type[_LossSpec]:
    if not isinstance(name, str) or name not in LOSS_SPECS:
        raise LossSpecError(f"unknown loss {name!r}; valid: {', '.join(loss_names())}")
    return LOSS_SPECS[name]


def loss_parameters(name: str) -> dict[str, Any]:
    """The parameters a spec may set for loss ``name``, with their defaults.

    Raises:
        LossSpecError: an unknown loss (the message lists the valid ones).
    """
    model = _lookup(name)
    return {
        field: info.default
        for field, info in model.model_fields.items()
        if field != "name" and field not in model.from_data
    }


def check_parameter(name: str, parameter: str, value: object) -> None:
    """Check one parameter value of loss ``name`` as a spec may set it.

    Rules across parameters (``background`` needs ``classes: foreground``) are the
    whole spec's, checked by ``validate_loss_spec``.

    Raises:
        LossSpecError: an unknown loss, a parameter the loss does not have or that
            the trainable supplies, or a value of the wrong type or out of range; the
            message names the parameter and the rule.
    """
    valid = loss_parameters(name)
    if parameter in supplied_by_data(name):
        raise LossSpecError(
            f"{parameter} is computed by the trainable from the training data; "
            "a spec must not set it"
        )
    if parameter not in valid:
        listed = ", ".join(sorted(valid)) or "none"
        raise LossSpecError(f"loss {name!r} has no parameter {parameter!r}; valid: {listed}")
    try:
        LOSS_SPECS[name].model_validate({"name": name, parameter: value})
    except ValidationError as error:
        own = [e for e in error.errors() if tuple(e["loc"][:1]) == (parameter,)]
        if own:
            rule = own[0]["msg"]
            raise LossSpecError(f"{parameter}={value!r} is invalid for {name}: {rule}") from None


def validate_loss_spec(data: Mapping[str, Any]) -> LossSpec:
    """Validate one whole loss spec ``{"name": ..., **params}`` into its model.

    Raises:
        LossSpecError: no or an unknown ``name``, an unknown parameter (the message
            lists the valid ones) or a value out of range.
    """
    if "name" not in data:
        raise LossSpecError(f"a loss spec needs a 'name'; valid: {', '.join(loss_names())}")
    model = _lookup(data["name"])
    unknown = sorted(set(data) - set(model.model_fields))
    if unknown:
        listed = ", ".join(sorted(set(model.model_fields) - {"name"})) or "none"
        raise LossSpecError(
            f"unknown parameter(s) {unknown} for loss {data['name']!r}; valid: {listed}"
        )
    try:
        return _LOSS_SPEC_ADAPTER.validate_python(dict(data))
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join([str(data["name"]), *(str(part) for part in first["loc"][1:])])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise LossSpecError(f"{where}: {message}") from None
