"""Sentence-pair classification (paraphrase identification, ``pi``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from trainables.data import PairExample
from trainables.metrics import pi_baselines, pi_metrics, top_prediction_share
from trainables.tasks.base import Batch, EncodeOptions, Feature, Task


class PairClassification(Task):
    """``[CLS] a [SEP] b [SEP]`` -> class logits ``(B, C)``; F1 of the positive class
    (the spec's ``task.positive_label``, else the training file's minority class)."""

    kind = "pi"

    def __init__(self, labels: Sequence[str], positive: int) -> None:
        super().__init__(labels)
        self.positive = positive

    def encode(
        self,
        examples: Sequence[PairExample],
        tokenizer: PreTrainedTokenizerBase,
        options: EncodeOptions,
        training: bool,
    ) -> list[Feature]:
        encoded = tokenizer(
            [e.text_a for e in examples],
            [e.text_b for e in examples],
            truncation=True,
            max_length=options.max_seq_length,
        )
        features: list[Feature] = []
        for index, example in enumerate(examples):
            feature = {key: values[index] for key, values in encoded.items()}
            feature["labels"] = example.label
            features.append(feature)
        return features

    def loss(self, outputs: Any, batch: Batch, loss_fn: Callable[..., Tensor]) -> Tensor:
        return loss_fn(outputs.logits, batch["labels"])  # (B, C), (B,)

    def class_counts(self, features: Sequence[Feature]) -> list[int]:
        counts = torch.bincount(
            torch.tensor([f["labels"] for f in features]), minlength=self.num_labels
        )
        return counts.tolist()

    def evaluate(
        self,
        predict: Callable[[Batch], Any],
        batches: Sequence[Batch],
        examples: Sequence[PairExample],
    ) -> dict[str, float]:
        predicted: list[int] = []
        gold: list[int] = []
        for batch in batches:
            predicted += predict(batch).logits.argmax(-1).tolist()
            gold += batch["labels"].tolist()
        return {
            **pi_metrics(predicted, gold, positive=self.positive),
            # What the model predicts, against the no-skill rules on the same pairs
            # (search_spaces.reports.tables.degenerate_reason).
            **pi_baselines(gold, self.positive),
            "top_prediction_share": top_prediction_share(predicted),
            "positive_prediction_share": 100.0 * predicted.count(self.positive) / len(predicted),
        }
