"""The paper's reported figures (``figures.yaml`` beside this module), as data: what a
table here can set beside its own cells (``search_spaces.reports.paper_beside``) and
what the scoreboard compares (``scripts/scoreboard.py``).

Each ``PaperFigure`` is one data set of one of the paper's tables, with its model,
split, metric and each loss's score or printed Δ against CE; ``paper_delta`` finds
the paper's Δ for a cell of ours by the catalogue data set, the loss and the variant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

FIGURES = Path(__file__).with_name("figures.yaml")


@dataclass(frozen=True)
class PaperFigure:
    """One data set of one of the paper's tables, as the paper prints it."""

    table: int
    title: str
    dataset: str  # the paper's data set
    model: str
    split: str
    metric: str  # f1, exact_match
    maps_to: dict[str, str]  # the catalogue data set and formulation ours would use
    stand_in: str | None = None  # where ours is another data set than the paper's
    scores: dict[str, float] = field(default_factory=dict)  # by loss name; ce the baseline
    deltas: dict[str, float] = field(default_factory=dict)  # as printed, where it prints them
    variants: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    alpha: dict[float, float] = field(default_factory=dict)  # Table 10: F1 by Tversky alpha

    def cite(self) -> str:
        """``Table 4, BERT-MRC on CoNLL-2003 (test)``."""
        return f"Table {self.table}, {self.model} on {self.dataset} ({self.split})"

    def delta(self, loss: str, variant: str = "original") -> float | None:
        """The paper's Δ of ``loss`` against CE (as printed where it prints one), on
        ``variant`` for Table 8; None where the paper has no such cell."""
        block: dict[str, Any] = (
            self.variants.get(variant, {})
            if self.variants
            else {
                "scores": self.scores,
                "deltas": self.deltas,
            }
        )
        if not self.variants and variant != "original":
            return None
        deltas, scores = block.get("deltas") or {}, block.get("scores") or {}
        if loss in deltas:
            return float(deltas[loss])
        if loss in scores and "ce" in scores and loss != "ce":
            return round(float(scores[loss]) - float(scores["ce"]), 2)
        return None


@cache
def paper_figures() -> tuple[PaperFigure, ...]:
    """Every figure ``figures.yaml`` holds, in its order."""
    return tuple(PaperFigure(**entry) for entry in yaml.safe_load(FIGURES.read_text()))


def figure_for(dataset: str, metric: str = "f1") -> PaperFigure | None:
    """The paper's Δ table for a catalogue data set and metric (not Table 10's curves)."""
    for figure in paper_figures():
        if figure.maps_to["dataset"] == dataset and figure.metric == metric and not figure.alpha:
            return figure
    return None


def paper_delta(
    dataset: str, loss: str, variant: str = "original", metric: str = "f1"
) -> tuple[PaperFigure, float] | None:
    """The paper's figure and Δ for one cell of ours (a catalogue data set, a loss
    name, a variant), or None where it reports none."""
    figure = figure_for(dataset, metric)
    if figure is None:
        return None
    delta = figure.delta(loss, variant)
    return None if delta is None else (figure, delta)
