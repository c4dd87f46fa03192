"""A table whose seeds ran until decided (``seeds: {min, max, until: decided}``): each
cell's looks at its paired differences (``search_spaces.sequential.run_rule``), where
it stopped and why, and its repeated confidence interval and p-value in place of the
fixed-k ones: a cell never claims more than its rule allows (docs/sweeps.md, "Seeds
until decided").

The rule is read from the rows themselves (their setup field ``seeds``), so the
driver, which follows it to choose each round's seeds, and every table of its trials
find the same looks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from search_spaces.reports.flagged import marks
from search_spaces.reports.formats import format_value, ordered
from search_spaces.reports.paired import holm
from search_spaces.sections import SeedsUntil
from search_spaces.sequential import Look, Verdict, run_rule
from search_spaces.setup import PREFIX

RULE_COLUMN = f"{PREFIX}seeds"
Cell = tuple[Any, Any]  # (row label, column label)


def rule_of(rows: pd.DataFrame) -> SeedsUntil | None:
    """The seeds-until-decided rule the rows' trials ran under, or None for a fixed
    list of seeds (or rows from before the rule existed)."""
    if RULE_COLUMN not in rows:
        return None
    texts = rows[RULE_COLUMN].dropna().unique()
    return SeedsUntil.parse(str(texts[0])) if len(texts) == 1 else None


def paired_differences(
    rows: pd.DataFrame, rows_key: str, cols_key: str, metric: str, baseline: str
) -> dict[Cell, list[float]]:
    """Each non-baseline cell's differences ``row − baseline`` at the seeds both ran,
    in seed order (the order the rounds ran them); rows without the metric left out."""
    per_seed = rows.dropna(subset=[metric]).groupby([cols_key, "seed", rows_key])[metric].mean()
    wide = per_seed.unstack(rows_key)
    differences: dict[Cell, list[float]] = {}
    for column in ordered(wide.index.get_level_values(0)):
        block = wide.loc[column].sort_index()
        for label in ordered(wide.columns, baseline)[1:]:
            pairs = block[[label, baseline]].dropna()
            differences[(label, column)] = list(pairs[label] - pairs[baseline])
    return differences


def cell_looks(
    rows: pd.DataFrame,
    rows_key: str,
    cols_key: str,
    metric: str,
    baseline: str,
    rule: SeedsUntil,
) -> dict[Cell, list[Look]]:
    """The looks the rule takes at each non-baseline cell of ``rows`` (the trials the
    statistics are over: constant ones already left out)."""
    settings = rule.rule()
    return {
        cell: run_rule(values, settings)
        for cell, values in paired_differences(rows, rows_key, cols_key, metric, baseline).items()
    }


def loss_looks(rows: pd.DataFrame, metric: str, rule: SeedsUntil) -> dict[str, list[Look]]:
    """Each loss's looks (by table label) over a sweep's final rows, its constant trials
    left out as its table leaves them out: what the driver plans its next round by.
    Rows of one data set and one variant, with the baseline ``ce``."""
    constant, _ = marks(rows, metric)
    learned = rows.drop(index=constant.index)
    if "ce" not in set(learned.get("loss", [])):
        return {}
    looks = cell_looks(learned, "loss", "dataset", metric, "ce", rule)
    return {str(label): taken for (label, _), taken in looks.items()}


def stopped(looks: list[Look], rule: SeedsUntil) -> dict[str, Any]:
    """Where a cell's looks end: ``look`` (1-based) of ``looks`` (how many the rule has),
    ``seeds``, ``verdict`` (decided, futile, max; ``continue`` where its seeds ran out
    before the rule stopped it: a trial failed), ``reason``, the mean paired difference
    ``delta``, the repeated ``ci`` and the repeated ``p``; ``look`` 0 before the first
    look."""
    if not looks:
        return {"look": 0, "looks": len(rule.looks), "seeds": 0, "verdict": "continue"}
    last = looks[-1]
    return {
        "look": last.look,
        "looks": len(rule.looks),
        "seeds": last.seeds,
        "verdict": str(last.verdict),
        "reason": last.reason or "seeds missing: a trial failed",
        "delta": last.mean,
        "ci": (last.ci_low, last.ci_high),
        "p": last.p_value,
    }


def with_rule(
    table: pd.DataFrame, looks: Mapping[Cell, list[Look]], rule: SeedsUntil
) -> pd.DataFrame:
    """``table`` carrying the rule (``attrs["seeds_until"]``, its text) and where each
    cell stopped (``attrs["sequential"]``: ``{(row, column): stopped(...)}``); each Δ
    is the mean paired difference at the cell's own seeds (the baseline ran more), the
    repeated interval and p-value replace the fixed-k ones in ``attrs["ci"]`` and
    ``attrs["p_raw"]``, and the marks (``attrs["significance"]``) are the repeated
    p-values Holm-adjusted over the table, on the cells the rule decided only (NaN on
    the others): a mark never claims more than the rule."""
    ends = {cell: stopped(taken, rule) for cell, taken in looks.items()}
    table.attrs["seeds_until"] = rule.describe()
    table.attrs["sequential"] = ends
    tested = {cell: end for cell, end in ends.items() if "p" in end}
    for (row, column), end in tested.items():
        table.at[row, (column, "delta")] = end["delta"]
    table.attrs["ci"] = {cell: end["ci"] for cell, end in tested.items()}
    raw = pd.Series([end["p"] for end in tested.values()], dtype=float)
    table.attrs["p_raw"] = dict(zip(tested, raw, strict=True))
    table.attrs["significance"] = {
        cell: float(p) if end["verdict"] == Verdict.DECIDED else math.nan
        for (cell, end), p in zip(tested.items(), holm(raw), strict=True)
    }
    return table


def rule_line(table: pd.DataFrame) -> str | None:
    """Where each cell stopped, in a sentence, or None for a table without the rule:
    ``"Seeds until decided (looks 3, 5; ...): focal(gamma=0) at look 1 of 2 (3
    seeds), futile (conditional power 0.004), repeated 95% CI [-0.10, +0.12],
    repeated p 1.00; ..."``."""
    ends = table.attrs.get("sequential") or {}
    if not ends:
        return None
    text = str(table.attrs["seeds_until"])
    level = 1 - (SeedsUntil.parse(text) or SeedsUntil(until="decided")).alpha
    several = len({column for _, column in ends}) > 1
    shown = "; ".join(
        (f"{format_value(row)} ({format_value(column)})" if several else format_value(row))
        + " "
        + _end_text(end, level)
        for (row, column), end in ends.items()
    )
    rule = text.removeprefix("until decided: ")
    return (
        f"Seeds until decided ({rule}; Lan–DeMets O'Brien–Fleming boundaries, t scale; "
        f"futile where the repeated CI lies inside ±delta_min or the conditional power is "
        f"below 10%): {shown}."
    )


def _end_text(end: Mapping[str, Any], level: float) -> str:
    if not end["look"]:
        return "before its first look"
    low, high = end["ci"]
    verdict = end["verdict"] if end["verdict"] != Verdict.CONTINUE else "stopped"
    return (
        f"at look {end['look']} of {end['looks']} ({end['seeds']} seeds), {verdict} "
        f"({end['reason']}), repeated {level:.0%} CI [{low:+.2f}, {high:+.2f}], "
        f"repeated p {end['p']:.2f}"
    )
