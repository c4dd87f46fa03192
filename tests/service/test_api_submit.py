"""POST /v1/sweeps: stored pending and never sent to Ray on the request; every refusal
names the field and the rule and stores nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from search_spaces.datasets import DATASETS
from sweep_service.store import Owner, create_api_key, create_owner, get_sweep
from tests.service.api_fixtures import Api, MakeApi, bearer, stored_sweeps


def test_a_sweep_is_stored_pending_and_not_submitted(
    api: Api, session_factory: sessionmaker[Session]
) -> None:
    response = api.client.post("/v1/sweeps", json={"extends": "smoke"})
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "pending"
    assert (body["name"], body["preset"], body["trial_count"]) == ("smoke", "smoke", 2)
    assert body["links"]["sweep"] == f"/v1/sweeps/{body['id']}"
    assert body["links"]["grid"] == f"/v1/sweeps/{body['id']}/grid"
    assert api.runner.submitted == []  # the reconciler submits, after the store write
    assert stored_sweeps(session_factory) == 1


def test_a_retry_with_the_same_idempotency_key_returns_the_first_sweep(
    api: Api, session_factory: sessionmaker[Session]
) -> None:
    headers = {"Idempotency-Key": "submit-1"}
    first = api.client.post("/v1/sweeps", json={"extends": "smoke"}, headers=headers)
    again = api.client.post("/v1/sweeps", json={"extends": "smoke"}, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert stored_sweeps(session_factory) == 1


def test_the_same_idempotency_key_with_another_body_is_refused(
    api: Api, session_factory: sessionmaker[Session]
) -> None:
    headers = {"Idempotency-Key": "submit-1"}
    api.client.post("/v1/sweeps", json={"extends": "smoke"}, headers=headers)
    other = {"extends": "smoke", "seeds": [1]}
    refused = api.client.post("/v1/sweeps", json=other, headers=headers)
    assert refused.status_code == 422
    assert refused.json()["code"] == "idempotency_mismatch"
    assert "submit-1" in refused.json()["detail"]
    assert stored_sweeps(session_factory) == 1


SMOKE = {"extends": "smoke"}
INVALID_SPECS: dict[str, tuple[dict[str, Any], list[Any], str]] = {
    "unknown-loss": (
        {**SMOKE, "search_space": {"losses": [{"name": "nope"}]}},
        ["body", "search_space", "losses", 0, "name"],
        "unknown loss 'nope'; valid: ce",
    ),
    "alpha-out-of-range": (
        {**SMOKE, "search_space": {"losses": [{"name": "dsc", "alpha": -1}]}},
        ["body", "search_space", "losses", 0, "alpha"],
        "greater than or equal to 0",
    ),
    "unknown-dataset": (
        {**SMOKE, "task": {"kind": None, "dataset": "imdb"}},
        ["body", "task", "dataset", 0],
        "unknown dataset 'imdb'; valid:",
    ),
    "dataset-files-missing": (
        {**SMOKE, "task": {"kind": "ner", "dataset": "conll2003"}},
        ["body", "task", "dataset", 0],
        "data set 'conll2003': conll2003/train.txt is missing from the service's data-sets folder",
    ),
    "too-many-trials": (
        {**SMOKE, "seeds": list(range(10))},
        ["body"],
        "20 trials (losses × datasets × variants × seeds = 2 × 1 × 1 × 10) exceed the cap of 8",
    ),
    "unknown-field": ({**SMOKE, "bogus": 1}, ["body", "bogus"], "unknown key; valid: name,"),
    "misspelt-field": (
        {**SMOKE, "trainig": {}},
        ["body", "trainig"],
        "unknown key; did you mean 'training'?",
    ),
    "unknown-preset": ({"extends": "nope"}, ["body", "extends"], "unknown preset 'nope'; valid:"),
    "absolute-model-path": ({**SMOKE, "model": "/etc/models/x"}, ["body", "model"], "absolute"),
    "model-path-escape": ({**SMOKE, "model": "models/../../x"}, ["body", "model"], "'..'"),
    "home-model-path": ({**SMOKE, "model": "~/x"}, ["body", "model"], "'~'"),
}


@pytest.mark.parametrize("case", list(INVALID_SPECS))
def test_an_invalid_spec_names_the_field_and_rule_and_stores_nothing(
    make_api: MakeApi, session_factory: sessionmaker[Session], case: str
) -> None:
    api = make_api(max_trials=8)
    spec, loc, rule = INVALID_SPECS[case]
    refused = api.client.post("/v1/sweeps", json=spec)
    assert refused.status_code == 422
    body = refused.json()
    assert body["code"] == "invalid_spec"
    assert [(issue["loc"], rule in issue["msg"]) for issue in body["detail"]] == [(loc, True)]
    assert stored_sweeps(session_factory) == 0


def test_a_data_set_path_leaving_the_folder_is_refused_without_showing_paths(
    api: Api, session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    escaping = {"train": "../outside/train.tsv", "eval": "mrpc/dev.tsv"}
    monkeypatch.setitem(DATASETS, "mrpc", dataclasses.replace(DATASETS["mrpc"], files=escaping))
    refused = api.client.post(
        "/v1/sweeps", json={**SMOKE, "task": {"kind": "pi", "dataset": "mrpc"}}
    )
    assert refused.status_code == 422
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "task", "dataset", 0]
    assert "lies outside the data-sets folder" in issue["msg"]
    assert str(Path(api.settings.datasets_dir or "").parent) not in refused.text
    assert stored_sweeps(session_factory) == 0


@pytest.mark.parametrize(
    ("body", "loc"),
    [(b"{", ["body", 1]), (b"[1, 2]", ["body"])],
    ids=["not-json", "not-an-object"],
)
def test_a_body_that_is_not_a_json_object_is_refused(
    api: Api, session_factory: sessionmaker[Session], body: bytes, loc: list[Any]
) -> None:
    headers = {"Content-Type": "application/json"}
    refused = api.client.post("/v1/sweeps", content=body, headers=headers)
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_request"
    assert refused.json()["detail"][0]["loc"] == loc
    assert stored_sweeps(session_factory) == 0


QUOTAS = {
    "max_trials_per_sweep": (
        {"max_trials_per_sweep": 1},
        SMOKE,
        "2 trials exceed the quota of 1 trials per sweep",
    ),
    "max_gpus_per_trial": (
        {"max_gpus_per_trial": 0.25},
        {**SMOKE, "resources": {"gpus_per_trial": 0.5}},
        "0.5 GPUs per trial exceed the quota of 0.25",
    ),
    "max_concurrent_sweeps": (
        {"max_concurrent_sweeps": 0},
        SMOKE,
        "0 sweeps are active; the quota is 0 at once",
    ),
}


@pytest.mark.parametrize("quota", list(QUOTAS))
def test_each_quota_is_refused_naming_it_and_stores_nothing(
    api: Api, session: Session, session_factory: sessionmaker[Session], quota: str
) -> None:
    limits, spec, message = QUOTAS[quota]
    owner = create_owner(session, "carol", **limits)
    key = create_api_key(session, owner.id).plain_key
    refused = api.client.post("/v1/sweeps", json=spec, headers=bearer(key))
    assert refused.status_code == 429
    assert refused.json() == {"detail": message, "code": "quota_exceeded"}
    assert stored_sweeps(session_factory) == 0


def test_the_concurrency_quota_counts_active_sweeps(
    api: Api, session: Session, session_factory: sessionmaker[Session]
) -> None:
    owner = create_owner(session, "carol", max_concurrent_sweeps=1)
    key = create_api_key(session, owner.id).plain_key
    assert api.client.post("/v1/sweeps", json=SMOKE, headers=bearer(key)).status_code == 201
    refused = api.client.post("/v1/sweeps", json=SMOKE, headers=bearer(key))
    assert refused.status_code == 429
    assert "1 sweeps are active; the quota is 1 at once" in refused.json()["detail"]
    assert stored_sweeps(session_factory) == 1


def test_a_body_over_the_limit_gets_413(
    make_api: MakeApi, session_factory: sessionmaker[Session]
) -> None:
    api = make_api(max_request_bytes=2048)
    padded = {"extends": "smoke", "description": "x" * 4096}
    declared = api.client.post("/v1/sweeps", json=padded)
    assert declared.status_code == 413
    assert declared.json()["code"] == "request_too_large"
    chunks = iter([b'{"extends": "smoke", "description": "', b"x" * 4096, b'"}'])
    streamed = api.client.post(
        "/v1/sweeps", content=chunks, headers={"Content-Type": "application/json"}
    )
    assert streamed.status_code == 413
    assert streamed.json() == {
        "detail": "the request body exceeds the limit of 2048 bytes",
        "code": "request_too_large",
    }
    assert stored_sweeps(session_factory) == 0


def test_the_stored_sweep_keeps_the_spec_as_submitted(
    api: Api, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    spec = {"extends": "smoke", "seeds": [3, 4]}
    created = api.client.post("/v1/sweeps", json=spec, headers=bearer(key)).json()
    assert created["trial_count"] == 4
    stored = get_sweep(session, alice.id, created["id"])
    assert stored.spec == spec
    assert stored.resolved_spec["seeds"] == [3, 4]


def _own_data(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("train.conll", "dev.conll"):
        (folder / name).write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n")
    return folder


def _own_spec(path: str) -> dict[str, Any]:
    return {
        "extends": "smoke",
        "task": {
            "kind": "ner",
            "dataset": {"path": path, "format": "conll"},
            "variant": "original",
        },
    }


def test_a_local_data_set_in_the_owners_folder_or_a_shared_one_is_accepted(
    make_api: MakeApi, tmp_path: Path, session_factory: sessionmaker[Session]
) -> None:
    api = make_api(data_roots=[tmp_path / "team"])
    own = _own_data(Path(api.settings.datasets_dir or "") / "local" / "my_ner")
    shared = _own_data(tmp_path / "team" / "their_ner")
    for path in ("my_ner", str(own), "their_ner", str(shared)):
        accepted = api.client.post("/v1/sweeps", json=_own_spec(path))
        assert accepted.status_code == 201, accepted.text
    assert stored_sweeps(session_factory) == 4


def test_the_readmes_own_data_spec_runs_from_the_homes_datasets_folder_laid_out_as_conll2003(
    make_api: MakeApi, tmp_path: Path, session_factory: sessionmaker[Session]
) -> None:
    """``path: my_ner`` as the README writes it, the folder copied to
    ``$DICESWEEP_HOME/datasets/<owner>/`` (``local``: a loopback service without keys)
    where DICESWEEP_DATASETS_DIR points elsewhere (as ``make demo`` sets it), in the
    CoNLL-2003 layout (``train.txt``, ``valid.txt``, ``test.txt``)."""
    api = make_api(home=tmp_path / "home")
    assert api.settings.datasets_dir != tmp_path / "home" / "datasets"
    folder = tmp_path / "home" / "datasets" / "local" / "my_ner"
    folder.mkdir(parents=True)
    for name in ("train.txt", "valid.txt", "test.txt"):
        (folder / name).write_text(
            "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
        )
    for path in ("my_ner", str(folder)):
        accepted = api.client.post("/v1/sweeps", json=_own_spec(path))
        assert accepted.status_code == 201, accepted.text
    assert stored_sweeps(session_factory) == 2


def test_a_missing_relative_folder_is_refused_naming_the_folders_looked_in(
    make_api: MakeApi, tmp_path: Path, session: Session, alice: Owner, bob: Owner
) -> None:
    api = make_api(home=tmp_path / "home", data_roots=[tmp_path / "team"])
    _own_data(Path(api.settings.datasets_dir or "") / "alice" / "my_ner")
    key = create_api_key(session, bob.id).plain_key
    refused = api.client.post("/v1/sweeps", json=_own_spec("my_ner"), headers=bearer(key))
    assert refused.status_code == 422
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "task", "dataset", 0, "path"]
    looked_in = [
        Path(api.settings.datasets_dir or "") / "bob",
        tmp_path / "home" / "datasets" / "bob",
        tmp_path / "team",
    ]
    assert issue["msg"] == (
        "data set 'my_ner': 'my_ner' is not a folder in your own data folders or the "
        f"shared ones (looked in: {', '.join(map(str, looked_in))}; symlinks are followed)"
    )
    assert "alice" not in refused.text


def test_another_owners_folder_is_refused_as_a_missing_one_is(
    api: Api,
    session: Session,
    alice: Owner,
    bob: Owner,
    session_factory: sessionmaker[Session],
) -> None:
    """The refusal tells bob nothing of alice's folders: naming one that exists gets
    the same answer, word for word, as naming it once it is gone."""
    folder = _own_data(Path(api.settings.datasets_dir or "") / "alice" / "my_ner")
    keys = {owner.name: create_api_key(session, owner.id).plain_key for owner in (alice, bob)}

    def submitted(owner: str) -> tuple[int, Any]:
        answer = api.client.post(
            "/v1/sweeps", json=_own_spec(str(folder)), headers=bearer(keys[owner])
        )
        return answer.status_code, answer.json()

    assert submitted("alice")[0] == 201  # her own folder
    existing = submitted("bob")
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    missing = submitted("bob")
    assert existing == missing
    status, body = existing
    assert status == 422
    [issue] = body["detail"]
    assert issue["loc"] == ["body", "task", "dataset", 0, "path"]
    assert "is not a folder in your own data folders or the shared ones" in issue["msg"]
    assert stored_sweeps(session_factory) == 1


def test_a_shared_folder_is_accepted_for_every_owner(
    make_api: MakeApi,
    tmp_path: Path,
    session: Session,
    alice: Owner,
    bob: Owner,
    session_factory: sessionmaker[Session],
) -> None:
    api = make_api(data_roots=[tmp_path / "team"])
    shared = _own_data(tmp_path / "team" / "their_ner")
    for owner in (alice, bob):
        key = create_api_key(session, owner.id).plain_key
        for path in ("their_ner", str(shared)):
            accepted = api.client.post("/v1/sweeps", json=_own_spec(path), headers=bearer(key))
            assert accepted.status_code == 201, (owner.name, accepted.text)
    assert stored_sweeps(session_factory) == 4


@pytest.mark.parametrize(
    ("where", "rule"),
    [
        ("dotdot", "'..' is not allowed"),
        ("absolute", "is not a folder in your own data folders or the shared ones"),
        ("symlink", "is not a folder in your own data folders or the shared ones"),
        ("missing", "is not a folder in your own data folders or the shared ones"),
        ("service-root", "is not a folder in your own data folders or the shared ones"),
    ],
)
def test_a_local_data_set_outside_the_roots_is_refused(
    api: Api, tmp_path: Path, session_factory: sessionmaker[Session], where: str, rule: str
) -> None:
    outside = _own_data(tmp_path / "outside")
    root = Path(api.settings.datasets_dir or "")
    (root / "local").mkdir()
    (root / "local" / "link").symlink_to(outside)
    _own_data(root / "top_level")  # the data-sets folder itself is no owner's
    path = {
        "dotdot": "../outside",
        "absolute": str(outside),
        "symlink": "link",
        "missing": "not_there",
        "service-root": str(root / "top_level"),
    }[where]
    refused = api.client.post("/v1/sweeps", json=_own_spec(path))
    assert refused.status_code == 422
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "task", "dataset", 0, "path"]
    assert rule in issue["msg"]
    assert stored_sweeps(session_factory) == 0


# --- the model, checked at submission ------------------------------------------------


def hub_cache(folder: Path, repo: str) -> Path:
    """A Hugging Face cache holding ``repo``'s config.json, laid out as the hub client
    lays it out (refs/main naming a snapshot)."""
    entry = folder / f"models--{repo.replace('/', '--')}"
    commit = "0" * 40
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(commit)
    (entry / "snapshots" / commit).mkdir(parents=True)
    (entry / "snapshots" / commit / "config.json").write_text('{"model_type": "bert"}')
    return folder


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hub switched off (HF_HUB_OFFLINE=1) over a cache holding one model."""
    from huggingface_hub import constants

    cache = hub_cache(tmp_path / "hf-cache", "org/cached-model")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_an_uncached_hub_model_offline_is_refused_naming_model(
    api: Api, session_factory: sessionmaker[Session], offline_hub: Path
) -> None:
    refused = api.client.post("/v1/sweeps", json={**SMOKE, "model": "roberta-base"})
    assert refused.status_code == 422
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "model"]
    assert "'roberta-base' is not a folder and not in the Hugging Face cache" in issue["msg"]
    assert "HF_HUB_OFFLINE=1" in issue["msg"]
    assert stored_sweeps(session_factory) == 0
    accepted = api.client.post("/v1/sweeps", json={**SMOKE, "model": "org/cached-model"})
    assert accepted.status_code == 201
    assert stored_sweeps(session_factory) == 1


def test_a_model_folder_is_read_under_the_data_roots_and_needs_its_config(
    api: Api, session_factory: sessionmaker[Session], offline_hub: Path, tmp_path: Path
) -> None:
    root = Path(api.settings.datasets_dir or "") / "local"  # the loopback owner's folder
    (root / "models" / "saved").mkdir(parents=True)
    (root / "models" / "empty").mkdir(parents=True)
    (root / "models" / "saved" / "config.json").write_text('{"model_type": "bert"}')
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "config.json").write_text('{"model_type": "bert"}')
    (root / "models" / "link").symlink_to(tmp_path / "elsewhere")

    def refusal(model: str) -> str:
        response = api.client.post("/v1/sweeps", json={**SMOKE, "model": model})
        assert response.status_code == 422, response.text
        [issue] = response.json()["detail"]
        assert issue["loc"] == ["body", "model"]
        return str(issue["msg"])

    assert "has no config.json" in refusal("models/empty")
    assert "lies outside your own data folders or the shared ones" in refusal("models/link")
    missing = refusal("models/missing")
    assert "'models/missing' is not a folder and not in the Hugging Face cache" in missing
    assert f"(folders looked in: {root}, " in missing
    assert "neither a folder nor a Hugging Face hub id" in refusal("models/no/such/folder")
    assert stored_sweeps(session_factory) == 0
    accepted = api.client.post("/v1/sweeps", json={**SMOKE, "model": "models/saved"})
    assert accepted.status_code == 201


def test_an_uncached_hub_data_set_offline_is_refused_naming_its_field(
    api: Api, session_factory: sessionmaker[Session], offline_hub: Path
) -> None:
    task = {"kind": "pi", "dataset": {"hub": "nyu-mll/glue", "config": "mrpc"}}
    refused = api.client.post("/v1/sweeps", json={**SMOKE, "task": task})
    assert refused.status_code == 422
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "task", "dataset", 0, "hub"]
    assert "the hub is off (HF_HUB_OFFLINE=1)" in issue["msg"]
    assert stored_sweeps(session_factory) == 0


# --- resources the cluster has --------------------------------------------------------


def test_a_trial_no_node_can_hold_is_refused_at_submission_naming_what_the_cluster_has(
    api: Api, session_factory: sessionmaker[Session]
) -> None:
    """A GPU preset on a CPU-only cluster is a 422 when it is submitted, not a driver
    that fails after Ray started."""
    api.runner.cluster = [{"CPU": 2.0, "memory": 8e9}]
    refused = api.client.post("/v1/sweeps", json={**SMOKE, "resources": {"gpus_per_trial": 1}})
    assert refused.status_code == 422
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "resources", "gpus_per_trial"]
    assert issue["msg"] == (
        "a trial asks for 1 CPU and 1 GPU; no node of the cluster has them "
        "(its nodes: 2 CPUs, 0 GPUs)"
    )
    too_wide = api.client.post("/v1/sweeps", json={**SMOKE, "resources": {"cpus_per_trial": 4}})
    assert too_wide.json()["detail"][0]["loc"] == ["body", "resources", "cpus_per_trial"]
    assert stored_sweeps(session_factory) == 0
    # One node holding the whole trial is enough; a cluster that cannot say refuses nothing.
    api.runner.cluster = [{"CPU": 2.0}, {"CPU": 8.0, "GPU": 1.0}]
    on_the_gpu_node = {**SMOKE, "resources": {"gpus_per_trial": 1, "cpus_per_trial": 4}}
    assert api.client.post("/v1/sweeps", json=on_the_gpu_node).status_code == 201
    api.runner.cluster = None
    unknown = {**SMOKE, "seeds": [5], "resources": {"gpus_per_trial": 1}}
    assert api.client.post("/v1/sweeps", json=unknown).status_code == 201
    assert stored_sweeps(session_factory) == 2
