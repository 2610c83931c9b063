"""Models written in PyTorch, imported with `from_torch` (issue 21, point 4): the zoo of
`minigraph.fromtorch.zoo` imports; on the imported ResNet-18 and GPT block every planner
of the registry gives a valid plan and DTR's simulation runs; the tour, the explorer, the
widget and `minigraph tour --torch` accept an imported model; an imported CNN that maps
fully runs bit for bit the same in every planned arena as without reuse."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from graphgen import bytes_equal

torch = pytest.importorskip("torch")

import minigraph as mg  # noqa: E402
from minigraph.cli import main  # noqa: E402
from minigraph.errors import BudgetError, ThrashError  # noqa: E402
from minigraph.fromtorch import from_torch  # noqa: E402
from minigraph.fromtorch.zoo import (  # noqa: E402
    TORCH_MODELS,
    TorchModelError,
    imported,
    torch_model,
)
from minigraph.memory.planners import JOINT_PLANNERS, PLANNERS, options_for  # noqa: E402
from minigraph.runtime.dtr import simulate  # noqa: E402
from minigraph.tour import opaque_nodes, tour  # noqa: E402
from minigraph.viz.explorer import CUSTOM, MemoryExplorer  # noqa: E402

SMALL = {"mlp": {}, "cnn": {}, "resnet18": {"batch": 2, "image": 16, "width": 4},
         "gpt_block": {"batch": 1, "seq": 8, "d_model": 32, "heads": 2}}
_CACHE: dict[str, object] = {}


def small(name: str):
    """The zoo model `name` at its test size, imported once per session."""
    if name not in _CACHE:
        _CACHE[name] = imported(name, **SMALL[name])
    return _CACHE[name]


def torch_loss(name: str) -> float:
    case = torch_model(name, **SMALL[name])
    with torch.no_grad():
        return float(case.loss_fn(case.module(*case.example_inputs), *case.targets))


def test_importing_the_zoo_does_not_import_torch():
    code = ("import sys, minigraph, minigraph.fromtorch, minigraph.fromtorch.zoo, "
            "minigraph.fromtorch.architectures, "
            "minigraph.ops.opaque, minigraph.cli, minigraph.tour; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_zoo_builders_refuse_bad_names_and_options():
    with pytest.raises(TorchModelError, match="nosuch"):
        torch_model("nosuch")
    with pytest.raises(TorchModelError, match="'depth'"):
        torch_model("resnet18", depth=50)
    with pytest.raises(TorchModelError, match="heads"):
        torch_model("gpt_block", d_model=30, heads=4)
    with pytest.raises(TorchModelError, match="batch"):
        torch_model("cnn", batch=0)


def test_zoo_sizes_are_the_real_ones_when_asked():
    # ResNet-18 at its paper's width has 11.2M parameters at 1000 classes (torchvision's
    # count); here with 10 classes: 11,181,642. GPT-2 small's block: 7,087,872.
    resnet = torch_model("resnet18", width=64, image=224, batch=1).module
    assert sum(p.numel() for p in resnet.parameters()) == 11_181_642
    block = torch_model("gpt_block", d_model=768, heads=12, seq=16).module
    assert sum(p.numel() for p in block.parameters()) == 7_087_872


@pytest.mark.parametrize("name", sorted(TORCH_MODELS))
def test_every_zoo_model_maps_fully_and_its_step_is_pytorchs(name):
    model = small(name)
    g = model.graph
    assert g.outputs[0] == model.loss and len(model.params) >= 2
    assert {f"{p}_new" for p in model.params} <= set(g.outputs)
    assert not opaque_nodes(g) and model.report.runs, f"every op of {name} should map"
    out = mg.Executor(g, mg.plan_memory(g)).run(model.feeds(0))
    assert float(out[model.loss]) == pytest.approx(torch_loss(name), rel=1e-4)


@pytest.mark.parametrize("name", ["resnet18", "gpt_block"])
def test_every_planner_gives_a_valid_plan_on_the_imported_model(name):
    g = small(name).graph
    arenas = {}
    for planner in sorted(PLANNERS):
        args = options_for(planner, {"time_limit": 0.5, "seed": 0})
        report = mg.plan_memory(g, mg.MemoryOptions(planner=planner, inplace=True,
                                                    planner_args=args))
        report.plan.validate(g)
        assert report.theoretical_minimum <= report.arena_bytes <= report.no_reuse_bytes
        arenas[planner] = report.arena_bytes
    assert min(arenas.values()) < arenas["none"]        # sharing saves bytes
    for planner in sorted(JOINT_PLANNERS):  # order and layout together: small graphs only
        with pytest.raises(mg.PlanError, match=f"{len(g.nodes)} nodes"):
            mg.plan_memory(g, mg.MemoryOptions(planner=planner,
                                               planner_args={"time_limit": 0.5}))


@pytest.mark.parametrize("name", ["resnet18", "gpt_block"])
def test_dtr_simulation_runs_on_the_imported_model(name):
    g = small(name).graph
    full = simulate(g, ratio=1.0)
    assert full.evictions == 0 and full.overhead == pytest.approx(1.0)
    finished = []
    for ratio in (0.8, 0.6, 0.5, 0.4):
        try:
            trace = simulate(g, ratio=ratio, heuristic="dtr")
        except (BudgetError, ThrashError):
            continue
        assert trace.budget < full.budget and trace.overhead >= 1.0
        finished.append(trace)
    assert finished, "DTR finished at no budget below the peak"
    assert any(t.evictions > 0 for t in finished)


def test_tour_of_an_imported_model_runs_the_step():
    model = small("cnn")
    buf = io.StringIO()
    result = tour(model, file=buf, time_limit=0.1)
    text = buf.getvalue()
    assert text.startswith(f"minigraph tour: {model.name}")
    assert result["model"] is model
    assert result["loss"] == pytest.approx(torch_loss("cnn"), rel=1e-4)
    assert "mg.memory_widget(model)" in text
    with pytest.raises(mg.MinigraphError, match="batch"):
        tour(model, batch=4, file=io.StringIO())
    with pytest.raises(mg.MinigraphError, match="int"):
        tour(42, file=io.StringIO())


class _Erf(torch.nn.Module):
    def forward(self, x):
        return torch.erf(x)


def _opaque_model():
    """An MLP with erf, a Core ATen op minigraph has no kernel for."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), _Erf(), torch.nn.Linear(16, 4))
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    return from_torch(net, (x,), torch.nn.functional.cross_entropy, targets=(y,),
                      name="erf_mlp")


def test_tour_of_a_graph_with_opaque_ops_plans_and_says_why_it_does_not_run():
    model = _opaque_model()
    opaque = opaque_nodes(model.graph)
    assert opaque, "erf was expected to stay opaque"
    buf = io.StringIO()
    result = tour(model, file=buf, time_limit=0.1, run=True)
    text = buf.getvalue()
    lines = [ln for ln in text.splitlines() if ln.startswith("not run:")]
    assert len(lines) == 1 and "opaque" in lines[0] and opaque[0] in lines[0]
    assert result["loss"] is None and result["stats"] is None
    assert all(r.report is not None or r.note.startswith("skipped") for r in result["rows"])


@pytest.mark.parametrize("name", ["cnn", "gpt_block"])
def test_explorer_builds_on_an_imported_model(name):
    model = small(name)
    ex = MemoryExplorer(model)
    assert ex.initial.model == CUSTOM and ex.graph(ex.initial) is model.graph
    res = ex.compute(ex.initial.replace(planner="bestfit", inplace=True, dtr=True))
    assert res.report.arena_bytes <= res.report.no_reuse_bytes
    assert res.dtr is not None and res.headline


def test_widget_takes_an_imported_model():
    pytest.importorskip("ipywidgets")
    pytest.importorskip("matplotlib")
    model = _opaque_model()
    w = mg.memory_widget(model, planner="ge", inplace=True)
    assert w.result.graph is model.graph and w.result.state.planner == "ge"
    w.result.report.plan.validate(model.graph)
    w.set(planner="bestfit", dtr=True)
    assert w.result.state.planner == "bestfit" and w.result.dtr is not None
    assert w.result.report.arena_bytes <= w.result.report.no_reuse_bytes


@pytest.mark.parametrize("planner", sorted(PLANNERS))
def test_imported_cnn_runs_bitwise_equal_in_every_planned_arena(planner):
    model = small("cnn")
    g = model.graph
    assert not opaque_nodes(g), "the zoo's CNN must map fully"
    feeds = model.feeds(0)
    base = mg.Executor(g, mg.plan_memory(g, mg.MemoryOptions(planner="none"))).run(feeds)
    for inplace in (False, True):
        args = options_for(planner, {"time_limit": 0.2, "seed": 0})
        report = mg.plan_memory(g, mg.MemoryOptions(planner=planner, inplace=inplace,
                                                    planner_args=args))
        out = mg.Executor(g, report).run(feeds)
        assert bytes_equal(out, base), (planner, inplace)
    assert np.isfinite(float(base[model.loss]))


def test_cli_tour_torch(capsys):
    assert main(["tour", "--torch", "cnn", "--time-limit", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "minigraph tour: torch_cnn" in out and "one SGD step" in out
    assert main(["tour", "--torch", "cnn", "--model", "mlp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not both" in err[0]
    with pytest.raises(SystemExit) as e:
        main(["tour", "--torch", "nosuch"])
    assert e.value.code == 2


def test_benchmark_prints_each_architecture_with_its_nodes_and_planned_bytes(capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import from_torch as bench  # benchmarks/from_torch.py
    assert bench.main(["--quick", "--architectures", "--only", "text_classifier,conv1d"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(ln for ln in lines if ln.startswith("| architecture |"))
    assert "| ATen nodes | mapped | opaque |" in header and "bestfit + in-place" in header
    for name in ("text_classifier", "conv1d"):
        cells = next(ln for ln in lines if ln.startswith(f"| {name} |")).split("|")[1:-1]
        aten, mapped, opaque = (int(c) for c in cells[1:4])
        assert aten == mapped > 0 and opaque == 0
        assert len(cells) == len(header.split("|")) - 2 and "KiB" in cells[4]
