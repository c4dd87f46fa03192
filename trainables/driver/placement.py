"""Where a trial's retry runs after an out-of-memory kill: on another node that holds
it, where there is one, and said so on the driver's stderr (the sweep's log).

Tune sets no node per trial, only its resources (a placement group per trial). Ray's
label selectors could keep a placement group off the node that killed the trial, but
only as a hard rule: were the other nodes to leave, the retry would wait forever.
Ray's soft target (``_soft_target_node_id``, a ``STRICT_PACK`` group) asks for the
other node and falls back to any node (the one that killed it too) where the other
one has no room at the moment or has left; so the retry is never held back.
The retry's own resources are the trial's again once it starts, so that its worker,
when the trial is done, serves the sweep's next trials as any other.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from ray.tune import Callback

from trainables.driver.cluster import Resources, holds
from trainables.driver.oom import death_cause, memory_reason, worker_death_reason
from trainables.driver.tracking import latest_error

# The memory monitor's message: "Memory on the node (IP: 172.18.0.4, ID: 5f1c...) was".
_NODE_ID = re.compile(r"\(IP: [^,)\s]+, ID: ([0-9a-f]+)\)")


def killed_on(error: BaseException | str | None) -> str | None:
    """The id (hex) of the node where ``error``, a trial's out-of-memory failure (the
    memory monitor's kill or a worker process killed as the kernel's OOM killer
    does), happened; None for any other failure, or where Ray left no node."""
    if error is None or not (memory_reason(error) or worker_death_reason(error)):
        return None
    actor_id = getattr(error, "actor_id", None)
    if actor_id:
        from ray._private import state

        try:  # the actor's record in the GCS, which keeps the node it lived on
            info = state.actors(actor_id)
        except Exception:  # the GCS away, an id it never had
            info = None
        node = (info or {}).get("Address", {}).get("NodeID") if isinstance(info, dict) else None
        if node:
            return str(node)
        cause = death_cause(actor_id)
        if cause is not None and cause.HasField("oom_context"):
            error = cause.oom_context.error_message
    found = _NODE_ID.search(str(error))
    return found.group(1) if found else None


def other_node(nodes: list[dict[str, Any]], avoid: str, wanted: Resources) -> str | None:
    """Of ``nodes`` (``ray.nodes()``), a live node other than ``avoid`` (an id) whose
    total resources hold ``wanted`` (one trial's, summed over its bundles): the one
    with the most of them free now (``Available``, where given); None where none
    holds it."""
    fits = [
        node
        for node in nodes
        if node["Alive"] and node["NodeID"] != avoid and holds(node["Resources"], wanted)
    ]
    if not fits:
        return None

    def room(node: dict[str, Any]) -> tuple[bool, float]:
        free = node.get("Available", node["Resources"])
        return holds(free, wanted), free.get("CPU", 0.0)

    return str(max(fits, key=room)["NodeID"])


def steered(original: Any, target: str) -> Any:
    """``original`` (a trial's ``PlacementGroupFactory``) asking for node ``target``."""
    from ray.tune import PlacementGroupFactory

    # A soft target needs STRICT_PACK: the trial's bundles on one node, as Tune's one
    # bundle per trial of this project is anyway.
    return PlacementGroupFactory(
        original.bundles, strategy="STRICT_PACK", _soft_target_node_id=target
    )


def cluster_nodes() -> list[dict[str, Any]]:
    """``ray.nodes()``, each with ``Available``: its resources free now."""
    import ray
    from ray._private.state import available_resources_per_node

    free = available_resources_per_node()
    return [{**node, "Available": free.get(node["NodeID"], {})} for node in ray.nodes()]


def where(nodes: list[dict[str, Any]], node_id: str) -> str:
    """``172.18.0.4 (5f1c02ab)``: node ``node_id``'s address and the start of its id
    (nodes on one machine share the address)."""
    found = (n["NodeManagerAddress"] for n in nodes if n["NodeID"] == node_id)
    return f"{next(found, 'unknown')} ({node_id[:8]})"


class OomRetryPlacement(Callback):
    """Sends a trial's retry after an out-of-memory kill to another node that holds it
    (see the module's docstring), and says where it sends it on stderr; ``steered``
    keeps, per trial id, the nodes' addresses it was sent away from."""

    def __init__(self) -> None:
        self._original: dict[str, Any] = {}
        self.steered: dict[str, list[str]] = {}

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        try:
            self._steer(trial)
        except Exception as error:  # the GCS away: Tune's own placement, not a dead driver
            print(
                f"retrying trial {trial.trial_id} wherever Tune places it: its failure's "
                f"node could not be read ({type(error).__name__}: {error})",
                file=sys.stderr,
            )

    def _steer(self, trial: Any) -> None:
        node = killed_on(latest_error(trial))
        if node is None:
            return
        nodes = cluster_nodes()
        address = where(nodes, node)
        original = self._original.get(trial.trial_id, trial.placement_group_factory)
        target = other_node(nodes, node, original.required_resources)
        if target is None:
            print(
                f"retrying trial {trial.trial_id} on the same node {address} (out of memory "
                "there): no other node holds it",
                file=sys.stderr,
            )
            return
        self._original[trial.trial_id] = original
        trial.update_resources(steered(original, target))
        self.steered.setdefault(trial.trial_id, []).append(address)
        print(
            f"retrying trial {trial.trial_id} away from node {address} (out of memory "
            f"there), on node {where(nodes, target)}, or on the first with room should "
            "that one have none",
            file=sys.stderr,
        )

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        # Tune calls this before the trial is RUNNING, once its placement group holds
        # it: the trial's own resources again, for the worker's next trials.
        original = self._original.pop(trial.trial_id, None)
        if original is not None:
            trial.update_resources(original)
