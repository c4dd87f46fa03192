"""tiny-bert's vocabulary, built the same way in every process.

The ``tokenizers`` WordPiece trainer is not deterministic across processes: its
counts live in Rust hash maps seeded per process, so ties between merges fall
differently and the same texts give another vocabulary (another token set, in
another order) in each process. tiny-bert's embeddings are initialised by row, so
another vocabulary is another model, and the same trial would score otherwise in
another process. This vocabulary depends on the texts only: the special tokens,
every character alone and as a ``##`` continuation, the most frequent whole words
for half of the rest, then the most frequent word starts (2-5 characters) and ``##``
continuations (2-4 characters) (ties in alphabetical order throughout). WordPiece
splits a word outside it into its longest known start and continuations, so a word
seen once costs a few tokens, not one per character.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def word_counts(texts: Iterable[str]) -> Counter[str]:
    """How often each word of ``texts`` occurs, split as BERT's pre-tokenizer splits
    them (white space, then every punctuation mark alone), case kept."""
    from tokenizers.pre_tokenizers import BertPreTokenizer

    split = BertPreTokenizer().pre_tokenize_str
    return Counter(word for text in texts for word, _ in split(text))


def build_vocab(texts: Iterable[str], size: int) -> list[str]:
    """The vocabulary of ``texts``, at most ``size`` tokens unless its characters
    alone need more (every character must be spelled); the same list for the same
    texts in any process.

    Raises:
        ValueError: ``size`` smaller than the special tokens.
    """
    if size < len(SPECIAL_TOKENS):
        raise ValueError(f"size must be at least {len(SPECIAL_TOKENS)}, got {size}")
    counts = word_counts(texts)
    characters = sorted({character for word in counts for character in word})
    vocab = [*SPECIAL_TOKENS, *characters, *(f"##{character}" for character in characters)]
    room = max(size - len(vocab), 0)
    vocab += _most_frequent(counts, set(vocab), room // 2)
    return vocab + _most_frequent(_pieces(counts), set(vocab), size - len(vocab))


def _pieces(counts: Counter[str]) -> Counter[str]:
    """Each word's starts of 2-5 characters and ``##`` continuations of 2-4, counted
    as often as their words occur."""
    pieces: Counter[str] = Counter()
    for word, count in counts.items():
        for length in range(2, min(len(word), 6)):
            pieces[word[:length]] += count
        for start in range(1, len(word)):
            for length in range(2, min(len(word) - start, 4) + 1):
                pieces[f"##{word[start : start + length]}"] += count
    return pieces


def _most_frequent(counts: Counter[str], known: set[str], room: int) -> list[str]:
    """Up to ``room`` entries of ``counts`` not in ``known``, most frequent first, ties
    in alphabetical order."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [entry for entry, _ in ranked if entry not in known][: max(room, 0)]


def write_vocab(vocab: list[str], folder: Path) -> Path:
    """``folder/vocab.txt``, one token a line as BERT's tokenizers read it."""
    path = folder / "vocab.txt"
    path.write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
    return path
