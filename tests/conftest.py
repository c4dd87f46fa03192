"""Shared fixtures: the real data sets, and the opt-in switches for slow, browser and
end-to-end tests."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from search_spaces.settings import DicesweepSettings
from tests.toydata import make_toy_datasets

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow", action="store_true", default=False, help="also run tests marked slow"
    )
    parser.addoption(
        "--browser", action="store_true", default=False, help="run the browser tests only"
    )
    parser.addoption(
        "--e2e", action="store_true", default=False, help="run the end-to-end sweep tests only"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The browser tests (make browser-test) need chromium and run on their own.
    browser = config.getoption("--browser")
    skip_browser = pytest.mark.skip(reason="a browser test: run with make browser-test")
    skip_rest = pytest.mark.skip(reason="not a browser test (--browser runs those only)")
    for item in items:
        if ("browser" in item.keywords) != browser:
            item.add_marker(skip_rest if browser else skip_browser)
    # The end-to-end sweeps (make e2e-test) run real sweeps for minutes, on their own:
    # --e2e selects them only; without it they are skipped.
    if config.getoption("--e2e"):
        others = [item for item in items if "e2e" not in item.keywords]
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if "e2e" in item.keywords]
    elif not browser:
        skip_e2e = pytest.mark.skip(reason="an end-to-end sweep: run with make e2e-test")
        for item in items:
            if "e2e" in item.keywords:
                item.add_marker(skip_e2e)
    if config.getoption("--runslow") or os.environ.get("DICESWEEP_RUN_SLOW") == "1":
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow or DICESWEEP_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


def _datasets_dir() -> Path | None:
    configured = os.environ.get("DICESWEEP_DATASETS_DIR")
    candidate = Path(configured) if configured else REPO_ROOT.parent / "shared" / "data"
    return candidate if candidate.is_dir() else None


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    """Root of the real data sets (``DICESWEEP_DATASETS_DIR``, else ``../shared/data``)."""
    found = _datasets_dir()
    if found is None:
        pytest.skip("real data sets not found: set DICESWEEP_DATASETS_DIR")
    return found


@pytest.fixture(scope="module")
def toy_home(tmp_path_factory: pytest.TempPathFactory) -> DicesweepSettings:
    """Settings with the toy data sets and a fresh home."""
    root = tmp_path_factory.mktemp("toy")
    datasets = make_toy_datasets(root / "datasets")
    return DicesweepSettings(home=root / "home", datasets_dir=datasets)


@contextmanager
def short_home_folder() -> Iterator[Path]:
    """A ``DICESWEEP_HOME`` short enough for Ray's socket paths under it (a pytest
    ``tmp_path`` is not), removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="dsw-", dir="/tmp"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def local_ray_head(
    module: str, num_cpus: int = 2, environment: dict[str, str] | None = None
) -> Iterator[None]:
    """A local Ray head of its own (``isolate_ray``) with ``num_cpus`` CPUs and
    ``environment`` set while it runs; the workers cannot import a test module, so
    ``module``'s functions ship by value. Ray reads its auth mode once per process, and
    other tests may have read it already: these tests are not about auth."""
    import ray

    from search_spaces.settings import isolate_ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[module])
    with pytest.MonkeyPatch.context() as env, short_home_folder() as home:
        env.delenv("RAY_TMPDIR", raising=False)  # restored afterwards: isolate_ray sets it
        env.setenv("RAY_AUTH_MODE", "disabled")
        for name, value in (environment or {}).items():
            env.setenv(name, value)
        isolate_ray(home)
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()


@pytest.fixture
def short_home() -> Iterator[Path]:
    """See ``short_home_folder``."""
    with short_home_folder() as home:
        yield home
