"""Reading a sweep spec from a YAML or JSON file (JSON is YAML), with errors that name
the file, line and column in one line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml


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
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise SpecFileError(f"{where}: invalid YAML: {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise SpecFileError(f"{source}: invalid YAML: {error}") from None
    if not isinstance(data, dict):
        raise SpecFileError(f"{source}: a sweep spec must be a mapping, got {type(data).__name__}")
    return data
