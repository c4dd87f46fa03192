"""The GPU check's sweep: four trials of ``trainables.train.train`` sharing one GPU
(``gpus_per_trial: 0.25``) through a local Ray head, then the same four one at a time.

Each trial writes where Ray placed it (its node, ``ray.get_gpu_ids()``, its start and
end) beside the sweep's home; the check reads those back rather than trusting the
request: the four ran on one node and one GPU, and all four at once.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from gpu_check_report import Check

from search_spaces.presets import load_presets
from search_spaces.resolve import resolve_spec

PLACEMENTS = "placements"
GPU_SHARE = 0.25
TRIALS = 4
LOSSES = [{"name": "ce"}, {"name": "focal", "gamma": 2}, {"name": "dice"}, {"name": "dsc"}]


def sweep_spec(model: str, steps: int, dry_run: bool) -> dict[str, Any]:
    """Four MiniLM-L6 trials on CoNLL-2003, one loss each, four at once: a quarter of a
    GPU each, or half a CPU each in the dry run. The training sentences hold ``steps``
    batches of 16 (one evaluation, one checkpoint, at the end)."""
    return {
        "name": "gpu-check",
        "task": {"dataset": "conll2003"},
        "model": model,
        "training": {
            "max_steps": steps,
            "learning_rate": 1e-4,
            "max_train_examples": 16 * steps,
            "max_eval_examples": 16 if dry_run else 100,
        },
        "search_space": {"losses": LOSSES},
        "seeds": [0],
        "resources": {
            "cpus_per_trial": 0.5 if dry_run else 1,
            "gpus_per_trial": 0 if dry_run else GPU_SHARE,
            "max_concurrent_trials": TRIALS,
        },
    }


def placed_train(config: dict[str, Any]) -> None:
    """``trainables.train.train``, then the trial's placement written to
    ``$DICESWEEP_HOME/placements/<trial id>.json``."""
    import ray
    import torch
    from ray import tune

    from trainables.train import train

    started = time.time()
    train(config)
    record = {
        "loss": config["loss"]["name"],
        "node": ray.get_runtime_context().get_node_id(),
        "gpus": [str(gpu) for gpu in ray.get_gpu_ids()],
        "start": started,
        "end": time.time(),
        "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20
        if torch.cuda.is_available()
        else None,
    }
    folder = Path(os.environ["DICESWEEP_HOME"]) / PLACEMENTS / config["sweep_id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{tune.get_context().get_trial_id()}.json").write_text(json.dumps(record))


def most_at_once(records: list[dict[str, Any]]) -> int:
    """The most trials running at one moment, from their start and end times."""
    events = sorted([(r["start"], 1) for r in records] + [(r["end"], -1) for r in records])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def run_tuner(spec: Any, home: Path, at_once: int) -> dict[str, Any]:
    """The spec's trials through one ``Tuner``, ``at_once`` at a time: wall time, errors
    and the trials' placements."""
    from ray import tune

    from trainables.driver.tune_search import to_param_space, trial_resources

    name = f"at-once-{at_once}"
    tuner = tune.Tuner(
        tune.with_resources(placed_train, trial_resources(spec)),
        param_space=to_param_space(spec, sweep_id=name),
        tune_config=tune.TuneConfig(max_concurrent_trials=at_once, reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(home / "tune"), name=name, verbose=0),
    )
    started = time.perf_counter()
    results = tuner.fit()
    seconds = time.perf_counter() - started
    folder = home / PLACEMENTS / name
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    return {
        "at_once_asked": at_once,
        "wall_s": seconds,
        "errors": [str(error).strip().splitlines()[-1] for error in results.errors],
        "trials": records,
        "most_at_once": most_at_once(records),
        "nodes": sorted({r["node"] for r in records}),
        "gpus": sorted({",".join(r["gpus"]) or "none" for r in records}),
    }


def placement_checks(together: dict[str, Any], apart: dict[str, Any], dry_run: bool) -> list[Check]:
    """Every trial finished; the shared run's four ran at once on one node and (on a GPU)
    one GPU; the one-at-a-time run's never overlapped."""
    gpus = together["gpus"]
    errors = together["errors"] + apart["errors"]
    return [
        Check(
            "sweep trials",
            not errors,
            f"{len(together['trials'])} + {len(apart['trials'])} finished"
            + (f"; {len(errors)} failed, first: {errors[0]}" if errors else ""),
        ),
        Check(
            "sweep four at once",
            together["most_at_once"] == TRIALS,
            f"{together['most_at_once']} of {TRIALS} ran at once",
        ),
        Check("sweep one node", len(together["nodes"]) == 1, f"{len(together['nodes'])} node(s)"),
        Check(
            "sweep GPU ids",
            gpus == ["none"] if dry_run else (len(gpus) == 1 and gpus != ["none"]),
            f"GPU ids {gpus}",
        ),
        Check(
            "sweep one at a time", apart["most_at_once"] == 1, f"{apart['most_at_once']} at once"
        ),
    ]


def shared_sweep(
    model: str, home: Path, steps: int, dry_run: bool
) -> tuple[dict[str, Any], list[Check]]:
    """The four trials sharing the GPU (on CPUs in the dry run), then one at a time, on
    one local Ray head whose files stay under ``home``; the figures and the checks."""
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spec = resolve_spec(sweep_spec(model, steps, dry_run), load_presets())
    env = {k: v for k, v in os.environ.items() if k.startswith("DICESWEEP_")}
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"  # verbose=0 then prints nothing per Tuner
    ray.init(
        address="local",
        num_cpus=2 if dry_run else max(4, os.cpu_count() or 1),
        num_gpus=0 if dry_run else 1,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
    )
    try:
        together = run_tuner(spec, home, TRIALS)
        apart = run_tuner(spec, home, 1)
    finally:
        ray.shutdown()
    figures = {
        "gpus_per_trial": spec.resources.gpus_per_trial,
        "cpus_per_trial": spec.resources.cpus_per_trial,
        "steps": steps,
        "together": together,
        "apart": apart,
        "speedup": apart["wall_s"] / together["wall_s"],
    }
    return figures, placement_checks(together, apart, dry_run)
