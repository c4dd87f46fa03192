"""The data-set variants of Table 8 (Li et al., 2020, section 4.4) for a binary set.

The paper built them from QQP (363,871 training pairs, 37% positive) by
augmenting or down-sampling each class. Here a variant is what the paper did to
each class, as a factor on that class's count, so that it means the same thing
on any binary set. "Positive" is the scored class (the spec's
``task.positive_label``, else the training file's minority class, as the paper's
QQP duplicates: ``trainables.data.classes``), "negative" the other one. A
factor is the paper's count of the class in the variant over its count in the
original, from the sizes and shares the paper states; a class the paper left
alone keeps factor 1:

=====================  ======================  ======================  ================
variant                positives               negatives               QQP in the paper
=====================  ======================  ======================  ================
``original``           x 1                     x 1                     363,871, 37%
``+positive``          x 1.7027 (augmented)    x 1                     458,477, 50%
``+negative``          x 0.7151 (down-sampled) x 1.5800 (augmented)    458,477, 21%
``-negative``          x 1                     x 0.5871 (down-sampled) 269,165, 50%
``+positive&negative`` x 1.2600 (augmented)    x 1.2600 (augmented)    458,477, 37%
=====================  ======================  ======================  ================

(``+positive``: 458,477 x 50% / (363,871 x 37%); ``+negative``: 458,477 x 21% /
(363,871 x 37%) and 458,477 x 79% / (363,871 x 63%); ``-negative``: 269,165 x
50% / (363,871 x 63%); ``+positive&negative``: 458,477 / 363,871.) Counts are
rounded half up. So every variant moves the positive share the way the paper's
did, whatever the original share: up for ``+positive`` and ``-negative``, down
for ``+negative``, unchanged for ``+positive&negative``. On QQP's 37% the shares
are the paper's (50, 21, 50, 37%); on MRPC (3,668 pairs, 1,194 = 32.55% of them
label 0, "not paraphrase", the minority and so the scored class) they are 45.1,
17.9, 45.1 and 32.5% (docs/sweeps.md lists the counts).

Augmented pairs are made by ``trainables.data.augment`` (mention swaps) and are
new pairs: none equals another pair of the set, in either sentence order. Which
pairs are copied or dropped depends only on the seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from trainables.data.augment import MentionPool, augment, can_augment
from trainables.data.classes import minority_label
from trainables.data.examples import PairExample

VARIANT_NAMES = ("original", "+positive", "+negative", "-negative", "+positive&negative")

# The paper's QQP figures (section 4.4): the original set and each variant's size
# and share of positives.
PAPER_ORIGINAL = (363_871, Fraction(37, 100))
PAPER_VARIANTS: dict[str, tuple[int, Fraction]] = {
    "original": (363_871, Fraction(37, 100)),
    "+positive": (458_477, Fraction(50, 100)),
    "+negative": (458_477, Fraction(21, 100)),
    "-negative": (269_165, Fraction(50, 100)),
    "+positive&negative": (458_477, Fraction(37, 100)),
}
# Which classes the paper changed in each variant: (positives, negatives).
_CHANGED = {
    "original": (False, False),
    "+positive": (True, False),
    "+negative": (True, True),
    "-negative": (False, True),
    "+positive&negative": (True, True),
}
# Tries to draw a new copy of one template before it counts as used up.
_TRIES_PER_COPY = 20


def class_factors(name: str) -> tuple[Fraction, Fraction]:
    """The factors on (positives, negatives) of variant ``name`` (the module doc's table)."""
    size, share = PAPER_VARIANTS[name]
    original_size, original_share = PAPER_ORIGINAL
    positive = Fraction(size) * share / (original_size * original_share)
    negative = Fraction(size) * (1 - share) / (original_size * (1 - original_share))
    changed = _CHANGED[name]
    return (positive if changed[0] else Fraction(1), negative if changed[1] else Fraction(1))


@dataclass(frozen=True)
class VariantPlan:
    """How many original pairs of each label a variant keeps and how many it adds.

    Tuples are indexed by label: ``kept[1]`` label-1 pairs kept, ``added[0]``
    augmented label-0 pairs. ``positive`` is the scored label.
    """

    name: str
    kept: tuple[int, int]
    added: tuple[int, int]
    positive: int

    @property
    def counts(self) -> tuple[int, int]:
        """Pairs per label in the variant."""
        return (self.kept[0] + self.added[0], self.kept[1] + self.added[1])

    @property
    def size(self) -> int:
        return sum(self.counts)

    @property
    def positive_fraction(self) -> float:
        """Share of the positive (scored) label in the variant, in 0..1."""
        return self.counts[self.positive] / self.size


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


def _round_half_up(value: Fraction) -> int:
    return int(value + Fraction(1, 2)) if value >= 0 else -int(-value + Fraction(1, 2))


def plan_variant(name: str, counts: Sequence[int], positive: int | None = None) -> VariantPlan:
    """The kept and added counts per label of variant ``name`` (rules in the module doc),
    around the ``positive`` label (None: the minority of ``counts``).

    Raises:
        ValueError: an unknown variant name (the message lists the valid ones),
            ``counts`` not of length 2, a class with no example, or ``positive``
            not 0 or 1.
    """
    if name not in VARIANT_NAMES:
        raise ValueError(f"unknown data-set variant {name!r}; valid: {', '.join(VARIANT_NAMES)}")
    if len(counts) != 2 or min(counts) < 1:
        raise ValueError(
            f"variant {name!r} needs a binary set with both labels present; counts {list(counts)}"
        )
    if positive is None:
        positive = minority_label(counts)
    if positive not in (0, 1):
        raise ValueError(f"the positive label must be 0 or 1, got {positive!r}")
    kept, added = [0, 0], [0, 0]
    for label, factor in zip((positive, 1 - positive), class_factors(name), strict=True):
        target = _round_half_up(counts[label] * factor)
        kept[label] = min(target, counts[label])
        added[label] = target - kept[label]
    return VariantPlan(name, (kept[0], kept[1]), (added[0], added[1]), positive)


def make_variant(
    examples: Sequence[PairExample], name: str, seed: int = 0, positive: int | None = None
) -> list[PairExample]:
    """Build variant ``name`` of a binary set around the ``positive`` label (None: the
    minority of ``examples``): a new list, deterministic for ``seed``.

    Kept originals come first in their input order, then the augmented pairs.
    Down-sampling draws without replacement; augmentation copies templates of
    the class in shuffled full passes, so templates are reused evenly, and keeps
    only copies new to the set (in either sentence order).

    Raises:
        ValueError: as ``plan_variant``, or a class to augment whose pairs cannot
            give enough new copies (see ``trainables.data.augment``).
    """
    plan = plan_variant(name, class_counts(examples), positive)
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
        seen = {pair_key(example) for example in examples}
        for label in (0, 1):
            result.extend(_augmented(examples, label, plan.added[label], pool, rng, seen))
    return result


def pair_key(example: PairExample) -> tuple[str, str]:
    """What makes two pairs the same pair: their sentences, in either order."""
    first, second = sorted((example.text_a, example.text_b))
    return first, second


def _augmented(
    examples: Sequence[PairExample],
    label: int,
    count: int,
    pool: MentionPool,
    rng: random.Random,
    seen: set[tuple[str, str]],
) -> list[PairExample]:
    """``count`` new pairs of ``label``; adds their keys to ``seen``."""
    templates = [e for e in examples if e.label == label and can_augment(e, pool)]
    copies: list[PairExample] = []
    while len(copies) < count and templates:
        used_up: set[str] = set()
        for template in rng.sample(templates, len(templates)):
            if len(copies) == count:
                break
            guid = f"{template.guid}#aug{label}-{len(copies)}"
            for _ in range(_TRIES_PER_COPY):
                copy = augment(template, pool, rng, guid=guid)
                if pair_key(copy) not in seen:
                    seen.add(pair_key(copy))
                    copies.append(copy)
                    break
            else:
                used_up.add(template.guid)
        templates = [t for t in templates if t.guid not in used_up]
    if len(copies) < count:
        raise ValueError(
            f"cannot add {count} new pairs of label {label}: its pairs with a shared name "
            f"or number give only {len(copies)} (copies are never repeats or reorderings)"
        )
    return copies
