"""The `minigraph` command: `python -m minigraph tour` prints the summary and the table."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import minigraph as mg
from minigraph import cli
from minigraph.experiments.training import train
from minigraph.memory.planners import PLANNERS

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run([sys.executable, "-m", "minigraph", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_python_m_minigraph_tour_prints_the_summary_and_the_memory_table() -> None:
    r = run_cli("tour")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    out = r.stdout
    for text in ("nodes", "tensors", "activations", "gradients", "parameters", "loss",
                 "no reuse", "in-place alone", "refcount (MXNet)", "refcount + in-place",
                 "2 colours", "theoretical minimum"):
        assert text in out, text
    for name in PLANNERS:
        if name not in ("none", "refcount"):
            assert f"{name} + in-place" in out, name


def test_tour_numbers_come_from_the_plans() -> None:
    buf = io.StringIO()
    from minigraph.tour import tour
    res = tour("mlp", file=buf, time_limit=0.1)
    text = buf.getvalue()
    rows = {r.label: r.report for r in res["rows"]}
    none, both = rows["no reuse"], rows["refcount + in-place"]
    assert f"{none.arena_bytes:,}" in text and f"{both.arena_bytes:,}" in text
    assert both.arena_bytes <= none.arena_bytes
    assert f"{none.theoretical_minimum:,}" in text
    for r in res["rows"]:
        if r.report is not None:
            assert r.report.arena_bytes >= r.report.theoretical_minimum
    assert f"loss {res['loss']:.6f}" in text
    m = res["model"]
    assert abs(res["loss"] - train(m, 1)[0][0]) < 1e-5


def test_tour_takes_a_model_and_a_batch() -> None:
    buf = io.StringIO()
    from minigraph.tour import tour
    res = tour("cnn", batch=2, file=buf, time_limit=0.05)
    assert res["model"].graph.tensors["x"].shape[0] == 2
    assert "LeNet-style CNN" in buf.getvalue()


def test_models_lists_the_zoo(capsys) -> None:
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    from minigraph.models import MODELS
    for name in MODELS:
        assert name in out


def test_plan_subcommand_prints_its_own_help() -> None:
    r = run_cli("plan", "--help")
    assert "Traceback" not in r.stderr
    assert r.returncode == 0 and "minigraph plan" in r.stdout


def test_no_subcommand_prints_help(capsys) -> None:
    assert cli.main([]) == 0
    assert "tour" in capsys.readouterr().out


def test_version() -> None:
    r = run_cli("--version")
    assert r.returncode == 0 and mg.__version__ in r.stdout


def test_tour_of_resnet50_plans_without_running() -> None:
    buf = io.StringIO()
    from minigraph.tour import tour
    res = tour("resnet50", file=buf, time_limit=0.05)
    text = buf.getvalue()
    assert res["loss"] is None and "not run" in text
    assert "25,557,032 values" in text and "theoretical minimum" in text


def test_lab_opens_the_tour_notebook_in_jupyter_lab(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(cli.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(cli.subprocess, "call", lambda args: seen.append(args) or 0)
    assert cli.main(["lab"]) == 0
    (args,) = seen
    assert args[:2] == ["/usr/bin/jupyter", "lab"]
    assert args[2].endswith("lessons/00_tour.ipynb") or args[2].endswith("lessons\\00_tour.ipynb")


def test_lab_explains_what_is_missing(monkeypatch, capsys) -> None:
    assert cli.main(["lab", "no_such_notebook.ipynb"]) == 2
    assert "not found" in capsys.readouterr().err
    monkeypatch.setattr(cli.shutil, "which", lambda name: None)
    if (ROOT / "lessons" / "00_tour.ipynb").exists():
        assert cli.main(["lab"]) == 2
        assert "pip install 'minigraph[lab]'" in capsys.readouterr().err
