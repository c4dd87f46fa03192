"""Hostile submissions, one table: each gets a 4xx whose message names the field and the
rule, and nothing is stored or sent to the cluster. ``docs/reliability.md`` counts
this table's rows (``pytest tests/service/test_hostile_input.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

import search_spaces.resolve
from tests.service.api_fixtures import MakeApi, stored_sweeps

SMOKE = {"extends": "smoke"}
LIMIT = 64 * 1024  # the request limit these tests run under (max_request_bytes)


def nested(depth: int) -> bytes:
    return b'{"extends": "smoke", "description": ' + b"[" * depth + b"]" * depth + b"}"


def own_data(path: str, **fields: str) -> dict[str, Any]:
    dataset = {"path": path, "format": "conll", **fields}
    task = {"kind": "ner", "dataset": dataset, "variant": "original"}
    return {**SMOKE, "task": task}


# A file outside the roots that links inside them point at: no refusal may quote it.
SECRET_LINE = "root:x:0:0:secret-line-of-the-linked-file"
LONG_PART = "a" * 256  # one byte over a file name's limit: ENAMETOOLONG when looked up


def losses(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {**SMOKE, "search_space": {"losses": entries}}


@dataclass(frozen=True)
class Hostile:
    """A request body (a spec, or raw bytes), and what its refusal must say."""

    body: dict[str, Any] | bytes
    status: int
    field: str  # the refusal's loc, joined with dots ("" when the message names it)
    words: str  # in the message
    chunked: bool = False


# A folder outside the owner's data folders is refused as a missing one is.
NOT_OWN = "is not a folder in your own data folders or the shared ones"
HOSTILE: dict[str, Hostile] = {
    # Paths out of the data roots
    "data-dotdot": Hostile(own_data("../outside"), 422, "task.dataset.0.path", "'..'"),
    "data-absolute": Hostile(own_data("/etc"), 422, "task.dataset.0.path", NOT_OWN),
    "data-symlink": Hostile(own_data("link"), 422, "task.dataset.0.path", NOT_OWN),
    "data-home": Hostile(own_data("~root"), 422, "task.dataset.0.path", NOT_OWN),
    "model-system-file": Hostile({**SMOKE, "model": "/etc/passwd"}, 422, "model", "absolute"),
    "model-dotdot": Hostile({**SMOKE, "model": "../../../etc/passwd"}, 422, "model", "'..'"),
    "model-symlink": Hostile({**SMOKE, "model": "models/etc"}, 422, "model", "lies outside"),
    # Files, not folders, linked out of the roots
    "data-file-symlink": Hostile(
        own_data("filelink"), 422, "task.dataset.0.path", "filelink/train.conll' lies outside"
    ),
    "model-config-symlink": Hostile(
        {**SMOKE, "model": "models/configlink"}, 422, "model", "config.json lies outside"
    ),
    # Names no file system holds
    "data-long-part": Hostile(own_data(LONG_PART), 422, "task.dataset.0.path", "255 bytes"),
    "model-long-part": Hostile({**SMOKE, "model": f"models/{LONG_PART}"}, 422, "model", "255"),
    "data-long-path": Hostile(
        own_data("/".join(["a" * 200] * 30)), 422, "task.dataset.0.path", "4096"
    ),
    # Names that break the exports' formats
    "name-newline": Hostile(
        own_data("conll", name="x\n\\input{/etc/passwd}"),
        422,
        "task.dataset.0.name",
        "one line",
    ),
    # Import-like names where the spec takes a name from a closed list
    "loss-import": Hostile(
        losses([{"name": "torch.nn.CrossEntropyLoss"}]),
        422,
        "search_space.losses.0.name",
        "unknown loss",
    ),
    "loss-dunder": Hostile(
        losses([{"name": "__import__('os').system"}]),
        422,
        "search_space.losses.0.name",
        "unknown loss",
    ),
    "dataset-import": Hostile(
        {**SMOKE, "task": {"kind": None, "dataset": "os:system"}},
        422,
        "task.dataset.0",
        "unknown dataset",
    ),
    "kind-import": Hostile(
        {**SMOKE, "task": {"kind": "subprocess.run"}}, 422, "task.kind", "unknown kind"
    ),
    "scheduler-import": Hostile(
        {**SMOKE, "scheduler": {"kind": "ray.tune.schedulers.PBT"}},
        422,
        "scheduler.kind",
        "unknown kind 'ray.tune.schedulers.PBT'; valid: fifo, asha, halving, median",
    ),
    "name-shell": Hostile({**SMOKE, "name": "x; rm -rf /"}, 422, "name", "pattern"),
    # Sizes
    "million-trials": Hostile(
        {
            **losses([{"name": "focal", "gamma": g / 10} for g in range(100)]),
            "seeds": list(range(10_000)),
        },
        422,
        "",
        "1000000 trials",
    ),
    "body-over-limit": Hostile({**SMOKE, "description": "x" * LIMIT}, 413, "", "exceeds the limit"),
    "body-over-limit-chunked": Hostile(
        {**SMOKE, "description": "x" * LIMIT}, 413, "", "exceeds the limit", chunked=True
    ),
    "deep-nesting": Hostile(nested(100_000), 413, "", "exceeds the limit"),
    "nesting-in-limit": Hostile(nested(5_000), 400, "", "nested too deeply"),
    "nesting-parsed": Hostile(nested(500), 422, "description", "valid string"),
    # Numbers JSON allows and the spec does not
    "nan": Hostile(
        b'{"extends": "smoke", "training": {"learning_rate": NaN}}',
        422,
        "training.learning_rate",
        "finite",
    ),
    "infinity": Hostile(
        b'{"extends": "smoke", "training": {"learning_rate": Infinity}}',
        422,
        "training.learning_rate",
        "finite",
    ),
    "huge-float": Hostile(
        {**SMOKE, "training": {"learning_rate": 1e308}}, 422, "training.learning_rate", "less"
    ),
    "huge-int": Hostile({**SMOKE, "training": {"epochs": 10**30}}, 422, "training.epochs", "less"),
    "negative-seed": Hostile({**SMOKE, "seeds": [-1]}, 422, "seeds", "[0,"),
    "alpha-over-one": Hostile(
        losses([{"name": "tversky", "alpha": 1.5, "beta": 0.5}]),
        422,
        "search_space.losses.0.alpha",
        "less than or equal to 1",
    ),
    "negative-gamma": Hostile(
        losses([{"name": "focal", "gamma": -1}]),
        422,
        "search_space.losses.0.gamma",
        "greater than or equal to 0",
    ),
    "zero-epochs": Hostile({**SMOKE, "training": {"epochs": 0}}, 422, "training.epochs", "greater"),
    "huge-batch": Hostile(
        {**SMOKE, "training": {"batch_size": 10**9}}, 422, "training.batch_size", "less"
    ),
    "negative-cpus": Hostile(
        {**SMOKE, "resources": {"cpus_per_trial": -1}}, 422, "resources.cpus_per_trial", "greater"
    ),
    # Text
    "lone-surrogate": Hostile(
        b'{"extends": "smoke", "description": "\\ud800"}', 422, "description", "lone surrogate"
    ),
    "nul-in-text": Hostile(
        b'{"extends": "smoke", "description": "a\\u0000b"}', 422, "description", "without NUL"
    ),
    "nul-in-key": Hostile(b'{"extends": "smoke", "\\u0000": 1}', 422, "'\\x00'", "without NUL"),
    "not-utf8": Hostile(
        b'{"extends": "smoke", "description": "\xff"}', 400, "", "not UTF-8 text: invalid start"
    ),
    # Presets
    "preset-extends-itself": Hostile({"extends": "loop"}, 422, "extends", "cycle: loop -> loop"),
    "unknown-preset": Hostile({"extends": "../smoke"}, 422, "extends", "unknown preset"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_submission_is_refused_naming_its_field_and_creates_nothing(
    make_api: MakeApi,
    session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    case: str,
) -> None:
    hostile = HOSTILE[case]
    api = make_api(max_request_bytes=LIMIT, max_trials=1000)
    root = Path(api.settings.datasets_dir or "") / "local"  # the loopback owner's folder
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "models" / "etc").symlink_to("/etc")
    (tmp_path / "outside").mkdir()
    (root / "link").symlink_to(tmp_path / "outside")
    secret = tmp_path / "outside" / "passwd"
    secret.write_text(f"{SECRET_LINE}\n")
    (root / "filelink").mkdir()
    (root / "filelink" / "train.conll").symlink_to(secret)
    (root / "filelink" / "dev.conll").write_text("EU B-ORG\n")
    (root / "models" / "configlink").mkdir()
    (root / "models" / "configlink" / "config.json").symlink_to(secret)
    loop = {"name": "loop", "extends": "loop"}
    looping = {**search_spaces.resolve.shared_presets(), "loop": loop}
    monkeypatch.setattr(search_spaces.resolve, "shared_presets", lambda: looping)

    headers = {"content-type": "application/json"}
    body = hostile.body
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent: Any = iter([content[:100], content[100:]]) if hostile.chunked else content
    refused = api.client.post("/v1/sweeps", content=sent, headers=headers)

    assert refused.status_code == hostile.status, refused.text
    assert refused.headers["content-type"] == "application/json"
    answer = refused.json()
    if isinstance(answer["detail"], list):
        issues = [(".".join(map(str, i["loc"][1:])), i["msg"]) for i in answer["detail"]]
        assert any(loc == hostile.field and hostile.words in msg for loc, msg in issues), issues
    else:
        assert hostile.field == ""
        assert hostile.words in answer["detail"], answer
    assert SECRET_LINE not in refused.text
    assert len(refused.content) < 4096  # a short prefix of a bad value at most
    assert stored_sweeps(session_factory) == 0
    assert api.runner.submitted == []


def test_a_huge_value_is_quoted_back_by_a_short_prefix_only(make_api: MakeApi) -> None:
    # Seen: a 100 KB `extends` came back whole in the 422's message.
    api = make_api(max_request_bytes=1_000_000)
    for body in (
        {"extends": "x" * 100_000},
        losses([{"name": "x" * 100_000}]),
        own_data("x" * 4000),
    ):
        refused = api.client.post("/v1/sweeps", json=body)
        assert refused.status_code in (404, 422), refused.text
        assert len(refused.content) < 4096, refused.text[:300]


def test_a_nul_in_an_id_or_a_header_is_a_clean_4xx_on_every_store(
    make_api: MakeApi, session_factory: sessionmaker[Session]
) -> None:
    # Seen: PostgreSQL refuses a NUL in a query parameter, and the API answered 500.
    api = make_api()
    for path in ("/v1/sweeps/a%00b", "/v1/sweeps/a%00b/trials", "/v1/grid?ids=a%00b"):
        assert api.client.get(path).status_code == 404, path
    assert api.client.post("/v1/sweeps/a%00b/cancel").status_code == 404
    keyed = api.client.post("/v1/sweeps", json=SMOKE, headers={"Idempotency-Key": "a\x00b"})
    assert keyed.status_code == 400, keyed.text
    assert "none NUL" in keyed.json()["detail"]
    assert stored_sweeps(session_factory) == 0
