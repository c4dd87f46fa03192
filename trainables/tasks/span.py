"""Span extraction (machine reading comprehension, SQuAD v1.1 and v2 JSON).

Long contexts are split into windows of ``max_seq_length`` tokens, each sharing
``doc_stride`` tokens (at most half a window) with the next: a fast tokenizer's
``stride``, as Hugging Face's ``run_qa.py`` reads ``doc_stride``. Start and end are
two problems over positions, restricted to the window's context tokens and ``[CLS]``
(the target of a window that does not hold the answer). With ``ce`` each is a softmax
over those positions (the usual baseline); every other loss treats each position as a
binary problem, with the context mask. Answers are scored with the official SQuAD normalisation.

With ``no_answer`` (SQuAD v2: some questions have no answer in their paragraph) an
unanswerable question is trained to point at ``[CLS]`` in every window, and a
question is answered with nothing when its lowest ``[CLS]`` score over its windows
beats its best span, as the official v2 baselines decode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from trainables.data import QAExample
from trainables.losses import CELoss
from trainables.metrics import normalize_answer, span_baselines, squad_metrics, top_prediction_share
from trainables.tasks.base import Batch, EncodeOptions, Feature, Task

MAX_ANSWER_TOKENS = 30
N_BEST = 20


class SpanExtraction(Task):
    """Start/end logits ``(B, L)`` over a window; exact match and F1 of the best span."""

    kind = "mrc"
    padded_fields: ClassVar[dict[str, int]] = {"context_mask": 0}

    def __init__(self, labels: Sequence[str] = (), no_answer: bool = False) -> None:
        super().__init__(labels)
        self.no_answer = no_answer

    def encode(
        self,
        examples: Sequence[QAExample],
        tokenizer: PreTrainedTokenizerBase,
        options: EncodeOptions,
        training: bool,
    ) -> list[Feature]:
        encoded = tokenizer(
            [e.question for e in examples],
            [e.context for e in examples],
            truncation="only_second",
            max_length=options.max_seq_length,
            stride=min(options.doc_stride, options.max_seq_length // 2),
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        features: list[Feature] = []
        for window, example_index in enumerate(encoded["overflow_to_sample_mapping"]):
            sequence_ids = encoded.sequence_ids(window)
            offsets = encoded["offset_mapping"][window]
            in_context = [s == 1 for s in sequence_ids]
            feature: Feature = {
                key: encoded[key][window]
                for key in ("input_ids", "attention_mask", "token_type_ids")
                if key in encoded
            }
            # [CLS] (position 0) stays selectable: the target when the answer is elsewhere.
            feature["context_mask"] = [int(c or i == 0) for i, c in enumerate(in_context)]
            start, end = _answer_positions(examples[example_index], offsets, in_context)
            feature["start_positions"], feature["end_positions"] = start, end
            if not training:
                feature["example_index"] = example_index
                feature["offsets"] = [
                    o if c else None for o, c in zip(offsets, in_context, strict=True)
                ]
            features.append(feature)
        return features

    def loss(self, outputs: Any, batch: Batch, loss_fn: Callable[..., Tensor]) -> Tensor:
        mask = batch["context_mask"].bool()  # (B, L)
        total = outputs.start_logits.new_zeros((), dtype=torch.float32)
        for logits, positions in (
            (outputs.start_logits, batch["start_positions"]),
            (outputs.end_logits, batch["end_positions"]),
        ):
            if isinstance(loss_fn, CELoss):
                # Softmax over the window's selectable positions: (B, L) against (B,).
                masked = logits.float().masked_fill(~mask, torch.finfo(torch.float32).min)
                total = total + loss_fn(masked, positions)
            else:
                onehot = torch.zeros_like(logits, dtype=torch.float32)
                onehot[torch.arange(len(positions)), positions] = 1.0
                total = total + loss_fn(logits, onehot, mask)
        return total / 2

    def class_counts(self, features: Sequence[Feature]) -> list[int]:
        # Per position of a window: negatives are the selectable non-answer positions.
        selectable = sum(sum(f["context_mask"]) for f in features)
        return [max(selectable - len(features), 1), max(len(features), 1)]

    def evaluate(
        self,
        predict: Callable[[Batch], Any],
        batches: Sequence[Batch],
        examples: Sequence[QAExample],
    ) -> dict[str, float]:
        best: dict[int, tuple[float, str]] = {}
        null: dict[int, float] = {}  # the lowest [CLS] score of each question's windows
        for batch in batches:
            outputs = predict(batch)
            starts, ends = outputs.start_logits.float(), outputs.end_logits.float()
            for row in range(starts.shape[0]):
                index = batch["example_index"][row]
                score = float(starts[row, 0] + ends[row, 0])
                null[index] = min(null.get(index, score), score)
                candidate = _best_span(
                    starts[row], ends[row], batch["offsets"][row], examples[index].context
                )
                if candidate and (index not in best or candidate[0] > best[index][0]):
                    best[index] = candidate
        predictions = {examples[i].qid: text for i, (_, text) in best.items()}
        if self.no_answer:
            for index, score in null.items():
                if index not in best or score > best[index][0]:
                    predictions[examples[index].qid] = ""
        return {
            **squad_metrics(predictions, examples),
            # What the reader answers (a question without a span answers nothing), against
            # the no-skill rule on the same questions
            # (search_spaces.reports.tables.degenerate_reason).
            **span_baselines(examples, self.no_answer),
            "top_prediction_share": top_prediction_share(
                normalize_answer(predictions.get(e.qid, "")) for e in examples
            ),
        }


def _answer_positions(
    example: QAExample, offsets: Sequence[tuple[int, int]], in_context: Sequence[bool]
) -> tuple[int, int]:
    """Token positions of the first gold answer in this window, or ``(0, 0)`` ([CLS])."""
    if not example.answers:
        return 0, 0
    answer = example.answers[0]
    start_char, end_char = answer.start, answer.start + len(answer.text)
    context = [i for i, c in enumerate(in_context) if c]
    if offsets[context[0]][0] > start_char or offsets[context[-1]][1] < end_char:
        return 0, 0
    start = next(i for i in context if offsets[i][1] > start_char)
    end = next(i for i in reversed(context) if offsets[i][0] < end_char)
    return start, end


def _best_span(
    start_logits: Tensor, end_logits: Tensor, offsets: Sequence[Any], context: str
) -> tuple[float, str] | None:
    """The highest-scoring valid span (start <= end, <= 30 tokens, inside the context)."""
    starts = torch.topk(start_logits, min(N_BEST, start_logits.numel())).indices.tolist()
    ends = torch.topk(end_logits, min(N_BEST, end_logits.numel())).indices.tolist()
    best: tuple[float, str] | None = None
    for s in starts:
        for e in ends:
            if s >= len(offsets) or e >= len(offsets) or offsets[s] is None or offsets[e] is None:
                continue
            if e < s or e - s + 1 > MAX_ANSWER_TOKENS:
                continue
            score = float(start_logits[s] + end_logits[e])
            if best is None or score > best[0]:
                best = (score, context[offsets[s][0] : offsets[e][1]])
    return best
