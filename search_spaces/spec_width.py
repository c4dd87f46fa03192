"""How wide a sweep spec can be: no object in a spec has more keys than the widest
object of its schema (plus ``extends``), so a body with more is refused before it is
validated. Validation compares every unknown key with the valid ones: a body of
20,000 unknown keys took seconds of CPU and answered with megabytes of issues.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from search_spaces.errors import SpecError, SpecIssue
from search_spaces.spec import SweepSpec


@functools.cache
def max_spec_keys() -> int:
    """The most keys one object of a sweep spec may hold: the widest object of
    ``SweepSpec``'s JSON schema, one more for ``extends`` at the top."""
    widths = [len(found) for found in _properties(SweepSpec.model_json_schema())]
    return max(widths) + 1


def _properties(schema: Any) -> Iterator[Mapping[str, Any]]:
    """Every ``properties`` mapping in a JSON schema, nested ones included."""
    if isinstance(schema, Mapping):
        if isinstance(schema.get("properties"), Mapping):
            yield schema["properties"]
        for value in schema.values():
            yield from _properties(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _properties(value)


def check_width(data: Any) -> None:
    """Refuse ``data`` when one of its objects (mappings, at any depth) has more keys
    than any object of a sweep spec may (``max_spec_keys``). Walked without recursion,
    so any depth the JSON parser accepted is walked.

    Raises:
        SpecError: one issue, naming the first such object and its number of keys.
    """
    limit = max_spec_keys()
    pending: list[tuple[str, Any]] = [("", data)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, Mapping):
            if len(value) > limit:
                rule = f"has {len(value)} keys; no object of a sweep spec has more than {limit}"
                raise SpecError([SpecIssue(path, rule)])
            pending.extend((f"{path}.{key}" if path else str(key), v) for key, v in value.items())
        elif isinstance(value, list):
            pending.extend((f"{path}[{index}]", v) for index, v in enumerate(value))
