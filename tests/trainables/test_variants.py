"""The Table 8 data-set variants: sizes, proportions, determinism, augmentation."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from trainables.data import (
    VARIANT_NAMES,
    PairExample,
    class_counts,
    load_split,
    make_variant,
    plan_variant,
)
from trainables.data.augment import MentionPool, augment, can_augment
from trainables.data.variants import pair_key

NAMES = ["Alice Smith", "Bob Jones", "Carol White", "Dan Brown"]
CITIES = ["Paris", "London", "Tokyo", "Lima"]
ITEMS = ["fee", "rent", "fare", "toll", "tax", "bill", "wage"]
PAPER_SHARES = {  # the paper's QQP variants: share of positives
    "original": 0.37,
    "+positive": 0.50,
    "+negative": 0.21,
    "-negative": 0.50,
    "+positive&negative": 0.37,
}


def pair(index: int, label: int) -> PairExample:
    """Three kinds of pair: a shared name and city, a shared number, no mention.

    The number pairs name one of seven items, so a number swapped in from
    another pair mostly makes a pair the set does not hold yet."""
    name, city = NAMES[index % 4], CITIES[(index // 4) % 4]
    if index % 3 == 0:
        texts = (f"Yesterday {name} flew to {city} .", f"{name} went to {city} yesterday .")
    elif index % 3 == 1:
        item = ITEMS[index % 7]
        texts = (
            f"the {item} rose to {100 + index} dollars .",
            f"the {item} is now {100 + index} dollars .",
        )
    else:
        texts = ("the weather was fine .", "it was a fine day .")
    return PairExample(f"g{index}", *texts, label)


@pytest.fixture(scope="module")
def qqp_like() -> list[PairExample]:
    """1,000 pairs, 370 positive (37%, as QQP), labels interleaved."""
    rng = random.Random(7)
    labels = [1] * 370 + [0] * 630
    rng.shuffle(labels)
    return [pair(i, label) for i, label in enumerate(labels)]


# Hand-computed for 370 positive / 630 negative, n = 1000 (QQP's 37%), with the
# factors of the module doc (f+ on positives, f- on negatives):
#   +positive:          f+ = 458477*.5/(363871*.37) = 1.70268: 370 -> round(629.99) = 630
#   +negative:          f+ = 458477*.21/(363871*.37) = 0.71513: 370 -> round(264.60) = 265
#                       f- = 458477*.79/(363871*.63) = 1.58000: 630 -> round(995.40) = 995
#   -negative:          f- = 269165*.5/(363871*.63) = 0.58707: 630 -> round(369.85) = 370
#   +positive&negative: f = 458477/363871 = 1.26000: 370 -> 466, 630 -> round(793.80) = 794
QQP_LIKE_COUNTS = {  # (label 0, label 1)
    "original": (630, 370),
    "+positive": (630, 630),
    "+negative": (995, 265),
    "-negative": (370, 370),
    "+positive&negative": (794, 466),
}

# Real MRPC train, label 1 (paraphrase) scored: 1194 negative / 2474 positive, n = 3668:
#   +positive:          2474 * 1.70268 = 4212.44 -> 4212 positives         -> 77.91%
#   +negative:          2474 * 0.71513 = 1769.24 -> 1769 positives,
#                       1194 * 1.58000 = 1886.52 -> 1887 negatives         -> 48.39%
#   -negative:          1194 * 0.58707 =  700.96 ->  701 negatives         -> 77.92%
#   +positive&negative: 2474 * 1.26 = 3117.23 -> 3117, 1194 * 1.26 = 1504.43 -> 1504
MRPC_COUNTS = {
    "original": (1194, 2474),
    "+positive": (1194, 4212),
    "+negative": (1887, 1769),
    "-negative": (701, 2474),
    "+positive&negative": (1504, 3117),
}
MRPC_POSITIVE_PERCENT = {
    "original": 67.45,
    "+positive": 77.91,
    "+negative": 48.39,
    "-negative": 77.92,
    "+positive&negative": 67.45,
}


def test_class_counts() -> None:
    examples = [
        PairExample("a", "x", "y", 1),
        PairExample("b", "x", "y", 0),
        PairExample("c", "x", "y", 1),
    ]
    assert class_counts(examples) == [1, 2]
    assert class_counts(examples, num_labels=3) == [1, 2, 0]
    with pytest.raises(ValueError, match=r"'a' has label 1; labels must lie in 0\.\.0"):
        class_counts(examples, num_labels=1)


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_plan_on_a_37_percent_set(name: str) -> None:
    plan = plan_variant(name, [630, 370])
    assert plan.counts == QQP_LIKE_COUNTS[name]


def test_plan_reproduces_the_papers_shares_on_a_37_percent_set() -> None:
    for name in VARIANT_NAMES:
        assert plan_variant(name, [630, 370]).positive_fraction == pytest.approx(
            PAPER_SHARES[name], abs=1e-3
        )


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_every_variant_moves_the_positive_share_the_papers_way(name: str) -> None:
    """Whatever the original share, the positive class goes up, down or stays as in the paper."""
    direction = {"original": 0, "+positive": 1, "+negative": -1, "-negative": 1}.get(name, 0)
    for counts in ([630, 370], [370, 630], [500, 500], [900, 100]):
        for positive in (0, 1):
            before = counts[positive] / sum(counts)
            after = plan_variant(name, counts, positive).positive_fraction
            if direction == 0:
                assert after == pytest.approx(before, abs=2e-3)
            else:
                assert (after - before) * direction > 0.01


def test_the_positive_label_chooses_the_class_the_variants_turn_around() -> None:
    # Label 0 scored on a set where label 0 is 63%: "+positive" adds label-0 pairs.
    plan = plan_variant("+positive", [630, 370], positive=0)
    assert plan.counts == (1073, 370)  # 630 * 1.70268 = 1072.69
    assert plan.positive_fraction == pytest.approx(1073 / 1443)
    assert plan_variant("-negative", [630, 370], positive=0).counts == (630, 217)


def test_plan_rejects_unknown_names_one_class_sets_and_other_labels() -> None:
    with pytest.raises(
        ValueError, match=r"unknown data-set variant '\+pos'; valid: original, \+positive"
    ):
        plan_variant("+pos", [5, 5])
    with pytest.raises(ValueError, match="both labels present; counts \\[0, 7\\]"):
        plan_variant("+positive", [0, 7])
    with pytest.raises(ValueError, match="positive label must be 0 or 1, got 2"):
        plan_variant("+positive", [5, 5], positive=2)


def check_variant(
    original: list[PairExample], variant: list[PairExample], counts: tuple[int, int]
) -> None:
    """Sizes, labels and provenance of ``variant`` built from ``original``."""
    assert tuple(class_counts(variant)) == counts
    by_guid = {example.guid: example for example in original}
    kept = [example for example in variant if example.guid in by_guid]
    assert all(by_guid[example.guid] == example for example in kept)
    for example in variant[len(kept) :]:
        source = by_guid[example.guid.split("#aug")[0]]
        assert example.label == source.label
        assert (example.text_a, example.text_b) != (source.text_a, source.text_b)
    assert len({example.guid for example in variant}) == len(variant)


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_variants_of_a_37_percent_set(qqp_like: list[PairExample], name: str) -> None:
    variant = make_variant(qqp_like, name, seed=0)
    check_variant(qqp_like, variant, QQP_LIKE_COUNTS[name])
    if name in ("+positive", "+positive&negative"):  # every original kept, first, in order
        assert variant[: len(qqp_like)] == qqp_like


def test_minus_negative_only_removes_negatives(qqp_like: list[PairExample]) -> None:
    variant = make_variant(qqp_like, "-negative", seed=0)
    assert [e for e in variant if e.label == 1] == [e for e in qqp_like if e.label == 1]
    assert {e.guid for e in variant} <= {e.guid for e in qqp_like}


def test_variants_are_deterministic_for_a_seed(qqp_like: list[PairExample]) -> None:
    for name in ("+positive", "-negative", "+positive&negative"):
        assert make_variant(qqp_like, name, seed=1) == make_variant(qqp_like, name, seed=1)
        assert make_variant(qqp_like, name, seed=1) != make_variant(qqp_like, name, seed=2)


def test_make_variant_returns_a_new_list(qqp_like: list[PairExample]) -> None:
    variant = make_variant(qqp_like, "original")
    assert variant == qqp_like and variant is not qqp_like


# --- augmentation ------------------------------------------------------------------


def test_name_swap_is_consistent_in_both_sentences() -> None:
    source = PairExample("s", "Yesterday Alice Smith flew home .", "Alice Smith went home .", 1)
    other = PairExample("o", "He met Bob Jones .", "He saw Bob Jones .", 0)
    pool = MentionPool.from_examples([source, other])
    assert pool.by_shape[("name", "2")] == ("Alice Smith", "Bob Jones")
    copy = augment(source, pool, random.Random(0), guid="s#aug")
    # The one alternative of the same shape (2 words) replaces the shared mention.
    assert copy == PairExample(
        "s#aug", "Yesterday Bob Jones flew home .", "Bob Jones went home .", 1
    )


def test_number_swap_keeps_the_shape() -> None:
    source = PairExample("s", "the fee rose to 120 dollars .", "the fee is now 120 dollars .", 0)
    others = [PairExample("o", "it cost 250 or 2.5 .", "no .", 1)]
    pool = MentionPool.from_examples([source, *others])
    assert pool.by_shape[("number", "999")] == ("120", "250")
    copy = augment(source, pool, random.Random(0), guid="s#aug")
    assert (copy.text_a, copy.text_b) == (
        "the fee rose to 250 dollars .",
        "the fee is now 250 dollars .",
    )


def test_sentence_initial_and_single_letter_words_are_not_names() -> None:
    examples = [
        PairExample("a", "The cat saw the dog and I ran .", "The dog saw I ran .", 1),
        PairExample("b", "We like the cat .", "I like it .", 0),
    ]
    pool = MentionPool.from_examples(examples)
    assert pool.mentions(examples[0].text_a) == []
    assert not pool.swappable(examples[0])


def test_a_pair_without_a_shared_mention_is_never_copied_reordered() -> None:
    pool = MentionPool.from_examples([])
    source = PairExample("s", "the weather was fine .", "it was a fine day .", 1)
    assert not can_augment(source, pool)
    with pytest.raises(ValueError, match="'s' cannot be augmented: its sentences share no name"):
        augment(source, pool, random.Random(0), guid="s#aug")


def test_a_class_with_no_augmentable_pair_is_an_error() -> None:
    examples = [PairExample(f"n{i}", "a b .", "c d .", 0) for i in range(3)]
    examples.append(PairExample("p", "so it goes .", "so it goes .", 1))
    with pytest.raises(ValueError, match=r"cannot add 1 new pairs of label 1: .* give only 0"):
        make_variant(examples, "+positive")  # 1 * 1.70 rounds to 2 positives


def test_a_class_that_runs_out_of_new_copies_is_an_error() -> None:
    """Each positive's only copy is the other positive: none is new, so none is added."""
    examples = [
        PairExample("p1", "so Alice Smith ran .", "so Alice Smith left .", 1),
        PairExample("p2", "so Bob Jones ran .", "so Bob Jones left .", 1),
        *[PairExample(f"n{i}", f"x{i} .", f"y{i} .", 0) for i in range(3)],
    ]
    with pytest.raises(ValueError, match=r"cannot add 1 new pairs of label 1: .* give only 0"):
        make_variant(examples, "+positive")  # 2 * 1.70 rounds to 3 positives


def augmented_repeats(original: list[PairExample], variant: list[PairExample]) -> tuple[int, int]:
    """(augmented pairs that are an original pair with its sentences swapped,
    augmented pairs that equal another pair of the variant or an original, in either order)."""
    originals = {(e.text_a, e.text_b) for e in original}
    guids = {e.guid for e in original}
    augmented = [e for e in variant if e.guid not in guids]
    swapped = sum((e.text_b, e.text_a) in originals for e in augmented)
    keys = Counter(pair_key(e) for e in variant)
    original_keys = {pair_key(e) for e in original}
    duplicates = sum(keys[pair_key(e)] > 1 or pair_key(e) in original_keys for e in augmented)
    return swapped, duplicates


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_augmented_pairs_are_new_pairs(qqp_like: list[PairExample], name: str) -> None:
    variant = make_variant(qqp_like, name, seed=0)
    assert augmented_repeats(qqp_like, variant) == (0, 0)


def test_the_repeat_count_sees_swaps_and_duplicates() -> None:
    """The counter the tests rely on finds both kinds of repeat when they are there."""
    original = [PairExample("a", "x y .", "z w .", 1), PairExample("b", "p q .", "r s .", 0)]
    variant = [
        *original,
        PairExample("a#aug1-0", "z w .", "x y .", 1),  # a swapped original
        PairExample("a#aug1-1", "m n .", "o p .", 1),
        PairExample("a#aug1-2", "m n .", "o p .", 1),  # a repeat of the one before
    ]
    assert augmented_repeats(original, variant) == (1, 3)


# --- real MRPC ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def mrpc_train(datasets_dir: Path) -> list[PairExample]:
    return [e for e in load_split("mrpc", "train", datasets_dir) if isinstance(e, PairExample)]


@pytest.mark.data
@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_variants_of_real_mrpc(mrpc_train: list[PairExample], name: str) -> None:
    variant = make_variant(mrpc_train, name, seed=0)
    check_variant(mrpc_train, variant, MRPC_COUNTS[name])
    positives = MRPC_COUNTS[name][1] / sum(MRPC_COUNTS[name])
    assert round(100 * positives, 2) == MRPC_POSITIVE_PERCENT[name]
    # Before the scored class was explicit, 23-26% of augmented pairs were swapped
    # originals and "+positive" held 27 exact duplicates.
    assert augmented_repeats(mrpc_train, variant) == (0, 0)


@pytest.mark.data
def test_real_mrpc_variants_follow_the_papers_direction(mrpc_train: list[PairExample]) -> None:
    share = {name: MRPC_POSITIVE_PERCENT[name] for name in VARIANT_NAMES}
    assert share["+positive"] > share["original"] > share["+negative"]  # paper: 50 > 37 > 21
    assert share["-negative"] > share["original"]  # paper: 50 > 37
    assert make_variant(mrpc_train, "-negative", seed=0) != make_variant(
        mrpc_train, "-negative", seed=1
    )
