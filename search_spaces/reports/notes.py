"""Lines under a table about its trials' marks, its two stages and its precision, for
every renderer, and what of the stages and the precision its rows carry.

The marks (``flagged``): the constant trials and those below no-skill, each with its
evidence, and the Δs that leaving the below-no-skill ones out would change. The stages
(``tuning``): each loss's settings as stage 1 chose them (``tuned_settings``), a
choice at its grid's edge (``grid_edges``); they were chosen on the tuning split, held
out of the training file for stage 1 only; stage 2 trains on the whole training file;
a loss whose stage-1 trials were all constant had its settings chosen among them. The
precision (``precision_counts``, ``precision_line``): what the trials' forward passes
ran in.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from search_spaces.reports.formats import format_value, sort_key
from search_spaces.setup import PREFIX, parse_tune_grid

CONSTANT_HEADING = (
    "Constant trials (one prediction for ≥ 99% of dev: left out of the means, Δs and"
    " tests; marked, never bold):"
)
BELOW_HEADING = "Trials below no-skill (predict more than one thing; in the statistics, marked):"
SENSITIVITY_HEADING = (
    "Δs whose sign or resolution changes when the below-no-skill trials are left out too"
    " (as tested → without them):"
)
STAGES = (
    "stage 1 chose each loss's settings on a tuning split held out of the training file;"
    " stage 2 trains on the whole training file and is scored on dev"
)


def mark_groups(
    table: pd.DataFrame, label: Callable[[Mapping[str, Any]], str]
) -> list[tuple[str, str, list[str]]]:
    """Each non-empty group of marked trials as (CSS class, heading, items): the
    constant trials and those below no-skill (``label: value, reason``, ``label``
    naming the trial), then the Δs leaving the below-no-skill ones out would change."""
    groups = []
    for css, heading, name in (
        ("degenerate", CONSTANT_HEADING, "degenerate"),
        ("below-no-skill", BELOW_HEADING, "below_no_skill"),
    ):
        entries = table.attrs.get(name) or []
        items = [f"{label(e)}: {e['value']:.2f}, {e['reason']}" for e in entries]
        groups.append((css, heading, items))
    changed = table.attrs.get("sensitivity") or []
    items = [
        f"{c['row']} ({c['column']}): Δ {c['delta']:+.2f}, detects {c['resolvable']:.2f}"
        f" → Δ {c['delta_without']:+.2f}, detects {c['resolvable_without']:.2f}"
        for c in changed
    ]
    groups.append(("sensitivity", SENSITIVITY_HEADING, items))
    return [group for group in groups if group[2]]


def mark_lines(table: pd.DataFrame, label: Callable[[Mapping[str, Any]], str]) -> list[str]:
    """``mark_groups`` as lines: each heading, then its items as ``- item``."""
    return [
        line
        for _, heading, items in mark_groups(table, label)
        for line in (heading, *(f"- {item}" for item in items))
    ]


def marks_html(table: pd.DataFrame, label: Callable[[Mapping[str, Any]], str]) -> str:
    """``mark_groups`` as HTML: each heading a paragraph, its items a list of its class;
    every text escaped."""
    return "".join(
        f'<p>{html.escape(heading)}</p><ul class="{css}">'
        + "".join(f"<li>{html.escape(item)}</li>" for item in items)
        + "</ul>"
        for css, heading, items in mark_groups(table, label)
    )


def tuned_text(
    tuned: Mapping[str, Mapping[str, Any]],
    constant: list[str],
    edges: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The settings stage 1 chose for each loss (``tuned_settings``), a choice at its
    grid's edge (``edges``, ``grid_edges``) flagged as one, a loss chosen among
    constant trials only saying so, and what each stage trains on."""
    parts = []
    edges = edges or {}
    for label, settings in tuned.items():
        at_edge = edges.get(label, {})
        text = f"{label}: " + ", ".join(
            f"{k}={format_value(v)}"
            + (f" (at the grid's edge: the {at_edge[k]})" if k in at_edge else "")
            for k, v in settings.items()
        )
        if label in constant:
            text += " (every stage-1 trial constant: the best of them)"
        parts.append(text)
    return f"Tuned per loss ({STAGES}): {'; '.join(parts)}."


def grid_edges(rows: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Each loss whose stage-1 choice sits at an edge of its grid (``setup_tune_grid``):
    ``{"ce": {"learning_rate": "lowest of {0.0001, 0.0003}"}}``, which says the grid may
    have been too narrow (docs/sweeps.md, "The setup a number comes from"); empty
    without one."""
    if f"{PREFIX}tune_grid" not in rows or "loss" not in rows:
        return {}
    edges: dict[str, dict[str, str]] = {}
    for label, group in rows.groupby("loss", sort=False):
        stated = group[f"{PREFIX}tune_grid"].dropna()
        if stated.empty:  # a loss no stage 1 tuned here (a one-stage shard of a merge)
            continue
        grids = parse_tune_grid(str(stated.iloc[0]))
        for name, values in grids.items():
            column = f"tuned_{name}"
            if column not in group or group[column].isna().all() or len(values) < 2:
                continue
            chosen = float(group[column].dropna().iloc[0])
            shown = "{" + ", ".join(format_value(v) for v in values) + "}"
            if math.isclose(chosen, min(values)):
                edges.setdefault(str(label), {})[name] = f"lowest of {shown}"
            elif math.isclose(chosen, max(values)):
                edges.setdefault(str(label), {})[name] = f"highest of {shown}"
    return dict(sorted(edges.items(), key=lambda item: sort_key(item[0])))


def tuned_settings(rows: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each loss's settings chosen by stage 1 of a two-stage sweep, as its rows carry
    them (``tuned_<setting>``): ``{"ce": {"learning_rate": 3e-05}}``; empty without."""
    columns = [column for column in rows.columns if column.startswith("tuned_")]
    if not columns or "loss" not in rows:
        return {}
    tuned: dict[str, dict[str, Any]] = {}
    for label, group in rows.groupby("loss", sort=False):
        values = {
            column.removeprefix("tuned_"): _plain_number(group[column].dropna().iloc[0])
            for column in columns
            if group[column].notna().any()
        }
        if values:
            tuned[str(label)] = values
    return dict(sorted(tuned.items(), key=lambda item: sort_key(item[0])))


def _plain_number(value: Any) -> Any:
    """A pandas/numpy scalar as a plain int or float (JSON and messages show it)."""
    number = float(value)
    return int(number) if number.is_integer() and abs(number) >= 1 else number


# What a trial reports as its ``precision`` (trainables.precision), in the notes' words.
PRECISION_WORDS = {"fp32": "fp32", "bf16": "bf16 autocast", "fp16": "fp16 autocast"}


def precision_counts(rows: pd.DataFrame) -> dict[str, int]:
    """How many of ``rows`` trained in each precision (their ``precision`` column;
    ``unrecorded`` for a trial from before trials reported it), or {} when none did."""
    if "precision" not in rows or rows["precision"].isna().all():
        return {}
    counts = rows["precision"].fillna("unrecorded").value_counts()
    return {str(name): int(count) for name, count in sorted(counts.items())}


def precision_line(table: pd.DataFrame) -> str | None:
    """``Trained in bf16 autocast (losses in fp32).``: what the table's trials trained
    in (``attrs["precision"]``, ``precision_counts``), each precision's trial count
    when they differ; None when no trial recorded it."""
    counts: dict[str, int] = table.attrs.get("precision") or {}
    words = {name: PRECISION_WORDS.get(name, name) for name in counts}
    if not counts:
        return None
    if list(counts) == ["fp32"]:
        return "Trained in fp32."
    if len(counts) == 1:
        return f"Trained in {words[next(iter(counts))]} (losses in fp32)."
    shown = ", ".join(f"{words[name]} {count}" for name, count in counts.items())
    return f"Trained in several precisions, trials in each: {shown} (losses in fp32)."
