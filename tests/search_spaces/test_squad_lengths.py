"""scripts/squad_lengths.py counts a SQuAD file's long questions and the questions that
need a second window, in a real WordPiece tokenizer's tokens."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import BertTokenizerFast

from tests.scripts import script

squad_lengths = script("squad_lengths")


def squad_file(path: Path, paragraphs: list[tuple[str, list[str]]]) -> Path:
    data = {
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {"context": context, "qas": [{"id": q, "question": q} for q in questions]}
                    for context, questions in paragraphs
                ],
            }
        ]
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_long_questions_and_second_windows_are_counted(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]))
    tokenizer = tmp_path / "tokenizer"
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(tokenizer)
    path = squad_file(
        tmp_path / "squad.json",
        [
            (" ".join(["b"] * 20), [" ".join(["a"] * 65), " ".join(["a"] * 64)]),  # 65 cut, 64 kept
            (" ".join(["c"] * 40), ["a a"]),  # 2 + 40 + 3 = 45 tokens: two windows of 44
        ],
    )
    counts = squad_lengths.lengths(path, str(tokenizer), max_query=64, max_length=44)
    # 65 + 20 + 3 and 64 + 20 + 3 exceed 44 too.
    assert counts == {"questions": 3, "longer_questions": 1, "more_than_one_window": 3}
    counts = squad_lengths.lengths(path, str(tokenizer), max_query=64, max_length=45)
    assert counts["more_than_one_window"] == 2  # 45 fits
