"""Benchmark scripts that need something outside the repository say so plainly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_dtr_reference_without_simrd_says_how_to_get_it_and_exits_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SIMRD_PATH"}
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dtr_reference.py"),
                          "--simrd", str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 2
    assert "simrd not importable" in res.stdout
    assert "git clone https://github.com/uwsampl/dtr-prototype" in res.stdout
