"""The data-set variants of Table 8 (Li et al., 2020, section 4.4) for a binary set.

The paper built them from QQP (363,871 training pairs, 37% positive), where the
positive class is the minority. Here each variant is a rule over the minority
class (``m``, the paper's "positive") and the majority class (``M``, the paper's
"negative"), so that it means the same thing on any binary set:

=====================  ==================================================  =================
variant                rule                                                QQP in the paper
=====================  ==================================================  =================
``original``           unchanged                                           363,871, 37%
``+positive``          augment ``m`` until ``m = M``: size ``2M``          458,477, 50%
``+negative``          down-sample ``m`` and augment ``M`` to the size     458,477, 21%
                       of ``+positive&negative`` with ``m`` at 21%:
                       ``m' = round(0.21 * round(1.26 n))``
``-negative``          down-sample ``M`` to ``m``: size ``2m``             269,165, 50%
``+positive&negative`` augment both to the size of ``+positive``, ``2M``,  458,477, 37%
                       keeping ``m``'s original share:
                       ``m' = round(2M * m / n)``
=====================  ==================================================  =================

On a 37%-positive set of ``n`` pairs these give ``+positive`` 1.26 n at 50%
(the paper's 458,477 / 363,871 = 1.26), ``-negative`` 0.74 n at 50% (paper
0.7397) and ``+positive&negative`` 1.26 n at 37%. The paper's ``+negative`` has
both 458,477 pairs and 21% positives, i.e. ~96,300 of QQP's ~134,600
positives: it cannot keep every positive. The rule meets both figures: the
size of the augmented sets (``round(n * 458477 / 363871)``) with 21% minority,
dropping minority pairs and augmenting majority ones (0.265 n and 0.995 n at 37%).

Sets whose positive class (label 1) is the majority swap the roles: on MRPC
(3,668 pairs, 2,474 positive = 67.45%) ``+positive`` augments the 1,194
negatives to 2,474 (4,948 pairs, 50%); ``+negative`` has ``round(3668 * 458477 / 363871)`` =
4,622 pairs, of which ``round(0.21 * 4622)`` = 971 negatives (down-sampled) and
3,651 positives (augmented), 21.0% negative; ``-negative`` down-samples positives
to 1,194 (2,388 pairs, 50%);
``+positive&negative`` has 4,948 pairs of which ``round(4948 * 1194 / 3668)``
= 1,611 negative and 3,337 positive (67.44%). At a tie (50/50) label 1 counts
as the minority; ``+positive`` and ``-negative`` then leave the set unchanged.
A set already at or below 21% minority gets nothing added by ``+negative``.

Augmented pairs are made by ``trainables.data.augment`` (mention swaps, never
exact copies); which pairs are copied or dropped depends only on the seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from trainables.data.augment import MentionPool, augment, can_augment
from trainables.data.examples import PairExample

VARIANT_NAMES = ("original", "+positive", "+negative", "-negative", "+positive&negative")
NEGATIVE_VARIANT_MINORITY_PERCENT = 21  # the paper's "+negative": 21% positive
AUGMENTED_SIZE = (458_477, 363_871)  # the paper's augmented QQP sets against the original


@dataclass(frozen=True)
class VariantPlan:
    """How many original pairs of each label a variant keeps and how many it adds.

    Tuples are indexed by label: ``kept[1]`` positives kept, ``added[0]``
    augmented negatives.
    """

    name: str
    kept: tuple[int, int]
    added: tuple[int, int]

    @property
    def counts(self) -> tuple[int, int]:
        """Pairs per label in the variant."""
        return (self.kept[0] + self.added[0], self.kept[1] + self.added[1])

    @property
    def size(self) -> int:
        return sum(self.counts)

    @property
    def positive_fraction(self) -> float:
        """Share of label 1 in the variant, in 0..1."""
        return self.counts[1] / self.size


def class_counts(examples: Sequence[PairExample], num_labels: int = 2) -> list[int]:
    """Number of examples per label index, ``[count of 0, count of 1, ...]``.

    Raises:
        ValueError: a label outside ``0 .. num_labels - 1``.
    """
    counts = [0] * num_labels
    for example in examples:
        if not 0 <= example.label < num_labels:
            raise ValueError(
                f"example {example.guid!r} has label {example.label}; "
                f"labels must lie in 0..{num_labels - 1}"
            )
        counts[example.label] += 1
    return counts


def _round_ratio(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded half up, in exact integer arithmetic."""
    return (2 * numerator + denominator) // (2 * denominator)


def plan_variant(name: str, counts: Sequence[int]) -> VariantPlan:
    """The kept and added counts per label of variant ``name`` (rules in the module doc).

    Raises:
        ValueError: an unknown variant name (the message lists the valid ones),
            ``counts`` not of length 2, or a class with no example.
    """
    if name not in VARIANT_NAMES:
        raise ValueError(f"unknown data-set variant {name!r}; valid: {', '.join(VARIANT_NAMES)}")
    if len(counts) != 2 or min(counts) < 1:
        raise ValueError(
            f"variant {name!r} needs a binary set with both labels present; counts {list(counts)}"
        )
    minority = 1 if counts[1] <= counts[0] else 0
    n_min, n_maj = counts[minority], counts[1 - minority]
    kept, added = {minority: n_min, 1 - minority: n_maj}, {0: 0, 1: 0}
    if name == "+positive":
        added[minority] = n_maj - n_min
    elif name == "+negative" and 100 * n_min > NEGATIVE_VARIANT_MINORITY_PERCENT * (n_min + n_maj):
        size = _round_ratio((n_min + n_maj) * AUGMENTED_SIZE[0], AUGMENTED_SIZE[1])
        kept[minority] = _round_ratio(size * NEGATIVE_VARIANT_MINORITY_PERCENT, 100)
        added[1 - minority] = size - kept[minority] - n_maj
    elif name == "-negative":
        kept[1 - minority] = n_min
    elif name == "+positive&negative":
        size = 2 * n_maj
        target_min = _round_ratio(size * n_min, n_min + n_maj)
        added[minority] = target_min - n_min
        added[1 - minority] = size - target_min - n_maj
    return VariantPlan(name, (kept[0], kept[1]), (added[0], added[1]))


def make_variant(examples: Sequence[PairExample], name: str, seed: int = 0) -> list[PairExample]:
    """Build variant ``name`` of a binary set: a new list, deterministic for ``seed``.

    Kept originals come first in their input order, then the augmented pairs.
    Down-sampling draws without replacement; augmentation copies templates of
    the class in shuffled full passes, so templates are reused evenly.

    Raises:
        ValueError: as ``plan_variant``, or a class to augment that has no pair
            that can be augmented (see ``trainables.data.augment``).
    """
    plan = plan_variant(name, class_counts(examples))
    if name == "original":
        return list(examples)
    rng = random.Random(seed)
    kept_ids: set[int] = set()
    for label in (0, 1):
        ids = [i for i, example in enumerate(examples) if example.label == label]
        kept_ids.update(rng.sample(ids, plan.kept[label]) if plan.kept[label] < len(ids) else ids)
    result = [example for i, example in enumerate(examples) if i in kept_ids]
    if any(plan.added):
        pool = MentionPool.from_examples(examples)
        for label in (0, 1):
            result.extend(_augmented(examples, label, plan.added[label], pool, rng))
    return result


def _augmented(
    examples: Sequence[PairExample], label: int, count: int, pool: MentionPool, rng: random.Random
) -> list[PairExample]:
    if count == 0:
        return []
    templates = [e for e in examples if e.label == label and can_augment(e, pool)]
    if not templates:
        raise ValueError(
            f"cannot add {count} pairs of label {label}: no pair of that label can be augmented"
        )
    order: list[PairExample] = []
    while len(order) < count:
        order.extend(rng.sample(templates, len(templates)))
    return [
        augment(template, pool, rng, guid=f"{template.guid}#aug{label}-{index}")
        for index, template in enumerate(order[:count])
    ]
