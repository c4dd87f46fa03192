"""NER as reading comprehension (BERT-MRC, ``task: {kind: ner, formulation: mrc}``).

Each sentence is asked one query per entity type (``trainables.data.mrc_ner``): the
window is ``[CLS] query [SEP] sentence [SEP]``, truncated in the sentence. Where the
targets sit is ``mrc.labels``: ``words``, a word is its first sub-token, the start and
end targets sit there and ``word_mask`` (the positions the start/end losses count)
marks those positions; ``official``, ``word_mask`` marks every context sub-token and
the last ``[SEP]`` and the end target is the last sub-token of the entity's last word.
Either way every entity keeps its own position (a repeated string is no other
occurrence's) and a sentence's last word is a word like any other. Losses:
``trainables.tasks.mrc_ner_loss``; model: ``trainables.tasks.mrc_ner_model``.

Evaluation decodes each query's start and end flags (logit > 0) over the labelled
positions (``mrc.decoding``: ``strict`` or ``official``, ``trainables.data.mrc_ner``;
with ``answerable: train_infer`` a query the answerability head calls unanswerable
predicts none). Two scores come of it:

- ``f1``, ``precision``, ``recall``: the spans mapped to words (a span at the last
  ``[SEP]`` is no entity), the non-overlapping ones kept across types by score (start
  + end logit), turned back into IOB2 tags and scored with
  ``trainables.metrics.ner_metrics`` (the ``conlleval`` rules), as the tagger is
  scored. Entities in words cut off by ``max_seq_length`` count as missed.
- ``span_f1``, ``span_precision``, ``span_recall``: the official per-query count, the
  predicted spans of each window against the spans the same decoding reads from its
  gold targets, on positions, summed over windows (the official code's
  ``MRCNERSpanF1``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from torch import Tensor, nn
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from search_spaces.mrc_ner import MrcNerSpec
from trainables.data import TaggedSentence
from trainables.data.mrc_ner import (
    MrcNerExample,
    Span,
    TypedSpan,
    entity_types,
    flat_spans,
    official_flat_spans,
    resolve_overlaps,
    to_mrc_examples,
    to_tags,
)
from trainables.metrics import ner_metrics, tagging_baselines, top_prediction_share
from trainables.modeling import build_encoder
from trainables.tasks.base import Batch, EncodeOptions, Feature, Task
from trainables.tasks.mrc_ner_loss import mrc_ner_losses, span_candidates
from trainables.tasks.mrc_ner_model import MrcNerOutput, QueryNer


class MrcNer(Task):
    """Start/end logits ``(B, L)`` per (query, sentence); span F1 of the decoded tags."""

    kind = "ner"
    padded_fields: ClassVar[dict[str, int]] = {"start_labels": 0, "end_labels": 0, "word_mask": 0}

    def __init__(
        self, labels: Sequence[str], settings: MrcNerSpec, queries: Mapping[str, str]
    ) -> None:
        super().__init__(labels)
        self.settings = settings
        self.types = entity_types(labels)
        self.queries = {kind: queries[kind] for kind in self.types}

    def build_model(self, model: str, vocab_size: int | None = None) -> nn.Module:
        return QueryNer(
            build_encoder(model, vocab_size, self.settings.dropout),
            span_head=self.settings.span_head,
            answerable=self.settings.answerable != "off",
        )

    def encode(
        self,
        examples: Sequence[TaggedSentence],
        tokenizer: PreTrainedTokenizerBase,
        options: EncodeOptions,
        training: bool,
    ) -> list[Feature]:
        self._check_room(tokenizer, options.max_seq_length)
        questions = to_mrc_examples(examples, self.types, self.queries)
        encoded = tokenizer(
            [q.query.split() for q in questions],
            [list(q.words) for q in questions],
            is_split_into_words=True,
            truncation="only_second",
            max_length=options.max_seq_length,
        )
        return [
            self._feature(question, encoded, index, training)
            for index, question in enumerate(questions)
        ]

    def _check_room(self, tokenizer: PreTrainedTokenizerBase, max_seq_length: int) -> None:
        """Raises ``ValueError`` where a query leaves a window no room for its sentence."""
        for kind, query in self.queries.items():
            # [CLS] query [SEP] ... [SEP], and at least one token of the sentence
            needed = len(tokenizer(query.split(), is_split_into_words=True)["input_ids"]) + 2
            if needed >= max_seq_length:
                raise ValueError(
                    f"the query of {kind} takes {needed - 1} tokens with its markers: "
                    f"max_seq_length {max_seq_length} leaves no room for the sentence"
                )

    def _feature(
        self, question: MrcNerExample, encoded: Any, index: int, training: bool
    ) -> Feature:
        """One window's tensors' lists, its targets where ``mrc.labels`` puts them."""
        word_ids, sequence_ids = encoded.word_ids(index), encoded.sequence_ids(index)
        positions = _word_positions(word_ids, sequence_ids)
        length = len(encoded["input_ids"][index])
        official = self.settings.labels == "official"
        ends_at = _last_positions(word_ids, sequence_ids) if official else positions
        spans = [(positions[s], ends_at[e]) for s, e in question.spans if e < len(positions)]
        labelled = _context_positions(sequence_ids) if official else positions
        feature: Feature = {key: values[index] for key, values in encoded.items()}
        feature["word_mask"] = _flags(length, labelled)
        feature["start_labels"] = _flags(length, [s for s, _ in spans])
        feature["end_labels"] = _flags(length, [e for _, e in spans])
        feature["spans"] = spans
        feature["answerable"] = int(bool(spans))
        if not training:
            feature["example_index"] = question.sentence
            feature["type_index"] = self.types.index(question.entity_type)
            feature["word_positions"] = positions
            feature["label_positions"] = labelled
            # The word of each labelled position (-1: the last [SEP]).
            words = [word if word is not None else -1 for word in word_ids]
            feature["label_words"] = [words[p] if sequence_ids[p] == 1 else -1 for p in labelled]
        return feature

    def loss(self, outputs: Any, batch: Batch, loss_fn: Callable[..., Tensor]) -> Tensor:
        candidates = None
        if outputs.span_logits is not None:
            candidates = span_candidates(
                outputs.start_logits, outputs.end_logits, batch, self.settings.span_candidates
            )
        terms = mrc_ner_losses(outputs, batch, loss_fn, self.settings, candidates)  # type: ignore[arg-type]
        return terms.total(self.settings)

    def class_counts(self, features: Sequence[Feature]) -> list[int]:
        # Per context word: positives start an entity of the query's type.
        words = sum(sum(f["word_mask"]) for f in features)
        starts = sum(sum(f["start_labels"]) for f in features)
        return [max(words - starts, 1), max(starts, 1)]

    def evaluate(
        self,
        predict: Callable[[Batch], Any],
        batches: Sequence[Batch],
        examples: Sequence[TaggedSentence],
    ) -> dict[str, float]:
        found: list[list[tuple[float, TypedSpan]]] = [[] for _ in examples]
        counts = SpanCounts()
        for batch in batches:
            outputs: MrcNerOutput = predict(batch)
            for row in range(outputs.start_logits.shape[0]):
                predicted_spans = self.decode_positions(outputs, batch, row)
                counts.add(predicted_spans, self.gold_positions(batch, row))
                found[int(batch["example_index"][row])] += self.to_words(
                    predicted_spans, outputs, batch, row
                )
        predicted = [
            to_tags(len(example.tags), resolve_overlaps(spans))
            for example, spans in zip(examples, found, strict=True)
        ]
        gold = [list(example.tags) for example in examples]
        return {
            **ner_metrics(predicted, gold),
            **counts.metrics(),
            # What the reader tags, against the no-skill rule on the same words
            # (search_spaces.reports.tables.degenerate_reason).
            **tagging_baselines(gold, by_spans=True),
            "top_prediction_share": top_prediction_share(t for tags in predicted for t in tags),
        }

    def spans_of(self, starts: Sequence[bool], ends: Sequence[bool]) -> list[Span]:
        """Spans (indices into the labelled positions) by ``mrc.decoding``."""
        decode = official_flat_spans if self.settings.decoding == "official" else flat_spans
        return decode(starts, ends)

    def _labelled(self, batch: Batch, row: int) -> list[int]:
        key = "label_positions" if self.settings.labels == "official" else "word_positions"
        positions: list[int] = batch[key][row]
        return positions

    def decode_positions(self, outputs: MrcNerOutput, batch: Batch, row: int) -> list[Span]:
        """One window's predicted spans, as indices into its labelled positions; none
        where the answerability head (``answerable: train_infer``) calls it unanswerable."""
        answerable = outputs.answerable_logits
        inferred = self.settings.answerable == "train_infer" and answerable is not None
        if inferred and float(answerable[row]) <= 0:  # type: ignore[index]
            return []
        positions = self._labelled(batch, row)
        starts = outputs.start_logits[row, positions] > 0  # (positions,)
        ends = outputs.end_logits[row, positions] > 0
        return self.spans_of(starts.tolist(), ends.tolist())

    def gold_positions(self, batch: Batch, row: int) -> list[Span]:
        """The spans the decoding reads from one window's gold start and end targets."""
        positions = self._labelled(batch, row)
        starts = batch["start_labels"][row, positions] > 0
        ends = batch["end_labels"][row, positions] > 0
        return self.spans_of(starts.tolist(), ends.tolist())

    def to_words(
        self, spans: Sequence[Span], outputs: MrcNerOutput, batch: Batch, row: int
    ) -> list[tuple[float, TypedSpan]]:
        """``spans`` (``decode_positions``) as word spans of the window's type, each with
        its score (start logit + end logit); a span at a position of no word is dropped."""
        positions = self._labelled(batch, row)
        words = (
            batch["label_words"][row]
            if self.settings.labels == "official"
            else list(range(len(positions)))
        )
        kind = self.types[int(batch["type_index"][row])]
        found = []
        for start, end in spans:
            first, last = words[start], words[end]
            if first < 0 or last < 0:
                continue
            start_logit = outputs.start_logits[row, positions[start]].float()
            score = start_logit + outputs.end_logits[row, positions[end]].float()
            found.append((float(score), (kind, first, last)))
        return found

    def decode(
        self, outputs: MrcNerOutput, batch: Batch, row: int
    ) -> list[tuple[float, TypedSpan]]:
        """One window's predicted spans (word indices) of its type, each with its score
        (start logit + end logit)."""
        return self.to_words(self.decode_positions(outputs, batch, row), outputs, batch, row)


class SpanCounts:
    """The official per-query span count: true and false positives and false negatives
    of each window's predicted spans against its gold ones, as multisets."""

    def __init__(self) -> None:
        self.true_positives = self.false_positives = self.false_negatives = 0

    def add(self, predicted: Sequence[Span], gold: Sequence[Span]) -> None:
        left = list(gold)
        for span in predicted:
            if span in left:
                left.remove(span)
                self.true_positives += 1
            else:
                self.false_positives += 1
        self.false_negatives += len(left)

    def metrics(self) -> dict[str, float]:
        """``span_precision``, ``span_recall``, ``span_f1`` in percent (0 where a
        denominator is 0)."""
        tp = self.true_positives
        precision = tp / (tp + self.false_positives) if tp + self.false_positives else 0.0
        recall = tp / (tp + self.false_negatives) if tp + self.false_negatives else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"span_precision": 100 * precision, "span_recall": 100 * recall, "span_f1": 100 * f1}


def _word_positions(
    word_ids: Sequence[int | None], sequence_ids: Sequence[int | None]
) -> list[int]:
    """The position of each visible context word's first sub-token, word by word."""
    positions: list[int] = []
    previous = None
    for position, (word, sequence) in enumerate(zip(word_ids, sequence_ids, strict=True)):
        if sequence == 1 and word is not None and word != previous:
            positions.append(position)
        previous = word if sequence == 1 else None
    return positions


def _last_positions(
    word_ids: Sequence[int | None], sequence_ids: Sequence[int | None]
) -> list[int]:
    """The position of each visible context word's last sub-token, word by word."""
    last: dict[int, int] = {}
    for position, (word, sequence) in enumerate(zip(word_ids, sequence_ids, strict=True)):
        if sequence == 1 and word is not None:
            last[word] = position
    return [last[word] for word in sorted(last)]


def _context_positions(sequence_ids: Sequence[int | None]) -> list[int]:
    """Every context sub-token's position and the last ``[SEP]``'s (the positions of
    ``token_type_ids == 1``, the official label mask)."""
    context = [position for position, sequence in enumerate(sequence_ids) if sequence == 1]
    return [*context, len(sequence_ids) - 1]


def _flags(length: int, positions: Sequence[int]) -> list[int]:
    flags = [0] * length
    for position in positions:
        flags[position] = 1
    return flags
