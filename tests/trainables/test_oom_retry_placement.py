"""A trial's retry after an out-of-memory kill runs on another node that holds it, on a
real local cluster of a head and two worker nodes; where only the node that killed it
holds the trial, the retry stays there; the driver says which. The cluster (~20 s to
start) is shared by the module's tests: ~45 s in all."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from search_spaces.settings import isolate_ray
from tests.conftest import short_home_folder
from trainables.driver.placement import OomRetryPlacement, killed_on, other_node


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[tuple[Any, dict[str, str]]]:
    """A local ``Cluster`` of a head with no CPU for trials and two worker nodes, "a"
    and "b" (their ids), each with one CPU and a ``slot``; only "a" has ``solo``."""
    from ray.cluster_utils import Cluster

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with pytest.MonkeyPatch.context() as env, short_home_folder() as home:
        env.delenv("RAY_TMPDIR", raising=False)
        env.setenv("RAY_AUTH_MODE", "disabled")
        env.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        isolate_ray(home)
        head = {"num_cpus": 0, "gcs_server_port": free_port(), "include_dashboard": False}
        cluster = Cluster(initialize_head=True, head_node_args=head)
        try:
            a = cluster.add_node(num_cpus=1, resources={"slot": 1, "solo": 1})
            b = cluster.add_node(num_cpus=1, resources={"slot": 1})
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False)
            yield cluster, {"a": a.node_id, "b": b.node_id}
        finally:
            ray.shutdown()
            cluster.shutdown()


@pytest.fixture
def two_workers(local_cluster: tuple[Any, dict[str, str]]) -> dict[str, str]:
    """The ids of ``local_cluster``'s worker nodes, "a" and "b"."""
    return local_cluster[1]


def killed_once(config: dict[str, Any]) -> None:
    """A trial whose first try's worker process is SIGKILLed, as the kernel's OOM
    killer does, on whichever node it landed; a retry reports its node."""
    from ray import tune

    node = ray.get_runtime_context().get_node_id()
    first = Path(config["marks"]) / "first_node"
    if not first.exists():
        first.write_text(node)
        os.kill(os.getpid(), signal.SIGKILL)
    tune.report({"node": node})


def run_trial(tmp_path: Path, resources: dict[str, float], callbacks: list[Any]) -> tuple[str, str]:
    """(the node of the trial's first try, that of its retry), ids: ``killed_once``
    with ``resources`` under ``callbacks``."""
    from ray import tune

    (tmp_path / "marks").mkdir()
    tuner = tune.Tuner(
        tune.with_resources(killed_once, resources),
        param_space={"marks": str(tmp_path / "marks")},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "runs"),
            failure_config=tune.FailureConfig(max_failures=2),
            callbacks=callbacks,
            verbose=0,
        ),
    )
    results = tuner.fit()
    assert len(results) == 1
    result = results[0]
    assert result.error is None and result.metrics is not None, result.error
    return (tmp_path / "marks" / "first_node").read_text(), str(result.metrics["node"])


def test_a_retry_after_an_oom_kill_runs_on_the_other_node(
    two_workers: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    placement = OomRetryPlacement()
    first, retry = run_trial(tmp_path, {"cpu": 1, "slot": 1}, [placement])
    assert {first, retry} == {two_workers["a"], two_workers["b"]}
    [trial_id] = placement.steered
    said = capsys.readouterr().err
    assert re.search(
        rf"retrying trial {trial_id} away from node \S+ \({first[:8]}\) \(out of memory "
        rf"there\), on node \S+ \({retry[:8]}\), or on the first with room should that "
        "one have none",
        said,
    ), said


def test_a_retry_stays_where_no_other_node_holds_the_trial(
    two_workers: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    placement = OomRetryPlacement()
    first, retry = run_trial(tmp_path, {"cpu": 1, "solo": 1}, [placement])
    assert first == retry == two_workers["a"]
    assert placement.steered == {}
    said = capsys.readouterr().err
    assert re.search(
        rf"retrying trial \S+ on the same node \S+ \({first[:8]}\) \(out of memory there\): "
        "no other node holds it",
        said,
    ), said


def killed_first(config: dict[str, Any]) -> None:
    """The sweep's very first try is SIGKILLed as ``killed_once``'s; every try of trial
    ``config["i"]`` leaves a line in its own file."""
    from ray import tune

    marks = Path(config["marks"])
    with (marks / f"tries-{config['i']}").open("a") as tries:
        tries.write("try\n")
    try:
        (marks / "first").open("x").close()
    except FileExistsError:
        tune.report({"done": 1})
    else:
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_steered_retry_among_trials_on_reused_workers_runs_once(
    two_workers: dict[str, str], tmp_path: Path
) -> None:
    from ray import tune

    marks = tmp_path / "marks"
    marks.mkdir()
    placement = OomRetryPlacement()
    tuner = tune.Tuner(
        tune.with_resources(killed_first, {"cpu": 1, "slot": 1}),
        param_space={"marks": str(marks), "i": tune.grid_search([0, 1, 2, 3])},
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "runs"),
            failure_config=tune.FailureConfig(max_failures=2),
            callbacks=[placement],
            verbose=0,
        ),
    )
    results = tuner.fit()
    assert results.num_errors == 0 and len(results) == 4
    tries = sorted(len((marks / f"tries-{i}").read_text().split()) for i in range(4))
    assert tries == [1, 1, 1, 2]  # the killed trial's retry, no other trial again
    assert len(placement.steered) == 1


def test_a_retry_sent_to_a_node_that_left_is_placed_on_another(
    local_cluster: tuple[Any, dict[str, str]],
) -> None:
    from ray.tune import PlacementGroupFactory

    from trainables.driver.placement import steered

    cluster = local_cluster[0]
    leaving = cluster.add_node(num_cpus=1, resources={"slot": 1})
    cluster.wait_for_nodes()
    cluster.remove_node(leaving)
    group = steered(PlacementGroupFactory([{"CPU": 1, "slot": 1}]), leaving.node_id)
    placed = group.to_placement_group()
    try:  # a soft target: never held back for the node it asked for
        assert placed.wait(timeout_seconds=30)
    finally:
        ray.util.remove_placement_group(placed)


def node(node_id: str, total: dict[str, float], free: dict[str, float], alive: bool = True) -> Any:
    return {"NodeID": node_id, "Alive": alive, "Resources": total, "Available": free}


def test_the_other_node_is_a_live_one_that_holds_the_trial_with_the_most_room() -> None:
    wanted = {"CPU": 2.0}
    nodes = [
        node("killer", {"CPU": 8}, {"CPU": 8}),
        node("small", {"CPU": 1}, {"CPU": 1}),
        node("gone", {"CPU": 8}, {"CPU": 8}, alive=False),
        node("busy", {"CPU": 4}, {"CPU": 0}),
        node("roomy", {"CPU": 4}, {"CPU": 3}),
    ]
    assert other_node(nodes, "killer", wanted) == "roomy"
    assert other_node(nodes[:4], "killer", wanted) == "busy"  # it holds the trial, later
    assert other_node(nodes[:3], "killer", wanted) is None


def test_a_failure_other_than_out_of_memory_steers_no_retry() -> None:
    assert killed_on(ValueError("diverged at step 12")) is None
    assert killed_on(None) is None


def test_a_cluster_that_does_not_answer_leaves_the_retry_to_tune(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trainables.driver import placement

    def gcs_away() -> list[dict[str, Any]]:
        raise ConnectionError("GCS unreachable")

    monkeypatch.setattr(placement, "latest_error", lambda trial: "killed")
    monkeypatch.setattr(placement, "killed_on", lambda error: "5f1c02ab")
    monkeypatch.setattr(placement, "cluster_nodes", gcs_away)
    trial = type("Trial", (), {"trial_id": "t_00000"})()
    OomRetryPlacement().on_trial_recover(0, [trial], trial)  # raises nothing: Tune goes on
    assert capsys.readouterr().err == (
        "retrying trial t_00000 wherever Tune places it: its failure's node could not be "
        "read (ConnectionError: GCS unreachable)\n"
    )
