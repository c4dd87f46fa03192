"""The BERT-MRC model of NER as reading comprehension: an encoder over (query,
sentence) and binary heads per position, as the official ``models/bert_query_ner.py``.

Each head is a two-layer perceptron (``hidden -> hidden -> 1``, ReLU between: the
official ``MultiLayerPerceptronClassifier`` with ``--activate_func relu``) over the
encoder's hidden states after dropout. The span-match head scores the pair (i, j) from
the concatenation ``[h_i; h_j]``; its first layer is split into the halves that see
``h_i`` and ``h_j``, so the ``(B, L, L, 2H)`` concatenation is never built (the same
function, half the memory). The answerability head reads the pooled ``[CLS]``. The
heads start from PyTorch's default initialisation; ``training.head_init: encoder``
gives them the encoder's ``_init_weights``, as the official ``init_weights()`` does
(``trainables.modeling.init_heads_as_encoder``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from transformers import PreTrainedModel


@dataclass
class MrcNerOutput:
    """Logits of one batch of (query, sentence) windows."""

    start_logits: Tensor  # (B, L)
    end_logits: Tensor  # (B, L)
    span_logits: Tensor | None  # (B, L, L): start at i, end at j; None without the head
    answerable_logits: Tensor | None  # (B,); None without the head


def _perceptron(width: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, 1))


class QueryNer(nn.Module):
    """Start, end, span-match and answerability heads over ``encoder``."""

    def __init__(self, encoder: PreTrainedModel, span_head: bool, answerable: bool) -> None:
        super().__init__()
        self.encoder = encoder
        hidden = int(encoder.config.hidden_size)
        # BERT-like configs name it hidden_dropout_prob; BERT's own value elsewhere
        self.dropout = nn.Dropout(float(getattr(encoder.config, "hidden_dropout_prob", 0.1)))
        self.start = _perceptron(hidden, hidden)
        self.end = _perceptron(hidden, hidden)
        self.span = _perceptron(2 * hidden, hidden) if span_head else None
        self.answerable = _perceptron(hidden, hidden) if answerable else None

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> MrcNerOutput:
        encoded = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        )
        states = self.dropout(encoded.last_hidden_state)  # (B, L, H)
        return MrcNerOutput(
            start_logits=self.start(states).squeeze(-1),
            end_logits=self.end(states).squeeze(-1),
            span_logits=None if self.span is None else self._span_logits(states),
            answerable_logits=None
            if self.answerable is None
            else self.answerable(_pooled(encoded, states)).squeeze(-1),
        )

    def _span_logits(self, states: Tensor) -> Tensor:
        """``(B, L, L)``: the perceptron of ``[h_i; h_j]`` for every pair (i, j)."""
        assert self.span is not None
        first, activation, last = self.span
        hidden = states.shape[-1]
        weight = first.weight  # (H, 2H): the columns for h_i, then those for h_j
        at_start = states @ weight[:, :hidden].T + first.bias  # (B, L, H)
        at_end = states @ weight[:, hidden:].T  # (B, L, H)
        pairs = activation(at_start.unsqueeze(2) + at_end.unsqueeze(1))  # (B, L, L, H)
        logits: Tensor = last(pairs).squeeze(-1)
        return logits


def _pooled(encoded: object, states: Tensor) -> Tensor:
    """The encoder's pooled ``[CLS]`` (BERT's pooler), or the ``[CLS]`` state where the
    encoder has no pooler."""
    pooled = getattr(encoded, "pooler_output", None)
    return pooled if isinstance(pooled, torch.Tensor) else states[:, 0]
