"""A trial killed for memory says so, from what Ray records of a real kill: a Ray
worker made to run out of memory under a local head whose memory monitor's threshold
sits just above what the machine uses now, and a worker process SIGKILLed as the
kernel's OOM killer does (Ray can only guess at that cause, and the reason says so)."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Iterator

import psutil
import pytest
import ray

from search_spaces.settings import isolate_ray
from tests.conftest import short_home_folder
from trainables.driver.reports import failure_reason

# Ray 2.56 on: "... Memory on the node (IP: 192.0.2.2, ID: ...) was 3.99GB used /
# 23.54GB limit (0.169)"; older Rays worded it otherwise, the reason stays the same.
MONITOR_KILL = re.compile(
    r"out of memory on node \S+ \([\d.]+GB used of a [\d.]+GB limit\), "
    r"killed by Ray's memory monitor"
)
HEADROOM_BYTES = 1_500_000_000  # the workers may use this much more than now


@pytest.fixture(scope="module")
def low_memory_ray() -> Iterator[None]:
    """A local Ray head whose memory monitor kills a worker once the machine uses
    ``HEADROOM_BYTES`` more than when it started."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    memory = psutil.virtual_memory()
    threshold = (memory.total - memory.available + HEADROOM_BYTES) / memory.total
    with pytest.MonkeyPatch.context() as env, short_home_folder() as home:
        env.delenv("RAY_TMPDIR", raising=False)
        env.setenv("RAY_AUTH_MODE", "disabled")
        env.setenv("RAY_memory_usage_threshold", f"{threshold:.4f}")  # read by its raylet
        env.setenv("RAY_memory_monitor_refresh_ms", "100")
        isolate_ray(home)
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
        yield
        ray.shutdown()


def eat_memory() -> int:
    """Hold ever more memory, each page written, to ten times the headroom at most."""
    held = []
    for _ in range(10 * HEADROOM_BYTES // 100_000_000):
        held.append(bytearray(b"\x01") * 100_000_000)
        time.sleep(0.05)
    return len(held)


@ray.remote(max_restarts=0)
class Trial:
    """An actor, as a Tune trial runs in."""

    def pid(self) -> int:
        return os.getpid()

    def eat(self) -> int:
        return eat_memory()

    def sleep(self) -> None:
        time.sleep(120)


@ray.remote(max_retries=0)
def eating_task() -> int:
    return eat_memory()


def error_of(ref: ray.ObjectRef) -> BaseException:
    with pytest.raises(ray.exceptions.RayError) as raised:
        ray.get(ref, timeout=120)
    return raised.value


def test_an_actor_the_memory_monitor_kills_is_named_out_of_memory(low_memory_ray: None) -> None:
    trial = Trial.remote()  # type: ignore[attr-defined]
    killed = error_of(trial.eat.remote())
    assert MONITOR_KILL.fullmatch(failure_reason(killed)), (failure_reason(killed), killed)
    # Its text alone (what a resumed driver reads from Tune's error file) too.
    assert MONITOR_KILL.fullmatch(failure_reason(str(killed)))
    # A call on the actor it left dead.
    again = error_of(trial.eat.remote())
    assert MONITOR_KILL.fullmatch(failure_reason(again)), failure_reason(again)


def test_a_task_the_memory_monitor_kills_is_named_out_of_memory(low_memory_ray: None) -> None:
    killed = error_of(eating_task.remote())
    assert MONITOR_KILL.fullmatch(failure_reason(killed)), (failure_reason(killed), killed)


def test_a_worker_killed_as_by_the_kernels_oom_killer_names_that_cause(
    low_memory_ray: None,
) -> None:
    trial = Trial.remote()  # type: ignore[attr-defined]
    pid = ray.get(trial.pid.remote())
    sleeping = trial.sleep.remote()
    os.kill(pid, signal.SIGKILL)  # what the kernel's OOM killer sends
    died = error_of(sleeping)
    reason = failure_reason(died)
    assert failure_reason(str(died)) == reason  # from Tune's error file's text too
    assert re.fullmatch(
        rf"worker process died unexpectedly on node \S+ \(pid {pid}\): most often the "
        rf"kernel's OOM killer \(out of memory\); look for \"Killed process {pid}\" in "
        r"that node's kernel log",
        reason,
    ), reason


def test_an_actor_killed_on_purpose_stays_as_it_was(low_memory_ray: None) -> None:
    trial = Trial.remote()  # type: ignore[attr-defined]
    ray.get(trial.pid.remote())
    sleeping = trial.sleep.remote()
    ray.kill(trial)
    reason = failure_reason(error_of(sleeping))
    assert reason.startswith("ActorDiedError: The actor died unexpectedly"), reason
