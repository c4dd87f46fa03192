"""Token tagging: NER over IOB2 tags (span F1) and POS over UPOS tags (word F1), or
over character spans (``B-NN``/``I-NN``, CTB's joint segmentation and tagging: span F1).

A word's tag is predicted at its first sub-word token; the other sub-words are
ignored (-100) in the loss. Words cut off by ``max_seq_length`` are scored as
predicted ``O`` (NER) or as wrong (POS), so truncation never inflates a score.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from trainables.data import TaggedSentence
from trainables.losses import IGNORE_INDEX
from trainables.metrics import ner_metrics, pos_metrics, tagging_baselines, top_prediction_share
from trainables.tasks.base import Batch, EncodeOptions, Feature, Task

TRUNCATED = "<truncated>"  # a POS prediction for a cut-off word: never equal to a gold tag


class Tagging(Task):
    """Token classification: logits ``(B, L, C)`` against first-sub-word tags ``(B, L)``."""

    kind = "ner"

    def __init__(self, labels: Sequence[str], kind: str = "ner") -> None:
        super().__init__(labels)
        self.kind = kind  # type: ignore[misc]
        self.index = {tag: i for i, tag in enumerate(self.labels)}

    def encode(
        self,
        examples: Sequence[TaggedSentence],
        tokenizer: PreTrainedTokenizerBase,
        options: EncodeOptions,
        training: bool,
    ) -> list[Feature]:
        encoded = tokenizer(
            [list(e.tokens) for e in examples],
            is_split_into_words=True,
            truncation=True,
            max_length=options.max_seq_length,
        )
        features: list[Feature] = []
        for index, example in enumerate(examples):
            word_ids = encoded.word_ids(index)
            labels, first_tokens, previous = [], [], None
            for position, word in enumerate(word_ids):
                is_first = word is not None and word != previous
                tag = self.index.get(example.tags[word], IGNORE_INDEX) if is_first else None
                labels.append(IGNORE_INDEX if tag is None else tag)
                if is_first:
                    first_tokens.append(position)
                previous = word
            feature = {key: values[index] for key, values in encoded.items()}
            feature["labels"] = labels
            if not training:
                feature["example_index"] = index
                feature["first_tokens"] = first_tokens
            features.append(feature)
        return features

    def loss(self, outputs: Any, batch: Batch, loss_fn: Callable[..., Tensor]) -> Tensor:
        return loss_fn(outputs.logits, batch["labels"])  # (B, L, C), (B, L)

    def class_counts(self, features: Sequence[Feature]) -> list[int]:
        tags = torch.tensor([t for f in features for t in f["labels"] if t != IGNORE_INDEX])
        counts = torch.bincount(tags, minlength=self.num_labels)
        # A tag absent from a capped training sample still needs a finite wce weight.
        return counts.clamp_min(1).tolist()

    def evaluate(
        self,
        predict: Callable[[Batch], Any],
        batches: Sequence[Batch],
        examples: Sequence[TaggedSentence],
    ) -> dict[str, float]:
        by_spans = self.kind == "ner" or self.spans
        fallback = "O" if by_spans else TRUNCATED
        predicted: list[list[str]] = []
        gold: list[list[str]] = []
        for batch in batches:
            best = predict(batch).logits.argmax(-1).tolist()  # (B, L)
            for row, positions, index in zip(
                best, batch["first_tokens"], batch["example_index"], strict=True
            ):
                example = examples[index]
                tags = [self.labels[row[p]] for p in positions]
                predicted.append(tags + [fallback] * (len(example.tags) - len(tags)))
                gold.append(list(example.tags))
        return {
            **(ner_metrics if by_spans else pos_metrics)(predicted, gold),
            # What the model predicts, against the no-skill rule on the same words
            # (search_spaces.reports.tables.degenerate_reason).
            **tagging_baselines(gold, by_spans),
            "top_prediction_share": top_prediction_share(t for tags in predicted for t in tags),
        }

    @property
    def spans(self) -> bool:
        """POS tags given per character as spans (``B-NN``, ``I-NN``: CTB's joint
        segmentation and tagging) are scored as spans, a word counting when its
        boundaries and tag are right, as the paper scores Chinese POS."""
        return bool(self.labels) and all(tag[:2] in ("B-", "I-") for tag in self.labels)
