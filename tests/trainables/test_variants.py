"""The Table 8 data-set variants: sizes, proportions, determinism, augmentation."""

from __future__ import annotations

import random
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

NAMES = ["Alice Smith", "Bob Jones", "Carol White", "Dan Brown"]
CITIES = ["Paris", "London", "Tokyo", "Lima"]
PAPER_AUGMENTED_RATIO = 458_477 / 363_871  # 1.2600
PAPER_DOWNSAMPLED_RATIO = 269_165 / 363_871  # 0.7397


def pair(index: int, label: int) -> PairExample:
    """Three kinds of pair: a shared name and city, a shared number, no mention."""
    name, city = NAMES[index % 4], CITIES[(index // 4) % 4]
    if index % 3 == 0:
        texts = (f"Yesterday {name} flew to {city} .", f"{name} went to {city} yesterday .")
    elif index % 3 == 1:
        texts = (
            f"the fee rose to {100 + index} dollars .",
            f"the fee is now {100 + index} dollars .",
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


# Hand-computed for 370 positive (minority) / 630 negative (majority), n = 1000:
#   +positive:          positives up to 630          -> 1260 = 2 * 630, 50%
#   +negative:          size round(1000 * 458477 / 363871) = round(1259.99) = 1260,
#                       positives round(0.21 * 1260) = round(264.6) = 265 (105 dropped),
#                       negatives 1260 - 265 = 995 (365 added) -> 21.0%
#   -negative:          negatives down to 370        -> 740, 50%
#   +positive&negative: size 2 * 630 = 1260, positives round(1260 * 370 / 1000)
#                       = round(466.2) = 466, negatives 1260 - 466 = 794
QQP_LIKE_COUNTS = {
    "original": (630, 370),
    "+positive": (630, 630),
    "+negative": (995, 265),
    "-negative": (370, 370),
    "+positive&negative": (794, 466),
}

# Real MRPC train: 1194 negative (minority) / 2474 positive (majority), n = 3668:
#   +positive:          negatives up to 2474         -> 4948, 50%
#   +negative:          size round(3668 * 458477 / 363871) = round(4621.63) = 4622,
#                       negatives round(0.21 * 4622) = round(970.62) = 971 (223 dropped),
#                       positives 4622 - 971 = 3651 (1177 added) -> negatives 21.0%
#   -negative:          positives down to 1194       -> 2388, 50%
#   +positive&negative: size 4948, negatives round(4948 * 1194 / 3668) = round(1610.67)
#                       = 1611, positives 4948 - 1611 = 3337 (67.44%)
MRPC_COUNTS = {
    "original": (1194, 2474),
    "+positive": (2474, 2474),
    "+negative": (971, 3651),
    "-negative": (1194, 1194),
    "+positive&negative": (1611, 3337),
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


def test_plan_matches_the_paper() -> None:
    plans = {name: plan_variant(name, [630, 370]) for name in VARIANT_NAMES}
    assert plans["+positive"].size / 1000 == pytest.approx(PAPER_AUGMENTED_RATIO, abs=1e-3)
    assert plans["+positive&negative"].size == plans["+positive"].size
    assert plans["+positive&negative"].positive_fraction == pytest.approx(0.37, abs=1e-3)
    assert plans["-negative"].size / 1000 == pytest.approx(PAPER_DOWNSAMPLED_RATIO, abs=1e-3)
    assert plans["+negative"].positive_fraction == pytest.approx(0.21, abs=1e-3)
    assert plans["+negative"].size == plans["+positive"].size


def test_plan_rejects_unknown_names_and_one_class_sets() -> None:
    with pytest.raises(
        ValueError, match=r"unknown data-set variant '\+pos'; valid: original, \+positive"
    ):
        plan_variant("+pos", [5, 5])
    with pytest.raises(ValueError, match="both labels present; counts \\[0, 7\\]"):
        plan_variant("+positive", [0, 7])


def test_plan_at_a_tie_and_below_21_percent() -> None:
    assert plan_variant("+positive", [50, 50]).counts == (50, 50)
    assert plan_variant("-negative", [50, 50]).counts == (50, 50)
    assert plan_variant("+negative", [90, 10]).counts == (90, 10)  # already 10% < 21%


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


def test_fallback_swaps_sentence_order_and_refuses_identical_sentences() -> None:
    pool = MentionPool.from_examples([])
    source = PairExample("s", "the weather was fine .", "it was a fine day .", 1)
    copy = augment(source, pool, random.Random(0), guid="s#aug")
    assert (copy.text_a, copy.text_b, copy.label) == (source.text_b, source.text_a, 1)
    same = PairExample("t", "so it goes .", "so it goes .", 0)
    assert not can_augment(same, pool)
    with pytest.raises(ValueError, match="'t' cannot be augmented"):
        augment(same, pool, random.Random(0), guid="t#aug")


def test_a_class_with_no_augmentable_pair_is_an_error() -> None:
    examples = [PairExample(f"n{i}", "a b .", "c d .", 0) for i in range(3)]
    examples.append(PairExample("p", "so it goes .", "so it goes .", 1))
    with pytest.raises(ValueError, match="cannot add 2 pairs of label 1"):
        make_variant(examples, "+positive")


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
    assert (
        round(100 * positives, 2)
        == {
            "original": 67.45,  # 2474 / 3668
            "+positive": 50.0,
            "+negative": 78.99,  # 3651 / 4622; negatives 21.0%
            "-negative": 50.0,
            "+positive&negative": 67.44,  # 3337 / 4948
        }[name]
    )


@pytest.mark.data
def test_real_mrpc_augmentation_mostly_swaps_mentions(mrpc_train: list[PairExample]) -> None:
    variant = make_variant(mrpc_train, "+positive", seed=0)
    augmented = variant[len(mrpc_train) :]
    by_guid = {example.guid: example for example in mrpc_train}
    reordered = sum(
        (e.text_b, e.text_a) == (s.text_a, s.text_b)
        for e in augmented
        for s in [by_guid[e.guid.split("#aug")[0]]]
    )
    assert len(augmented) == 1280  # 2474 - 1194 negatives added
    assert reordered < len(augmented) // 2  # most copies carry a swapped name or number
    assert make_variant(mrpc_train, "-negative", seed=0) != make_variant(
        mrpc_train, "-negative", seed=1
    )
