"""A sweep's MLflow experiment and parent run, as its driver opens them: the
experiment (``dicesweep``, or the owner's ``dicesweep/<owner>`` the service names),
created marked as model training; the parent run, found on a resume or created with
the spec; the link its trials log through."""

from __future__ import annotations

import sys
import time
from typing import Any

from search_spaces.contract import (
    CHART_VIEW_TAG,
    DATASET_COUNT_TAG,
    EXPERIMENT,
    ROLE_TAG,
    SWEEP_TAG,
    chart_view,
    said,
)
from search_spaces.dataset_refs import dataset_label
from search_spaces.resolve import trial_count
from search_spaces.sections import TrackingLink
from search_spaces.settings import DicesweepSettings
from search_spaces.spec import SweepSpec
from trainables.driver.mlflow_wait import through_outage

# MLflow 3's experiment kind, its model-training view (runs, params, metrics, charts)
# rather than the GenAI one (traces, evaluations): the UI reads the tag where the kind
# is chosen per experiment and asks for it where it is missing; where the sidebar's
# switch chooses the view instead (MLflow 3.17 does), the service's links add
# ``workflowType`` (sweep_service.api.trials).
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")


def experiment_id(
    client: Any, settings: DicesweepSettings, name: str = EXPERIMENT, known: str | None = None
) -> str:
    """The experiment ``name`` (``dicesweep``, or an owner's ``dicesweep/<owner>``),
    created with an artifact folder under the home, marked as model training for the
    MLflow UI, with the saved chart view that shows the trials' charts first
    (``CHART_VIEW_TAG``). ``known``: the id the service gives, the owner's experiment
    as the service made it (``sweep_service.owner_experiments``): used as it is, never
    looked up by name."""
    if known is not None:
        found = client.get_experiment(known)
    else:
        found = client.get_experiment_by_name(name)
    if found is not None:
        if found.tags.get(EXPERIMENT_KIND[0]) != EXPERIMENT_KIND[1]:
            client.set_experiment_tag(found.experiment_id, *EXPERIMENT_KIND)
        if CHART_VIEW_TAG not in found.tags:
            client.set_experiment_tag(found.experiment_id, CHART_VIEW_TAG, _view())
        return str(found.experiment_id)
    location = None
    if str(settings.mlflow_tracking_uri).startswith("sqlite:"):
        settings.mlflow_artifact_root.mkdir(parents=True, exist_ok=True)
        location = settings.mlflow_artifact_root.as_uri()
    tags = dict([EXPERIMENT_KIND, (CHART_VIEW_TAG, _view())])
    from mlflow.exceptions import MlflowException

    try:
        return str(client.create_experiment(name, artifact_location=location, tags=tags))
    except MlflowException as error:
        # Two sweeps' drivers starting at once: the other one created it first.
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        created = client.get_experiment_by_name(name)
        if created is None:
            raise
        return str(created.experiment_id)


def _view() -> str:
    return chart_view(int(time.time() * 1000))


def parent_run_name(spec: SweepSpec, sweep_id: str) -> str:
    """``"table8-mrpc · 3536bd89"``: the spec's name (a preset's when it sets none) and a
    short id, so runs of one spec stay apart in the MLflow UI: the first 8 hex digits of
    the service's ``sw-3536bd89...``, the random tail of ``new_sweep_id``'s
    ``table8-mrpc-20261125-101500-a1b2c3``."""
    short = sweep_id.removeprefix("sw-").rsplit("-", 1)[-1][:8]
    return f"{spec.name} · {short}"


def parent_run(client: Any, experiment: str, sweep_id: str, spec: SweepSpec) -> str:
    """The sweep's parent run: found by its tags on a resume, else created with the spec,
    named by ``parent_run_name`` and described by the spec's description."""
    from mlflow.entities import Param, RunStatus
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME, MLFLOW_RUN_NOTE

    from trainables.driver.trial_runs import find_run

    tags = {SWEEP_TAG: sweep_id, ROLE_TAG: "sweep"}
    existing = find_run(client, experiment, tags)
    if existing is not None:
        client.update_run(existing, status=RunStatus.to_string(RunStatus.RUNNING))
        return existing
    described = {MLFLOW_RUN_NOTE: spec.description} if spec.description else {}
    named = {
        **tags,
        **described,
        MLFLOW_RUN_NAME: parent_run_name(spec, sweep_id),
        DATASET_COUNT_TAG: str(len(spec.task.dataset)),
    }
    run = client.create_run(experiment, tags=named)
    params = {
        "preset": spec.extends or "",
        "trials": trial_count(spec),
        "model": spec.model,
        "datasets": ",".join(dataset_label(dataset) for dataset in spec.task.dataset),
        "variants": ",".join(spec.task.variant),
        "seeds": (
            rule.describe() if (rule := spec.seeds_until) else ",".join(map(str, spec.seed_list))
        ),
        "search": spec.search.algorithm,
        "scheduler": spec.scheduler.kind,
        "metric": spec.search.metric,
    }
    client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
    # The spec that ran, every preset applied: enough to run the sweep again.
    client.log_dict(run.info.run_id, spec.model_dump(mode="json"), "spec.yaml")
    return str(run.info.run_id)


def open_tracking(
    settings: DicesweepSettings,
    sweep_id: str,
    spec: SweepSpec,
    experiment_name: str = EXPERIMENT,
    known_experiment: str | None = None,
) -> tuple[Any, TrackingLink]:
    """An MLflow client, and the link trials log through: experiment (``known_experiment``
    when the service names its id) and parent run. An MLflow server that does not
    answer is waited for, at most ``settings.mlflow_outage_s``, with a notice on stderr
    (``through_outage``).

    Raises:
        TrackingAwayError: MLflow did not answer within ``settings.mlflow_outage_s``.
    """
    from mlflow.tracking import MlflowClient

    uri = str(settings.mlflow_tracking_uri)
    client = MlflowClient(tracking_uri=uri)

    def notify(message: str) -> None:
        print(said(sweep_id, message), file=sys.stderr, flush=True)

    def open_runs() -> TrackingLink:
        experiment = experiment_id(client, settings, experiment_name, known_experiment)
        parent = parent_run(client, experiment, sweep_id, spec)
        return TrackingLink(tracking_uri=uri, experiment_id=experiment, parent_run_id=parent)

    return client, through_outage(open_runs, uri, settings.mlflow_outage_s, notify)


def stop_running_trial_runs(client: Any, experiment: str, sweep_id: str) -> None:
    """An interrupted sweep's trial runs still marked running become KILLED (a resumed
    sweep reopens them)."""
    query = (
        f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'trial' "
        "and attributes.status = 'RUNNING'"
    )
    for run in client.search_runs([experiment], filter_string=query, max_results=5000):
        client.set_terminated(run.info.run_id, "KILLED")
