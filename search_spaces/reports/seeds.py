"""What a table's mean ± std is over, in words: seeds, or runs that repeat a seed.

Two sweeps merged that both ran seed 0 put two runs of seed 0 in a cell; their std
is the spread of reruns, not of seeds, and the legend says so rather than counting
them as seeds.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from search_spaces.plural import counted


def _stat(table: pd.DataFrame, stat: str) -> list[int]:
    """The non-empty cells' ``stat`` (``count``: runs, ``seeds``: distinct seeds)."""
    values = table.xs(stat, axis=1, level="stat").to_numpy().ravel()
    return [int(v) for v in values if v is not None and not math.isnan(float(v))]


def seed_phrase(table: pd.DataFrame) -> str | None:
    """``"3 seeds"`` (the most a cell holds) when every run of a cell has a seed of
    its own, else what the runs repeat: ``"2 runs of seed 0"``, ``"4 runs of seeds 0, 1
    (runs repeat seeds)"``; None when no cell holds a scored run (every trial constant).

    ``table`` is a ``pivot_table`` result: stats ``count`` (runs) and ``seeds``
    (distinct seeds) per cell, ``attrs["seeds"]`` every seed in it.
    """
    runs = _stat(table, "count")
    seeds = _stat(table, "seeds") if "seeds" in table.columns.get_level_values("stat") else runs
    if not runs:
        return None
    if runs == seeds:
        return counted(max(seeds), "seed")
    every: list[Any] = list(table.attrs.get("seeds") or [])
    if len(every) == 1:
        return f"{max(runs)} runs of seed {every[0]}"
    named = ", ".join(str(seed) for seed in every)
    return f"{max(runs)} runs of seeds {named} (runs repeat seeds)"
