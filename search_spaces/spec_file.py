"""Reading a sweep spec from a YAML or JSON file, with errors that name the file, line
and column in one line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml


class SpecLoader(yaml.SafeLoader):
    """YAML with YAML 1.2's numbers: ``5e-5`` is a float, as in JSON, not the string
    PyYAML's YAML 1.1 rules make of an exponent without a dot."""


SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


class SpecFileError(ValueError):
    """A spec file that cannot be read, is not YAML, or holds no mapping."""


def read_spec_file(path: str) -> dict[str, Any]:
    """The mapping in the YAML or JSON file ``path``, or on standard input for ``-``.

    Raises:
        SpecFileError: "spec.yaml:3:9: invalid YAML: mapping values are not allowed here".
    """
    source = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise SpecFileError(f"{source}: cannot read the spec: {reason}") from None
    if source.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise SpecFileError(
                f"{source}:{error.lineno}:{error.colno}: invalid JSON: {error.msg}"
            ) from None
        return _mapping(data, source)
    try:
        data = yaml.load(text, Loader=SpecLoader)
    except yaml.MarkedYAMLError as error:
        raise SpecFileError(_yaml_message(error, source)) from None
    except yaml.YAMLError as error:
        raise SpecFileError(f"{source}: invalid YAML: {error}") from None
    return _mapping(data, source)


# PyYAML's context of an error inside a bracket, and the bracket it opened.
_OPEN_BRACKETS = {"while parsing a flow mapping": "{", "while parsing a flow sequence": "["}


def _yaml_message(error: yaml.MarkedYAMLError, source: str) -> str:
    """One line naming where the problem is; for a bracket left open, the line where it
    was opened (PyYAML notices only at the next key, often lines later)."""
    mark = error.problem_mark or error.context_mark
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
    bracket = _OPEN_BRACKETS.get(error.context or "")
    opened, found = error.context_mark, error.problem_mark
    if bracket is None or opened is None or found is None:
        return f"{where}: invalid YAML: {error.problem or error.context}"
    return (
        f"{source}:{opened.line + 1}:{opened.column + 1}: invalid YAML: the {bracket!r} "
        f"opened here is not closed ({error.problem} at line {found.line + 1}, "
        f"column {found.column + 1})"
    )


def _mapping(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SpecFileError(f"{source}: a sweep spec must be a mapping, got {type(data).__name__}")
    return data
