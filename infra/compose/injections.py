"""The faults ``faults.py`` injects into the compose topology, one scenario each: what
the table says of it, how it is injected (once a trial has reported progress, or at
submission), what is set up before the sweep and undone after it, and what recovers
the sweep from it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from check import Stack, run
from verdict import OOM_WORKER, Reasons, oom_problems

SPEC: Mapping[str, Any] = {
    "extends": "smoke",
    "name": "compose-fault",
    "training": {"epochs": 40, "max_train_examples": 512, "max_eval_examples": 64},
    "seeds": [0, 1],
    "max_failures": 2,
}
# The smoke task in batches of 256 sentences of up to 128 tokens: a trial's process
# peaked at 1.2 GB (the smoke preset's batches of 32: 0.63 GB), over the limited
# worker's 600 MiB, which Ray's own processes there share, and far within an unlimited
# one. Two trials, one on each worker. The driver sends a killed trial's retry to the
# other worker only where that one has room at that moment: while the other trial runs
# there (about a minute), each retry lands on the limited worker again and is killed
# within about 17 s, hence 8 retries.
OOM_SPEC: Mapping[str, Any] = {
    "extends": "smoke",
    "name": "compose-fault-oom",
    "training": {
        "epochs": 2,
        "batch_size": 256,
        "max_seq_length": 128,
        "max_train_examples": 2000,
        "max_eval_examples": 64,
    },
    "seeds": [0],
    "max_failures": 8,
}
MEMORY_LIMIT = "600m"
MLFLOW_DOWN_S = 240  # MLflow kept stopped after the sweep's submission
# Kills the sweep's driver inside the head's container: every process whose command
# line runs the driver module (Ray's job supervisor is left alone and sees it die).
KILL_DRIVER = (
    "import os, signal\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        line = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ')\n"
    "    except OSError:\n"
    "        continue\n"
    "    if b'-m trainables.driver' in line and int(pid) != os.getpid():\n"
    "        os.kill(int(pid), signal.SIGKILL); print('killed', pid)\n"
)


def _nothing(stack: Stack) -> None:
    return None


@dataclass(frozen=True)
class Fault:
    """One scenario: ``prepare`` runs before the sweep is submitted, ``inject`` once a
    trial has reported progress (at submission when ``at_submit``), ``undo`` after the
    sweep ended or the scenario failed; ``checks`` adds the scenario's own problems
    and what it saw to the common verdict."""

    name: str
    what: str  # the fault, as the table says it
    inject: Callable[[Stack], object]
    recovery: str  # what recovers the sweep from it
    prepare: Callable[[Stack], object] = _nothing
    undo: Callable[[Stack], object] = _nothing
    at_submit: bool = False
    spec: Mapping[str, Any] = field(default_factory=lambda: SPEC)
    checks: Callable[[Stack, str, Reasons], tuple[list[str], str]] | None = None


def _pause(stack: Stack, service: str, seconds: int) -> None:
    stack.compose("pause", service)
    time.sleep(seconds)
    stack.compose("unpause", service)


def _stop(stack: Stack, service: str, seconds: int) -> None:
    stack.compose("stop", "-t", "5", service)
    time.sleep(seconds)
    stack.compose("start", service)


def _kill_and_start(stack: Stack, service: str, down_s: int = 5) -> None:
    stack.compose("kill", service)
    time.sleep(down_s)
    stack.compose("start", service)


def _kill_driver(stack: Stack) -> None:
    out = stack.compose("exec", "-T", "ray-head", "python", "-c", KILL_DRIVER)
    if "killed" not in out:
        raise RuntimeError("no driver process found on the head to kill")


def _start_mlflow_later(stack: Stack) -> None:
    time.sleep(MLFLOW_DOWN_S)
    stack.compose("start", "mlflow")


def _limit_memory(stack: Stack) -> None:
    """``docker update --memory 600m --memory-swap 600m`` on the worker's container
    (compose v1 names it ``<project>_ray-worker-1_1``)."""
    limit = ["--memory", MEMORY_LIMIT, "--memory-swap", MEMORY_LIMIT]
    run(["docker", "update", *limit, stack.container(OOM_WORKER)])


def _unlimit_memory(stack: Stack) -> None:
    """The worker recreated as the compose file has it: ``docker update`` cannot lift a
    memory limit (``--memory 0`` leaves it)."""
    stack.compose("up", "-d", "--no-deps", "--force-recreate", OOM_WORKER)


FAULTS = (
    Fault(
        "worker-killed",
        "`docker kill` of a Ray worker, started again 10 s later",
        lambda s: _kill_and_start(s, "ray-worker-1", 10),
        "Ray retries its trial (`max_failures`) on a live worker; the MLflow run is reused",
    ),
    Fault(
        "worker-paused-60s",
        "a Ray worker paused 60 s (`docker pause`)",
        lambda s: _pause(s, "ray-worker-1", 60),
        "the trial goes on when the worker does, or Ray reruns it",
    ),
    Fault(
        "worker-paused-120s",
        "a Ray worker paused 120 s",
        lambda s: _pause(s, "ray-worker-1", 120),
        "Ray declares the node dead and reruns its trial elsewhere; the worker rejoins",
    ),
    Fault(
        "driver-killed",
        "the sweep's driver killed (SIGKILL) on the head",
        _kill_driver,
        "the reconciler resubmits the driver, which resumes from Tune's storage",
    ),
    Fault(
        "api-restarted",
        "the API container restarted (reconciler included)",
        lambda s: s.compose("restart", "-t", "5", "api"),
        "the driver runs on; the restarted reconciler takes the sweep up again",
    ),
    Fault(
        "mlflow-stopped-60s",
        "the MLflow server stopped 60 s",
        lambda s: _stop(s, "mlflow", 60),
        "the trial logger holds its writes and flushes them after; the reconciler skips"
        " its progress reads meanwhile",
    ),
    Fault(
        "postgres-restarted",
        "PostgreSQL (the service's and MLflow's store) restarted",
        lambda s: s.compose("restart", "-t", "5", "postgres"),
        "the API answers 503 `store_unavailable` until the store is back",
    ),
    Fault(
        "head-killed",
        "`docker kill` of the Ray head, then `docker start`",
        lambda s: _kill_and_start(s, "ray-head", 5),
        "the workers rejoin; the resubmitted driver waits for capacity and resumes from"
        " Tune's storage",
    ),
    Fault(
        "mlflow-down-at-submit",
        f"the MLflow server stopped, the sweep submitted, MLflow started {MLFLOW_DOWN_S} s later",
        _start_mlflow_later,
        "the sweep waits MLflow out (the owner's MLflow user, the driver's runs) instead of"
        " failing",
        prepare=lambda s: s.compose("stop", "-t", "5", "mlflow"),
        undo=lambda s: s.compose("start", "mlflow"),
        at_submit=True,
    ),
    Fault(
        "oom-trial",
        f"a trial over a Ray worker's memory (`docker update --memory {MEMORY_LIMIT}`)",
        _nothing,
        "the trial's reason names out of memory; Ray retries it (`max_failures`) on the"
        " worker with room",
        prepare=_limit_memory,
        undo=_unlimit_memory,
        at_submit=True,
        spec=OOM_SPEC,
        checks=oom_problems,
    ),
)
