"""scripts/gpu-check.sh where no GPU is: one line, exit 2, nothing installed; and the
verdicts it draws from pip's reports and the trials' placements
(benchmarks/gpu_check_report.py, benchmarks/gpu_check_sweep.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_check_report import cuda_torch, pip_report  # noqa: E402
from gpu_check_sweep import most_at_once  # noqa: E402

# What the script runs before it looks for a GPU; a PATH of these alone has no nvidia-smi.
TOOLS = ("dirname", "sed", "head")
BROKEN_DRIVER = (
    '#!/bin/sh\necho "NVIDIA-SMI has failed: couldn\'t communicate with the driver"\nexit 9\n'
)


def tools_only(folder: Path) -> Path:
    """A folder of links to ``TOOLS`` (from this machine's PATH), and nothing else."""
    folder.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (folder / tool).symlink_to(found)
    return folder


@pytest.mark.parametrize("nvidia_smi", ["missing", "failing"])
def test_refuses_in_one_line_without_a_gpu(tmp_path: Path, nvidia_smi: str) -> None:
    path = tools_only(tmp_path / "bin")
    if nvidia_smi == "failing":
        (path / "nvidia-smi").write_text(BROKEN_DRIVER)
        (path / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": str(path), "VENV": str(tmp_path / "venv")}
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run(
        [bash, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("gpu-check: no NVIDIA GPU here") and "--dry-run" in lines[0]
    assert not (tmp_path / "venv").exists()  # refused before installing anything


def torch_report(version: str, requires: list[str]) -> dict[str, Any]:
    """A pip ``--report`` of one torch wheel."""
    url = f"https://index.example/torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    metadata = {"name": "torch", "version": version, "requires_dist": requires}
    return {"install": [{"metadata": metadata, "download_info": {"url": url}}]}


def test_the_cuda_build_is_told_from_the_cpu_build() -> None:
    cuda = torch_report(
        "2.13.0",
        ["filelock", 'nvidia-nccl-cu13==2.29.7; platform_system == "Linux"', "sympy>=1.13.3"],
    )
    figures, check = cuda_torch(cuda)
    assert check.ok and figures["cuda_requires"] == ["nvidia-nccl-cu13==2.29.7"]
    _, check = cuda_torch(torch_report("2.13.0+cpu", ["filelock"]))
    assert not check.ok and "no CUDA library" in check.detail


def test_a_slow_index_is_skipped_and_a_failed_resolution_fails(tmp_path: Path) -> None:
    (tmp_path / "slow.rc").write_text("124 90\n")
    report, check = pip_report(tmp_path, "slow")
    assert report is None and check is not None and check.ok and "skipped" in check.detail
    (tmp_path / "bad.rc").write_text("1 3\n")
    (tmp_path / "bad.log").write_text("Collecting torch\nERROR: No matching distribution\n")
    report, check = pip_report(tmp_path, "bad")
    assert report is None and check is not None and not check.ok
    assert check.detail == "ERROR: No matching distribution"


def test_trials_at_once_are_counted_from_their_intervals() -> None:
    overlapping = [{"start": s, "end": s + 10} for s in (0, 1, 2, 3)]
    assert most_at_once(overlapping) == 4
    assert most_at_once([{"start": s, "end": s + 1} for s in (0, 1, 2, 3)]) == 1
