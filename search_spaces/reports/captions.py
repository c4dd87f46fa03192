"""The words around a rendered table: its legend and the lines under it.

``legend`` says what the cells mean (metric, seeds, baseline, marks); ``notes`` gives
each loss's tuned settings, the optimiser steps, the no-skill baselines, the smallest
Δ the tests resolve, the marked trials and the failed ones, one line each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from search_spaces.plural import counted
from search_spaces.reports.formats import format_value
from search_spaces.reports.notes import mark_lines, precision_line, tuned_text
from search_spaces.reports.paper_beside import paper_lines
from search_spaces.reports.resolution import resolvable_line
from search_spaces.reports.seeds import seed_phrase
from search_spaces.reports.sequential import rule_line
from search_spaces.reports.setup_block import setup_lines, split_line
from search_spaces.reports.tested import tested_line

# The no-skill rule of each task kind, as the trainable scores it on the dev set.
NO_SKILL_RULES = (
    "PI: always positive (F1), the majority class (accuracy); NER: every word O; "
    "POS: every word the majority tag; MRC: the first k words of the passage, "
    "k the mean gold answer length (SQuAD v2: or no answer, the better)"
)
_SCORE_NAMES = {"f1": "F1", "accuracy": "accuracy", "exact_match": "EM"}


def legend(table: pd.DataFrame) -> str:
    """What a table's cells mean, in one sentence: its metric, the seeds, the
    baseline of the deltas and the marks."""
    attrs = table.attrs
    seeds = seed_phrase(table)
    if seeds is None:
        return f"{attrs['metric']}: no scored seed."
    text = f"{attrs['metric']}: mean ± std over {seeds}"
    if attrs.get("sequential"):
        ran = " or ".join(map(str, sorted({e["seeds"] for e in attrs["sequential"].values()})))
        text = (
            f"{attrs['metric']}: mean ± std over the seeds each row ran ({ran}; "
            f"{attrs['baseline']}: every seed another ran), Δ against {attrs['baseline']} "
            "at the row's own seeds"
        )
    elif attrs.get("baseline") is not None:
        text += f" (Δ against {attrs['baseline']})"
    text += "; best per column in bold"
    if attrs.get("degenerate_cells"):
        text += " among the cells without constant trials"
    tested = [p for p in (attrs.get("significance") or {}).values() if not math.isnan(p)]
    if attrs.get("sequential"):
        deltas = len(attrs.get("p_raw") or {})
        return text + (
            f"; ‡ p < 0.01, † p < 0.05 on the cells the rule decided (its repeated p-values,"
            f" Holm-adjusted over the table's {counted(deltas, 'Δ')}): "
            "seeds until decided, each Δ paired with the baseline's seeds."
        )
    if tested:
        count = counted(len(tested), "tested Δ")
        text += (
            f"; ‡ p < 0.01, † p < 0.05 (paired t-test against {attrs['baseline']} over seeds,"
            f" Holm-adjusted over the table's {count})"
        )
    return text + "."


def ci_line(table: pd.DataFrame) -> str | None:
    """Each tested Δ with its 95% confidence interval (paired t over seeds), in a
    sentence, or None without tests (``attrs["ci"]``, ``paired.with_significance``) or
    where seeds ran until decided (``rule_line`` gives the repeated intervals)."""
    if table.attrs.get("sequential"):
        return None
    intervals = {
        key: bounds
        for key, bounds in (table.attrs.get("ci") or {}).items()
        if not math.isnan(bounds[0])
    }
    if not intervals:
        return None
    several = len({column for _, column in intervals}) > 1
    shown = "; ".join(
        (f"{format_value(row)} ({format_value(column)})" if several else format_value(row))
        + f" {_delta(table, row, column):+.2f} [{low:+.2f}, {high:+.2f}]"
        for (row, column), (low, high) in intervals.items()
    )
    baseline = table.attrs.get("baseline")
    return f"Δ against {baseline} with its 95% confidence interval (paired t over seeds): {shown}."


def _delta(table: pd.DataFrame, row: Any, column: Any) -> float:
    return float(table.at[row, (column, "delta")])


def baseline_line(table: pd.DataFrame) -> str | None:
    """Each data set's no-skill scores in a sentence, or None without them."""
    baselines = table.attrs.get("baselines") or {}
    if not baselines:
        return None
    shown = "; ".join(
        f"{name} " + ", ".join(f"{_SCORE_NAMES.get(k, k)} {v:.2f}" for k, v in scores.items())
        for name, scores in sorted(baselines.items())
    )
    return f"No-skill baselines ({NO_SKILL_RULES}): {shown}."


def steps_line(table: pd.DataFrame) -> str | None:
    """The optimiser steps per trial of each row in a sentence (one number where every
    trial of the row ran as many; min/median/max otherwise), or None without them."""
    spans = table.attrs.get("steps") or []
    if not spans:
        return None
    shown = "; ".join(
        f"{format_value(span['row'])} {_span(span['min'], span['median'], span['max'])}"
        for span in spans
    )
    return f"Optimiser steps per trial (min/median/max): {shown}."


def _span(low: int, median: int, high: int) -> str:
    return str(low) if low == high else f"{low}/{median}/{high}"


def tuned_line(table: pd.DataFrame) -> str | None:
    """The settings stage 1 of a two-stage sweep chose for each loss, in a sentence, or
    None for a sweep without ``tune``."""
    tuned = table.attrs.get("tuned") or {}
    if not tuned:
        return None
    constant = table.attrs.get("tuned_constant") or []
    return tuned_text(tuned, constant, table.attrs.get("grid_edges"))


def notes(table: pd.DataFrame) -> list[str]:
    """The lines under a table beyond its legend: the setup fields that split cells,
    each Δ's confidence interval (or, seeds until decided, where each cell stopped, why,
    and its repeated interval), each loss's tuned settings, the optimiser steps, the
    no-skill baselines, the smallest Δ the tests detect, the precision the trials
    trained in, the setup block (``setup_block.setup_lines``), the marked trials
    (constant, below no-skill: ``notes.mark_lines``) and the failed ones."""
    found = (
        split_line(table.attrs.get("split_by") or {}),
        ci_line(table),
        rule_line(table),
        tuned_line(table),
        steps_line(table),
        baseline_line(table),
        resolvable_line(table),
        precision_line(table),
        tested_line(table, format_value),
    )
    lines = [line for line in found if line]
    lines += paper_lines(table)
    lines += setup_lines(table.attrs.get("setup") or [])
    lines += mark_lines(table, failed_label)
    failed = table.attrs.get("failed") or []
    if failed:
        lines.append("Failed trials (not in the table):")
        lines += [f"- {failed_label(entry)}: {entry['reason']}" for entry in failed]
    return lines


def failed_label(entry: Mapping[str, Any]) -> str:
    """``dsc(alpha=0.1) seed=1 on mrpc original``, then ``in sweep sw-1`` in a merged
    table, whose trials carry their sweep."""
    label = f"{entry['loss']} seed={entry['seed']} on {entry['dataset']} {entry['variant']}"
    return f"{label} in sweep {entry['sweep']}" if entry.get("sweep") else label
