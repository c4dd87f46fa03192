"""NER as reading comprehension (BERT-MRC, ``task: {kind: ner, formulation: mrc}``).

Each sentence is asked one query per entity type (``trainables.data.mrc_ner``): the
window is ``[CLS] query [SEP] sentence [SEP]``, truncated in the sentence. A word is
its first sub-token: the start and end targets sit there, and ``word_mask`` marks
those positions (the official code marks every context sub-token and the last
``[SEP]``; words are what entities are made of, and what is scored). Losses:
``trainables.tasks.mrc_ner_loss``; model: ``trainables.tasks.mrc_ner_model``.

Evaluation decodes each query's start and end flags (logit > 0) to flat spans (each
start to the nearest end, the official flat decoding; with ``answerable:
train_infer`` a query the answerability head calls unanswerable predicts none),
keeps the non-overlapping ones across types by score (start + end logit), turns them
back into IOB2 tags and scores those with ``trainables.metrics.ner_metrics`` (the
``conlleval`` rules), as the tagger is scored. Entities in words cut off by
``max_seq_length`` count as missed.
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
    TypedSpan,
    entity_types,
    flat_spans,
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
        """One window's tensors' lists: targets at the words' first sub-tokens."""
        positions = _word_positions(encoded.word_ids(index), encoded.sequence_ids(index))
        length = len(encoded["input_ids"][index])
        spans = [(positions[s], positions[e]) for s, e in question.spans if e < len(positions)]
        feature: Feature = {key: values[index] for key, values in encoded.items()}
        feature["word_mask"] = _flags(length, positions)
        feature["start_labels"] = _flags(length, [s for s, _ in spans])
        feature["end_labels"] = _flags(length, [e for _, e in spans])
        feature["spans"] = spans
        feature["answerable"] = int(bool(spans))
        if not training:
            feature["example_index"] = question.sentence
            feature["type_index"] = self.types.index(question.entity_type)
            feature["word_positions"] = positions
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
        for batch in batches:
            outputs: MrcNerOutput = predict(batch)
            for row in range(outputs.start_logits.shape[0]):
                found[int(batch["example_index"][row])] += self.decode(outputs, batch, row)
        predicted = [
            to_tags(len(example.tags), resolve_overlaps(spans))
            for example, spans in zip(examples, found, strict=True)
        ]
        gold = [list(example.tags) for example in examples]
        return {
            **ner_metrics(predicted, gold),
            # What the reader tags, against the no-skill rule on the same words
            # (search_spaces.reports.tables.degenerate_reason).
            **tagging_baselines(gold, by_spans=True),
            "top_prediction_share": top_prediction_share(t for tags in predicted for t in tags),
        }

    def decode(
        self, outputs: MrcNerOutput, batch: Batch, row: int
    ) -> list[tuple[float, TypedSpan]]:
        """One window's predicted spans (word indices) of its type, each with its score
        (start logit + end logit)."""
        answerable = outputs.answerable_logits
        inferred = self.settings.answerable == "train_infer" and answerable is not None
        if inferred and float(answerable[row]) <= 0:  # type: ignore[index]
            return []  # the head calls the query unanswerable
        positions = batch["word_positions"][row]
        starts = outputs.start_logits[row, positions].float()  # (words,)
        ends = outputs.end_logits[row, positions].float()
        kind = self.types[int(batch["type_index"][row])]
        return [
            (float(starts[s] + ends[e]), (kind, s, e))
            for s, e in flat_spans((starts > 0).tolist(), (ends > 0).tolist())
        ]


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


def _flags(length: int, positions: Sequence[int]) -> list[int]:
    flags = [0] * length
    for position in positions:
        flags[position] = 1
    return flags
