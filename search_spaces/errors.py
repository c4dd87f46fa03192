"""The one error type of a sweep spec, and how validators report a broken rule.

Every problem is a ``SpecIssue``: a field path in the spec's own terms
(``search_space.losses[2].alpha``) and the rule, so the REST service can answer
a 4xx naming both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

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
                path = ".".join(part for part in (path, context["path"]) if part)
                message = context["rule"]
            issues.append(SpecIssue(path, message))
        return cls(issues)


def format_path(loc: Sequence[int | str]) -> str:
    """``("search_space", "losses", 2, "alpha")`` -> ``"search_space.losses[2].alpha"``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path
