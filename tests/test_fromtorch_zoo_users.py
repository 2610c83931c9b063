"""Twelve common architectures written the way their users write them, imported whole.

Each model of `minigraph.fromtorch.architectures` is plain PyTorch: LeNet, a MobileNetV2 block,
a ViT with a class token and erf GELU, a nanoGPT block with a `tril` causal mask and tied
weights, a BERT layer with an attention mask, a U-Net with `ConvTranspose2d`, an
MLP-Mixer, a CNN with GroupNorm + SiLU + LeakyReLU, a text classifier with `padding_idx`,
`nn.LSTM`, `nn.TransformerEncoderLayer` and a Conv1d network. For each:

- the import maps every ATen node (no opaque node), and the graph runs;
- one step gives PyTorch's loss and updated parameters (float32 to rtol 1e-4, float64 to
  rtol 1e-8);
- every planner's arena run (in-place on) is bitwise equal to the run without a plan.

Skipped without PyTorch. Sizes are tiny; most of the time is PyTorch's own tracing.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from graphgen import bytes_equal

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

import minigraph as mg  # noqa: E402
from minigraph.fromtorch import from_torch  # noqa: E402
from minigraph.fromtorch.architectures import ARCHITECTURES, architecture  # noqa: E402
from minigraph.memory.planners import PLANNERS, options_for  # noqa: E402

LR = 0.1
DTYPES = {"float32": 1e-4, "float64": 1e-8}       # rtol of the loss and the new parameters
_IMPORTED: dict = {}


def step(name: str, dtype_name: str):
    """(module, inputs, loss_fn, targets, model): the case and its import, once each."""
    key = (name, dtype_name)
    if key not in _IMPORTED:
        module, inputs, loss_fn, targets = architecture(name, dtype_name)
        model = from_torch(module, inputs, loss_fn, targets=targets, lr=LR, name=name)
        _IMPORTED[key] = (module, inputs, loss_fn, targets, model)
    return _IMPORTED[key]


def pytorch_step(module, inputs, loss_fn, targets):
    """PyTorch's loss and updated parameters (minigraph's names) for one SGD step."""
    ref = copy.deepcopy(module)
    loss = loss_fn(ref(*inputs), *targets)
    loss.backward()
    new = {}
    for name, p in ref.named_parameters():       # tied weights appear once
        new[name.replace(".", "_")] = (p - LR * p.grad).detach().numpy()
    return float(loss.detach()), new


@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
@pytest.mark.parametrize("name", ARCHITECTURES)
def test_architecture_imports_whole_and_its_step_is_pytorchs(name, dtype_name):
    module, inputs, loss_fn, targets, model = step(name, dtype_name)
    rep = model.report
    assert rep.runs and not rep.opaque, f"{name}: opaque nodes {rep.opaque}"
    assert sum(rep.mapped.values()) == rep.aten_nodes
    out = mg.Executor(model).run(model.feeds(0))
    loss, new = pytorch_step(module, inputs, loss_fn, targets)
    rtol = DTYPES[dtype_name]
    assert float(out[model.loss]) == pytest.approx(loss, rel=rtol)
    assert set(model.params) <= set(new)
    for p in model.params:
        np.testing.assert_allclose(out[f"{p}_new"], new[p], rtol=rtol, atol=rtol * 1e-2,
                                   err_msg=f"{name}: {p}")


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_every_planner_runs_the_architecture_bitwise_as_without_a_plan(name):
    model = step(name, "float32")[-1]
    feeds = model.feeds(0)
    base = mg.Executor(model).run(feeds)
    for planner in sorted(PLANNERS):
        args = options_for(planner, {"time_limit": 0.05, "seed": 0})
        report = mg.plan_memory(model, mg.MemoryOptions(planner=planner, inplace=True,
                                                        planner_args=args))
        assert bytes_equal(mg.Executor(model, report).run(feeds), base), planner


def test_architectures_refuse_unknown_names_and_dtypes():
    from minigraph.fromtorch.zoo import TorchModelError
    with pytest.raises(TorchModelError, match="unknown architecture 'resnet'"):
        architecture("resnet")
    with pytest.raises(TorchModelError, match="float16"):
        architecture("lenet", "float16")
