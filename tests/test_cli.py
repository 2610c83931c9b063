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


def test_lab_runs_the_jupyterlab_of_this_interpreter(monkeypatch) -> None:
    # `.venv/bin/minigraph lab` with the venv not activated: `jupyter` is not on PATH, the
    # venv's python has JupyterLab; as root JupyterLab needs --allow-root to start.
    nb = Path("lessons") / "00_tour.ipynb"
    assert cli.lab_command(nb, python="/v/bin/python", root=False) == [
        "/v/bin/python", "-m", "jupyterlab", str(nb)]
    assert cli.lab_command(nb, python="/v/bin/python", root=True) == [
        "/v/bin/python", "-m", "jupyterlab", "--allow-root", str(nb)]
    seen = []
    monkeypatch.setenv("PATH", "")                      # no `jupyter` anywhere on PATH
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: object())
    class Done:
        def __init__(self, args, **kw):
            seen.append(args)
            assert kw == {"start_new_session": True}    # its own group: ended as one

        def wait(self):
            return 0

    monkeypatch.setattr(cli.subprocess, "Popen", Done)
    assert cli.main(["lab"]) == 0
    (args,) = seen
    assert args[:3] == [sys.executable, "-m", "jupyterlab"]
    assert ("--allow-root" in args) == (os.geteuid() == 0)
    assert Path(args[-1]).parts[-2:] == ("lessons", "00_tour.ipynb")


def test_lab_explains_what_is_missing(monkeypatch, capsys) -> None:
    assert cli.main(["lab", "no_such_notebook.ipynb"]) == 2
    assert "not found" in capsys.readouterr().err
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    if (ROOT / "lessons" / "00_tour.ipynb").exists():
        assert cli.main(["lab"]) == 2
        err = capsys.readouterr().err
        assert "pip install 'minigraph[lab]'" in err and sys.executable in err


# --- a user's mistake: one line, exit 2, never a silently replaced value (issue 15) ---------

PROBLEM = "id,lower,upper,size\na,0,2,100\nb,1,3,600\n"


def in_process(capsys, *argv: str) -> subprocess.CompletedProcess:
    """`minigraph ARGV` run in this process (fast); the same result shape as run_cli."""
    capsys.readouterr()
    try:
        code = cli.main(list(argv))
    except SystemExit as e:                 # argparse's usage errors exit
        code = e.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(argv), code, out.out, out.err)


def assert_one_line_exit_2(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("minigraph") and "error:" in lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_a_users_mistake_from_the_command_line_is_one_line_and_exit_2(tmp_path) -> None:
    # Through `python -m minigraph`, where the exit status is what a shell sees.
    path = tmp_path / "p.csv"
    path.write_text(PROBLEM)
    r = run_cli("plan", str(path), "--alignment", "-512")      # was planned at alignment 1
    assert_one_line_exit_2(r, "--alignment", "'-512' must be >= 1")
    assert "arena" not in r.stdout
    assert_one_line_exit_2(run_cli("tour", "--time-limit", "nan"), "minigraph tour: error",
                           "--time-limit", "'nan' must be a finite number of seconds")
    path.write_bytes("id,lower,upper,size\nb\u00e9,0,2,4\n".encode("latin-1"))
    assert_one_line_exit_2(run_cli("plan", str(path)), f"{path}, line 2", "not UTF-8")
    assert_one_line_exit_2(run_cli("plan", "--model", "nope"), "invalid choice: 'nope'")


def test_a_bad_alignment_exits_2_and_is_never_replaced_by_1(tmp_path, capsys) -> None:
    path = tmp_path / "p.csv"
    path.write_text(PROBLEM)
    for bad, words in (("-512", "'-512' must be >= 1"), ("0", "'0' must be >= 1"),
                       ("1.5", "'1.5' is not an integer")):
        r = in_process(capsys, "plan", str(path), "--alignment", bad)
        assert_one_line_exit_2(r, "--alignment", words)
        assert "arena" not in r.stdout
        assert_one_line_exit_2(in_process(capsys, "plan", "--model", "mlp", "--alignment", bad),
                               words)


def test_a_non_finite_or_non_positive_time_limit_exits_2(tmp_path, capsys) -> None:
    path = tmp_path / "p.csv"
    path.write_text(PROBLEM)
    for bad in ("nan", "inf", "-inf", "-1", "0", "soon"):
        assert_one_line_exit_2(in_process(capsys, "plan", str(path), "--planner", "anneal",
                                          "--time-limit", bad), "--time-limit")
        assert_one_line_exit_2(in_process(capsys, "tour", "--time-limit", bad),
                               "minigraph tour: error", "--time-limit")


def test_a_bad_file_exits_2_naming_the_file_and_line(tmp_path, capsys) -> None:
    cases = {
        "latin1.csv": ("id,lower,upper,size\nb\u00e9,0,2,4\n".encode("latin-1"),
                       ("line 2", "not UTF-8")),
        "binary.csv": (bytes(range(256)), ("line 2", "not UTF-8")),
        "digits.csv": ("id,lower,upper,size\na,0,2,\u0664\n".encode(), ("line 2", "size")),
        "header.csv": (b"foo,bar\n1,2\n", ("line 1", "missing column")),
        "empty.csv": (b"", ("line 1", "empty file")),
        "wide.csv": (b"id,lower,upper,size\na,0,2,4,5\n", ("line 2", "5 fields")),
        "huge.csv": (b"id,lower,upper,size\n" + b"x" * 200_000 + b",0,2,4\n",
                     ("line 2", "field limit")),
    }
    for name, (data, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert_one_line_exit_2(in_process(capsys, "plan", str(path)), str(path), *words)
    assert_one_line_exit_2(in_process(capsys, "plan", str(tmp_path / "missing.csv")),
                           "missing.csv", "cannot read the file")
    bad_plan = tmp_path / "overlap.csv"
    bad_plan.write_text("id,lower,upper,size,offset\na,0,4,100,0\nb,2,3,10,50\n")
    assert_one_line_exit_2(in_process(capsys, "plan", "--check", str(bad_plan)),
                           "line 3", "overlap")


def test_an_unknown_name_or_bad_usage_exits_2(tmp_path, capsys) -> None:
    path = tmp_path / "p.csv"
    path.write_text(PROBLEM)
    for argv, words in [
        (("plan", str(path), "--planner", "nope"), "unknown planner 'nope'"),
        (("plan", str(path), "--planner", "none", "--seed", "1"), "has no option 'seed'"),
        (("plan", "--model", "nope"), "invalid choice: 'nope'"),
        (("plan", "--model", "mlp", "--order", "nope"), "--order"),
        (("plan", "--model", "mlp", "--batch", "0"), "--batch"),
        (("plan",), "exactly one of"),
        (("plan", str(path), "--check", str(path)), "missing column offset"),  # FILE: its problem
        (("plan", "--model", "mlp", "--check", str(path)), "exactly one of"),
        (("plan", str(path), "-o", str(tmp_path / "no" / "x.csv")), "No such file"),
        (("tour", "--model", "nope"), "invalid choice: 'nope'"),
        (("tour", "--batch", "-1"), "'-1' must be >= 1"),
        (("no-such-command",), "invalid choice"),
    ]:
        assert_one_line_exit_2(in_process(capsys, *argv), words)


def test_a_minigraph_error_past_the_parser_is_one_line(monkeypatch, capsys) -> None:
    from minigraph.errors import DeviceError

    def fail(*args, **kw):
        raise DeviceError("no GPU here;\nCuPy is not installed")

    monkeypatch.setattr(cli, "tour", fail)
    r = in_process(capsys, "tour")
    assert_one_line_exit_2(r)
    assert r.stderr == "minigraph tour: error: no GPU here;; CuPy is not installed\n"


def test_valid_cli_input_still_plans(tmp_path, capsys) -> None:
    path = tmp_path / "p.csv"
    path.write_text(PROBLEM)
    r = in_process(capsys, "plan", str(path), "--planner", "greedy-size", "--alignment", "512")
    assert r.returncode == 0 and r.stderr == ""
    assert "alignment 512" in r.stdout and "arena               1536 B" in r.stdout
    r = in_process(capsys, "plan", str(path), "--planner", "anneal", "--time-limit", "0.2",
                   "--seed", "1")
    assert r.returncode == 0, r.stderr
    r = in_process(capsys, "plan", str(path))                   # no --alignment: 1 for CSV
    assert r.returncode == 0 and "alignment 1" in r.stdout



def test_plan_model_takes_the_graphs_switches(capsys) -> None:
    # Each switch reaches MemoryOptions: the arena printed is plan_memory's with the same
    # options, and strict / nnvm / safe change it where they should.
    from minigraph.memory import MemoryOptions, plan_memory
    from minigraph.models import get_model
    graph = get_model("transformer", batch=2).graph
    cases = [(("--inplace", "strict"), dict(inplace="strict")),
             (("--inplace", "last-reader"), dict(inplace=True)),
             (("--colors", "2", "--coloring", "nnvm"), dict(colors=2, coloring="nnvm")),
             (("--inplace", "last-reader", "--safe"), dict(inplace=True, safe=True))]
    arenas = set()
    for argv, kw in cases:
        r = in_process(capsys, "plan", "--model", "transformer", "--batch", "2",
                       "--planner", "ge", *argv)
        assert r.returncode == 0, r.stderr
        want = plan_memory(graph, MemoryOptions(planner="ge", **kw)).arena_bytes
        assert f"arena               {want} B" in r.stdout, (argv, r.stdout)
        arenas.add(want)
    assert len(arenas) > 1                   # the switches are not ignored


def test_graph_switches_without_a_graph_are_refused(tmp_path, capsys) -> None:
    path = tmp_path / "p.csv"
    path.write_text(PROBLEM)
    assert_one_line_exit_2(in_process(capsys, "plan", str(path), "--safe"), "needs a graph")
    assert_one_line_exit_2(in_process(capsys, "plan", "--model", "mlp", "--inplace", "x"),
                           "invalid choice")

# --- issue 16: the tour's errors, its default model, its explanations, progress bars -----

def test_tour_mistakes_print_one_line_exit_2_and_nothing_else() -> None:
    # Through a real process: the exit status a shell sees, no traceback, and no half
    # printed tour on stdout (the device is checked before anything is built).
    cases = [(("tour", "--model", "nope"), "invalid choice: 'nope'"),
             (("tour", "--batch", "0"), "'0' must be >= 1"),          # was a NaN loss
             (("tour", "--batch", "-3"), "'-3' must be >= 1")]
    from minigraph.backend import gpu_available
    if not gpu_available():
        cases.append((("tour", "--device", "gpu"), "CuPy with a CUDA device is not available"))
    for argv, words in cases:
        r = run_cli(*argv)
        assert_one_line_exit_2(r, "minigraph tour: error", words)
        assert r.stdout == "", (argv, r.stdout)


def test_the_tour_starts_on_a_model_where_the_planners_differ() -> None:
    from minigraph.tour import TOUR_MODEL, tour
    buf = io.StringIO()
    res = tour(file=buf, time_limit=0.1)
    text = buf.getvalue()
    assert res["model"].name == TOUR_MODEL
    arenas = {r.label: r.report.arena_bytes for r in res["rows"] if r.report is not None}
    sharing = {arenas[k] for k in ("ge + in-place", "bestfit + in-place",
                                   "greedy-size + in-place", "ge-max + in-place")}
    assert len(sharing) >= 3, arenas            # not a tie: the techniques differ
    lo, hi = min(sharing), max(sharing)
    assert f"x{hi / lo:.3f} between the best and the worst" in res["spread"] in text
    for words in ("measured peak", "largest workspace", "expected peak", "tracemalloc",
                  "what to try next:", "minigraph lab", "--model densenet"):
        assert words in text, words
    st = res["stats"]
    assert st.expected_peak == st.arena_bytes + st.unplanned_bytes + st.op_temporaries
    from minigraph.graph import fmt_bytes
    assert fmt_bytes(st.measured_peak) in text and fmt_bytes(st.expected_peak) in text


def test_a_plan_below_the_theoretical_minimum_row_is_explained() -> None:
    # On the LSTM in-place lowers the minimum: a row with in-place sits below the
    # "theoretical minimum" row, and the footer says why and which minimum applies.
    from minigraph.tour import tour
    buf = io.StringIO()
    res = tour("lstm", file=buf, time_limit=0.1, run=False)
    reports = [r for r in res["rows"] if r.report is not None]
    plain = next(r.report for r in reports if not r.options.inplace).theoretical_minimum
    fused = next(r.report for r in reports if r.options.inplace).theoretical_minimum
    assert fused < plain
    below = [r for r in reports if r.report.arena_bytes < plain]
    assert below and all(r.options.inplace for r in below)
    assert all(r.report.arena_bytes >= fused for r in below)
    assert (f"a row with in-place can go below the minimum without it ({plain:,} B), never "
            f"below its own ({fused:,} B)") in res["table"]
    assert "x minimum: arena / the minimum that applies to the row" in res["table"]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_draw_on_a_terminal_after_a_second_only() -> None:
    import time

    from minigraph.experiments.plan_cli import PROGRESS_DELAY, progress_bar, ticking
    quiet = io.StringIO()                       # not a terminal: nothing, however long
    with ticking("anneal", 2.0, file=quiet, tick=0.05):
        time.sleep(PROGRESS_DELAY + 0.3)
    assert quiet.getvalue() == ""
    quick = FakeTerminal()                      # a terminal, quick work: nothing
    with ticking("anneal", 2.0, file=quick, tick=0.05):
        time.sleep(0.2)
    assert quick.getvalue() == ""
    slow = FakeTerminal()                       # a terminal, over a second: a bar
    with ticking("anneal", 2.0, file=slow, tick=0.05) as bar:
        bar.ncols = 80
        time.sleep(PROGRESS_DELAY + 0.4)
    assert "anneal:" in slow.getvalue() and "/2.0 s" in slow.getvalue()
    assert progress_bar(3, "x", file=io.StringIO()).disable


def test_a_long_plan_keeps_stdout_clean(tmp_path) -> None:
    # Over a second of annealing in a process whose stderr is a pipe: no bar anywhere.
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size\n" + "".join(
        f"b{i},{i % 17},{i % 17 + 3 + i % 5},{64 + 8 * (i % 13)}\n" for i in range(200)))
    r = run_cli("plan", str(path), "--planner", "anneal", "--time-limit", "1.2")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.splitlines()[0] == f"{path}: planner anneal, alignment 1"
    assert all("\r" not in line and "|" not in line for line in r.stdout.splitlines())


def test_estimate_prints_every_technique_for_a_meta_model(capsys) -> None:
    import pytest
    pytest.importorskip("torch")
    spec = "minigraph.fromtorch.real_sizes:resnet50"
    r = in_process(capsys, "estimate", spec, "--shape", "2x3x32x32", "--inference")
    assert r.returncode == 0, r.stderr
    for row in ("weights", "theoretical minimum", "no reuse", "refcount", "GE + in-place",
                "best fit", "DTR on 24 GB", "DTR on 80 GB"):
        assert row in r.stdout, row
    assert "resnet50 (inference" in r.stdout and "0.10 GB" in r.stdout    # 25.6 M weights
    t = in_process(capsys, "estimate", spec, "--shape", "2x3x32x32")
    assert t.returncode == 0 and "resnet50 (training" in t.stdout


def test_estimate_mistakes_are_one_line_and_exit_2(capsys) -> None:
    import pytest
    pytest.importorskip("torch")
    spec = "minigraph.fromtorch.real_sizes:resnet50"
    assert_one_line_exit_2(in_process(capsys, "estimate", "no_colon", "--shape", "2x3"),
                           "package.module:factory")
    assert_one_line_exit_2(in_process(capsys, "estimate", "minigraph.cli:nope",
                                      "--shape", "2x3"), "nope")
    assert_one_line_exit_2(in_process(capsys, "estimate", spec, "--shape", "2x3xq"),
                           "2x3xq")
    assert_one_line_exit_2(in_process(capsys, "estimate", spec, "--shape", "2x3x32x32",
                                      "--dtype", "bfloat16"), "bfloat16")
    assert_one_line_exit_2(in_process(capsys, "estimate", spec, "--shape", "2x4x32x32",
                                      "--inference"), "ResNet50", "2x4x32x32", "channels")
    assert_one_line_exit_2(in_process(capsys, "estimate", spec), "--shape")
