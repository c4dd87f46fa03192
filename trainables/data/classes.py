"""The scored class of a binary set, and caps that keep the class shares.

A binary set's positive (scored) class is the one the spec names
(``task.positive_label``), else its training file's minority class: the class an
imbalanced task is about, the one the paper's F1 and Table 8 variants turn around
(QQP's duplicates, 37%; on MRPC label 0, "not paraphrase", 32.6%). An exactly
balanced file scores label 1 (``TIE_LABEL``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainables.data.examples import PairExample

TIE_LABEL = 1  # the scored class of a training file with as many 0s as 1s


@dataclass(frozen=True)
class ScoredClass:
    """The scored label of a binary set, its share of the training file, and why."""

    label: int
    share: float  # of the whole training file (before any variant or cap), in 0..1
    named: bool  # the spec named it; False: the training file's minority (or the tie rule)

    def describe(self) -> str:
        """``"0 (the minority, 32.6% of the training file)"``."""
        if self.named:
            why = "named in the spec"
        elif self.share == 0.5:
            why = f"balanced file: label {TIE_LABEL} by rule"
        else:
            why = "the minority"
        return f"{self.label} ({why}, {self.share:.1%} of the training file)"


def minority_label(counts: Sequence[int]) -> int:
    """The label with fewer examples of a binary set's ``[count of 0, count of 1]``
    (``TIE_LABEL`` when they are equal)."""
    zeros, ones = counts
    return TIE_LABEL if zeros == ones else int(ones < zeros)


def scored_class(labels: Sequence[int], named: int | None) -> ScoredClass:
    """The scored class of a binary training file with these ``labels``.

    Raises:
        ValueError: ``named`` is not 0, 1 or None, or a label is not 0 or 1.
    """
    if named not in (0, 1, None):
        raise ValueError(f"the positive label must be 0 or 1, got {named!r}")
    ones = sum(1 for label in labels if label == 1)
    zeros = sum(1 for label in labels if label == 0)
    if ones + zeros != len(labels) or not labels:
        raise ValueError(
            f"a binary training file needs labels 0 and 1 only; got {sorted(set(labels))}"
        )
    label = minority_label([zeros, ones]) if named is None else named
    share = (ones if label == 1 else zeros) / len(labels)
    return ScoredClass(label, share, named is not None)


def stratified_sample(examples: Sequence[Any], limit: int, seed: int) -> list[Any]:
    """``limit`` of ``examples`` (all of them when fewer) that keep the label shares.

    Pairs (``PairExample``) are drawn per label: each label gets its share of
    ``limit`` rounded down, and the examples left over go to the largest remainders
    (ties to the smaller label), so each count is within one of its exact share.
    Other examples (sentences, questions) have no single label and are drawn at
    random. The chosen ones keep their input order; the draw depends only on ``seed``.
    """
    if limit >= len(examples):
        return list(examples)
    rng = random.Random(seed)
    if not all(isinstance(example, PairExample) for example in examples):
        return [examples[i] for i in sorted(rng.sample(range(len(examples)), limit))]
    by_label: dict[int, list[int]] = {}
    for index, example in enumerate(examples):
        by_label.setdefault(example.label, []).append(index)
    labels = sorted(by_label)
    exact = {label: len(by_label[label]) * limit / len(examples) for label in labels}
    counts = {label: int(exact[label]) for label in labels}
    by_remainder = sorted(labels, key=lambda label: (counts[label] - exact[label], label))
    for label in by_remainder[: limit - sum(counts.values())]:
        counts[label] += 1
    chosen = [i for label in labels for i in rng.sample(by_label[label], counts[label])]
    return [examples[i] for i in sorted(chosen)]
