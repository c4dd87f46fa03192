"""The storage a sweep leaves in DICESWEEP_STORAGE_PATH, measured on tiny-bert and
scaled to BERT-base by parameter count (docs/deploy.md, "Storage").

Runs the ``smoke`` preset (2 tiny-bert trials) with the driver, measures each trial's
folder (its one kept checkpoint and Tune's result files), counts the parameters in
the checkpoint and in BERT-base (built on the meta device: nothing downloaded), and
writes the arithmetic for the ``table8`` preset.

    python benchmarks/bench_storage.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from docs_table import machine_description, write_section
from search_spaces.resolve import resolve_spec, trial_count
from trainables.loop import CHECKPOINT_FILE

DOCS = Path(__file__).resolve().parents[1] / "docs" / "deploy.md"

MB = 1e6


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def bert_base_parameters() -> int:
    """BERT-base (``BertConfig()``'s defaults) with a 2-way classifier, on the meta device."""
    from transformers import BertConfig, BertForSequenceClassification

    with torch.device("meta"):
        model = BertForSequenceClassification(BertConfig(num_labels=2))
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dsw-", dir="/tmp") as home:
        env = {**os.environ, "DICESWEEP_HOME": home, "OMP_NUM_THREADS": "1"}
        command = [sys.executable, "-m", "trainables.driver", "--preset", "smoke"]
        subprocess.run(
            [*command, "--sweep-id", "storage"], env=env, check=True, capture_output=True
        )
        trials = sorted(p for p in (Path(home) / "ray_results" / "storage").iterdir() if p.is_dir())
        rows = []
        for trial in trials:
            (checkpoint,) = trial.rglob(CHECKPOINT_FILE)
            state = torch.load(checkpoint, map_location="cpu", weights_only=False)
            params = sum(t.numel() for t in state["model"].values())
            rows.append(
                (
                    trial.name[:24],
                    folder_bytes(trial),
                    checkpoint.stat().st_size,
                    params,
                    sorted(state),
                )
            )
    tiny_params = rows[0][3]
    checkpoint_bytes = max(r[2] for r in rows)
    other_bytes = max(r[1] - r[2] for r in rows)
    base_params = bert_base_parameters()
    per_param = checkpoint_bytes / tiny_params
    base_trial = base_params * per_param + other_bytes
    running = base_params * per_param * 3  # model + AdamW's two moments, while training
    table8 = trial_count(resolve_spec({"extends": "table8"}))
    lines = [
        f"Measured on {machine_description()} with `python benchmarks/bench_storage.py` "
        "(the `smoke` preset, tiny-bert, 2 trials).",
        "",
        "| trial | folder (bytes) | checkpoint (bytes) | parameters | checkpoint holds |",
        "|---|---:|---:|---:|---|",
        *(f"| {n} | {f:,} | {c:,} | {p:,} | {', '.join(k)} |" for n, f, c, p, k in rows),
        "",
        "Scaled to BERT-base by parameter count:",
        "",
        f"- bytes per parameter in a finished trial's checkpoint: {checkpoint_bytes:,} / "
        f"{tiny_params:,} = {per_param:.3f} (float32 weights, no optimiser state);",
        f"- BERT-base with a 2-way head: {base_params:,} parameters, so a finished trial keeps "
        f"{base_params:,} × {per_param:.3f} + {other_bytes:,} (Tune's result files) "
        f"= **{base_trial / MB:,.0f} MB**;",
        f"- `table8` ({table8} trials) keeps {table8} × {base_trial / MB:,.0f} MB = "
        f"**{table8 * base_trial / 1e9:,.1f} GB** when it ends;",
        f"- a trial still training keeps its optimiser state too (about 3 × the weights, "
        f"{running / MB:,.0f} MB), and while Tune writes the next checkpoint before it drops "
        f"the last, up to twice that: add {2 * running / 1e9:,.1f} GB per trial running at once.",
        "",
        "Before a finished trial dropped its optimiser state it kept about 3 × as much: "
        f"{table8 * running / 1e9:,.1f} GB for `table8`.",
    ]
    body = "\n".join(lines)
    print(body)
    write_section(DOCS, "Storage a sweep takes", body)


if __name__ == "__main__":
    main()
