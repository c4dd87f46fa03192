"""A value's display form and the order of labels, shared by the tables and their renderers.

The renderers of a ``pivot_table`` result are one module each: ``markdown``,
``csv_json`` (CSV and JSON), ``latex``, ``html_table`` and ``plots`` (PNG), over the
cells of ``grid`` and the legend and notes of ``captions``.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

from search_spaces.datasets import VARIANTS

STATS = ("mean", "std", "count", "seeds", "delta")  # count: runs; seeds: distinct seeds


def format_value(value: Any) -> str:
    """A short display form: ``true``, ``0.1`` (floats via ``:g``), or ``str(value)``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def sort_key(value: Any) -> tuple[int, float, str]:
    """Numbers first (by value), then Table 8 variants (paper's order), then labels."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):  # numpy's too
        return (0, float(value), "")
    if value in VARIANTS:  # Table 8's column order
        return (1, float(VARIANTS.index(value)), "")
    return (2, 0.0, str(value))


def ordered(values: Iterable[Any], first: Any = None) -> list[Any]:
    """``values`` sorted: numbers numerically, Table 8 variants in the paper's order,
    other labels alphabetically; ``first`` (the baseline) leads if present."""
    rest = sorted((v for v in set(values) if v != first), key=sort_key)
    return [first, *rest] if first in set(values) else rest
