"""NER as reading comprehension against the official code (ShannonAI/dice_loss_for_NLP),
its arithmetic re-derived here: the official decoding on random start/end patterns."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from search_spaces.mrc_ner import MrcNerSpec
from trainables.data import read_conll2003
from trainables.data.mrc_ner import entity_spans, flat_spans, official_flat_spans
from trainables.modeling import tiny_tokenizer
from trainables.tasks import EncodeOptions, build_task
from trainables.tasks.mrc_ner import MrcNer


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


# The official conversion (tasks/mrc_ner/data_preprocess/label_utils.py and
# datasets/mrc_ner_dataset.py), re-derived.


def iob2_to_iobes(tags: Sequence[str]) -> list[str]:
    """IOB2 tags as the official loader's ``iob_iobes`` gives them."""
    out = []
    for index, tag in enumerate(tags):
        following = tags[index + 1] if index + 1 < len(tags) else "O"
        inside_next = following.startswith("I-")
        if tag.startswith("B-"):
            out.append(tag if inside_next else "S-" + tag[2:])
        elif tag.startswith("I-"):
            out.append(tag if inside_next else "E-" + tag[2:])
        else:
            out.append(tag)
    return out


def official_span_labels(tags: Sequence[str]) -> list[tuple[int, int, object]]:
    """``get_span_labels``: its last entity's label is ``tag.split("-"[-1])``, a list,
    which no entity type equals."""
    spans: list[tuple[int, int, object]] = []
    last, start = "O", -1
    for i, tag in enumerate(tags):
        pos = None if tag == "O" else tag.split("-")[0]
        if (pos in ("S", "B") or tag == "O") and last != "O":
            spans.append((start, i - 1, last.split("-")[-1]))
        if pos in ("B", "S") or last == "O":
            start = i
        last = tag
    if tags[-1] != "O":
        spans.append((start, len(tags) - 1, tags[-1].split("-"[-1])))
    return spans


def official_window(
    tokenizer: Any, query: str, words: Sequence[str], spans: list[tuple[int, int]]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """``MRCNERDataset.__getitem__``'s label mask, start and end labels of one window,
    and the start position ``_improve_answer_span`` found for each span."""
    encoded = tokenizer(query, " ".join(words), return_token_type_ids=True)
    ids, types = encoded["input_ids"], encoded["token_type_ids"]
    first_sep, end_sep = ids.index(tokenizer.sep_token_id), len(ids) - 1
    starts, ends = [], []
    for start, end in spans:
        answer = tokenizer.encode(" ".join(words[start : end + 1]), add_special_tokens=False)
        found = _first_occurrence(ids, answer, first_sep, end_sep)
        starts.append(found[0])
        ends.append(found[1])
    mask = [int(t == 1) for t in types]
    positions = range(len(ids))
    return mask, [int(i in starts) for i in positions], [int(i in ends) for i in positions], starts


def _first_occurrence(ids: list[int], answer: list[int], first: int, last: int) -> tuple[int, int]:
    """``_improve_answer_span``: the first (start, end) in ``first..last``, starts
    ascending and ends descending, whose ids are the answer's; else ``(first, last)``."""
    wanted = " ".join(map(str, answer))
    for new_start in range(first, last + 1):
        for new_end in range(last, new_start - 1, -1):
            if " ".join(map(str, ids[new_start : new_end + 1])) == wanted:
                return new_start, new_end
    return first, last


@pytest.mark.data
def test_official_labels_equal_the_official_conversion_but_for_the_two_rules(
    datasets_dir: Path, tmp_path: Path
) -> None:
    """On CoNLL-2003's first 400 training sentences, ``labels: official`` gives every
    window the official label mask, start and end labels, except where the official
    conversion drops a sentence's last entity or puts a repeated string at its first
    occurrence; both kinds are counted, and no other window differs."""
    sentences = read_conll2003(datasets_dir / "conll2003" / "train.txt")[:400]
    labels = sorted({t for s in sentences for t in s.tags})
    task = build_task("ner", labels, mrc=MrcNerSpec(labels="official"), dataset="conll2003")
    assert isinstance(task, MrcNer)
    texts = [" ".join(s.tokens) for s in sentences] + list(task.queries.values())
    tokenizer = tiny_tokenizer(texts, tmp_path, "official")
    features = task.encode(sentences, tokenizer, EncodeOptions(512), training=False)
    counts = {"same": 0, "final entity dropped": 0, "repeat moved": 0}
    for feature in features:
        sentence = sentences[feature["example_index"]]
        kind, words = task.types[feature["type_index"]], list(sentence.tokens)
        query = task.queries[kind]
        ours = [(s, e) for t, s, e in entity_spans(sentence.tags) if t == kind]
        kept = [
            (s, e) for s, e, t in official_span_labels(iob2_to_iobes(sentence.tags)) if t == kind
        ]
        mask, starts, ends, _ = official_window(tokenizer, query, words, kept)
        assert feature["word_mask"] == mask  # the mask never differs
        got = (feature["start_labels"], feature["end_labels"])
        if got == (starts, ends):
            counts["same"] += 1
            continue
        if len(kept) < len(ours):
            assert kept == ours[:-1] and ours[-1][1] == len(words) - 1
            counts["final entity dropped"] += 1
            _, starts, ends, found = official_window(tokenizer, query, words, ours)
            if got == (starts, ends):
                continue
        _, _, _, found = official_window(tokenizer, query, words, ours)
        own = [feature["word_positions"][s] for s, _ in ours]
        # some entity put at an earlier occurrence of its string
        assert any(f < o for f, o in zip(found, own, strict=True)), (words, ours)
        counts["repeat moved"] += 1
    assert counts["final entity dropped"] > 0 and counts["repeat moved"] > 0, counts
    print(f"{len(features)} windows: {counts}")
