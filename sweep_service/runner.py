"""Sweeps as Ray Jobs: each sweep's driver is one job whose submission id is the sweep id.

The submission id makes a resubmission idempotent: submitting a sweep whose job
exists is a no-op. A sweep whose driver died is resubmitted under a new id,
``<sweep id>-retry<n>`` (Ray never reuses an id). The job's working folder holds one
file, ``spec.json``: the resolved spec the service stored (uploaded with the job, so
a remote cluster gets it too, whatever its size); the job runs
``python -m trainables.driver --resolved-spec spec.json --sweep-id ID --experiment
dicesweep/OWNER --experiment-id N`` (each owner's sweeps in the owner's MLflow
experiment, the one the service made: ``sweep_service.owner_experiments``), which
resumes from Tune's experiment state when it exists, so a resubmitted sweep
continues where its dead driver stopped. With MLflow's access control on
(``OwnerAccess``), the folder also holds ``mlflow_credentials`` (0600): the owner's
MLflow user and password, which the driver's MLflow client signs in with
(``MLFLOW_TRACKING_AUTH=dicesweep-file``); the job's environment names the file only.
The job's environment also names its owner (``DICESWEEP_DATA_OWNER``): its driver and
trials read local data and model folders in that owner's data folders and the shared
ones only (``search_spaces.data_roots``).
"""

from __future__ import annotations

import enum
import json
import shlex
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from search_spaces.contract import EXPERIMENT, experiment_owner
from search_spaces.data_roots import DATA_OWNER_ENV
from search_spaces.mlflow_credentials import CREDENTIALS_ENV, PROVIDER, write_credentials

if TYPE_CHECKING:
    from collections.abc import Callable

    from sweep_service.mlflow_access import OwnerAccess


class JobState(enum.StrEnum):
    """A sweep's job as the cluster sees it (Ray's job statuses, plus MISSING)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    MISSING = "MISSING"  # the cluster has no such job (never submitted, or the head restarted)

    def is_finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED)


class Job(NamedTuple):
    """A sweep's job as the Jobs API reports it."""

    state: JobState
    message: str = ""  # Ray's: a failed driver's log tail, a stopped job's reason
    exit_code: int | None = None  # the driver's, once it exited (``DriverExit``)


def job_id(sweep_id: str, resubmissions: int) -> str:
    """The Ray job id of a sweep's current driver: the sweep id, then one per retry."""
    return sweep_id if resubmissions == 0 else f"{sweep_id}-retry{resubmissions}"


class Runner(Protocol):
    """Where sweeps run. ``RayJobRunner`` in the service; tests may pass a fake."""

    def submit(self, job: str, sweep_id: str, spec: Mapping[str, Any], experiment: str) -> None:
        """Start the sweep's driver as job ``job`` on the resolved ``spec``, its runs in
        the MLflow ``experiment``; a no-op when that job exists."""

    def state(self, job: str) -> Job:
        """The job's state, Ray's message for it and its driver's exit code."""

    def stop(self, job: str) -> None:
        """Ask the job to stop; a no-op when it has finished or does not exist."""

    def logs(self, job: str) -> str:
        """The end of the job's log (its driver's output), at most ``MAX_LOG_CHARS``;
        "" for a job that does not exist."""

    def nodes(self) -> list[dict[str, float]] | None:
        """Each alive node's total resources (``{"CPU": 16, "GPU": 1, ...}``), or None
        when the cluster cannot say (then nothing is refused for it)."""


SPEC_FILE = "spec.json"  # in the job's working folder
MAX_LOG_CHARS = 1_000_000  # of a job's log served to its owner: the end of it
CREDENTIALS_FILE = "mlflow_credentials"  # beside it, with MLflow's access control on


def driver_entrypoint(
    sweep_id: str, experiment: str, experiment_id: str | None = None, python: str = "python"
) -> str:
    """The shell command a sweep's job runs, in a working folder holding ``SPEC_FILE``."""
    command = [python, "-m", "trainables.driver", "--resolved-spec", SPEC_FILE]
    command += ["--sweep-id", sweep_id, "--experiment", experiment]
    if experiment_id is not None:
        command += ["--experiment-id", experiment_id]
    return shlex.join(command)


def owner_environment(experiment: str) -> dict[str, str]:
    """The job variable naming the owner of ``experiment`` (``dicesweep/<owner>``), whose
    data folders its driver and trials may read; none for ``EXPERIMENT`` (then the
    shared folders only)."""
    owner = experiment_owner(experiment)
    return {} if owner is None else {DATA_OWNER_ENV: owner}


def sign_in(
    access: OwnerAccess | None, folder: Path, experiment: str
) -> tuple[dict[str, str], str | None]:
    """The owner of ``experiment`` (``dicesweep/<owner>``) made an MLflow user with
    MANAGE on it and its credentials written to ``folder`` (``CREDENTIALS_FILE``,
    0600): the job's variables that point the driver's MLflow client there (names, no
    secret) and the experiment's id. Nothing without access control.

    Raises:
        MlflowAccessError: the MLflow server refused (the reconciler tries again).
    """
    if access is None:
        return {}, None
    granted = access.ensure_owner(experiment.removeprefix(f"{EXPERIMENT}/"))
    write_credentials(folder / CREDENTIALS_FILE, granted.username, granted.password)
    env = {"MLFLOW_TRACKING_AUTH": PROVIDER, CREDENTIALS_ENV: CREDENTIALS_FILE}
    return env, granted.experiment_id


class RayJobRunner:
    """Submits drivers to the Ray Jobs API at ``address`` (``http://host:8265``)."""

    def __init__(
        self,
        address: str,
        env_vars: Mapping[str, str],
        python: str = "python",
        access: OwnerAccess | None = None,
        local_experiments: Callable[[str], str] | None = None,
    ) -> None:
        from ray.job_submission import JobSubmissionClient

        self._client = JobSubmissionClient(address)
        self._address = address
        self._env_vars = dict(env_vars)
        self._python = python
        self._access = access  # None: the MLflow store has no access control
        # The embedded store's owner experiments: name -> the id the service made.
        self._local_experiments = local_experiments
        self._nodes: tuple[float, list[dict[str, float]] | None] = (-NODES_TTL_S, None)

    def submit(self, job: str, sweep_id: str, spec: Mapping[str, Any], experiment: str) -> None:
        if self.state(job).state is not JobState.MISSING:
            return
        with tempfile.TemporaryDirectory(prefix="dicesweep-job-") as folder:
            (Path(folder) / SPEC_FILE).write_text(json.dumps(dict(spec)))
            signed, experiment_id = sign_in(self._access, Path(folder), experiment)
            local = self._local_experiments
            if experiment_id is None and local is not None and experiment != EXPERIMENT:
                experiment_id = local(experiment)
            env_vars = {**self._env_vars, **signed, **owner_environment(experiment)}
            # The client uploads the folder to the cluster before this returns.
            runtime_env = {"working_dir": folder, "env_vars": env_vars}
            try:
                self._client.submit_job(
                    entrypoint=driver_entrypoint(sweep_id, experiment, experiment_id, self._python),
                    submission_id=job,
                    runtime_env=runtime_env,
                )
            except RuntimeError as error:  # a concurrent submit of the same job won the race
                if "already exists" not in str(error):
                    raise

    def state(self, job: str) -> Job:
        try:
            info = self._client.get_job_info(job)
        except RuntimeError as error:  # the Jobs API answers 404 for an unknown id
            if "does not exist" in str(error) or "404" in str(error):
                return Job(JobState.MISSING)
            raise
        return Job(JobState(str(info.status)), info.message or "", info.driver_exit_code)

    def stop(self, job: str) -> None:
        if self.state(job).state in (JobState.PENDING, JobState.RUNNING):
            self._client.stop_job(job)

    def logs(self, job: str) -> str:
        try:
            text = str(self._client.get_job_logs(job))
        except RuntimeError as error:  # the Jobs API answers 404 for an unknown id
            if "does not exist" in str(error) or "404" in str(error):
                return ""
            raise
        return text[-MAX_LOG_CHARS:]

    def nodes(self) -> list[dict[str, float]] | None:
        # Asked at each submission: kept a while, so a burst of them asks once.
        asked, known = self._nodes
        if time.monotonic() - asked < NODES_TTL_S:
            return known
        from ray.util.state import list_nodes

        try:
            alive = list_nodes(
                address=self._address,
                filters=[("state", "=", "ALIVE")],
                timeout=NODES_TIMEOUT_S,
                raise_on_missing_output=False,
            )
            known = [{str(k): float(v) for k, v in node.resources_total.items()} for node in alive]
        except Exception:  # the state API's transport errors: the cluster cannot say
            known = None
        self._nodes = (time.monotonic(), known or None)
        return known or None


NODES_TTL_S = 30.0
NODES_TIMEOUT_S = 10
