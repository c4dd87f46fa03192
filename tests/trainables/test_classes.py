"""A binary set's scored class (the minority unless named) and caps that keep class shares."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from trainables.data import PairExample, TaggedSentence
from trainables.data.classes import TIE_LABEL, minority_label, scored_class, stratified_sample


def pairs(labels: list[int]) -> list[PairExample]:
    return [PairExample(f"g{i}", f"a{i} .", f"b{i} .", label) for i, label in enumerate(labels)]


def test_the_minority_label_is_scored_unless_named() -> None:
    labels = [1] * 67 + [0] * 33
    assert scored_class(labels, None).label == 0
    assert scored_class(labels, None).share == pytest.approx(0.33)
    assert scored_class([0] * 63 + [1] * 37, None).label == 1
    named = scored_class(labels, 1)
    assert (named.label, named.share, named.named) == (1, pytest.approx(0.67), True)


def test_an_exactly_balanced_file_scores_label_1() -> None:
    assert TIE_LABEL == 1
    assert minority_label([50, 50]) == 1
    balanced = scored_class([0, 1] * 5, None)
    assert (balanced.label, balanced.share) == (1, 0.5)
    assert balanced.describe() == "1 (balanced file: label 1 by rule, 50.0% of the training file)"


def test_the_scored_class_says_why() -> None:
    assert (
        scored_class([1, 1, 0], None).describe() == "0 (the minority, 33.3% of the training file)"
    )
    assert (
        scored_class([1, 1, 0], 1).describe() == "1 (named in the spec, 66.7% of the training file)"
    )


def test_a_scored_class_needs_labels_0_and_1() -> None:
    with pytest.raises(ValueError, match=r"labels 0 and 1 only; got \[0, 2\]"):
        scored_class([0, 2], None)
    with pytest.raises(ValueError, match="positive label must be 0 or 1, got 3"):
        scored_class([0, 1], 3)


@pytest.mark.parametrize("limit", [1, 2, 7, 10, 33, 99, 250, 399])
@pytest.mark.parametrize("share", [0.02, 0.326, 0.5, 0.6745])
def test_a_capped_binary_set_keeps_its_shares_within_one_example(limit: int, share: float) -> None:
    rng = random.Random(3)
    labels = [0] * round(400 * share) + [1] * (400 - round(400 * share))
    rng.shuffle(labels)
    examples = pairs(labels)
    capped = stratified_sample(examples, limit, seed=0)
    assert len(capped) == limit
    counts = Counter(example.label for example in capped)
    for label in (0, 1):
        exact = labels.count(label) * limit / len(labels)
        assert abs(counts[label] - exact) < 1, (label, counts[label], exact)
    indices = [examples.index(example) for example in capped]
    assert indices == sorted(indices)  # input order kept


def test_three_classes_keep_their_shares_too() -> None:
    examples = pairs([0] * 50 + [1] * 30 + [2] * 20)
    counts = Counter(example.label for example in stratified_sample(examples, 7, seed=0))
    # Exact 3.5, 2.1, 1.4: floors 3, 2, 1; the one left goes to the largest remainder (0).
    assert counts == {0: 4, 1: 2, 2: 1}


def test_a_stratified_cap_is_fixed_by_its_seed() -> None:
    examples = pairs([0] * 120 + [1] * 280)
    assert stratified_sample(examples, 50, seed=4) == stratified_sample(examples, 50, seed=4)
    assert stratified_sample(examples, 50, seed=4) != stratified_sample(examples, 50, seed=5)


def test_a_cap_at_or_above_the_size_keeps_everything() -> None:
    examples = pairs([0, 1, 1])
    assert stratified_sample(examples, 3, seed=0) == examples
    assert stratified_sample(examples, 10, seed=0) == examples


def test_sentences_are_capped_at_random_as_before() -> None:
    """Tagged sentences have no single label: the cap draws them at random, the same
    draw as before stratification (the caches and studies of other kinds keep theirs)."""
    sentences = [TaggedSentence((f"w{i}",), ("O",)) for i in range(40)]
    chosen = sorted(random.Random(0).sample(range(40), 9))
    assert stratified_sample(sentences, 9, seed=0) == [sentences[i] for i in chosen]
