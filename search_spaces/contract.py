"""The contract between a sweep's driver and the service: what one writes and the other reads.

The service (``sweep_service``) submits each sweep's driver (``python -m
trainables.driver``) as a Ray Job and follows it; both sides import these definitions,
and nothing here is written twice:

- the driver's exit codes (``DriverExit``): the service reads the one a driver ended
  with from the Jobs API (``driver_exit_code``) and fails the sweep for good on the
  final ones (``FINAL_EXITS``), submitting it again on any other;
- the driver's lines on its log: each ``sweep <id>: ...`` (``said``), its progress line
  (``progress_head``), and the notice a waiting driver prints, which the service shows
  as the sweep's message (``current_notice``);
- the MLflow names: each owner's experiment, and the tags that tell a sweep's parent
  run and its trials' nested runs apart and say what each ran.
"""

import enum
import json
import re

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


class DriverExit(enum.IntEnum):
    """How ``python -m trainables.driver`` ends (``trainables.driver.exits.run_declared``)."""

    DONE = 0
    TRIALS_FAILED = 1  # some trials failed: final
    INVALID = 2  # an invalid spec, or a trial larger than any node the cluster can have: final
    RELEASE_SKEW = 3  # the service's release differs from the cluster's
    NO_NODE_YET = 4  # no node that holds a trial joined within DICESWEEP_CLUSTER_WAIT_S
    NO_TRACKING = 5  # MLflow did not answer within DICESWEEP_MLFLOW_OUTAGE_S
    CRASHED = 70  # an error the driver did not foresee (sysexits' EX_SOFTWARE), never 1
    INTERRUPTED = 130  # Ctrl-C or SIGTERM: its runs closed KILLED, resumable


# The exits that end a sweep for good; after any other (a signal's too: the driver
# killed) the service submits the sweep again, at most ``max_resubmissions`` times.
FINAL_EXITS = frozenset({DriverExit.TRIALS_FAILED, DriverExit.INVALID})


def exit_is_final(code: int | None) -> bool:
    """Whether a driver that exited ``code`` (None: it never ran, or Ray does not say)
    ended its sweep for good."""
    return code in FINAL_EXITS


def said(sweep_id: str, text: str) -> str:
    """A line of the driver's own about sweep ``sweep_id``: ``sweep <id>: <text>``."""
    return f"sweep {sweep_id}: {text}"


# A notice: what a driver prints (``said``) at once and every 15 s while it waits for
# MLflow to answer or for a node that holds a trial, e.g. ``waiting for MLflow since
# 13:52:07 UTC: ...``. It holds while no other line of the driver's own follows it.
WAITING = "waiting for "
MAX_NOTICE_CHARS = 300


def progress_head(clock: str, ended: int, total: int) -> str:
    """The start of the driver's progress line: ``[0:01:12] 3/8 trials (38%)``."""
    percent = 100.0 * ended / total if total else 100.0
    return f"[{clock}] {ended}/{total} trials ({percent:.0f}%)"


_PROGRESS_HEAD = r"\[\d+:\d\d:\d\d\] \d+/\d+ trials \(\d+%\)"


def current_notice(log: str, sweep_id: str) -> str | None:
    """The text of the last ``sweep <sweep_id>: waiting for ...`` line of ``log`` while
    it is the driver's last line of its own (a ``said`` line or a progress line), at
    most ``MAX_NOTICE_CHARS``; else None."""
    own = re.compile(rf"^(?:{re.escape(said(sweep_id, ''))}(.*)|{_PROGRESS_HEAD}.*)$", re.M)
    lines = own.findall(log)
    if not lines or not lines[-1].startswith(WAITING):
        return None
    notice = str(lines[-1]).strip()
    return notice if len(notice) <= MAX_NOTICE_CHARS else notice[: MAX_NOTICE_CHARS - 1] + "…"


def is_notice(message: str | None) -> bool:
    """Whether a sweep's stored message is a driver's notice (``current_notice``)."""
    return bool(message) and str(message).startswith(WAITING)


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
# On a trial: what it ran (its loss's name, its seed, data set, variant and model).
LOSS_TAG = "dicesweep.loss"
SEED_TAG = "dicesweep.seed"
DATASET_TAG = "dicesweep.dataset"
VARIANT_TAG = "dicesweep.variant"
MODEL_TAG = "dicesweep.model"
# On a parent: how many trials failed (stage 1's, an outcome of the tuning, apart).
FAILED_TRIALS_TAG = "dicesweep.failed_trials"
FAILED_TUNE_TRIALS_TAG = "dicesweep.failed_tune_trials"
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
