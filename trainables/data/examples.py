"""The example types every reader returns, one per task kind.

Immutable records: a reader builds them once, the variants and the tokenisation
read them. Sequence fields are tuples so that an example cannot be changed in
place; constructors accept any sequence (a list from a reader or a hub record)
and store a tuple.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PairExample:
    """A sentence pair with a class index (paraphrase identification: 1 = paraphrase)."""

    guid: str
    text_a: str
    text_b: str
    label: int


@dataclass(frozen=True)
class TaggedSentence:
    """A pre-tokenised sentence with one tag per token (IOB2 NER tags or UPOS tags).

    Raises:
        ValueError: ``tokens`` and ``tags`` differ in length.
    """

    tokens: tuple[str, ...]
    tags: tuple[str, ...]

    def __post_init__(self) -> None:
        # Frozen: object.__setattr__ is the one way to store the tuple copies.
        object.__setattr__(self, "tokens", tuple(self.tokens))
        object.__setattr__(self, "tags", tuple(self.tags))
        if len(self.tokens) != len(self.tags):
            raise ValueError(
                f"TaggedSentence: {len(self.tokens)} tokens but {len(self.tags)} tags; "
                "every token needs exactly one tag"
            )


@dataclass(frozen=True)
class Answer:
    """A gold answer: its text and its character offset in the context."""

    text: str
    start: int


@dataclass(frozen=True)
class QAExample:
    """A SQuAD-style question over a context paragraph, with its gold answers.

    ``title`` names the article the paragraph comes from (the unit of the
    by-article train/eval split).
    """

    qid: str
    title: str
    context: str
    question: str
    answers: tuple[Answer, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", tuple(self.answers))


Example = PairExample | TaggedSentence | QAExample
