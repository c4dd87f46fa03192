"""Why a trial's worker died, where Ray says it was memory: a trial's reason names
out-of-memory from what Ray records, not from one sentence's wording.

- Ray's memory monitor killed the worker: the error is an ``OutOfMemoryError`` (a
  task's or an actor's), or the actor's death cause, as the GCS keeps it, holds an
  ``oom_context``; its message gives the node and the memory used of the limit.
- The worker died unexpectedly (``ActorDiedError``, Ray's exit type ``SYSTEM_ERROR``):
  the kernel's OOM killer (a container's memory limit) leaves Ray no record but the
  death, which Ray cannot tell from another SIGKILL or a crash; the reason says so,
  with the node and pid to look up in that node's kernel log.
"""

from __future__ import annotations

import re
from typing import Any

MONITOR = "killed by Ray's memory monitor"
# In the monitor's message: "Memory on the node (IP: 172.18.0.4, ID: ...) was 0.47GB
# used / 0.50GB limit (0.95)" (Ray 2.56 on); "... was running was 0.47GB / 0.50GB"
# before.
_NODE = re.compile(r"\(IP: ([^,)\s]+)")
_USAGE = (
    re.compile(r"was ([\d.]+\s*[KMGT]?i?B) used / ([\d.]+\s*[KMGT]?i?B) limit"),
    re.compile(r"was running was ([\d.]+\s*[KMGT]?i?B) / ([\d.]+\s*[KMGT]?i?B)"),
)
# An ActorDiedError's own lines for its context's fields ("\tpid: 812", "\tip: ...").
_FIELD = re.compile(r"^\t(pid|ip): (\S+)$", re.M)
_SYSTEM_ERROR = "SYSTEM_ERROR"  # Ray's WorkerExitType of a worker that died unasked


def monitor_reason(message: str) -> str:
    """``out of memory on node 172.18.0.4 (0.47GB used of a 0.50GB limit), killed by
    Ray's memory monitor``: what ``message`` (the monitor's) gives of it."""
    node = _NODE.search(message)
    usage = next((found for found in (p.search(message) for p in _USAGE) if found), None)
    where = f" on node {node.group(1)}" if node else ""
    used = f" ({usage.group(1)} used of a {usage.group(2)} limit)" if usage else ""
    return f"out of memory{where}{used}, {MONITOR}"


def death_cause(actor_id: str | None) -> Any:
    """The GCS's ``ActorDeathCause`` of actor ``actor_id`` (hex), or None where this
    process is not connected to the actor's cluster or the GCS has no such actor."""
    if not actor_id:
        return None
    import ray

    if not ray.is_initialized():
        return None
    # Ray's public state API needs the dashboard, which a local head goes without;
    # its GCS accessor is what that API reads (as ``cluster.configured_nodes`` does).
    from ray._private import state

    try:
        info = state.actors(actor_id)
    except Exception:  # the GCS away, an id it never had: no record to read
        return None
    return info.get("DeathCause") if isinstance(info, dict) else None


def memory_reason(error: BaseException | str) -> str | None:
    """The out-of-memory reason of a trial's ``error`` (Ray's error, or its text from
    Tune's error file), from Ray's record: its type, the actor's death cause, the
    monitor's message it carries; else None. See ``worker_death_reason`` for a
    death Ray cannot explain."""
    from ray.exceptions import OutOfMemoryError, RayActorError

    if isinstance(error, OutOfMemoryError):
        return monitor_reason(str(error))
    if isinstance(error, RayActorError):
        cause = death_cause(error.actor_id)
        if cause is not None and cause.HasField("oom_context"):
            return monitor_reason(cause.oom_context.error_message)
    text = str(error)
    return monitor_reason(text) if "Memory on the node (IP:" in text else None


def worker_death_reason(error: BaseException | str) -> str | None:
    """``worker process died unexpectedly on node 172.18.0.5 (pid 812): most often the
    kernel's OOM killer (out of memory); look for "Killed process 812" in that
    node's kernel log``, for an actor whose worker process died without Ray killing
    it (its death cause ``WORKER_DIED``, exit type ``SYSTEM_ERROR``); else None."""
    from ray.core.generated.common_pb2 import (  # type: ignore[attr-defined]  # no stubs
        ActorDiedErrorContext,
    )
    from ray.exceptions import ActorDiedError

    if isinstance(error, ActorDiedError):
        cause = death_cause(error.actor_id)
        if cause is not None and cause.WhichOneof("context") == "actor_died_error_context":
            context = cause.actor_died_error_context
            if context.reason != ActorDiedErrorContext.WORKER_DIED:
                return None
            if _SYSTEM_ERROR not in context.error_message:
                return None
            return _died(str(context.pid or ""), context.node_ip_address)
    elif not isinstance(error, str):
        return None
    # No record in the GCS (a resumed driver reads Tune's error file): the error's own
    # lines for its context's fields.
    text = str(error)
    if _SYSTEM_ERROR not in text:
        return None
    fields = dict(_FIELD.findall(text))
    return _died(fields.get("pid", ""), fields.get("ip", ""))


def _died(pid: str, node: str) -> str:
    where = "".join([f" on node {node}" if node else "", f" (pid {pid})" if pid else ""])
    look = f'look for "Killed process {pid}" in' if pid else "look in"
    return (
        f"worker process died unexpectedly{where}: most often the kernel's OOM killer "
        f"(out of memory); {look} that node's kernel log"
    )
