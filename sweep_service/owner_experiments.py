"""An owner's experiment, ``dicesweep/<owner>``: only ever one the service made.

Any MLflow user may create an experiment of any free name, with an artifact location
of its choosing, before the owner's key exists; adopting it would send the owner's
artifacts where its creator reads them, beside runs it planted. So the service marks
the experiments it makes: a tag holding an HMAC-SHA256, under the MLflow admin's
password, of the experiment's id, name and artifact location. Nobody without that
password can forge the mark, and the service never passes an artifact location of
its own on a tracking server (the server's default for the id is used), so a marked
experiment is one the service made, where the server put it. An experiment of the
owner's name without a valid mark is moved aside (renamed ``dicesweep/<owner>
(moved aside <UTC time>)``, its creator's grants revoked where the server has users)
and a fresh one made; the event is logged. Drivers are given the experiment's id and
never look an owner's experiment up by name.

The same on a tracking server (``OwnerAccess``: MLflow's REST store signed in as the
admin) and in the embedded store (MLflow's SQLAlchemy store on the SQLite file, keyed
with the embedded MLflow UI's admin password, ``sweep_service.mlflow_ui.embedded_auth``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mlflow.entities import ExperimentTag
from mlflow.store.tracking.abstract_store import AbstractStore

log = logging.getLogger("dicesweep.experiments")

MARK_TAG = "dicesweep.made_by_service"
# A second maker of the same name (the API and the reconciler at once): how long its
# mark may take to appear before the experiment is judged unmarked.
MARK_WAIT_S = 5.0


def mark(secret: str, experiment_id: str, name: str, location: str) -> str:
    """The mark of an experiment the service made (hex HMAC-SHA256 under ``secret``)."""
    message = f"dicesweep experiment\n{experiment_id}\n{name}\n{location}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def is_marked(experiment: Any, secret: str) -> bool:
    """Whether ``experiment`` (an MLflow ``Experiment``) carries the service's mark."""
    identity = (str(experiment.experiment_id), experiment.name, experiment.artifact_location)
    expected = mark(secret, *identity)
    return hmac.compare_digest(str(experiment.tags.get(MARK_TAG, "")), expected)


def owner_experiment(
    experiments: AbstractStore,
    name: str,
    secret: str,
    revoke: Callable[[str], None] | None = None,
    location: str | None = None,
) -> str:
    """The id of experiment ``name`` as the service made it: the marked one, restored if
    deleted; else any unmarked one of that name moved aside (``revoke`` then called with
    its id, to take its grants back) and a fresh one made at ``location`` (None: the
    store's default for its id) and marked."""
    found = experiments.get_experiment_by_name(name)
    if found is not None and not is_marked(found, secret):
        found = _marked_soon(experiments, name, secret)
    if found is not None and is_marked(found, secret):
        if found.lifecycle_stage == "deleted":
            experiments.restore_experiment(found.experiment_id)
        return str(found.experiment_id)
    if found is not None:
        aside = f"{name} (moved aside {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ})"
        experiments.rename_experiment(found.experiment_id, aside)
        if revoke is not None:
            revoke(str(found.experiment_id))
        log.warning(
            "experiment %r (id %s, artifacts at %s) was not made by the service: renamed %r "
            "and a fresh one made",
            name,
            found.experiment_id,
            found.artifact_location,
            aside,
        )
    made = experiments.create_experiment(name, artifact_location=location, tags=[])
    created = experiments.get_experiment(made)
    value = mark(secret, str(made), name, created.artifact_location)
    experiments.set_experiment_tag(made, ExperimentTag(MARK_TAG, value))
    return str(made)


def _marked_soon(experiments: AbstractStore, name: str, secret: str) -> Any:
    """The experiment ``name`` once marked, given ``MARK_WAIT_S`` (another of the
    service's processes may have just made it); as found at the end otherwise. One
    carrying a wrong mark is not waited for."""
    found = experiments.get_experiment_by_name(name)
    deadline = time.monotonic() + MARK_WAIT_S
    while found is not None and not is_marked(found, secret) and time.monotonic() < deadline:
        if MARK_TAG in found.tags:  # a mark, and a wrong one: no wait makes it right
            return found
        time.sleep(0.5)
        found = experiments.get_experiment_by_name(name)
    return found
