"""A resumed sweep's trials start again from a checkpoint that still exists.

Tune keeps one checkpoint a trial (``CheckpointConfig(num_to_keep=1)``). It deletes a
trial's previous checkpoint as soon as the next one is reported, and writes its
experiment state (which names each trial's checkpoint) only at its next save. A driver
killed between the two leaves a state that names a deleted checkpoint; Tune's restore
of that trial then fails on every retry ("Could not recover from checkpoint as it does
not exist on storage anymore"). Keeping more checkpoints narrows that window without
closing it.

``CheckpointRepair`` looks once at each trial about to start from a checkpoint. Where
that checkpoint is gone it points the trial at the checkpoint that replaced it (the
oldest one written after it: a checkpoint Tune registered, so a complete one; a newer
folder may be an upload the kill cut short). Where none is left the trial starts
afresh. Either way the driver's log says so.

This reaches into Tune's per-trial bookkeeping (``Trial.run_metadata.checkpoint_manager``,
Ray 2.60), the one place where dicesweep does; the tests drive it on a real cluster.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from ray.tune import Callback

CHECKPOINT_NAME = re.compile(r"checkpoint_(\d+)$")


class CheckpointRepair(Callback):  # type: ignore[misc]
    """Before each controller step: a pending trial whose checkpoint is gone resumes from
    the checkpoint that replaced it, or starts afresh."""

    def __init__(self) -> None:
        # (trial id, checkpoint path) already found present or repaired, so that each
        # checkpoint is looked up on storage once, not at every step.
        self._checked: set[tuple[str, str]] = set()

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        for trial in trials:
            checkpoint = trial.checkpoint
            if trial.status != "PENDING" or checkpoint is None:
                continue
            key = (trial.trial_id, checkpoint.path)
            if key in self._checked:
                continue
            self._checked.add(key)
            if not exists(checkpoint.filesystem, checkpoint.path):
                repair(trial)

    def __getstate__(self) -> dict[str, Any]:
        # Pickled with the run's settings when the sweep starts: nothing is checked then.
        return {"_checked": set()}


def exists(filesystem: Any, path: str) -> bool:
    from pyarrow.fs import FileType

    return bool(filesystem.get_file_info(path).type != FileType.NotFound)


def replacement(filesystem: Any, trial_path: str, missing: str) -> str | None:
    """The oldest checkpoint folder in ``trial_path`` written after ``missing``."""
    from pyarrow.fs import FileSelector, FileType

    gone = CHECKPOINT_NAME.search(missing)
    after = int(gone.group(1)) if gone else -1
    found: list[tuple[int, str]] = []
    for info in filesystem.get_file_info(FileSelector(trial_path, allow_not_found=True)):
        match = CHECKPOINT_NAME.search(info.base_name)
        if match and info.type == FileType.Directory and int(match.group(1)) > after:
            found.append((int(match.group(1)), info.path))
    return min(found)[1] if found else None


def repair(trial: Any) -> None:
    """Point ``trial`` at the checkpoint that replaced its missing one, or at none."""
    from ray.train._internal.checkpoint_manager import _CheckpointManager
    from ray.train._internal.session import _TrainingResult
    from ray.tune import Checkpoint

    old_manager = trial.run_metadata.checkpoint_manager
    missing = old_manager.latest_checkpoint_result
    storage = trial.storage
    found = replacement(storage.storage_filesystem, storage.trial_fs_path, missing.checkpoint.path)
    manager = _CheckpointManager(checkpoint_config=old_manager.checkpoint_config)
    name = missing.checkpoint.path.rsplit("/", 1)[-1]
    if found is None:
        print(
            f"trial {trial.trial_id}: its checkpoint {name} is gone and no later one "
            "exists; it starts afresh",
            file=sys.stderr,
        )
    else:
        checkpoint = Checkpoint(path=found, filesystem=storage.storage_filesystem)
        # The metrics are the missing checkpoint's: Tune's iteration count resumes from
        # them, while the trial resumes from the step its checkpoint holds.
        manager.register_checkpoint(_TrainingResult(checkpoint=checkpoint, metrics=missing.metrics))
        print(
            f"trial {trial.trial_id}: its checkpoint {name} is gone (deleted once the next "
            f"was reported, before the experiment state was saved); it resumes from "
            f"{found.rsplit('/', 1)[-1]}",
            file=sys.stderr,
        )
    trial.run_metadata.checkpoint_manager = manager
