"""Generated data sets for fast training tests."""

from __future__ import annotations

import random
from pathlib import Path

# A generated CoNLL-2003 look-alike: filler words around one person and one place.
# A tiny BERT learns it in a few dozen steps, so training tests stay fast.
PEOPLE = ["Alice Smith", "Bob Jones", "Carla Diaz", "Dmitri Ivanov", "Emma Stone"]
PLACES = ["Paris", "Berlin", "Lagos", "Lima", "Osaka", "Quebec"]
WORDS = "the a of to in said on that was for with visited met from today after".split()  # noqa: SIM905


def toy_sentence(rng: random.Random) -> list[tuple[str, str]]:
    """``(word, tag)`` pairs: ``O`` fillers, a ``B-PER I-PER`` name, a ``B-LOC`` place."""
    rows = [(rng.choice(WORDS), "O") for _ in range(rng.randint(2, 5))]
    person = rng.choice(PEOPLE).split()
    rows += [(person[0], "B-PER"), (person[1], "I-PER")]
    rows += [(rng.choice(WORDS), "O") for _ in range(rng.randint(1, 3))]
    rows.append((rng.choice(PLACES), "B-LOC"))
    return [*rows, (".", "O")]


def write_conll(path: Path, n: int, seed: int) -> None:
    """``n`` toy sentences in the CoNLL-2003 format (``token POS chunk NER``)."""
    rng = random.Random(seed)
    blocks = ["-DOCSTART- -X- -X- O\n"]
    for _ in range(n):
        blocks.append("".join(f"{w} NN O {t}\n" for w, t in toy_sentence(rng)))
    path.write_text("\n".join(blocks))


def make_toy_datasets(root: Path, n_train: int = 240) -> Path:
    """A data-sets folder whose ``conll2003`` is the toy set; returns the folder."""
    folder = root / "conll2003"
    folder.mkdir(parents=True)
    write_conll(folder / "train.txt", n_train, seed=1)
    write_conll(folder / "valid.txt", 60, seed=2)
    write_conll(folder / "test.txt", 60, seed=3)
    return root
