"""A trial killed for memory says so, from what Ray records of a real kill: a Ray
worker made to run out of memory under a local head whose memory monitor's threshold
sits just above what the machine uses now; a worker put in a memory cgroup below
what it allocates, which the kernel's OOM killer kills (where this process may make
one); and a worker process SIGKILLed as that killer does (Ray records only the death,
and the reason says so)."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import ray

from tests.conftest import local_ray_head
from trainables.driver.reports import failure_reason

# Ray 2.56 on: "... Memory on the node (IP: 192.0.2.2, ID: ...) was 3.99GB used /
# 23.54GB limit (0.169)"; older Rays worded it otherwise, the reason stays the same.
MONITOR_KILL = re.compile(
    r"out of memory on node \S+ \([\d.]+GB used of a [\d.]+GB limit\), "
    r"killed by Ray's memory monitor"
)
pytestmark = pytest.mark.slow  # a Ray head per test, workers killed: ~50 s
HEADROOM_BYTES = 1_500_000_000  # the workers may use this much more than now


@contextmanager
def local_head(memory_threshold: float | None = None) -> Iterator[None]:
    """A local Ray head of its own; its memory monitor kills a worker once the node's
    memory use passes ``memory_threshold`` (a fraction), Ray's default when None."""
    monitor: dict[str, str] = {}
    if memory_threshold is not None:  # read by its raylet
        monitor = {
            "RAY_memory_usage_threshold": f"{memory_threshold:.4f}",
            "RAY_memory_monitor_refresh_ms": "100",
        }
    with local_ray_head(__name__, num_cpus=1, environment=monitor):
        yield


@pytest.fixture
def low_memory_ray() -> Iterator[None]:
    """A head whose memory monitor kills a worker once the machine uses
    ``HEADROOM_BYTES`` more than now (a test's own: others' use moves on)."""
    memory = psutil.virtual_memory()
    with local_head((memory.total - memory.available + HEADROOM_BYTES) / memory.total):
        yield


@pytest.fixture
def plain_ray() -> Iterator[None]:
    """A head whose memory monitor keeps Ray's default threshold."""
    with local_head():
        yield


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
    plain_ray: None,
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


def memory_cgroup(limit_bytes: int) -> Path | None:
    """A new memory cgroup (v1) under this process's, limited to ``limit_bytes``, or
    None where this process may not make one (not root, no v1 memory controller)."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    own = next((line.split(":", 2)[2] for line in lines if line.split(":")[1] == "memory"), None)
    root = Path("/sys/fs/cgroup/memory")
    if own is None or not os.access(root / own.lstrip("/"), os.W_OK):
        return None
    group = root / own.lstrip("/") / f"dicesweep-oom-{os.getpid()}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
    except OSError:
        return None
    return group


def test_a_worker_the_kernels_oom_killer_kills_names_that_cause(plain_ray: None) -> None:
    trial = Trial.remote()  # type: ignore[attr-defined]
    pid = ray.get(trial.pid.remote())
    # Far below the memory monitor's threshold: the kernel kills first, as in a
    # container whose memory limit is lower than the node's.
    rss = psutil.Process(pid).memory_info().rss
    group = memory_cgroup(rss + HEADROOM_BYTES // 5)
    if group is None:
        pytest.skip("no memory cgroup can be made here (root and cgroup v1 needed)")
    try:
        (group / "cgroup.procs").write_text(str(pid))
        reason = failure_reason(error_of(trial.eat.remote()))
        assert (group / "memory.oom_control").read_text().split()[-1] != "0"  # the kernel's kill
    finally:
        group.rmdir()
    assert reason.startswith("worker process died unexpectedly on node "), reason
    assert f"(pid {pid}): most often the kernel's OOM killer (out of memory)" in reason


def test_an_actor_killed_on_purpose_stays_as_it_was(plain_ray: None) -> None:
    trial = Trial.remote()  # type: ignore[attr-defined]
    ray.get(trial.pid.remote())
    sleeping = trial.sleep.remote()
    ray.kill(trial)
    reason = failure_reason(error_of(sleeping))
    assert reason.startswith("ActorDiedError: The actor died unexpectedly"), reason
