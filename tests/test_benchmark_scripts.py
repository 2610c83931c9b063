"""Benchmark scripts that need something outside the repository say so plainly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_dtr_reference_without_simrd_says_how_to_get_it_and_exits_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SIMRD_PATH"}
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dtr_reference.py"),
                          "--simrd", str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 2
    assert "simrd not importable" in res.stdout
    assert "git clone https://github.com/uwsampl/dtr-prototype" in res.stdout


def test_the_committed_gpu_run_names_its_device_and_versions():
    """Lesson 08 shows the last real-GPU run where no GPU is present (gpu_results.json,
    written by benchmarks/gpu_collect.py from gpu_run.sh's output)."""
    from minigraph.experiments import gpu
    results = gpu.committed()
    assert results is not None
    env = results["environment"]
    assert env["device"] and env["cupy"] and env["cuda_runtime"] and env["torch"]
    assert set(results["models"]) == {"mlp", "resnet", "transformer"}
    text = gpu.tables(results)
    assert env["device"] in text and "torch peak" in text


def test_the_gpu_extras_take_either_cuda_wheel_of_cupy():
    tomllib = pytest.importorskip("tomllib")      # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(r.startswith("cupy-cuda13x") for r in extras["gpu"])
    assert any(r.startswith("cupy-cuda12x") for r in extras["gpu12"])


def test_engine_speed_prints_the_planned_against_unplanned_target_and_equal_results():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "engine_speed.py"),
                          "--quick", "--steps", "3", "--warmup", "1"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("planned and unplanned: bitwise equal") == 2, res.stdout
    assert "## Targets" in res.stdout and "within 5% of the unplanned one" in res.stdout
    assert "- overall: " in res.stdout
