"""Issue 47 point 5, the import's speed, checked without a clock: the capture hands PyTorch's
AOTAutograd fake tensors only (its second trace of the joint graph then runs no kernel; with
the module's real weights it ran the whole forward and backward on them), and the graph it
makes is the one the real-weight capture made, node for node, tensor for tensor, value for
value, on models with tied weights, `arange`, in-step constants, dropout, a second capture
(BCE with `pos_weight`), batch norm, and for inference. The times themselves are printed by
`python benchmarks/from_torch.py --import-speed`. Skipped without PyTorch."""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import unseen_models as U  # noqa: E402

from minigraph.fromtorch import from_torch  # noqa: E402
from minigraph.fromtorch.architectures import architecture  # noqa: E402
from minigraph.fromtorch.capture import MetaValue  # noqa: E402

CAPTURE = sys.modules["minigraph.fromtorch.capture"]


def _real_weights_capture(monkeypatch) -> None:
    """The capture as it was: the module's real weights and the example batch go to
    aot_export_module as they are (no fake tensors made here)."""
    monkeypatch.setattr(CAPTURE, "_faked", lambda torch, module, meta:
                        [({}, None, CAPTURE._fake_mode(torch), None)])
    monkeypatch.setattr(CAPTURE, "_fake_like", lambda torch, restore, t, meta: t)


def _same_value(a, b) -> bool:
    if isinstance(a, MetaValue) or isinstance(b, MetaValue):
        return repr(a) == repr(b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b


def assert_same_graph(g, h) -> None:
    """Nodes (op, attributes, inputs, outputs, role), tensors (shape, dtype, kind, producer),
    outputs, constants' values and parameters' initial values all equal."""
    assert g.outputs == h.outputs
    assert g.nodes == h.nodes
    assert dict(g.tensors) == dict(h.tensors)
    for name, t in g.tensors.items():
        u = h.tensors[name]
        assert _same_value(t.value, u.value), name
        assert _same_value(t.init, u.init), name


def _cases():
    def arch(name):
        c = architecture(name)
        return c.module, c.example_inputs, c.loss_fn, c.targets

    def unseen(name):
        module, inputs, loss_fn, targets = U.case(name)
        return module, inputs, loss_fn, targets
    return {
        "nanogpt": lambda: arch("nanogpt"),                   # tied weights, arange, GELU
        "mobilenet_v2_block": lambda: arch("mobilenet_v2_block"),      # batch norm
        "mobilenet_v2_dropout": lambda: unseen("mobilenet_v2_dropout"),  # dropout
        "flip_roll_clamp_tensor": lambda: unseen("flip_roll_clamp_tensor"),  # constants
        "multilabel_bce_pos_weight": lambda: unseen("multilabel_bce_pos_weight"),  # redo
        "torchvision_mobilenet_v3_small": lambda: unseen("torchvision_mobilenet_v3_small"),
    }


CASES = _cases()


def _import(name, inference=False):
    torch.manual_seed(0)
    module, inputs, loss_fn, targets = CASES[name]()
    return from_torch(module, inputs, None if inference else loss_fn,
                      targets=() if inference else targets)


def _torchvision_ok() -> bool:
    try:
        U._tv("mobilenet_v3_small")
    except Exception:
        return False
    return True


@pytest.mark.parametrize("name", sorted(CASES))
def test_fake_capture_makes_the_real_capture_graph(name, monkeypatch):
    if name.startswith("torchvision") and not _torchvision_ok():
        pytest.skip("torchvision does not load here")
    fast = _import(name)
    with monkeypatch.context() as m:
        _real_weights_capture(m)
        real = _import(name)
    assert_same_graph(fast.graph, real.graph)
    assert fast.report.aten_nodes == real.report.aten_nodes
    assert fast.report.mapped == real.report.mapped
    for k, v in real.feeds(0).items():
        assert np.array_equal(fast.feeds(0)[k], v), k


@pytest.mark.parametrize("name", ["nanogpt", "mobilenet_v2_block"])
def test_fake_capture_makes_the_real_capture_graph_for_inference(name, monkeypatch):
    fast = _import(name, inference=True)
    with monkeypatch.context() as m:
        _real_weights_capture(m)
        real = _import(name, inference=True)
    assert_same_graph(fast.graph, real.graph)


def test_aot_autograd_gets_fake_tensors_only(monkeypatch):
    """Every tensor AOTAutograd traces (each parameter, buffer and input) is fake, and the
    module has its real weights back after."""
    import torch._functorch.aot_autograd as aot
    from torch._subclasses.fake_tensor import is_fake
    seen = []
    real_export = aot.aot_export_module

    def spy(mod, args, **kwargs):
        seen.append([is_fake(t) for t in (*mod.parameters(), *mod.buffers(), *args)
                     if isinstance(t, torch.Tensor)])
        return real_export(mod, args, **kwargs)
    monkeypatch.setattr(aot, "aot_export_module", spy)
    torch.manual_seed(0)
    module, inputs, loss_fn, targets = CASES["mobilenet_v2_block"]()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    from_torch(module, inputs, loss_fn, targets=targets)
    assert seen and all(seen[0]) and all(all(s) for s in seen)
    assert len(seen[0]) == (len(list(module.parameters())) + len(list(module.buffers()))
                            + len(inputs) + len(targets))
    for k, v in module.state_dict().items():
        assert not is_fake(v) and torch.equal(v, before[k]), k


def test_the_real_weight_capture_is_what_the_spy_would_catch(monkeypatch):
    """The check above can fail: with the real-weight capture it sees real tensors."""
    import torch._functorch.aot_autograd as aot
    from torch._subclasses.fake_tensor import is_fake
    seen = []
    real_export = aot.aot_export_module

    def spy(mod, args, **kwargs):
        seen.append(any(not is_fake(t) for t in args if isinstance(t, torch.Tensor)))
        return real_export(mod, args, **kwargs)
    monkeypatch.setattr(aot, "aot_export_module", spy)
    _real_weights_capture(monkeypatch)
    _import("mobilenet_v2_block")
    assert seen and all(seen)


@pytest.mark.parametrize("name", ["nanogpt", "mobilenet_v2_block", "flip_roll_clamp_tensor"])
def test_flops_skipped_without_running_the_counter_are_the_counters(name):
    """The import runs PyTorch's FLOP counter only on ops it can count (a formula, or a
    decomposition it follows); on every node of the step the count is the counter's."""
    import operator

    from minigraph.fromtorch import capture
    from minigraph.fromtorch.aten import RULES
    from minigraph.fromtorch.importer import Converter, ImportReport
    torch.manual_seed(0)
    module, inputs, loss_fn, targets = CASES[name]()
    cap = capture(module, inputs, loss_fn, targets, keep=set(RULES).__contains__)
    c = Converter(cap, torch, ImportReport(name))
    nodes = [n for n in cap.gm.graph.nodes
             if n.op == "call_function" and n.target is not operator.getitem]
    counts = [(c.torch_flops(n), c.counted_flops(n)) for n in nodes]
    assert all(a == b for a, b in counts)
    assert any(a > 0 for a, _ in counts)            # matrix products or convolutions
    assert sum(a == 0 for a, _ in counts) > len(nodes) // 2
