"""A failed sweep's ``message`` is its reason in one line, the driver's log a link for
its owner: seen, the message carried 20,000 characters of Ray's log tail, tracebacks
and the server's absolute paths included. Over the real store (SQLite, PostgreSQL),
the reconciler following a job that failed as Ray reports it."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from sweep_service.reconciler import Reconciler
from sweep_service.runner import Job, JobState
from sweep_service.store import Owner, create_api_key
from tests.service.api_fixtures import FakeRunner, MakeApi, bearer

SERVER_PATH = "/srv/dicesweep/.venv/lib/python3.11/site-packages/trainables/driver/run.py"
DRIVER_LOG = (
    "2026-11-27 10:00:00,000\tINFO worker.py:1 -- Connecting to existing Ray cluster\n"
    + "sweep sw-1: waiting for a node\n" * 600
    + "Traceback (most recent call last):\n"
    + f'  File "{SERVER_PATH}", line 440, in main\n'
    + "    raise SpecError(issues)\n"
    + "search_spaces.errors.SpecError: task.dataset[0].path: "
    + "'/srv/dicesweep/datasets/my_ner/train.conll' is not under the data-sets folder\n"
)
# What Ray's Jobs API says of a failed driver: its exit code and the log's tail.
RAY_MESSAGE = (
    "Job entrypoint command failed with exit code 2, last available logs "
    f"(truncated to 20,000 chars):\n{DRIVER_LOG[-20_000:]}"
)


class FailedJobRunner(FakeRunner):
    """Jobs that fail at once as Ray reports a driver exiting with code 2."""

    def state(self, job: str) -> Job:
        if job in self.submitted:
            return Job(JobState.FAILED, RAY_MESSAGE, exit_code=2)
        return Job(JobState.MISSING)

    def logs(self, job: str) -> str:
        return DRIVER_LOG if job in self.submitted else ""


def test_a_failed_sweep_says_why_in_one_line_and_links_its_log(
    make_api: MakeApi,
    session: Session,
    session_factory: sessionmaker[Session],
    alice: Owner,
    bob: Owner,
) -> None:
    runner = FailedJobRunner()
    api = make_api(runner=runner)
    headers = bearer(create_api_key(session, alice.id).plain_key)
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"}, headers=headers)
    assert created.status_code == 201, created.text
    reconciler = Reconciler(session_factory, runner, max_resubmissions=0)
    reconciler.run_once()  # submitted
    reconciler.run_once()  # failed for good: exit code 2
    sweep = api.client.get(f"/v1/sweeps/{created.json()['id']}", headers=headers).json()
    assert sweep["status"] == "failed"
    message = sweep["message"]
    assert message.count("\n") <= 1 and len(message) < 500, message
    assert "exit code 2" in message
    assert "'…/train.conll' is not under the data-sets folder" in message
    assert "Traceback" not in message and "/srv/" not in message
    log = api.client.get(sweep["links"]["log"], headers=headers)
    assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")
    assert log.text == DRIVER_LOG
    others = bearer(create_api_key(session, bob.id).plain_key)
    assert api.client.get(sweep["links"]["log"], headers=others).status_code == 404
