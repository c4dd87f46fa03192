"""The one error type of a sweep spec, and how validators report a broken rule.

Every problem is a ``SpecIssue``: a field path in the spec's own terms
(``search_space.losses[2].alpha``) and the rule, so the REST service can answer
a 4xx naming both.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

# Tags of unions told apart by the value's shape (a data set's name, folder or hub id):
# pydantic puts the tag into an error's location, where the spec has no such key, so
# ``format_path`` leaves them out (a tag has a space; no field name has one).
_SHAPE_TAGS: set[str] = set()

BRIEF_CHARS = 40  # of a refused value, quoted back in a message


def brief(value: object) -> str:
    """``value`` quoted for a message, at most its first ``BRIEF_CHARS`` characters:
    a refused value may be huge, and the message goes back to whoever sent it."""
    text = str(value)
    if len(text) <= BRIEF_CHARS:
        return repr(text)
    return f"{text[:BRIEF_CHARS]!r}... ({len(text)} characters)"


def rule_error(rule: str, path: str = "") -> PydanticCustomError:
    """An error saying which ``rule`` is broken; ``path`` is relative to where it is raised
    (empty in a field validator, whose field pydantic already names)."""
    return PydanticCustomError("spec_rule", "{rule}", {"path": path, "rule": rule})


def shape_tag(name: str) -> Tag:
    """The tag of one member of a union told apart by shape, left out of error paths;
    ``name`` is words with a space, so that it never equals a spec's key."""
    _SHAPE_TAGS.add(name)
    return Tag(name)


def closest_key(key: str, valid: Iterable[str]) -> str | None:
    """The valid key ``key`` is most likely a misspelling of, if any is close."""
    close = difflib.get_close_matches(key, list(valid), n=1)
    return close[0] if close else None


def unknown_key_error(key: str, valid: Sequence[str]) -> PydanticCustomError:
    """``unknown key; did you mean 'training'?`` for the key ``trainig``, or the valid
    keys when no key is close."""
    close = closest_key(key, valid)
    hint = f"did you mean {close!r}?" if close else f"valid: {', '.join(valid)}"
    return rule_error(f"unknown key; {hint}")


class ClosedModel(BaseModel):
    """A closed, immutable model: an unknown key is an error naming the closest valid
    key (pydantic's own ``extra="forbid"`` error names none); every other error of the
    same input is still reported with it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="wrap")
    @classmethod
    def _known_keys(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        try:
            return handler(data)
        except ValidationError as error:
            details = error.errors()
            if not any(_is_own_extra(detail) for detail in details):
                raise
            valid = cls.key_choices(data if isinstance(data, dict) else {})
            # A required key written misspelt is one mistake: its "Field required" goes.
            meant = {
                closest_key(str(detail["loc"][0]), valid)
                for detail in details
                if _is_own_extra(detail)
            }
            reworded = [
                _reworded(detail, valid)
                for detail in details
                if not (detail["type"] == "missing" and detail["loc"] in {(key,) for key in meant})
            ]
            raise ValidationError.from_exception_data(error.title, reworded) from None

    @classmethod
    def key_choices(cls, data: dict[str, Any]) -> list[str]:
        """The keys an unknown key is matched against: the fields, unless a subclass
        knows better from ``data``."""
        return list(cls.model_fields)


def _is_own_extra(detail: ErrorDetails) -> bool:
    return detail["type"] == "extra_forbidden" and len(detail["loc"]) == 1


# pydantic's own error types; any other is a custom one, rebuilt from its message.
_KNOWN_ERROR_TYPES = set(get_args(ErrorType))


def _reworded(detail: ErrorDetails, valid: list[str]) -> InitErrorDetails:
    """``detail`` as it is raised again, an unknown key of this model reworded."""
    kind: str | PydanticCustomError = detail["type"]
    if _is_own_extra(detail):
        kind = unknown_key_error(str(detail["loc"][0]), valid)
    elif kind not in _KNOWN_ERROR_TYPES:
        kind = PydanticCustomError(str(kind), detail["msg"], detail.get("ctx"))
    reraised = InitErrorDetails(type=kind, loc=detail["loc"], input=detail["input"])
    if "ctx" in detail and isinstance(kind, str):
        reraised["ctx"] = detail["ctx"]
    return reraised


@dataclass(frozen=True)
class SpecIssue:
    """One problem with a spec: where (``search_space.losses[2].alpha``; ``""`` for the
    spec as a whole) and which rule it breaks."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(ValueError):
    """An invalid sweep spec; ``issues`` lists each problem with its field path."""

    def __init__(self, issues: Sequence[SpecIssue]) -> None:
        self.issues = list(issues)
        if len(self.issues) == 1:  # one mistake, one line
            super().__init__(f"invalid sweep spec: {self.issues[0]}")
        else:
            super().__init__("invalid sweep spec:\n" + "\n".join(f"  {i}" for i in self.issues))

    @classmethod
    def from_validation_error(cls, error: ValidationError) -> SpecError:
        """Turn pydantic's errors into issues with dotted, bracketed paths."""
        issues = []
        for detail in error.errors():
            path = format_path(detail["loc"])
            message = detail["msg"]
            context = detail.get("ctx") or {}
            if detail["type"] == "spec_rule":
                path = join_path(path, context["path"])
                message = context["rule"]
            elif detail["type"] == "literal_error":
                message = _unknown_value(detail["loc"], detail["input"], context["expected"])
            issues.append(SpecIssue(path, message))
        return cls(issues)


def _unknown_value(loc: Sequence[int | str], value: Any, expected: str) -> str:
    """``unknown format 'conl'; valid: conll, conllu, ...`` from pydantic's
    ``'conll', 'conllu' or ...`` (``expected``, the literal's values in its order)."""
    name = next((part for part in reversed(loc) if isinstance(part, str)), "value")
    valid = ", ".join(item.strip("'") for item in re.split(r", | or ", expected))
    return f"unknown {name} {value!r}; valid: {valid}"


def join_path(path: str, relative: str) -> str:
    """``("task.dataset", "[0].path")`` -> ``"task.dataset[0].path"``."""
    if not path or not relative:
        return path or relative
    return path + relative if relative.startswith("[") else f"{path}.{relative}"


def format_path(loc: Sequence[int | str]) -> str:
    """``("search_space", "losses", 2, "alpha")`` -> ``"search_space.losses[2].alpha"``."""
    path = ""
    for part in loc:
        if part in _SHAPE_TAGS:
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path
