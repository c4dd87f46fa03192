"""What every task kind provides to the training loop.

A task turns examples into features (token ids plus what evaluation needs),
pads a batch of features dynamically, computes the loss from the model's
outputs, and evaluates a model on a data set with the task's metrics.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from search_spaces.datasets import TaskKind
from trainables.modeling import build_model

Feature = dict[str, Any]
Batch = dict[str, Any]
# Padding value per field; fields not listed here are carried through as lists.
_PAD = {"input_ids": None, "attention_mask": 0, "token_type_ids": 0, "labels": -100}


@dataclass(frozen=True)
class EncodeOptions:
    """How examples are tokenised (part of the tokenisation cache key)."""

    max_seq_length: int
    doc_stride: int = 128


class Task(abc.ABC):
    """One task kind: features, batches, loss and metrics."""

    kind: ClassVar[TaskKind]
    padded_fields: ClassVar[dict[str, int]] = {}

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def build_model(self, model: str, vocab_size: int | None = None) -> nn.Module:
        """The encoder ``model`` (``vocab_size``: for ``tiny-bert``) with this task's head."""
        return build_model(model, self.kind, self.num_labels, vocab_size)

    @abc.abstractmethod
    def encode(
        self,
        examples: Sequence[Any],
        tokenizer: PreTrainedTokenizerBase,
        options: EncodeOptions,
        training: bool,
    ) -> list[Feature]:
        """Tokenise ``examples``; ``training`` features carry targets only."""

    @abc.abstractmethod
    def loss(self, outputs: Any, batch: Batch, loss_fn: Callable[..., Tensor]) -> Tensor:
        """The loss of one batch from the model's outputs."""

    @abc.abstractmethod
    def class_counts(self, features: Sequence[Feature]) -> list[int]:
        """Per-class counts of the training targets (the weights of ``wce``)."""

    @abc.abstractmethod
    def evaluate(
        self,
        predict: Callable[[Batch], Any],
        batches: Sequence[Batch],
        examples: Sequence[Any],
    ) -> dict[str, float]:
        """The task's metrics (percent) of the model ``predict`` over ``batches``."""

    def collate(self, features: Sequence[Feature], pad_token_id: int) -> Batch:
        """Pad a batch to its longest sequence; other fields stay per-feature lists."""
        length = max(len(f["input_ids"]) for f in features)
        pads = {**_PAD, "input_ids": pad_token_id, **self.padded_fields}
        batch: Batch = {}
        for field in features[0]:
            values = [f[field] for f in features]
            if field in pads and isinstance(values[0], list):
                batch[field] = torch.tensor([v + [pads[field]] * (length - len(v)) for v in values])
            elif isinstance(values[0], int):
                batch[field] = torch.tensor(values)
            else:
                batch[field] = values
        return batch


def model_inputs(batch: Batch) -> dict[str, Tensor]:
    """The tensors a ``transformers`` encoder takes from a batch."""
    return {
        key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in batch
    }
