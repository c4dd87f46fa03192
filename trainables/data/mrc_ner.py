"""NER as reading comprehension (BERT-MRC): tagged sentences as (query, sentence)
examples, one per entity type, and predicted spans back to IOB2 tags.

Spans are word indices, both ends included. Tags are IOB2, as every reader returns
them (``trainables.data.readers.to_iob2``); chunks are read by the CoNLL-2003
``conlleval`` rule, so an ``I-X`` after ``O`` or after another type opens an entity.
Pure Python: the task (``trainables.tasks.mrc_ner``) tokenises these examples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trainables.data.examples import TaggedSentence

Span = tuple[int, int]  # first and last word of an entity, both included
TypedSpan = tuple[str, int, int]  # (entity type, first word, last word)


@dataclass(frozen=True)
class MrcNerExample:
    """One query over one sentence: the gold spans of ``entity_type`` in ``words``."""

    sentence: int  # index of the sentence in its split
    entity_type: str
    query: str
    words: tuple[str, ...]
    spans: tuple[Span, ...]


def entity_spans(tags: Sequence[str]) -> list[TypedSpan]:
    """The entities of one sentence's IOB2 tags, in order, by the ``conlleval`` rule:
    ``B-X`` opens an entity, ``I-X`` continues one of type ``X`` or else opens one."""
    spans: list[TypedSpan] = []
    open_kind, first = "", 0  # the open entity's type ("" for none) and first word
    for index, tag in enumerate([*tags, "O"]):  # a closing "O" ends the last entity
        prefix, _, kind = tag.partition("-")
        if prefix == "I" and open_kind and kind == open_kind:
            continue
        if open_kind:
            spans.append((open_kind, first, index - 1))
        open_kind, first = (kind, index) if prefix in ("B", "I") and kind else ("", 0)
    return spans


def entity_types(labels: Iterable[str]) -> list[str]:
    """The entity types of a tag set (``B-PER``, ``I-PER``, ``O`` -> ``PER``), sorted."""
    return sorted({tag.partition("-")[2] for tag in labels if tag.partition("-")[2]})


def to_mrc_examples(
    sentences: Sequence[TaggedSentence], types: Sequence[str], queries: Mapping[str, str]
) -> list[MrcNerExample]:
    """One example per sentence and entity type, sentence by sentence, ``types`` in order.

    Raises:
        KeyError: a type of ``types`` without a query in ``queries``.
    """
    examples: list[MrcNerExample] = []
    for index, sentence in enumerate(sentences):
        spans = entity_spans(sentence.tags)
        for kind in types:
            examples.append(
                MrcNerExample(
                    sentence=index,
                    entity_type=kind,
                    query=queries[kind],
                    words=sentence.tokens,
                    spans=tuple((start, end) for t, start, end in spans if t == kind),
                )
            )
    return examples


def to_tags(length: int, spans: Iterable[TypedSpan]) -> list[str]:
    """IOB2 tags of a sentence of ``length`` words holding the non-overlapping ``spans``.

    Raises:
        ValueError: a span out of the sentence, reversed, or overlapping another.
    """
    tags = ["O"] * length
    for kind, start, end in spans:
        if not 0 <= start <= end < length:
            raise ValueError(f"span ({start}, {end}) of {kind} is not inside {length} words")
        if any(tag != "O" for tag in tags[start : end + 1]):
            raise ValueError(f"span ({start}, {end}) of {kind} overlaps another entity")
        tags[start] = f"B-{kind}"
        tags[start + 1 : end + 1] = [f"I-{kind}"] * (end - start)
    return tags


def from_mrc_examples(examples: Sequence[MrcNerExample], lengths: Sequence[int]) -> list[list[str]]:
    """The IOB2 tags of every sentence (``lengths``: words per sentence) from the spans of
    its examples (gold or predicted, non-overlapping across types)."""
    spans: list[list[TypedSpan]] = [[] for _ in lengths]
    for example in examples:
        spans[example.sentence] += [(example.entity_type, s, e) for s, e in example.spans]
    return [to_tags(length, found) for length, found in zip(lengths, spans, strict=True)]


def flat_spans(starts: Sequence[bool], ends: Sequence[bool]) -> list[Span]:
    """One query's predicted spans from its start and end flags per word, by the strict
    decoding: each start, left to right, ends at the nearest end at or after it; a
    start inside the span just taken is part of it. A start with no end after it
    predicts nothing (the official decoding, ``official_flat_spans``, makes it a
    one-position span)."""
    end_words = [index for index, flag in enumerate(ends) if flag]
    spans: list[Span] = []
    for start, flag in enumerate(starts):
        if not flag or (spans and start <= spans[-1][1]):
            continue
        end = next((e for e in end_words if e >= start), None)
        if end is not None:
            spans.append((start, end))
    return spans


def official_flat_spans(starts: Sequence[bool], ends: Sequence[bool]) -> list[Span]:
    """One query's spans from its start and end flags per position by the official
    decoding (the official code's metrics/functional/ner_span_f1.py): the flags are
    written as BMES tags and read back.

    Writing: ``B`` at every start, also where it is an end; ``E`` at every other end;
    then, start by start from the left, with ``e`` the nearest end at or after it,
    ``S`` at the start where ``e`` is the start itself, else ``M`` on the positions
    strictly between them (over the ``B`` of any start there). A start with no end
    after it keeps its ``B``.
    Reading, left to right: ``S`` is a one-position span; ``B`` and the run of ``M``
    after it (never counting the last position) end at the ``E`` that follows the run,
    else at the run's last ``M`` (``B`` alone: a one-position span), and reading goes
    on after the span; any other tag is skipped.
    """
    length = len(starts)
    tags = ["O"] * length
    start_at = [index for index, flag in enumerate(starts) if flag]
    end_at = [index for index, flag in enumerate(ends) if flag]
    for index in start_at:
        tags[index] = "B"
    for index in end_at:
        tags[index] = "B" if starts[index] else "E"
    for start in start_at:
        end = next((e for e in end_at if e >= start), None)
        if end == start:
            tags[start] = "S"
        elif end is not None:
            tags[start + 1 : end] = ["M"] * (end - start - 1)
    return _read_bmes(tags)


def _read_bmes(tags: Sequence[str]) -> list[Span]:
    """The spans of ``official_flat_spans``' BMES tags, by its reading rule."""
    spans: list[Span] = []
    index, length = 0, len(tags)
    while index < length:
        if tags[index] == "S":
            spans.append((index, index))
        if tags[index] != "B":
            index += 1
            continue
        last = index + 1
        while last + 1 < length and tags[last] == "M":
            last += 1
        if last < length and tags[last] == "E":
            spans.append((index, last))
            index = last + 1
        else:
            spans.append((index, last - 1))
            index = last
    return spans


def resolve_overlaps(candidates: Iterable[tuple[float, TypedSpan]]) -> list[TypedSpan]:
    """Non-overlapping spans across entity types (flat NER: a word has one tag): the
    highest-scoring first, each later one kept only where it overlaps none kept."""
    taken: set[int] = set()
    kept: list[TypedSpan] = []
    for _, (kind, start, end) in sorted(candidates, key=lambda c: -c[0]):
        words = set(range(start, end + 1))
        if words & taken:
            continue
        taken |= words
        kept.append((kind, start, end))
    return sorted(kept, key=lambda span: span[1])
