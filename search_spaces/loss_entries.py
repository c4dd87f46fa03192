"""One entry of ``search_space.losses``: a whole loss spec whose values may vary.

Each parameter value is one of

- a scalar: ``{"name": "focal", "gamma": 2}``;
- a list: a grid within this loss, the product of every listed parameter:
  ``{"name": "tversky", "alpha": [0.3, 0.5], "smooth": [1, 0.1]}`` is four specs
  (under random/TPE search a list is sampled like ``{"choice": [...]}``);
- a distribution, for random/TPE search only: ``{"uniform": [lo, hi]}``,
  ``{"loguniform": [lo, hi]}`` (``lo > 0``) or ``{"choice": [v, ...]}``.

Every value a grid point or a distribution can take is checked against the loss's
schema (``search_spaces.losses``): for ``uniform``/``loguniform`` both ends, for
``choice`` each option. Every range there is an interval, so checking the ends
checks the whole distribution.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationInfo,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from search_spaces.errors import ClosedModel, rule_error
from search_spaces.losses import (
    LOSS_SPECS,
    LossSpecError,
    check_parameter,
    loss_names,
    validate_loss_spec,
)

Scalar = bool | int | float | str
SIGNIFICANT_DIGITS = 12  # enough for any hyperparameter; drops binary noise like 0.1 + 0.2


def canonical(value: Any) -> Any:
    """``value`` with floats rounded to 12 significant digits (0.30000000000000004 -> 0.3)."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return value


class _Distribution(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Uniform(_Distribution):
    """``{"uniform": [lo, hi]}``: a float drawn uniformly from ``[lo, hi]``."""

    uniform: tuple[float, float]

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        low, high = self.uniform
        if not low < high:
            raise rule_error(f"uniform needs lo < hi, got [{low}, {high}]")
        return self

    def ends(self) -> list[Scalar]:
        return list(self.uniform)


class LogUniform(_Distribution):
    """``{"loguniform": [lo, hi]}``: ``log x`` uniform on ``[log lo, log hi]``, ``0 < lo``."""

    loguniform: tuple[float, float]

    @model_validator(mode="after")
    def _ordered_positive(self) -> LogUniform:
        low, high = self.loguniform
        if not 0 < low < high:
            raise rule_error(f"loguniform needs 0 < lo < hi, got [{low}, {high}]")
        return self

    def ends(self) -> list[Scalar]:
        return list(self.loguniform)


class Choice(_Distribution):
    """``{"choice": [v, ...]}``: one of the listed values, each equally likely."""

    choice: list[Scalar] = Field(min_length=1)

    def ends(self) -> list[Scalar]:
        return list(self.choice)


Distribution = Uniform | LogUniform | Choice
_DISTRIBUTIONS: dict[str, type[_Distribution]] = {
    "uniform": Uniform,
    "loguniform": LogUniform,
    "choice": Choice,
}


def _value_kind(value: Any) -> str | None:
    """The tag of a parameter value: scalar, list or a distribution's key; None if neither."""
    if isinstance(value, bool | int | float | str):
        return "scalar"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _DISTRIBUTIONS:
        return str(next(iter(value)))
    for key, model in _DISTRIBUTIONS.items():
        if isinstance(value, model):
            return key
    return None


# Tagged by shape, so that a bad value gets one error naming the accepted forms
# instead of one error per member of the union.
ParamValue = Annotated[
    Annotated[Scalar, Tag("scalar")]
    | Annotated[list[Scalar], Tag("list")]
    | Annotated[Uniform, Tag("uniform")]
    | Annotated[LogUniform, Tag("loguniform")]
    | Annotated[Choice, Tag("choice")],
    Discriminator(
        _value_kind,
        custom_error_type="parameter_value",
        custom_error_message=(
            'a parameter value is a scalar, a list of values, {"uniform": [lo, hi]}, '
            '{"loguniform": [lo, hi]} or {"choice": [v, ...]}'
        ),
    ),
]


def _parameters() -> tuple[str, ...]:
    """Every parameter a spec may set for some loss, in first-declared order: read from
    the losses' schema, so that a new parameter there is a search-space field here."""
    names: dict[str, None] = {}
    for model in LOSS_SPECS.values():
        for field in model.model_fields:
            if field != "name" and field not in model.from_data:
                names.setdefault(field)
    return tuple(names)


PARAMETERS = _parameters()


def candidates(value: ParamValue) -> list[Scalar]:
    """The values to check for ``value``: itself, each listed value, or a distribution's ends."""
    if isinstance(value, _Distribution):
        return value.ends()
    if isinstance(value, list):
        return value
    return [value]


class _Named(ClosedModel):
    name: str  # first: the parameter validators read it

    @classmethod
    def key_choices(cls, data: dict[str, Any]) -> list[str]:
        # The named loss's own parameters, when the name is known.
        model = LOSS_SPECS.get(str(data.get("name")))
        if model is None:
            return list(cls.model_fields)
        return [field for field in model.model_fields if field not in model.from_data]


# One optional field per parameter of the schema, after ``name``.
_PARAMETER_FIELDS: dict[str, Any] = {
    parameter: (ParamValue | None, None) for parameter in PARAMETERS
}
_WithParameters: Any = create_model("_WithParameters", __base__=_Named, **_PARAMETER_FIELDS)


class LossEntry(_WithParameters):
    """A loss name and its parameters, each a scalar, a list (grid) or a distribution.

    The fields are the union of every loss's parameters (``PARAMETERS``, from the
    schema); each is checked against the named loss, so ``gamma`` on ``dsc`` fails
    naming the valid ones.
    """

    @model_validator(mode="before")
    @classmethod
    def _nothing_the_trainable_supplies(cls, data: Any) -> Any:
        supplied = {need for model in LOSS_SPECS.values() for need in model.from_data}
        for key in sorted(supplied & set(data)) if isinstance(data, dict) else ():
            raise rule_error(
                f"{key} is computed by the trainable from the training data; "
                "a spec must not set it",
                key,
            )
        return data

    @field_validator("name")
    @classmethod
    def _known_loss(cls, name: str) -> str:
        if name not in loss_names():
            raise rule_error(f"unknown loss {name!r}; valid: {', '.join(loss_names())}")
        return name

    @field_validator(*PARAMETERS)
    @classmethod
    def _valid_for_loss(cls, value: ParamValue | None, info: ValidationInfo) -> ParamValue | None:
        name = info.data.get("name")
        parameter = info.field_name
        if name is None or parameter is None:  # the name already failed; that error suffices
            return value
        if value is None:
            raise rule_error("null is not a value: leave the parameter out for its default")
        if isinstance(value, list) and not value:
            raise rule_error("a list of values must not be empty")
        for candidate in candidates(value):
            try:
                check_parameter(name, parameter, candidate)
            except LossSpecError as error:
                raise rule_error(str(error)) from None
        return value

    @model_validator(mode="after")
    def _every_point_holds(self) -> LossEntry:
        # Each value was checked alone above; rules across parameters (background needs
        # classes: foreground) hold for whole specs, so for each grid point.
        if not self.distribution_params():
            try:
                self.grid()
            except LossSpecError as error:
                raise rule_error(str(error)) from None
        return self

    @model_serializer(mode="wrap")
    def _only_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Dumps what the spec said, so that a dump validates back to the same entry.
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if key == "name" or key in self.params()}

    def params(self) -> dict[str, ParamValue]:
        """The parameters this entry sets, in the loss's declaration order."""
        return {
            field: value
            for field in LOSS_SPECS[self.name].model_fields
            if field in self.model_fields_set and (value := getattr(self, field)) is not None
        }

    def distribution_params(self) -> list[str]:
        """Names of the parameters given as distributions."""
        return [name for name, value in self.params().items() if isinstance(value, _Distribution)]

    def varying_params(self) -> list[str]:
        """Names of the parameters given as lists or distributions (what a searcher samples)."""
        return [
            name for name, value in self.params().items() if isinstance(value, list | _Distribution)
        ]

    def grid_size(self) -> int:
        """How many whole loss specs the grid of this entry holds (lists multiply); for grid
        search, which refuses distributions."""
        return math.prod(len(candidates(value)) for value in self.params().values())

    def grid(self) -> list[dict[str, Any]]:
        """The whole loss specs of this entry's grid, canonical: only the given parameters.

        Raises:
            ValueError: the entry has a distribution (only random/TPE can sample it).
        """
        if self.distribution_params():
            raise ValueError(
                f"{self.name}: {', '.join(self.distribution_params())} given as distributions "
                "cannot be expanded into a grid"
            )
        params = self.params()
        points = itertools.product(*(candidates(value) for value in params.values()))
        return [
            canonical_loss({"name": self.name, **dict(zip(params, point, strict=True))})
            for point in points
        ]


def canonical_loss(spec: dict[str, Any]) -> dict[str, Any]:
    """Validate a whole loss spec; return its set parameters (floats rounded), name first.

    Raises:
        LossSpecError: an unknown loss or parameter, or a value out of range.
    """
    validated = validate_loss_spec(spec).model_dump(exclude_unset=True)
    return {"name": validated.pop("name"), **{k: canonical(v) for k, v in validated.items()}}
