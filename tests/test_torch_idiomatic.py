"""The idiomatic PyTorch baselines of the GPU benchmark are the same models: at minigraph's
initial weights they give minigraph's loss, and one step (eager SGD, or the update fused
into the backward pass) gives minigraph's updated parameters (issue 44: a baseline a user
would write, not a replay of minigraph's graph)."""

import numpy as np
import pytest

import minigraph as mg
from minigraph.models import get_model

torch = pytest.importorskip("torch")
from minigraph.experiments.torch_idiomatic import (  # noqa: E402
    bench_idiomatic,
    idiomatic_module,
    loss_and_updated,
    minigraph_layout,
)

SMALL = {"mlp": {}, "resnet": dict(depth=18, image=8, batch=4, width=4),
         "transformer": dict(layers=2, heads=2, seq=8, d_model=16, vocab=32, batch=2)}


@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.parametrize("variant", ["eager", "fused update"])
def test_the_idiomatic_module_takes_minigraphs_step(name, variant):
    m = get_model(name, **SMALL[name])
    feeds = m.feeds(0)
    ours = mg.Executor(m.graph, device="cpu").run(feeds)
    loss, updated = loss_and_updated(m, variant)
    np.testing.assert_allclose(loss, ours[m.loss], rtol=1e-5)
    expect = minigraph_layout(m, {p: ours[f"{p}_new"] for p in m.params})
    assert expect.keys() == updated.keys()
    for k, v in updated.items():
        np.testing.assert_allclose(v, expect[k], rtol=1e-3, atol=1e-5,
                                   err_msg=f"{name}/{variant}: {k}")


def test_a_layout_mismatch_is_refused_by_shape():
    m = get_model("resnet", **SMALL["resnet"])
    m.config["width"] = 8                     # the module no longer fits the weights
    with pytest.raises(ValueError, match="parameter shape"):
        idiomatic_module(m)


@pytest.mark.parametrize("variant", ["eager", "fused update"])
def test_the_benchmark_runs_on_the_cpu(variant):
    r = bench_idiomatic(get_model("mlp"), "cpu", variant, repeats=2, warmup=1)
    assert r["status"] == "ok" and r["ms"] > 0 and r["peak"] is None
