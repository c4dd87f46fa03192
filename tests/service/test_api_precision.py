"""POST /v1/sweeps with ``training.precision``: fp16 needs a GPU, so a submission that
would train it on CPUs is refused naming the field; bf16 and fp32 train anywhere."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from tests.service.api_fixtures import Api, stored_sweeps

SMOKE = {"extends": "smoke"}
CPU_ONLY = [{"CPU": 8.0, "memory": 16e9}, {"CPU": 4.0}]


def test_fp16_on_a_cpu_only_cluster_is_refused_at_submission_naming_its_field(
    api: Api, session_factory: sessionmaker[Session]
) -> None:
    api.runner.cluster = CPU_ONLY
    refused = api.client.post("/v1/sweeps", json={**SMOKE, "training": {"precision": "fp16"}})
    assert refused.status_code == 422
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "training", "precision"]
    assert issue["msg"] == (
        "fp16 needs a GPU: a trial reserves none (set resources.gpus_per_trial above 0); "
        "on CPUs use bf16 or fp32"
    )
    # Asking for a GPU the cluster does not have: both fields are named.
    on_a_gpu = {**SMOKE, "training": {"precision": "fp16"}, "resources": {"gpus_per_trial": 1}}
    issues = api.client.post("/v1/sweeps", json=on_a_gpu).json()["detail"]
    assert [issue["loc"][1:] for issue in issues] == [
        ["training", "precision"],
        ["resources", "gpus_per_trial"],
    ]
    assert issues[0]["msg"].startswith("fp16 needs a GPU: no node of the cluster has one")
    assert api.runner.submitted == []
    assert stored_sweeps(session_factory) == 0


def test_fp16_on_a_gpu_node_and_bf16_on_cpus_are_accepted(
    api: Api, session_factory: sessionmaker[Session]
) -> None:
    api.runner.cluster = [*CPU_ONLY, {"CPU": 8.0, "GPU": 1.0}]
    on_a_gpu = {**SMOKE, "training": {"precision": "fp16"}, "resources": {"gpus_per_trial": 1}}
    assert api.client.post("/v1/sweeps", json=on_a_gpu).status_code == 201
    api.runner.cluster = CPU_ONLY
    bf16 = {**SMOKE, "seeds": [3], "training": {"precision": "bf16"}}
    assert api.client.post("/v1/sweeps", json=bf16).status_code == 201
    # The older flag still reads: a stored or published spec's ``bf16: true`` is bf16.
    older = {**SMOKE, "seeds": [4], "training": {"bf16": True}}
    assert api.client.post("/v1/sweeps", json=older).status_code == 201
    assert stored_sweeps(session_factory) == 3
