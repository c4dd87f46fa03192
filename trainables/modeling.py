"""Tokenizers and encoders: any ``transformers`` model by hub id or local path.

The special model name ``tiny-bert`` builds a 2-layer, 64-wide BERT initialised
at random, with a vocabulary of the training texts (``tiny_vocab``), so a
sweep runs offline in seconds (tests and the ``smoke`` preset).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from filelock import FileLock
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    BertConfig,
    BertTokenizer,
    PreTrainedModel,
)
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from search_spaces.datasets import TaskKind
from trainables.tiny_vocab import build_vocab, write_vocab

TINY_BERT = "tiny-bert"
TINY_VOCAB_SIZE = 4000
_TINY_CONFIG = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 512,
}
_HEADS = {
    "pi": AutoModelForSequenceClassification,
    "ner": AutoModelForTokenClassification,
    "pos": AutoModelForTokenClassification,
    "mrc": AutoModelForQuestionAnswering,
}


def hidden_size(model: str) -> int:
    """The hidden size of ``model`` (tiny-bert's own, or its Hugging Face config's).

    Raises:
        OSError: the model's config cannot be read (not downloaded, no such folder).
    """
    if model == TINY_BERT:
        return int(_TINY_CONFIG["hidden_size"])
    return int(AutoConfig.from_pretrained(model).hidden_size)


def tiny_tokenizer(texts: Iterable[str], cache_dir: Path, key: str) -> PreTrainedTokenizerBase:
    """A cased WordPiece tokenizer whose vocabulary comes from ``texts``
    (``tiny_vocab.build_vocab``: the same in every process), saved once under
    ``cache_dir/tokenizers/words-<key>``.

    Every trial of a sweep asks for the same ``key`` (the data set and variant), so
    they share one vocabulary; a file lock keeps concurrent trials from building it
    twice.
    """
    folder = cache_dir / "tokenizers" / f"words-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if not (folder / "tokenizer_config.json").exists():
            vocab = write_vocab(build_vocab(texts, TINY_VOCAB_SIZE), folder)
            BertTokenizer(vocab=str(vocab), do_lower_case=False).save_pretrained(folder)
    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(folder)
    return tokenizer


def load_tokenizer(model: str) -> PreTrainedTokenizerBase:
    """The fast tokenizer of a hub id or local path (word offsets need a fast one).

    Raises:
        ValueError: the model has no fast tokenizer.
    """
    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(model)
    if not tokenizer.is_fast:
        raise ValueError(f"model {model!r} has no fast tokenizer; word alignment needs one")
    return tokenizer


def build_model(
    model: str, kind: TaskKind, num_labels: int, vocab_size: int | None = None
) -> PreTrainedModel:
    """The encoder with the head for ``kind``: a new head on pretrained weights, or a tiny BERT.

    ``num_labels`` is the number of classes (tags for tagging; ignored for ``mrc``);
    ``vocab_size`` is needed for ``tiny-bert`` only.
    """
    head = _HEADS[kind]
    if kind == "mrc":
        num_labels = 2  # the QA head's two outputs per token: start and end
    if model == TINY_BERT:
        if vocab_size is None:
            raise ValueError("tiny-bert needs the tokenizer's vocab_size")
        config = BertConfig(vocab_size=vocab_size, num_labels=num_labels, **_TINY_CONFIG)
        built: PreTrainedModel = head.from_config(config)
        return built
    config = AutoConfig.from_pretrained(model, num_labels=num_labels)
    loaded: PreTrainedModel = head.from_pretrained(model, config=config)
    return loaded


def build_encoder(
    model: str, vocab_size: int | None = None, dropout: float | None = None
) -> PreTrainedModel:
    """The bare encoder (hidden states, no head) of a hub id or local path, or a tiny BERT
    (``vocab_size`` needed for ``tiny-bert`` only), for task heads of our own;
    ``dropout`` replaces its ``hidden_dropout_prob`` (None: the model's own)."""
    overrides = {} if dropout is None else {"hidden_dropout_prob": dropout}
    if model == TINY_BERT:
        if vocab_size is None:
            raise ValueError("tiny-bert needs the tokenizer's vocab_size")
        config = BertConfig(vocab_size=vocab_size, **_TINY_CONFIG, **overrides)
        built: PreTrainedModel = AutoModel.from_config(config)
        return built
    loaded: PreTrainedModel = AutoModel.from_pretrained(model, **overrides)
    return loaded


def init_heads_as_encoder(model: nn.Module) -> None:
    """Initialise every part of ``model`` outside its ``encoder`` attribute (a task head
    of our own, ``trainables.tasks.mrc_ner_model``) with the encoder's own
    ``_init_weights`` (BERT: linear weights N(0, initializer_range), biases 0), as a
    Hugging Face model initialises its heads. A model without such an encoder (a Hugging
    Face model with its head: already initialised so) is left as it is."""
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, PreTrainedModel):
        return
    for child in model.children():
        if child is not encoder:
            child.apply(encoder._init_weights)


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """A short hash of the vocabulary, so cached encodings never mix tokenizers."""
    vocab = sorted(tokenizer.get_vocab().items())
    return hashlib.sha256(repr((type(tokenizer).__name__, vocab)).encode()).hexdigest()[:16]
