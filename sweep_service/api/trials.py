"""A sweep's trials as MLflow holds them, in pages; its progress as the store keeps it
(``sweep_service.progress``), and links into the MLflow UI. MLflow is read only."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from search_spaces.contract import CHART_VIEW
from search_spaces.reports import METRICS, below_no_skill_reason, degenerate_reason
from search_spaces.spec import runs_until_decided
from sweep_service.api.errors import ApiError
from sweep_service.api.schemas import BestTrial, TrialCounts, TrialPublic
from sweep_service.results import SweepNotFoundError, trial_rows
from sweep_service.store import Sweep

TRIAL_ORDER = ["loss", "dataset", "variant", "seed", "run_id"]  # also the page key
T = TypeVar("T")


def from_mlflow(read: Callable[[], T]) -> T:
    """``read()``, with MLflow's failures turned into a 503.

    Raises:
        ApiError: ``tracking_unavailable`` when MLflow refuses or does not answer.
        SweepNotFoundError: what ``read`` raises when no trials exist.
    """
    try:
        return read()
    except MlflowException as error:
        raise ApiError("tracking_unavailable", f"MLflow did not answer: {error.message}") from error


def sweep_trials(client: MlflowClient, sweep: Sweep) -> pd.DataFrame:
    """The trial rows of ``sweep`` (``results.trial_rows``), or an empty frame with the
    order columns when it has none yet. A finished sweep's come from the store, as they
    were when it ended (``Sweep.trial_rows``), so they are served while MLflow is away.

    Raises:
        ApiError: ``tracking_unavailable``.
    """
    if sweep.trial_rows is not None:
        return pd.DataFrame(sweep.trial_rows, columns=_columns(sweep.trial_rows))
    try:
        return from_mlflow(lambda: trial_rows(client, sweep.id, sweep.mlflow_experiment_id))
    except SweepNotFoundError:
        return pd.DataFrame(columns=[*TRIAL_ORDER, "status"])


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    """Every column of ``rows`` in first-seen order, the order columns included."""
    columns = dict.fromkeys([*TRIAL_ORDER, "status"])
    for row in rows:
        columns.update(dict.fromkeys(row))
    return list(columns)


def trial_counts(sweep: Sweep) -> TrialCounts:
    """The sweep's trials by state as the store last read them from MLflow
    (``progress.read_progress``, counting as ``count_states`` does); the rest of its
    ``trial_count`` trials are pending (not started, or not yet tracked), but for a
    finished sweep that ran seeds until decided, whose count is the cap its rule
    stopped short of: none is pending there."""
    started = sweep.trials_running + sweep.trials_done + sweep.trials_failed
    started += sweep.trials_stopped
    capped = sweep.status.is_finished() and runs_until_decided(sweep.resolved_spec)
    return TrialCounts(
        pending=0 if capped else max(sweep.trial_count - started, 0),
        running=sweep.trials_running,
        done=sweep.trials_done,
        failed=sweep.trials_failed,
        stopped=sweep.trials_stopped,
    )


def count_states(statuses: list[str], total: int) -> TrialCounts:
    """``statuses`` (MLflow's run statuses, one per trial) as counts: FINISHED done,
    FAILED failed, KILLED stopped, RUNNING running, the rest of ``total`` pending."""
    done, failed = statuses.count("FINISHED"), statuses.count("FAILED")
    stopped, running = statuses.count("KILLED"), statuses.count("RUNNING")
    return TrialCounts(
        pending=max(total - done - failed - stopped - running, 0),
        running=running,
        done=done,
        failed=failed,
        stopped=stopped,
    )


def best_trial(sweep: Sweep) -> BestTrial | None:
    """The sweep's best trial as last read from MLflow, if any has reported."""
    return None if sweep.best_trial is None else BestTrial.model_validate(sweep.best_trial)


# MLflow 3's UI shows an experiment in the view its sidebar's switch holds (kept by the
# browser, GenAI at first; not the experiment's ``mlflow.experimentKind``) unless the
# address names one: the links name the model-training view (runs, params, charts).
ML_VIEW = "?workflowType=machine_learning"


def experiment_base(ui: str, sweep: Sweep) -> str | None:
    """``<ui>/#/experiments/<id>``, the MLflow UI's address of the sweep's experiment
    (``ui``: the settings' ``mlflow_ui``); None until the driver has created it."""
    if sweep.mlflow_experiment_id is None:
        return None
    return f"{ui}/#/experiments/{sweep.mlflow_experiment_id}"


def run_url(base: str, run_id: str) -> str:
    """A run's page in the MLflow UI, under the experiment address ``base``."""
    return f"{base}/runs/{run_id}{ML_VIEW}"


class MlflowLinks(NamedTuple):
    """Where a sweep is in the MLflow UI; None where not known yet."""

    experiment: str | None = None  # its experiment's runs list
    run: str | None = None  # its parent run
    charts: str | None = None  # the runs' charts, the trials' first (``CHART_VIEW``)


def mlflow_links(ui: str, sweep: Sweep) -> MlflowLinks:
    """Links to the sweep's experiment, parent run and charts in the MLflow UI at
    ``ui``, all in its model-training view."""
    base = experiment_base(ui, sweep)
    if base is None:
        return MlflowLinks()
    run_id = sweep.mlflow_parent_run_id
    return MlflowLinks(
        experiment=f"{base}/runs{ML_VIEW}",
        run=run_url(base, run_id) if run_id else None,
        charts=f"{base}/runs{ML_VIEW}&compareRunsMode=CHART&viewStateShareKey={CHART_VIEW}",
    )


def trial_page(
    rows: pd.DataFrame, limit: int, page_token: str | None, experiment: str | None = None
) -> tuple[list[TrialPublic], str | None]:
    """The trials after ``page_token`` in ``TRIAL_ORDER``, at most ``limit``, and the
    token of the next page (None on the last). A key, not an offset: trials that
    appear while a client pages through shift nothing already seen.

    Raises:
        ApiError: ``invalid_argument`` for a token no earlier page gave.
    """
    records = rows.to_dict(orient="records")
    keyed = sorted(((_order_key(row), row) for row in records), key=lambda item: item[0])
    if page_token is not None:
        after = decode_trial_token(page_token)
        keyed = [(key, row) for key, row in keyed if key > after]
    page = keyed[:limit]
    next_token = encode_trial_token(page[-1][0]) if len(keyed) > limit else None
    return [trial_public(row, experiment) for _, row in page], next_token


def _order_key(row: dict[str, Any]) -> tuple[str, str, str, int, str]:
    return (
        str(row["loss"]),
        str(row["dataset"]),
        str(row["variant"]),
        int(row["seed"]),
        str(row["run_id"]),
    )


TRIAL_KEY_TYPES = (str, str, str, int, str)  # _order_key's parts


def encode_trial_token(key: tuple[str, str, str, int, str]) -> str:
    """The token of the page after the trial with order ``key`` (URL-safe base64 JSON)."""
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode_trial_token(token: str) -> tuple[str, str, str, int, str]:
    """The order key ``token`` names.

    Raises:
        ApiError: ``invalid_argument``: not a token ``encode_trial_token`` made.
    """
    refused = ApiError("invalid_argument", "page_token: not a token from an earlier page")
    try:
        key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError as error:
        raise refused from error
    # The documented shape only: four strings and an integer seed (JSON also reads
    # 1e999 as infinity, which no integer holds).
    if not (
        isinstance(key, list)
        and len(key) == len(TRIAL_KEY_TYPES)
        and all(type(part) is kind for part, kind in zip(key, TRIAL_KEY_TYPES, strict=True))
    ):
        raise refused
    loss, dataset, variant, seed, run_id = key
    return loss, dataset, variant, seed, run_id


def trial_public(row: dict[str, Any], experiment: str | None = None) -> TrialPublic:
    """The view of one trial row; absent parameters and metrics (NaN) are left out;
    its link into the MLflow UI under ``experiment`` (``experiment_base``) when given."""
    metrics = {name: float(row[name]) for name in METRICS if not _missing(row.get(name))}
    return TrialPublic(
        run_id=row["run_id"],
        status=row["status"],
        loss=str(row["loss"]),
        loss_name=str(row["loss_name"]),
        dataset=str(row["dataset"]),
        variant=str(row["variant"]),
        seed=int(row["seed"]),
        stage=row.get("stage") or "final",
        tuned=_prefixed(row, "tuned_", float),
        params=_prefixed(row, "param_", _plain),
        metrics=metrics,
        setup=_prefixed(row, "setup_", str),
        failure_reason=None if _missing(row.get("failure_reason")) else row["failure_reason"],
        degenerate_reason=degenerate_reason(metrics),
        below_no_skill_reason=below_no_skill_reason(metrics),
        stop_reason=None if _missing(row.get("stop_reason")) else row["stop_reason"],
        stop_rung=None if _missing(row.get("stop_rung")) else int(row["stop_rung"]),
        mlflow_run=run_url(experiment, str(row["run_id"])) if experiment else None,
    )


def _prefixed(row: dict[str, Any], prefix: str, value: Callable[[Any], T]) -> dict[str, T]:
    """The columns of ``row`` named ``<prefix><name>`` as ``{name: value(v)}``, absent
    (NaN) ones left out."""
    return {
        column.removeprefix(prefix): value(v)
        for column, v in row.items()
        if column.startswith(prefix) and not _missing(v)
    }


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _plain(value: Any) -> Any:
    """numpy scalars as Python ones."""
    return value.item() if hasattr(value, "item") else value
