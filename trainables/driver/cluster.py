"""The driver's side of the Ray cluster: joining it (or starting a local head), and
what it can tell about a sweep's trials."""

from __future__ import annotations

import os
from typing import Any

from search_spaces.settings import DicesweepSettings, forwarded_settings
from search_spaces.spec import SweepSpec


def start_ray(settings: DicesweepSettings, num_cpus: int | None) -> None:
    """Join ``DICESWEEP_RAY_ADDRESS``, or start a local head; trials get our settings."""
    import ray

    # By name: Ray logs a runtime environment, and secrets (an HF token, an API key)
    # reach a local head's workers through the environment they inherit.
    env = forwarded_settings()
    env.setdefault("DICESWEEP_HOME", str(settings.home))
    # Trials' own output (progress bars, checkpoint notices) stays in their workers'
    # logs (a local head's: <home>/ray/session_latest/logs/worker-*); the driver shows
    # the sweep's progress display and the failures.
    options: dict[str, Any] = {"runtime_env": {"env_vars": env}, "log_to_driver": False}
    if settings.ray_address:
        ray.init(address=settings.ray_address, **options)
    elif os.environ.get("RAY_ADDRESS"):
        # A Ray Job's driver: join the job's cluster; the job's runtime env already
        # carries the settings (Ray refuses a second one that repeats them).
        ray.init(log_to_driver=False)
    else:
        # "local": a new head of our own, never a cluster that `ray start` (or a
        # `dicesweep serve`) left recorded on this machine; its files under our home
        # (``isolate_local_ray``, called before this module imported Ray).
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, **options)


def unschedulable_reason(spec: SweepSpec) -> str | None:
    """Why no node of the cluster this process joined can run one trial of ``spec``,
    or None when one can. Nodes an autoscaler may still add are not seen: on such a
    cluster, keep a node of each kind the sweeps ask for at its group's minimum."""
    import ray

    wanted = {"CPU": spec.resources.cpus_per_trial, "GPU": spec.resources.gpus_per_trial}
    nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    if any(all(node.get(k, 0.0) >= v for k, v in wanted.items()) for node in nodes):
        return None
    largest = ", ".join(
        f"{node.get('CPU', 0):g} CPUs and {node.get('GPU', 0):g} GPUs" for node in nodes
    )
    return (
        f"resources.cpus_per_trial={wanted['CPU']:g} and gpus_per_trial={wanted['GPU']:g}: "
        f"no node of the cluster has that much (its nodes: {largest or 'none'})"
    )


def count_unfinished(experiment_path: str, expected: int) -> int:
    """Trials neither terminated nor errored (or never created): the sweep was interrupted."""
    from ray.tune import ExperimentAnalysis

    trials = ExperimentAnalysis(experiment_path).trials
    ended = sum(trial.status in ("TERMINATED", "ERROR") for trial in trials)
    return max(expected, len(trials)) - ended
