"""Same trial, same seed, same code: the same numbers in two separate processes.

Each process builds its own tiny-bert vocabulary (a home of its own, so no cache is
shared) under another ``PYTHONHASHSEED``; the vocabulary, the initialisation and the
data order must not depend on the process, or ``dicesweep run`` and the service
report different scores for the same spec (``docs/sweeps.md``, Reproducibility).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainables.tiny_vocab import SPECIAL_TOKENS, build_vocab

TRIAL = [
    *("--dataset", "ud_en_ewt_sample", "--loss", '{"name": "dsc", "alpha": 0.1}'),
    *("--epochs", "1", "--max-seq-length", "32", "--batch-size", "16"),
    *("--max-train-examples", "300", "--max-eval-examples", "100", "--seed", "3"),
]


def _trial(tmp_path: Path, name: str, hash_seed: str) -> dict[str, Any]:
    """One trial through ``python -m trainables.train`` in a fresh process and home."""
    env = {
        "DICESWEEP_HOME": str(tmp_path / name / "home"),
        "PYTHONHASHSEED": hash_seed,
        "PATH": "/usr/bin:/bin",
    }
    out = tmp_path / name / "out"
    result = subprocess.run(
        [sys.executable, "-m", "trainables.train", *TRIAL, "--output-dir", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    printed = result.stdout[result.stdout.index('{\n  "config"') :]
    metrics: dict[str, Any] = json.loads(printed)["metrics"]
    return metrics


def test_one_trial_gives_the_same_metrics_in_two_processes(tmp_path: Path) -> None:
    first = _trial(tmp_path, "first", "1")
    second = _trial(tmp_path, "second", "2")
    assert first["eval_f1"] > 0
    timed = {key for key in first if "seconds" in key}  # wall-clock: not a result
    assert timed == {"seconds"}
    # Exactly: every other metric, to the last bit.
    assert {k: v for k, v in first.items() if k not in timed} == {
        k: v for k, v in second.items() if k not in timed
    }


def test_the_vocabulary_depends_on_the_texts_only() -> None:
    texts = ["The cat sat .", "the dog sat !", "A cat , a dog ."]
    vocab = build_vocab(texts, 40)
    assert vocab == build_vocab(list(reversed(texts)), 40)
    assert vocab[: len(SPECIAL_TOKENS)] == list(SPECIAL_TOKENS)
    characters = sorted(set("".join(texts).replace(" ", "")))
    assert vocab[len(SPECIAL_TOKENS) : len(SPECIAL_TOKENS) + len(characters)] == characters
    # Then the most frequent words for half of the room left (cat, dog and sat twice,
    # ties alphabetically), then word starts and continuations.
    rest = vocab[len(SPECIAL_TOKENS) + 2 * len(characters) :]
    assert len(vocab) == 40 and rest[:3] == ["cat", "dog", "sat"]
    assert rest[3:] == ["##at", "##he", "##og", "ca"]
