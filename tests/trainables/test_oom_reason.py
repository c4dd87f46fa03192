"""A trial killed for memory says so: Ray's own error types, built as Ray builds them."""

from __future__ import annotations

from ray.core.generated.common_pb2 import (  # type: ignore[attr-defined]  # generated, no stubs
    ActorDiedErrorContext,
)
from ray.exceptions import ActorDiedError, OutOfMemoryError

from trainables.driver.reports import failure_reason

MONITOR = (
    "Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: 172.18.0.4, ID: 5f0c) where the task (actor ID: 9a1b, "
    "name=ImplicitFunc.__init__, pid=812, memory used=0.41GB) was running was "
    "0.48GB / 0.50GB (0.95), which exceeds the memory usage threshold of 0.95."
)
KERNEL = (
    "The actor is dead because its worker process has died. Worker exit type: "
    "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
    "code 2. End of file. There are some potential root causes. (1) The process is "
    "killed by SIGKILL by OOM killer due to high memory usage."
)


def actor_death(message: str) -> ActorDiedError:
    context = ActorDiedErrorContext(
        error_message=message,
        class_name="ImplicitFunc",
        actor_id=bytes(16),
        node_ip_address="172.18.0.5",
        pid=812,
    )
    return ActorDiedError(context)


def test_the_memory_monitors_kill_names_the_node_and_the_limit() -> None:
    expected = "out of memory on node 172.18.0.4 (0.48GB / 0.50GB used)"
    assert failure_reason(OutOfMemoryError(MONITOR)) == expected
    assert failure_reason(actor_death(MONITOR)) == expected


def test_a_kernel_oom_kill_is_named_as_likely() -> None:
    assert failure_reason(actor_death(KERNEL)) == (
        "worker killed on node 172.18.0.5, likely out of memory (the kernel's OOM killer)"
    )


def test_another_actor_death_stays_as_it_was() -> None:
    reason = failure_reason(actor_death("The actor was killed by ray.kill"))
    assert reason.startswith("ActorDiedError: The actor died unexpectedly")
