"""Label-preserving augmentation of sentence pairs by swapping mentions.

The paper (section 4.4) built its augmented QQP variants by replacing entity
mentions with other entities. Without an entity linker, mentions come from the
training set itself:

- a *name* is a run of proper-noun-like words: capitalised words that, away from
  the start of a sentence, are written capitalised more often than their
  lower-case form appears (``Mike Butcher``, ``U.S``, ``PCCW``; not ``The``);
  its shape is ``("name", number of words)``;
- a *number* is a token of digits, possibly with ``.`` or ``,`` inside (``1998``, ``2.5``);
  its shape is ``("number", digits as 9s)``, e.g. ``"9.9"``.

A copy of a pair replaces one mention that occurs in *both* sentences by another
mention of the same shape, everywhere in both sentences, so a paraphrase stays a
paraphrase and a non-paraphrase stays one. A pair with no such mention cannot be
augmented: a copy with its sentences in swapped order would be the same pair to
a symmetric task, not a new one. ``trainables.data.variants`` keeps only copies
that are new to the whole set.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from trainables.data.examples import PairExample

Shape = tuple[str, str]

_TOKEN = re.compile(r"\w+(?:[.,'&-]\w+)*|[^\w\s]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Tokens after which the next word starts a sentence (or a quotation), where
# capitalisation says nothing about being a name.
_SENTENCE_OPENERS = frozenset({".", "?", "!", ":", '"', "``"})


def _word_case_counts(texts: Iterable[str]) -> tuple[Counter[str], Counter[str]]:
    """Counts of capitalised words away from sentence starts, and of lower-case words."""
    capitalised: Counter[str] = Counter()
    lowercase: Counter[str] = Counter()
    for text in texts:
        previous = "."  # the text's first word starts a sentence
        for token in _TOKEN.findall(text):
            if token.islower():
                lowercase[token] += 1
            elif token[0].isupper() and previous not in _SENTENCE_OPENERS:
                capitalised[token] += 1
            previous = token
    return capitalised, lowercase


@dataclass(frozen=True)
class MentionPool:
    """Names and numbers of a training set, grouped by shape."""

    name_words: frozenset[str]
    by_shape: dict[Shape, tuple[str, ...]]

    @classmethod
    def from_examples(cls, examples: Sequence[PairExample]) -> MentionPool:
        """Collect the proper-noun-like words, then every mention, from both sentences."""
        # Each distinct sentence once: QQP repeats many questions across pairs.
        texts = dict.fromkeys(text for e in examples for text in (e.text_a, e.text_b))
        capitalised, lowercase = _word_case_counts(texts)
        # Single letters ("I", "A") are capitalised by rule, not because they are names.
        name_words = frozenset(
            word
            for word, count in capitalised.items()
            if len(word) > 1 and count > lowercase[word.lower()]
        )
        pool = cls(name_words, {})
        found: dict[Shape, set[str]] = {}
        for text in texts:
            for shape, mention in pool.mentions(text):
                found.setdefault(shape, set()).add(mention)
        # Sorted so that a seed picks the same replacement on every machine.
        return cls(name_words, {shape: tuple(sorted(items)) for shape, items in found.items()})

    def mentions(self, text: str) -> list[tuple[Shape, str]]:
        """The ``(shape, mention)`` pairs of ``text``, in order of appearance."""
        found: list[tuple[Shape, str]] = []
        run_start = run_end = run_length = 0
        for match in _TOKEN.finditer(text):
            token = match.group()
            if token in self.name_words:
                run_start = run_start if run_length else match.start()
                run_end, run_length = match.end(), run_length + 1
                continue
            if run_length:
                found.append((("name", str(run_length)), text[run_start:run_end]))
                run_length = 0
            if token[0].isdigit() and _NUMBER.fullmatch(token):
                found.append((("number", re.sub(r"\d", "9", token)), token))
        if run_length:
            found.append((("name", str(run_length)), text[run_start:run_end]))
        return found

    def swappable(self, example: PairExample) -> list[tuple[Shape, str]]:
        """Mentions of ``text_a`` that also occur in ``text_b`` and have an alternative."""
        candidates = []
        for shape, mention in dict.fromkeys(self.mentions(example.text_a)):
            alternatives = self.by_shape.get(shape, ())
            # The substring test first: it is cheap and rules most mentions out.
            in_b = mention in example.text_b and _whole(mention).search(example.text_b) is not None
            if in_b and any(other != mention for other in alternatives):
                candidates.append((shape, mention))
        return candidates


def _whole(mention: str) -> re.Pattern[str]:
    """A pattern for ``mention`` as whole words (not inside a longer word)."""
    return re.compile(rf"(?<!\w){re.escape(mention)}(?!\w)")


def can_augment(example: PairExample, pool: MentionPool) -> bool:
    """Whether ``augment`` can make a copy of ``example`` that differs from it."""
    return bool(pool.swappable(example))


def augment(example: PairExample, pool: MentionPool, rng: random.Random, guid: str) -> PairExample:
    """A label-preserving copy of ``example`` that differs from it, named ``guid``.

    Raises:
        ValueError: ``example`` cannot be augmented (see ``can_augment``).
    """
    candidates = pool.swappable(example)
    if candidates:
        shape, mention = rng.choice(candidates)
        replacement = rng.choice([other for other in pool.by_shape[shape] if other != mention])
        pattern = _whole(mention)
        # A function as replacement: backslashes in the new mention stay literal.
        text_a = pattern.sub(lambda _: replacement, example.text_a)
        text_b = pattern.sub(lambda _: replacement, example.text_b)
        return replace(example, guid=guid, text_a=text_a, text_b=text_b)
    raise ValueError(
        f"example {example.guid!r} cannot be augmented: its sentences share no name or "
        "number that has an alternative of the same shape"
    )
