"""NER as reading comprehension against the official code (ShannonAI/dice_loss_for_NLP),
its arithmetic re-derived here: the official decoding on random start/end patterns."""

from __future__ import annotations

import random

from trainables.data.mrc_ner import flat_spans, official_flat_spans


def official_bmes_decode(labels: list[str]) -> list[tuple[int, int]]:
    """The official ``bmes_decode`` (metrics/functional/ner_span_f1.py) over BMES labels:
    ``(begin, end)`` with ``end`` exclusive, as the official code returns them."""
    index, length, found = 0, len(labels), []
    while index < length:
        label = labels[index][0]
        if label == "O":
            index += 1
            continue
        if label == "S":
            found.append((index, index + 1))
            index += 1
            continue
        if label == "B":
            end = index + 1
            while end + 1 < length and labels[end][0] == "M":
                end += 1
            if end == length:
                found.append((index, end))
                index = end
                continue
            if labels[end][0] == "E":
                found.append((index, end + 1))
                index = end + 1
            else:
                found.append((index, end))
                index = end
            continue
        index += 1
    return found


def official_extract_flat_spans(
    start: list[int], end: list[int], mask: list[int]
) -> list[tuple[int, int]]:
    """The official ``extract_flat_spans`` as its code reads, returning ``(begin, end)``
    with ``end`` exclusive."""
    labels = ["O"] * len(start)
    starts = [i for i, flag in enumerate(start) if flag and mask[i]]
    ends = [i for i, flag in enumerate(end) if flag and mask[i]]
    for item in starts:
        labels[item] = "B-TAG"
    for item in ends:
        labels[item] = "B-TAG" if item in starts else "E-TAG"
    for first in starts:
        later = [e for e in ends if e >= first]
        if not later:
            continue
        last = min(later)
        if first != last:
            for i in range(first + 1, last):
                labels[i] = "M-TAG"
        else:
            labels[last] = "S-TAG"
    return official_bmes_decode(labels)


def random_patterns(count: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """``count`` start/end flag patterns of 1 to 12 positions, each flag on with a
    probability drawn per pattern (sparse to dense)."""
    rng = random.Random(seed)
    patterns = []
    for _ in range(count):
        length, density = rng.randint(1, 12), rng.choice((0.1, 0.25, 0.5, 0.8))
        patterns.append(
            (
                [int(rng.random() < density) for _ in range(length)],
                [int(rng.random() < density) for _ in range(length)],
            )
        )
    return patterns


def test_official_decoding_equals_the_official_code_on_20000_patterns() -> None:
    """0 differences; the strict decoding differs on many of the same patterns."""
    patterns = random_patterns(20_000, seed=61)
    differences = strict_differences = 0
    for starts, ends in patterns:
        official = [
            (b, e - 1) for b, e in official_extract_flat_spans(starts, ends, [1] * len(starts))
        ]
        differences += (
            official_flat_spans([bool(f) for f in starts], [bool(f) for f in ends]) != official
        )
        strict_differences += (
            flat_spans([bool(f) for f in starts], [bool(f) for f in ends]) != official
        )
    assert differences == 0
    assert strict_differences > 5_000


def test_the_two_decodings_on_the_departures_they_differ_by() -> None:
    """A start with no end after it: one word officially, nothing strictly; an end that
    is also a later start: two spans officially, one strictly."""
    assert official_flat_spans([False, True, False], [False, False, False]) == [(1, 1)]
    assert flat_spans([False, True, False], [False, False, False]) == []
    starts, ends = [True, False, True, False], [False, False, True, True]
    assert official_flat_spans(starts, ends) == [(0, 1), (2, 2)]
    assert flat_spans(starts, ends) == [(0, 2)]
