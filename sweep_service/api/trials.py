"""A sweep's trials as MLflow holds them: counts by state, the best so far, pages of
rows, and links into the MLflow UI. MLflow is read only."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from search_spaces.lineage import EXPERIMENT, ROLE_TAG, SWEEP_TAG
from search_spaces.reports import METRICS
from sweep_service.api.errors import ApiError
from sweep_service.api.schemas import BestTrial, TrialCounts, TrialPublic
from sweep_service.results import SweepNotFoundError, trial_rows
from sweep_service.store import Sweep

FAILED_RUN_STATUSES = frozenset({"FAILED", "KILLED"})
BEST_BY = "eval_f1"  # what "best trial" means, whatever metric the search ranked by
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


def sweep_trials(client: MlflowClient, sweep_id: str) -> pd.DataFrame:
    """The trial rows of ``sweep_id`` (``results.trial_rows``), or an empty frame with
    the order columns when the sweep has none yet.

    Raises:
        ApiError: ``tracking_unavailable``.
    """
    try:
        return from_mlflow(lambda: trial_rows(client, sweep_id))
    except SweepNotFoundError:
        return pd.DataFrame(columns=[*TRIAL_ORDER, "status"])


def trial_counts(rows: pd.DataFrame, trial_count: int) -> TrialCounts:
    """Trials done, failed and running by their runs' status; the rest of the
    ``trial_count`` trials are pending (not started, or not yet tracked)."""
    statuses = rows["status"]
    done = int((statuses == "FINISHED").sum())
    failed = int(statuses.isin(FAILED_RUN_STATUSES).sum())
    running = int((statuses == "RUNNING").sum())
    pending = max(trial_count - done - failed - running, 0)
    return TrialCounts(pending=pending, running=running, done=done, failed=failed)


def best_trial(rows: pd.DataFrame) -> BestTrial | None:
    """The trial with the highest ``eval_f1`` so far (a running trial counts with its
    latest value), or None when no trial has reported one."""
    if BEST_BY not in rows.columns or rows[BEST_BY].isna().all():
        return None
    best = rows.loc[rows[BEST_BY].idxmax()]
    return BestTrial(
        run_id=best["run_id"],
        loss=str(best["loss"]),
        seed=int(best["seed"]),
        dataset=str(best["dataset"]),
        variant=str(best["variant"]),
        eval_f1=float(best[BEST_BY]),
    )


def mlflow_links(client: MlflowClient, sweep: Sweep) -> tuple[str | None, str | None]:
    """Links to the sweep's MLflow experiment and parent run in the UI at the tracking
    URI (``<uri>/#/experiments/<id>/runs/<run id>``); None where not created yet.

    Raises:
        ApiError: ``tracking_unavailable``.
    """
    experiment = from_mlflow(lambda: client.get_experiment_by_name(EXPERIMENT))
    if experiment is None:
        return None, None
    experiment_link = f"{client.tracking_uri.rstrip('/')}/#/experiments/{experiment.experiment_id}"
    run_id = sweep.mlflow_parent_run_id or _parent_run_id(client, experiment.experiment_id, sweep)
    return experiment_link, f"{experiment_link}/runs/{run_id}" if run_id else None


def _parent_run_id(client: MlflowClient, experiment_id: str, sweep: Sweep) -> str | None:
    query = f"tags.`{SWEEP_TAG}` = '{sweep.id}' and tags.`{ROLE_TAG}` = 'sweep'"
    runs = from_mlflow(lambda: client.search_runs([experiment_id], query, max_results=1))
    return runs[0].info.run_id if runs else None


def trial_page(
    rows: pd.DataFrame, limit: int, page_token: str | None
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
    return [trial_public(row) for _, row in page], next_token


def _order_key(row: dict[str, Any]) -> tuple[str, str, str, int, str]:
    return (
        str(row["loss"]),
        str(row["dataset"]),
        str(row["variant"]),
        int(row["seed"]),
        str(row["run_id"]),
    )


def encode_trial_token(key: tuple[str, str, str, int, str]) -> str:
    """The token of the page after the trial with order ``key`` (URL-safe base64 JSON)."""
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode_trial_token(token: str) -> tuple[str, str, str, int, str]:
    """The order key ``token`` names.

    Raises:
        ApiError: ``invalid_argument``: not a token ``encode_trial_token`` made.
    """
    try:
        loss, dataset, variant, seed, run_id = json.loads(
            base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        )
        return str(loss), str(dataset), str(variant), int(seed), str(run_id)
    except (ValueError, TypeError) as error:
        refused = "page_token: not a token from an earlier page"
        raise ApiError("invalid_argument", refused) from error


def trial_public(row: dict[str, Any]) -> TrialPublic:
    """The view of one trial row; absent parameters and metrics (NaN) are left out."""
    params = {
        column.removeprefix("param_"): _plain(value)
        for column, value in row.items()
        if column.startswith("param_") and not _missing(value)
    }
    metrics = {name: float(row[name]) for name in METRICS if not _missing(row.get(name))}
    return TrialPublic(
        run_id=row["run_id"],
        status=row["status"],
        loss=str(row["loss"]),
        loss_name=str(row["loss_name"]),
        dataset=str(row["dataset"]),
        variant=str(row["variant"]),
        seed=int(row["seed"]),
        params=params,
        metrics=metrics,
    )


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _plain(value: Any) -> Any:
    """numpy scalars as Python ones."""
    return value.item() if hasattr(value, "item") else value
