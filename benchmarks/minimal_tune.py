"""The baseline of bench_sweep.py: the same trials as a hand-written Ray Tune script.

No MLflow, no spec, no reports: ``ray.init``, a ``Tuner`` over the trial configs
of a spec calling the same trainable, ``fit``. Usage:

    python benchmarks/minimal_tune.py SPEC.yaml
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import ray
import yaml
from ray import tune

from search_spaces.presets import load_presets
from search_spaces.resolve import resolve_spec
from trainables.driver.tune_search import to_param_space
from trainables.train import train


def main() -> None:
    spec = resolve_spec(yaml.safe_load(Path(sys.argv[1]).read_text()), load_presets())
    env = {k: v for k, v in os.environ.items() if k.startswith("DICESWEEP_")}
    ray.init(address="local", num_cpus=2, include_dashboard=False, runtime_env={"env_vars": env})
    with tempfile.TemporaryDirectory() as storage:
        tuner = tune.Tuner(
            tune.with_resources(train, {"cpu": spec.resources.cpus_per_trial}),
            param_space=to_param_space(spec, sweep_id="minimal"),
            tune_config=tune.TuneConfig(
                max_concurrent_trials=spec.resources.max_concurrent_trials, reuse_actors=True
            ),
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        )
        results = tuner.fit()
    assert not results.errors


if __name__ == "__main__":
    main()
