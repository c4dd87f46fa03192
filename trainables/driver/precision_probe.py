"""``training.precision: auto`` decided once for a whole sweep (``search_spaces.precision_rule``):
read back from the sweep's parent run when a driver already decided it, else stated by
the cluster (``DICESWEEP_AUTO_PRECISION``), else measured by one probe on a worker with
a trial's resources (a Ray task of the kind the trials get). The spec that runs asks
every trial for that precision, and the parent run records it and why.
"""

from __future__ import annotations

import sys
from typing import Any

from search_spaces.contract import PRECISION_REASON_TAG, PRECISION_TAG, said
from search_spaces.precision_rule import (
    BF16_PARITY,
    Probe,
    Resolved,
    stated_precision,
    sweep_precision,
)
from search_spaces.settings import DicesweepSettings
from search_spaces.setup import FORMULATIONS
from search_spaces.spec import SweepSpec

PROBE_TIMEOUT_S = 600.0  # a worker of the trials' kind may have to start first
FALLBACK_WIDTH = 768  # BERT-base's, where the model's config cannot be read yet


def formulation(spec: SweepSpec) -> str:
    """The task's formulation as the setup names it (``tagger``, ``pair classifier``,
    ``mrc``, ``span extraction``); of a sweep over several kinds, the first without
    bf16 parity, else the first."""
    found = [
        spec.task.formulation if kind == "ner" else FORMULATIONS[kind]
        for kind in (spec.task.kind_of(dataset) for dataset in spec.task.dataset)
    ]
    return next((name for name in found if name not in BF16_PARITY), found[0])


def probe_worker(model: str) -> Probe:
    """What this worker measures (run as a Ray task with a trial's resources): its
    device, and how many times as fast as fp32 bf16 multiplies at ``model``'s width
    (``FALLBACK_WIDTH`` where its config is not on the worker yet: the trials download it)."""
    import torch

    from trainables.modeling import hidden_size
    from trainables.precision import cpu_bf16_speedup, gpu_bf16_speedup

    try:
        width = hidden_size(model)
    except OSError:
        width = FALLBACK_WIDTH
    if torch.cuda.is_available():
        device = torch.device("cuda")
        bf16 = torch.cuda.is_bf16_supported()
        return Probe("cuda", gpu_bf16_speedup(width, device) if bf16 else 0.0, bf16)
    return Probe("cpu", cpu_bf16_speedup(width))


def measure(spec: SweepSpec) -> Probe:
    """One probe on a worker with a trial's resources."""
    import ray

    task = ray.remote(probe_worker).options(
        num_cpus=spec.resources.cpus_per_trial, num_gpus=spec.resources.gpus_per_trial
    )
    probe: Probe = ray.get(task.remote(spec.model), timeout=PROBE_TIMEOUT_S)
    return probe


RESOLVED: dict[str, Resolved] = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16"}


def decide(
    spec: SweepSpec, settings: DicesweepSettings, recorded: str | None
) -> tuple[Resolved, str]:
    """The sweep's precision and why: ``recorded`` (what the parent run holds, a
    resumed sweep's) first, then the cluster's statement, then one measurement."""
    if recorded in RESOLVED:
        return RESOLVED[recorded], "decided when the sweep started"
    if settings.auto_precision is not None:
        return stated_precision(settings.auto_precision, formulation(spec))
    return sweep_precision(measure(spec), formulation(spec))


def with_sweep_precision(
    spec: SweepSpec, settings: DicesweepSettings, client: Any, parent: str, sweep_id: str
) -> SweepSpec:
    """``spec`` whose ``training.precision`` is its sweep's one precision: ``auto``
    decided (``decide``) and recorded on the parent run (``dicesweep.precision``, and
    why in ``dicesweep.precision_reason``); any other precision as it is."""
    if spec.training.precision != "auto":
        return spec
    recorded = client.get_run(parent).data.tags.get(PRECISION_TAG)
    chosen, reason = decide(spec, settings, recorded)
    if recorded is None:
        client.set_tag(parent, PRECISION_TAG, chosen)
        client.set_tag(parent, PRECISION_REASON_TAG, reason)
    print(said(sweep_id, f"precision auto is {chosen} ({reason})"), file=sys.stderr)
    training = spec.training.model_copy(update={"precision": chosen})
    return spec.model_copy(update={"training": training})
