"""The rounds of a sweep whose seeds run until decided: which losses run which seeds next.

Round k runs the seeds between look k − 1 and look k (``0 … min − 1`` first) for every
loss whose rule still says continue after look k − 1, and for the baseline at the same
seeds, so every difference is paired; a loss that stopped (decided, futile) runs no
more, and the baseline runs no seed that no loss still needs. The looks come from the
rows of the rounds already run (``search_spaces.reports.sequential.cell_looks``), so a
resumed driver plans the same rounds again from the same trials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from search_spaces.sequential.rule import Look, SeedsUntilDecided, Verdict


@dataclass(frozen=True)
class Round:
    """One round: its ``look`` (1-based: the look taken once it ends), the losses that
    run it (by table label, the baseline first) and its seeds."""

    look: int
    labels: tuple[str, ...]
    seeds: tuple[int, ...]

    @property
    def trials(self) -> int:
        """How many trials the round runs."""
        return len(self.labels) * len(self.seeds)


def first_round(rule: SeedsUntilDecided, baseline: str, others: Sequence[str]) -> Round:
    """Every loss, the baseline among them, at seeds ``0 … min − 1``."""
    return Round(1, (baseline, *others), tuple(range(rule.min)))


def next_round(
    rule: SeedsUntilDecided, done: Round, looks: Mapping[str, Sequence[Look]]
) -> Round | None:
    """The round after ``done``, given each loss's looks so far (by label): the losses
    whose look ``done.look`` says continue, with the baseline (``done.labels[0]``), at
    the seeds up to the next look; None once no loss continues or the last look is
    taken. A loss whose seeds fell short of the look (a failed trial) stops."""
    if done.look >= len(rule.looks):
        return None
    going = tuple(
        label
        for label in done.labels[1:]
        if len(taken := looks.get(label, ())) == done.look and taken[-1].verdict is Verdict.CONTINUE
    )
    if not going:
        return None
    start, end = rule.looks[done.look - 1], rule.looks[done.look]
    return Round(done.look + 1, (done.labels[0], *going), tuple(range(start, end)))
