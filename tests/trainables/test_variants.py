"""The Table 8 data-set variants: sizes, proportions, determinism, augmentation."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest

from search_spaces.datasets import get_dataset
from search_spaces.resolve import get_preset
from trainables.data import (
    VARIANT_NAMES,
    PairExample,
    class_counts,
    load_split,
    make_variant,
    plan_variant,
)
from trainables.data.augment import MentionPool, augment, can_augment
from trainables.data.classes import stratified_sample
from trainables.data.variants import pair_key
from trainables.trial_data import CAP_SEED, DataRequest, read_examples, resolve_scored_class

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

# Real MRPC train, 1194 label 0 (not paraphrase, the minority, so the scored class by
# default) / 2474 label 1, n = 3668:
#   +positive:          1194 * 1.70268 = 2033.00 -> 2033 positives         -> 45.11%
#   +negative:          1194 * 0.71513 =  853.87 ->  854 positives,
#                       2474 * 1.58000 = 3908.92 -> 3909 negatives         -> 17.93%
#   -negative:          2474 * 0.58707 = 1452.42 -> 1452 negatives         -> 45.12%
#   +positive&negative: 1194 * 1.26 = 1504.43 -> 1504, 2474 * 1.26 = 3117.23 -> 3117
MRPC_COUNTS = {  # (label 0, label 1)
    "original": (1194, 2474),
    "+positive": (2033, 2474),
    "+negative": (854, 3909),
    "-negative": (1194, 1452),
    "+positive&negative": (1504, 3117),
}
MRPC_POSITIVE_PERCENT = {  # label 0
    "original": 32.55,
    "+positive": 45.11,
    "+negative": 17.93,
    "-negative": 45.12,
    "+positive&negative": 32.55,
}
# The figures of the study that found the direction reversed (positive = the minority):
# size and positive share of each variant, the share to within 0.5 points.
MRPC_FIGURES = {
    "original": (3668, 32.6),
    "+positive": (4507, 45.1),
    "+negative": (4763, 17.9),
    "-negative": (2646, 45.1),
    "+positive&negative": (4621, 32.5),
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


def mrpc_request(variant: str, cap: int | None = None) -> DataRequest:
    """A trial's data request on MRPC that leaves the scored class to its default."""
    return DataRequest(get_dataset("mrpc"), variant, "tiny-bert", 32, 128, cap, None)


@pytest.fixture(scope="module")
def mrpc_variants(datasets_dir: Path) -> dict[str, list[PairExample]]:
    """The five MRPC variants as a trial reads them (``read_examples``, no cap), the
    scored class resolved from the training file: the minority, label 0."""
    variants = {}
    for name in VARIANT_NAMES:
        request, scored = resolve_scored_class(mrpc_request(name), datasets_dir)
        assert scored is not None and (scored.label, scored.named) == (0, False)
        assert request.positive_label == 0
        variants[name] = read_examples(request, datasets_dir)[0]
    return variants


def percent_of_label_0(examples: list[PairExample]) -> float:
    return 100 * sum(example.label == 0 for example in examples) / len(examples)


@pytest.mark.data
@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_variants_of_real_mrpc(
    mrpc_train: list[PairExample], mrpc_variants: dict[str, list[PairExample]], name: str
) -> None:
    variant = mrpc_variants[name]
    assert variant == make_variant(mrpc_train, name, seed=0)  # the default: the minority
    check_variant(mrpc_train, variant, MRPC_COUNTS[name])
    positives = MRPC_COUNTS[name][0] / sum(MRPC_COUNTS[name])
    assert round(100 * positives, 2) == MRPC_POSITIVE_PERCENT[name]
    # Before the scored class was explicit, 23-26% of augmented pairs were swapped
    # originals and "+positive" held 27 exact duplicates.
    assert augmented_repeats(mrpc_train, variant) == (0, 0)


@pytest.mark.data
def test_real_mrpc_variants_follow_the_papers_direction(mrpc_train: list[PairExample]) -> None:
    share = {name: MRPC_POSITIVE_PERCENT[name] for name in VARIANT_NAMES}
    assert share["+positive"] > share["original"] > share["+negative"]  # paper: 50 > 37 > 21
    assert share["-negative"] > share["original"]  # paper: 50 > 37
    # The balancing variants move towards 50%, "+negative" away from it, as on QQP.
    assert abs(share["+positive"] - 50) < abs(share["original"] - 50)
    assert abs(share["+negative"] - 50) > abs(share["original"] - 50)
    assert make_variant(mrpc_train, "-negative", seed=0) != make_variant(
        mrpc_train, "-negative", seed=1
    )


@pytest.mark.data
def test_naming_label_1_scores_paraphrase_the_majority(mrpc_train: list[PairExample]) -> None:
    """The spec's ``positive_label`` wins over the default: label 1 gives the reversed
    structure the default avoids (+positive 77.91%, +negative 48.39%)."""
    counts = class_counts(mrpc_train)
    assert plan_variant("+positive", counts, positive=1).counts == (1194, 4212)
    assert plan_variant("+negative", counts, positive=1).counts == (1887, 1769)
    assert round(100 * plan_variant("+negative", counts, positive=1).positive_fraction, 2) == 48.39


@pytest.mark.data
@pytest.mark.parametrize("cap", [None, 400, 1000])
def test_the_five_mrpc_variants_with_the_default_positive_class(
    mrpc_variants: dict[str, list[PairExample]], cap: int | None
) -> None:
    """Each variant built around the default positive class (the minority, label 0), then
    capped as a trial caps it (stratified): the size and share the study measured."""
    for name, (size, percent) in MRPC_FIGURES.items():
        variant = mrpc_variants[name]
        train = variant if cap is None else stratified_sample(variant, cap, CAP_SEED)
        assert len(train) == (size if cap is None else cap)
        share = percent_of_label_0(train)
        assert share == pytest.approx(percent, abs=0.5), (name, cap)
        # The cap keeps the variant's positives within one pair of their exact share.
        positives = MRPC_COUNTS[name][0] * len(train) / sum(MRPC_COUNTS[name])
        assert abs(share * len(train) / 100 - positives) < 1, (name, cap)


@pytest.mark.data
@pytest.mark.parametrize("name", ["original", "-negative"])
def test_a_trials_training_cap_is_the_stratified_one(
    datasets_dir: Path, mrpc_variants: dict[str, list[PairExample]], name: str
) -> None:
    request, _ = resolve_scored_class(mrpc_request(name, cap=400), datasets_dir)
    train, _ = read_examples(request, datasets_dir)
    assert train == stratified_sample(mrpc_variants[name], 400, CAP_SEED)
    assert percent_of_label_0(train) == pytest.approx(MRPC_FIGURES[name][1], abs=0.5)


TABLE8_PRESETS = ["table8", "study-table8", "study-table8-full"]
DESCRIBED = re.compile(
    r"(original|\+positive&negative|\+positive|\+negative|-negative) ([\d,]+) pairs ([\d.]+)%"
)


@pytest.mark.data
@pytest.mark.parametrize("preset", TABLE8_PRESETS)
def test_table8_presets_describe_their_training_sets(
    mrpc_variants: dict[str, list[PairExample]], preset: str
) -> None:
    """Each Table 8 preset's description states every variant's size and positive share:
    the ones its trials train on, computed from the MRPC training file and its caps."""
    spec = get_preset(preset)
    assert spec.task.dataset == ["mrpc"] and spec.task.positive_label is None
    assert "scored class 0 (not paraphrase, the minority)" in spec.description
    described = {
        name: (int(size.replace(",", "")), float(percent))
        for name, size, percent in DESCRIBED.findall(spec.description)
    }
    assert list(described) == list(spec.task.variant)
    cap = spec.training.max_train_examples
    for name, stated in described.items():
        variant = mrpc_variants[name]
        train = variant if cap is None else stratified_sample(variant, cap, CAP_SEED)
        assert stated == (len(train), round(percent_of_label_0(train), 1)), name
