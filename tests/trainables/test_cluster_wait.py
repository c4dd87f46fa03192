"""A sweep's driver waits for the cluster to offer a node for its trials (a restarted
head's workers rejoin over tens of seconds) and fails at once only when no node the
cluster can ever have holds one: a real multi-node Ray cluster on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from search_spaces.contract import DriverExit
from search_spaces.resolve import resolve_spec
from search_spaces.settings import DicesweepSettings, isolate_ray
from search_spaces.spec import SweepSpec
from tests.conftest import short_home_folder
from tests.tcp_proxy import free_port
from trainables.driver.cluster import await_capacity

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head with no CPUs, as a restarted head is before its workers rejoin."""
    with pytest.MonkeyPatch.context() as env, short_home_folder() as home:
        env.delenv("RAY_TMPDIR", raising=False)  # restored afterwards: isolate_ray sets it
        env.setenv("RAY_AUTH_MODE", "disabled")  # read once per process: not about auth
        isolate_ray(home)
        head = {"num_cpus": 0, "gcs_server_port": free_port(), "include_dashboard": False}
        nodes = cluster_utils.Cluster(initialize_head=True, head_node_args=head)
        ray.init(address=nodes.address, log_to_driver=False)
        yield nodes
        ray.shutdown()
        nodes.shutdown()


def settings(**values: Any) -> DicesweepSettings:
    return DicesweepSettings(ray_address="127.0.0.1:1", **values)


def one_cpu() -> SweepSpec:
    return resolve_spec({"extends": "smoke", "resources": {"cpus_per_trial": 1}})


def test_no_node_within_the_wait_is_a_code_that_is_tried_again(cluster: Any) -> None:
    notices: list[str] = []
    started = time.monotonic()
    refused = await_capacity(one_cpu(), settings(cluster_wait_s=3), False, notices.append)
    assert refused is not None and refused[0] == DriverExit.NO_NODE_YET != DriverExit.INVALID
    assert "no node of the cluster has that much (its nodes: 0 CPUs and 0 GPUs)" in refused[1]
    assert "after waiting 3 s (DICESWEEP_CLUSTER_WAIT_S)" in refused[1]
    assert 3 <= time.monotonic() - started < 30
    assert notices[0] == (
        "waiting for a node with 1 CPU and 0 GPUs (cluster has 0 CPUs/0 GPUs; 0 s of 3)"
    )


def test_a_trial_larger_than_the_configured_nodes_fails_at_once(cluster: Any) -> None:
    spec = resolve_spec({"extends": "smoke", "resources": {"cpus_per_trial": 16}})
    limit = settings(cluster_wait_s=600, cluster_max_resources={"CPU": 8, "GPU": 1})
    started = time.monotonic()
    refused = await_capacity(spec, limit, False, print)
    assert refused == (
        2,
        "resources.cpus_per_trial=16 and gpus_per_trial=0: no node the cluster can have "
        "has that much (its nodes: 8 CPUs and 1 GPU)",
    )
    assert time.monotonic() - started < 5


def test_the_driver_waits_for_a_node_that_joins_late(cluster: Any) -> None:
    # A worker that joins after 6 s, as `ray start --address` does in a worker
    # container (a thread cannot start a node in this process: Ray sets signal handlers).
    ray_cli = Path(sys.executable).with_name("ray")
    join = f"sleep 6; exec {ray_cli} start --address {cluster.address} --num-cpus 1 --block"
    worker = subprocess.Popen(["sh", "-c", join], env=os.environ.copy())
    notices: list[str] = []
    started = time.monotonic()
    try:
        refused = await_capacity(one_cpu(), settings(cluster_wait_s=180), False, notices.append)
        waited = time.monotonic() - started
        # Within the configured capacity too: a large enough node is there.
        within = settings(cluster_wait_s=180, cluster_max_resources={"CPU": 8})
        assert await_capacity(one_cpu(), within, False, notices.append) is None
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    assert refused is None
    assert 6 <= waited < 170
    assert notices and notices[0].startswith("waiting for a node with 1 CPU and 0 GPUs")
