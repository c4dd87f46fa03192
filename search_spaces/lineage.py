"""Names shared by the sweep driver (which writes MLflow runs) and the service (which reads them).

Each owner's sweeps go to the owner's own MLflow experiment, ``dicesweep/<owner>``;
a sweep run without the service (``dicesweep run``) goes to ``dicesweep``. A sweep
is a parent run (role ``sweep``) and a nested run per trial (role ``trial``), told
apart by these tags; sweep ids are unique across experiments.
"""

import json

EXPERIMENT = "dicesweep"


def experiment_name(owner: str | None = None) -> str:
    """The MLflow experiment of ``owner``'s sweeps; ``EXPERIMENT`` without an owner."""
    return EXPERIMENT if owner is None else f"{EXPERIMENT}/{owner}"


def experiment_owner(name: str) -> str | None:
    """The owner whose experiment ``name`` is (``experiment_name``'s inverse); None for
    ``EXPERIMENT`` or any other name."""
    prefix = f"{EXPERIMENT}/"
    return name.removeprefix(prefix) if name.startswith(prefix) else None


def dicesweep_experiments(client: object) -> list[str]:
    """The ids of every experiment dicesweep writes (``EXPERIMENT`` and each owner's),
    where a sweep's runs are looked up by its id. ``client`` is an ``MlflowClient``."""
    found = client.search_experiments(  # type: ignore[attr-defined]
        filter_string=f"name LIKE '{EXPERIMENT}%'", max_results=1000
    )
    ours = [e for e in found if e.name == EXPERIMENT or e.name.startswith(f"{EXPERIMENT}/")]
    return [str(experiment.experiment_id) for experiment in ours]  # not a "dicesweep-x"


# A saved chart view of every dicesweep experiment, opened by the service's "charts"
# link (``viewStateShareKey``): the MLflow UI (3.x) puts a run's prefixed metrics'
# sections (the parents' ``best_eval_f1/...``, ``grid/...``) before "Model metrics"
# (the trials' ``eval_f1``, ``train_loss``); this view puts the trials' charts first.
# The UI reads a view from the experiment tag ``mlflow.sharedViewState.<key>``: a
# name, times, and its state as JSON; sections the state does not list follow in the
# order the metrics are found.
CHART_VIEW = "dicesweep-trials-first"
CHART_VIEW_TAG = f"mlflow.sharedViewState.{CHART_VIEW}"


def chart_view(now_ms: int) -> str:
    """The value of ``CHART_VIEW_TAG``: a view named "dicesweep: trials first"."""
    state = {
        "compareRunSections": [
            {
                "uuid": "dicesweep-trials",
                "name": "Model metrics",
                "display": True,
                "isReordered": False,
            }
        ],
        "compareRunCharts": [],  # the UI makes a chart per metric
        "isAccordionReordered": True,  # keep this order, do not sort the sections
    }
    view = {
        "name": "dicesweep: trials first",
        "createdAt": now_ms,
        "updatedAt": now_ms,
        "state": json.dumps(state),
    }
    return json.dumps(view)


TAG_PREFIX = "dicesweep."
SWEEP_TAG = "dicesweep.sweep_id"
TRIAL_TAG = "dicesweep.trial_id"
ROLE_TAG = "dicesweep.role"
LOSS_LABEL_TAG = "dicesweep.loss_label"
ATTEMPT_TAG = "dicesweep.attempt"  # 1, then +1 each time a trial is retried or resumed
# Why a FINISHED trial's dev predictions show it learned nothing
# (search_spaces.flags.degenerate_reason)
DEGENERATE_TAG = "dicesweep.degenerate"
FAILURE_TAG = "dicesweep.failure"  # why a FAILED trial failed, e.g. "diverged at step 12 ..."
# Why a trial that finished on a retry needed one: its last failed attempt's reason,
# kept when the run ends FINISHED and loses dicesweep.failure.
RETRIED_AFTER_TAG = "dicesweep.retried_after"
# Why a FINISHED trial stopped: epochs, max_steps, early_stopping (trainables.loop) or
# scheduler (the sweep's ASHA or median rule stopped it).
STOP_TAG = "dicesweep.stop_reason"
# The Ray node a trial last reported from: its id, host name (the container's) and IP.
NODE_TAG = "dicesweep.node_id"
HOSTNAME_TAG = "dicesweep.hostname"
NODE_IP_TAG = "dicesweep.node_ip"
# What a trial trained in, as it resolved training.precision on its device (fp32, bf16, fp16).
# On a parent: the one precision its sweep's ``auto`` was decided as
# (search_spaces.precision_rule), and why.
PRECISION_TAG = "dicesweep.precision"
PRECISION_REASON_TAG = "dicesweep.precision_reason"
# On a parent: how many data sets the sweep covers; with more than one, each trial's
# run name ends with its data set.
DATASET_COUNT_TAG = "dicesweep.dataset_count"
# Two-stage tuning (search_spaces.tuning). On a trial: its stage, "tune" or "final"
# (every trial of a sweep without tune). On a parent: the stage that runs now, each
# loss's chosen settings once stage 1 ended (JSON keyed by the loss's table label:
# {"ce": {"learning_rate": 3e-05}}), and how stage 1 picked its settings (grid or
# random).
STAGE_TAG = "dicesweep.stage"
TUNED_TAG = "dicesweep.tuned"
TUNE_METHOD_TAG = "dicesweep.tune_method"
