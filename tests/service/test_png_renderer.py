"""Every PNG the API serves comes from its one renderer, off the request threads and
bounded, and draws names as text: the merged grid's PNGs too (seen: drawn on the
request threads, 16 of them held a list of sweeps for 25 s), and a data set named in
matplotlib's mathtext (seen: 500 on both PNG routes)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from search_spaces.reports import paper_table, to_png
from sweep_service.api.errors import ApiError
from sweep_service.api.grid import PngRenderer
from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft

MATHTEXT = r"$\undefinedmacro{x}$"  # matplotlib's mathtext refuses it


def finished(sweep_id: str, tracking: MlflowClient, dataset: str = "mrpc") -> None:
    write_trials(
        tracking,
        sweep_id,
        [
            FakeTrial({"name": "ce"}, seed=0, dataset=dataset, eval_f1=80.0),
            FakeTrial({"name": "ce"}, seed=1, dataset=dataset, eval_f1=81.0),
            FakeTrial({"name": "dice"}, seed=0, dataset=dataset, eval_f1=82.0),
            FakeTrial({"name": "dice"}, seed=1, dataset=dataset, eval_f1=84.0),
        ],
    )


def test_a_name_in_mathtext_is_drawn_as_text_on_both_png_routes(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    sweep = create_sweep(session, alice.id, make_draft(MATHTEXT.strip("$\\{}"), trials=4)).sweep
    finished(sweep.id, tracking, dataset=MATHTEXT)
    headers = bearer(create_api_key(session, alice.id).plain_key)
    for path in (f"/v1/sweeps/{sweep.id}/grid", f"/v1/grid?ids={sweep.id}"):
        separator = "&" if "?" in path else "?"
        answer = api.client.get(f"{path}{separator}format=png", headers=headers)
        assert answer.status_code == 200, (path, answer.text[:300])
        assert answer.content.startswith(b"\x89PNG")


def test_merged_pngs_come_from_the_one_renderer(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    first = create_sweep(session, alice.id, make_draft("first", trials=4)).sweep
    second = create_sweep(session, alice.id, make_draft("second", trials=4)).sweep
    finished(first.id, tracking)
    finished(second.id, tracking, dataset="ud_en_ewt")
    headers = bearer(create_api_key(session, alice.id).plain_key)
    renderer = api.client.app.state.services.png  # type: ignore[attr-defined]
    renderer._max_waiting_per_owner = 12  # alice's twelve at once: her share made room
    paths = [
        f"/v1/grid?ids={ids}&rows={rows}&cols={cols}&format=png"
        for ids in (first.id, second.id, f"{first.id},{second.id}", f"{second.id},{first.id}")
        for rows, cols in (("loss", "dataset"), ("dataset", "loss"), ("loss", "sweep"))
    ]
    drawn_when_listed: list[int] = []  # how many drawings were done as each listing answered

    def list_sweeps() -> None:
        deadline = time.monotonic() + 120
        while renderer.drawn < len(paths) or any(not f.done() for f in renderer._kept.values()):
            assert time.monotonic() < deadline, f"{renderer.drawn} of {len(paths)} drawn"
            assert api.client.get("/v1/sweeps", headers=headers).status_code == 200
            drawn_when_listed.append(renderer.drawn)

    with ThreadPoolExecutor(len(paths) + 1) as pool:
        lister = pool.submit(list_sweeps)
        answers = list(pool.map(lambda path: api.client.get(path, headers=headers), paths))
        lister.result(timeout=120)
    assert [a.status_code for a in answers] == [200] * len(paths), answers[0].text
    assert all(a.content.startswith(b"\x89PNG") for a in answers)
    assert renderer.drawn == len(paths)  # each drawn once, by the renderer
    again = api.client.get(paths[0], headers=headers)
    assert again.content == answers[0].content and renderer.drawn == len(paths)  # kept
    # The list of sweeps answered while drawings still waited: no request thread held them.
    assert any(drawn < len(paths) for drawn in drawn_when_listed), drawn_when_listed


def small_table(dataset: str) -> pd.DataFrame:
    rows = [
        {"loss": loss, "loss_name": loss, "dataset": dataset, "variant": "original"}
        | {"seed": seed, "eval_f1": 80.0 + seed, "status": "FINISHED"}
        for loss in ("ce", "dice")
        for seed in (0, 1)
    ]
    return paper_table(pd.DataFrame(rows), "eval_f1")


def test_the_renderer_refuses_more_drawings_than_it_queues() -> None:
    renderer = PngRenderer(max_waiting=1)
    drawing = renderer.png(small_table("mrpc"))
    with pytest.raises(ApiError) as refused:
        renderer.png(small_table("qqp"))
    assert refused.value.code == "renderer_busy"
    assert refused.value.headers == {"Retry-After": "2"}
    assert drawing.result(timeout=60).startswith(b"\x89PNG")
    assert renderer.png(small_table("qqp")).result(timeout=60).startswith(b"\x89PNG")  # its turn


def test_one_owner_cannot_fill_the_queue_for_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """bob's burst is refused at his share (2 of 4 here); alice's drawing still queues."""
    gate = threading.Event()

    def held(table: pd.DataFrame) -> bytes:  # the real drawing, once the test lets it go
        gate.wait(timeout=60)
        return to_png(table)

    monkeypatch.setattr("sweep_service.api.grid.to_png", held)
    renderer = PngRenderer(max_waiting=4, max_waiting_per_owner=2)
    bobs = [renderer.png(small_table(f"bob-{n}"), "bob") for n in range(2)]
    with pytest.raises(ApiError) as refused:
        renderer.png(small_table("bob-2"), "bob")
    assert refused.value.code == "renderer_busy"
    assert "2 plots of yours being drawn" in str(refused.value.body)
    alices = renderer.png(small_table("alice"), "alice")
    shared = renderer.png(small_table("bob-0"), "alice")  # a drawing bob asked for: shared
    assert shared is bobs[0]
    gate.set()
    for drawing in (*bobs, alices):
        assert drawing.result(timeout=60).startswith(b"\x89PNG")
    assert renderer.png(small_table("bob-2"), "bob").result(timeout=60).startswith(b"\x89PNG")
