"""The driver's side of the Ray cluster: joining it (or starting a local head), and
what it can tell about a sweep's trials."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from search_spaces.contract import WAITING, DriverExit
from search_spaces.plural import counted
from search_spaces.settings import DicesweepSettings, forwarded_settings
from search_spaces.spec import SweepSpec


def start_ray(settings: DicesweepSettings, num_cpus: int | None, log_file: Path) -> None:
    """Join ``DICESWEEP_RAY_ADDRESS``, or start a local head; trials get our settings.
    Ray's notices meanwhile ("Started a local Ray instance.") go to ``log_file``."""
    import ray

    from trainables.driver.progress import ray_log_file

    with ray_log_file(log_file):
        _init(ray, settings, num_cpus)


def _init(ray: Any, settings: DicesweepSettings, num_cpus: int | None) -> None:
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


# How often the driver looks at the cluster's nodes while it waits, and tells so.
POLL_S = 2.0
NOTICE_EVERY_S = 15.0

Resources = dict[str, float]


def trial_demand(spec: SweepSpec) -> Resources:
    """What one trial of ``spec`` needs of a single node."""
    return {"CPU": spec.resources.cpus_per_trial, "GPU": spec.resources.gpus_per_trial}


def holds(node: Resources, wanted: Resources) -> bool:
    return all(node.get(key, 0.0) >= value for key, value in wanted.items())


def alive_nodes() -> list[Resources]:
    """The total resources of every live node of the cluster this process joined."""
    import ray

    return [dict(node["Resources"]) for node in ray.nodes() if node["Alive"]]


def configured_nodes(settings: DicesweepSettings, own_head: bool) -> list[Resources] | None:
    """The kinds of node the cluster can ever have, when known: a local head of our own
    is all there is; ``DICESWEEP_CLUSTER_MAX_RESOURCES`` when set; else an autoscaler's
    node groups that may have a node (KubeRay, ``ray up``), as Ray's GCS records them;
    None on a cluster of nodes that join by ``ray start`` (compose, by hand)."""
    if own_head:
        return alive_nodes()
    if settings.cluster_max_resources is not None:
        return [settings.cluster_max_resources]
    # Ray keeps no public API for the autoscaler's configuration; its GCS state
    # accessor is what ``ray status`` reads it through.
    from ray._private.state import state

    config = state.get_cluster_config()
    if config is None or not config.node_group_configs:
        return None
    return [dict(group.resources) for group in config.node_group_configs if group.max_count != 0]


def describe(nodes: list[Resources]) -> str:
    return ", ".join(
        f"{counted(node.get('CPU', 0.0), 'CPU')} and {counted(node.get('GPU', 0.0), 'GPU')}"
        for node in nodes
    )


def unschedulable_reason(spec: SweepSpec, nodes: list[Resources], which: str) -> str | None:
    """Why none of ``nodes`` (``which``: what they are, for the message) can run one
    trial of ``spec``, or None when one can."""
    wanted = trial_demand(spec)
    if any(holds(node, wanted) for node in nodes):
        return None
    return (
        f"resources.cpus_per_trial={wanted['CPU']:g} and gpus_per_trial={wanted['GPU']:g}: "
        f"no node {which} has that much (its nodes: {describe(nodes) or 'none'})"
    )


def waiting_notice(spec: SweepSpec, nodes: list[Resources], waited: float, limit: float) -> str:
    """``waiting for a node with 1 CPU and 1 GPU (cluster has 0 CPUs/0 GPUs; 35 s of
    300)``."""
    wanted = trial_demand(spec)
    cpus = sum(node.get("CPU", 0.0) for node in nodes)
    gpus = sum(node.get("GPU", 0.0) for node in nodes)
    return (
        f"{WAITING}a node with {counted(wanted['CPU'], 'CPU')} and "
        f"{counted(wanted['GPU'], 'GPU')} (cluster has {counted(cpus, 'CPU')}/"
        f"{counted(gpus, 'GPU')}; {waited:.0f} s of {limit:g})"
    )


def await_capacity(
    spec: SweepSpec,
    settings: DicesweepSettings,
    own_head: bool,
    notify: Callable[[str], object],
) -> tuple[int, str] | None:
    """Wait until a live node can hold one trial of ``spec``: None then. Else the exit
    code and the reason: at once (``INVALID``) when no node the cluster can ever have holds
    it (``configured_nodes``), after ``settings.cluster_wait_s`` (``NO_NODE_YET``) when none
    joined meanwhile. While it waits, ``notify`` gets ``waiting_notice`` at first and
    every ``NOTICE_EVERY_S``: nodes rejoin a restarted head over tens of seconds."""
    configured = configured_nodes(settings, own_head)
    if configured is not None:
        which = "of the cluster" if own_head else "the cluster can have"
        never = unschedulable_reason(spec, configured, which)
        if never:
            return DriverExit.INVALID, never
    started = time.monotonic()
    noticed = -NOTICE_EVERY_S
    while True:
        nodes = alive_nodes()
        if unschedulable_reason(spec, nodes, "of the cluster") is None:
            return None
        waited = time.monotonic() - started
        if waited >= settings.cluster_wait_s:
            reason = unschedulable_reason(spec, nodes, "of the cluster")
            limit = f"{settings.cluster_wait_s:g} s (DICESWEEP_CLUSTER_WAIT_S)"
            return DriverExit.NO_NODE_YET, f"{reason}, after waiting {limit}"
        if waited - noticed >= NOTICE_EVERY_S:
            notify(waiting_notice(spec, nodes, waited, settings.cluster_wait_s))
            noticed = waited
        time.sleep(POLL_S)


def count_unfinished(experiment_path: str, expected: int) -> int:
    """Trials neither terminated nor errored (or never created): the sweep was interrupted."""
    from ray.tune import ExperimentAnalysis

    trials = ExperimentAnalysis(experiment_path).trials
    ended = sum(trial.status in ("TERMINATED", "ERROR") for trial in trials)
    return max(expected, len(trials)) - ended


def with_configs(results: Iterable[Any], experiment_path: str) -> list[Any]:
    """Tune's ``results`` (``Result``s of the experiment at ``experiment_path``), each
    with its trial's config. A ``Result`` takes its config from the trial's last report:
    a trial that never reported (killed for memory at its start, on every try) has none
    there, only in the experiment's state, where this reads it."""
    results = list(results)
    if all(result.config is not None for result in results):
        return results
    from ray.tune import ExperimentAnalysis

    configs = {trial.trial_id: trial.config for trial in ExperimentAnalysis(experiment_path).trials}
    completed = []
    for result in results:
        metrics = result.metrics or {}
        config = configs.get(str(metrics.get("trial_id")))
        if result.config is None and config is not None:
            result = dataclasses.replace(result, metrics={**metrics, "config": config})
        completed.append(result)
    return completed
