"""The PyTorch importer (issue 21, points 1-3): `from_torch` captures AOTAutograd's joint
graph; an MLP and a small CNN built in PyTorch run in minigraph's executor with PyTorch's
loss and gradients (float32 tolerance); a graph with an opaque op plans with every planner,
replays through every online allocator and simulates under DTR, and running it raises
OpaqueOpError naming the node and the ATen op; what cannot be imported is refused with a
typed error; `import minigraph` never imports torch. Skipped without PyTorch."""

from __future__ import annotations

import copy
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

import minigraph as mg  # noqa: E402
from minigraph.errors import BudgetError, ThrashError  # noqa: E402
from minigraph.fromtorch import (  # noqa: E402
    ImportReport,
    OpaqueOpError,
    TorchImportError,
    TorchMissingError,
    TorchModel,
    from_torch,
    report,
)
from minigraph.fromtorch.compare import compare  # noqa: E402
from minigraph.memory.online import (  # noqa: E402
    ALLOCATORS,
    replay_allocator,  # noqa: E402
    trace_from_schedule,
)
from minigraph.memory.planners import JOINT_PLANNERS, PLANNERS, options_for  # noqa: E402
from minigraph.ops import flops_of  # noqa: E402
from minigraph.runtime.dtr import simulate  # noqa: E402

LR = 0.1


def _mlp():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return net, torch.randn(6, 8), torch.randint(0, 4, (6,))


def _cnn():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU(),
                        nn.Flatten(), nn.Linear(6 * 2 * 2, 5))
    return net, torch.randn(3, 3, 8, 8), torch.randint(0, 5, (3,))


class _Erf(nn.Module):
    def forward(self, x):
        return torch.erf(x)


def _erf_mlp():
    """erf: a Core ATen op minigraph has no op for (and PyTorch no decomposition of), so
    it stays opaque; its backward decomposes into elementwise ops, which map."""
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(8, 16), _Erf(), nn.Linear(16, 4))
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    return from_torch(net, (x,), F.cross_entropy, targets=(y,), name="erf_mlp")


def _pytorch_step(net, x, y, loss_fn=F.cross_entropy):
    ref = copy.deepcopy(net)
    loss = loss_fn(ref(x), y)
    loss.backward()
    return float(loss.detach()), {k.replace(".", "_"): (p.detach().numpy(), p.grad.numpy())
                         for k, p in ref.named_parameters()}


def _assert_step_is_pytorchs(model, net, x, y, loss_fn=F.cross_entropy, rel=1e-5, rtol=1e-4,
                             atol=2e-6):
    """One run of the imported graph is PyTorch's step: the same loss (within `rel`) and,
    read back from `p_new = p - LR * grad`, the same gradients (within rtol, atol)."""
    out = mg.Executor(model.graph, device="cpu").run(model.feeds(0))
    loss, ref = _pytorch_step(net, x, y, loss_fn)
    assert float(out[model.loss]) == pytest.approx(loss, rel=rel)
    assert set(model.params) == set(ref)
    for name, (w, dw) in ref.items():
        np.testing.assert_allclose((w - out[f"{name}_new"]) / LR, dw, rtol=rtol, atol=atol,
                                   err_msg=name)
    return out


@pytest.mark.parametrize("build", [_mlp, _cnn], ids=["mlp", "cnn"])
def test_imported_step_matches_pytorch(build):
    net, x, y = build()
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,), lr=LR)
    assert isinstance(model, TorchModel) and model.report.runs
    assert model.graph.outputs == (model.loss, *(f"{p}_new" for p in model.params))
    _assert_step_is_pytorchs(model, net, x, y)


class _TinyGPT(nn.Module):
    """Embedding, pre-norm causal attention (softmax, additive mask buffer), tanh-GELU MLP."""

    def __init__(self, vocab=11, d=8, heads=2, seq=5):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), -1e9), 1))

    def forward(self, ids):
        x = self.emb(ids)
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5) + self.mask[:t, :t]
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class _TinyResNet(nn.Module):
    """Stem conv-bn-relu-maxpool(3, 2, 1), one basic block with a strided 1x1 shortcut,
    adaptive average pooling and a linear classifier [He 2016]."""

    def __init__(self, c=4, classes=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.c1 = nn.Conv2d(c, 2 * c, 3, stride=2, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(2 * c)
        self.c2 = nn.Conv2d(2 * c, 2 * c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(2 * c)
        self.down = nn.Sequential(nn.Conv2d(c, 2 * c, 1, stride=2, bias=False),
                                  nn.BatchNorm2d(2 * c))
        self.fc = nn.Linear(2 * c, classes)

    def forward(self, x):
        x = self.stem(x)
        h = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        h = F.relu(h + self.down(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


def test_transformer_block_imports_fully_and_matches_pytorch():
    torch.manual_seed(3)
    net = _TinyGPT()
    ids, target = torch.randint(0, 11, (2, 5)), torch.randn(2, 5, 8)
    model = from_torch(net, (ids,), F.mse_loss, targets=(target,), lr=LR)
    assert model.report.runs, model.report
    assert {"layer_norm", "layer_norm_grad", "gelu", "gelu_grad", "softmax", "softmax_grad",
            "embedding", "embedding_grad", "mse"} <= {n.op for n in model.graph}
    assert model.report.constants == ["mask"]
    _assert_step_is_pytorchs(model, net, ids, target, F.mse_loss, rtol=1e-3, atol=1e-5)


def test_resnet_block_imports_fully_and_matches_pytorch_in_float64():
    # float64: batch norm over a small batch is ill-conditioned, and float32 rounding
    # (different summation orders) alone moves deep gradients by ~1e-3; in float64 the
    # import must agree to ~1e-10, which only the same mathematics gives.
    torch.manual_seed(4)
    net = _TinyResNet().double()
    x, y = torch.randn(2, 3, 8, 8, dtype=torch.float64), torch.randint(0, 3, (2,))
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,), lr=LR)
    assert model.report.runs, model.report
    _assert_step_is_pytorchs(model, net, x, y, rel=1e-12, rtol=1e-8, atol=1e-10)


def test_imported_step_is_a_planned_arena_run_like_the_zoo():
    net, x, y = _cnn()
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,))
    feeds = model.feeds(0)
    plain = mg.Executor(model.graph, device="cpu").run(feeds)
    rep = mg.plan_memory(model.graph, planner="ge", inplace=True)
    planned = mg.Executor(model.graph, rep, device="cpu").run(feeds)
    assert all(np.array_equal(plain[k], planned[k]) for k in plain)
    assert rep.arena_bytes < rep.no_reuse_bytes


def test_batch_norm_buffers_are_constants_and_their_updates_dropped():
    net, x, y = _cnn()
    before = net[1].running_mean.clone()
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,))
    assert torch.equal(net[1].running_mean, before)        # capturing ran nothing for real
    rep = model.report
    assert {"1_running_mean", "1_running_var", "1_num_batches_tracked"} <= set(rep.dropped)
    assert any("buffer updates dropped" in line for line in rep.lost())
    assert "kept:" in str(rep) and "lost:" in str(rep) and report(model) is rep
    assert [n.op for n in model.graph if n.op.startswith("batch_norm")] == \
        ["batch_norm", "batch_norm_grad"]


def test_frozen_parameters_become_constants():
    net, x, y = _cnn()
    net[0].weight.requires_grad_(False)
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,))
    assert "0_weight" not in model.params and model.graph.tensors["0_weight"].kind == "const"
    assert model.report.frozen == ["0_weight"] and model.report.runs
    assert "conv2d_grad_w" in {n.op for n in model.graph}        # the second conv trains


def test_eval_mode_batch_norm_reads_running_statistics_and_matches_pytorch():
    net, x, y = _cnn()
    with torch.no_grad():                        # running statistics that are not 0 and 1
        net[1].running_mean.uniform_(-1, 1)
        net[1].running_var.uniform_(0.5, 2)
    net.eval()
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,), lr=LR)
    assert model.report.runs and {"1_running_mean", "1_running_var"} <= set(
        model.report.constants)
    assert not any(n.op.startswith("batch_norm") for n in model.graph)   # elementwise ops
    _assert_step_is_pytorchs(model, net, x, y)


def test_views_become_copies_and_transposes_fold_into_matmul():
    net, x, y = _mlp()
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,))
    ops_used = [n.op for n in model.graph]
    assert "transpose" not in ops_used          # nn.Linear's t() is a matmul flag
    n, nbytes = model.report.view_copies
    copies = [model.graph.tensors[o] for nd in model.graph if nd.op == "reshape"
              for o in nd.outputs]
    assert n == len(copies) and nbytes == sum(t.nbytes for t in copies) and n > 0


def test_with_lr_rebuilds_the_update_and_make_batch_keeps_shapes():
    net, x, y = _mlp()
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,), lr=0.1)
    other = model.with_lr(0.5)
    assert other.lr == 0.5 and model.with_lr(0.1) is model
    assert {n.attr["lr"] for n in other.graph if n.op == "sgd_update"} == {0.5}
    b0, b7 = model.make_batch(0), model.make_batch(7)
    np.testing.assert_array_equal(b0["x"], x.numpy())
    assert b7["y"].dtype == np.int64 and b7["x"].shape == (6, 8)
    assert b7["y"].max() <= int(y.max()) and not np.array_equal(b7["x"], b0["x"])


# --- opaque ops ------------------------------------------------------------------------------

def test_opaque_op_carries_pytorch_shapes_flops_and_refuses_to_run():
    model = _erf_mlp()
    g = model.graph
    opq = [n for n in g if n.op == "opaque"]
    assert {n.attr["aten"] for n in opq} == {"aten.erf.default"}
    assert not model.report.runs and len(model.report.opaque) == 1
    for n in opq:
        out = g.tensors[n.outputs[0]]
        assert out.shape == (4, 16) and out.dtype == "float32" and flops_of(g, n) > 0
    with pytest.raises(OpaqueOpError, match=r"aten_erf_0.*aten\.erf\.default"):
        mg.Executor(g, device="cpu").run(model.feeds(0))
    planned = mg.plan_memory(g, planner="ge", inplace=True)
    with pytest.raises(OpaqueOpError, match="no op for aten.erf"):   # says why
        mg.Executor(g, planned, device="cpu").run(model.feeds(0))
    with pytest.raises(OpaqueOpError, match="aten_erf_0"):        # DTR's real mode too
        mg.DTRExecutor(g, ratio=1.0, device="cpu").run(model.feeds(0))


def test_graph_with_opaque_ops_plans_with_every_planner():
    g = _erf_mlp().graph
    for planner in sorted(PLANNERS):
        args = options_for(planner, {"time_limit": 0.5, "seed": 0})
        rep = mg.plan_memory(g, mg.MemoryOptions(planner=planner, inplace=True,
                                                 planner_args=args))
        rep.plan.validate(g)
        assert rep.theoretical_minimum <= rep.arena_bytes <= rep.no_reuse_bytes, planner
    for planner in sorted(JOINT_PLANNERS):
        if len(g.nodes) <= 30:
            mg.plan_memory(g, mg.MemoryOptions(planner=planner, planner_args={
                "time_limit": 0.5})).plan.validate(g)


def test_graph_with_opaque_ops_replays_through_every_online_allocator():
    g = _erf_mlp().graph
    trace = trace_from_schedule(g)
    opaque_out = {o for n in g if n.op == "opaque" for o in n.outputs}
    assert opaque_out & {e[1] for e in trace}          # the opaque outputs are allocated
    peak = max(mg.liveness(g, alignment=1).live_bytes())
    for name in sorted(ALLOCATORS):
        result = replay_allocator(trace, name, check=True)
        assert result.peak_requested == peak, name
        assert result.peak_reserved >= result.peak_allocated >= peak, name


def test_graph_with_opaque_ops_simulates_under_dtr():
    g = _erf_mlp().graph
    full = simulate(g, ratio=1.0)
    assert full.evictions == 0
    done = []
    for ratio in (0.9, 0.7, 0.5):
        try:
            done.append(simulate(g, ratio=ratio, heuristic="dtr"))
        except (BudgetError, ThrashError):
            continue
    assert done and all(t.budget < full.budget for t in done)
    assert any(t.evictions > 0 for t in done)


def test_opaque_view_records_the_input_it_aliases():
    class Windows(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x.unfold(1, 4, 2).sum(2))      # unfold: an ATen view, opaque

    x, y = torch.randn(3, 8), torch.randint(0, 3, (3,))
    model = from_torch(Windows(), (x,), F.cross_entropy, targets=(y,))
    (node,) = [n for n in model.graph if n.op == "opaque"]
    assert node.attr["aten"] == "aten.unfold.default" and node.attr["view_of"] == 0
    assert node.inputs == ("x",) and model.graph.tensors[node.outputs[0]].shape == (3, 3, 4)
    n, nbytes = model.report.view_copies
    assert nbytes >= 3 * 3 * 4 * 4                     # counted among the views made copies


def test_opaque_op_validates_its_own_specs():
    x = mg.input("x", (2, 3))
    y, = mg.opaque([x], "aten.foo.default", [((3, 2), "float32")], flops=12, view_of=0)
    assert y.shape == (3, 2)
    with pytest.raises(mg.GraphError, match="view_of=3"):
        mg.opaque([x], "aten.foo.default", [((3, 2), "float32")], view_of=3)
    with pytest.raises(mg.GraphError, match="at least one output"):
        mg.opaque([x], "aten.foo.default", [])


class _Tied(nn.Module):
    """Two layers sharing one weight (as GPT ties its embedding and output layer)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def test_tied_weights_are_one_parameter_with_the_summed_gradient():
    torch.manual_seed(6)
    net, x, y = _Tied(), torch.randn(3, 4), torch.randn(3, 4)
    model = from_torch(net, (x,), F.mse_loss, targets=(y,), lr=LR)
    assert sorted(model.params) == ["a_bias", "a_weight", "b_bias"]
    assert any("b_weight is a_weight" in s for s in model.report.kept())
    _assert_step_is_pytorchs(model, net, x, y, F.mse_loss, rel=1e-6)


class _GRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 6, batch_first=True)

    def forward(self, x):
        return torch.stack([h.sum(-1) for h in self.rnn(x)[0].unbind(1)], dim=-1)


def test_a_recurrent_net_with_stack_imports_fully_and_matches_pytorch():
    torch.manual_seed(9)
    net, x, y = _GRU(), torch.randn(2, 3, 4), torch.randn(2, 3)
    model = from_torch(net, (x,), F.mse_loss, targets=(y,), lr=LR)
    assert model.report.runs, model.report.opaque
    _assert_step_is_pytorchs(model, net, x, y, F.mse_loss)


def test_loss_options_the_fused_rule_lacks_are_decomposed_and_run():
    """Class weights (a tensor made inside the step) and an ignore_index that is a real
    class change the loss; minigraph's fused cross-entropy refuses them, so the step is
    captured again with PyTorch's own decomposition of the loss, which runs: PyTorch's
    loss and gradients."""
    torch.manual_seed(7)
    net, x, y = nn.Linear(4, 3), torch.randn(5, 4), torch.tensor([0, 1, 2, 1, 0])
    for loss in (lambda o, t: F.cross_entropy(o, t, weight=torch.tensor([1.0, 2.0, 3.0])),
                 lambda o, t: F.cross_entropy(o, t, ignore_index=1),
                 lambda o, t: F.cross_entropy(o, t, ignore_index=-100)):
        model = from_torch(net, (x,), loss, targets=(y,))
        assert model.report.runs, model.report.opaque
        assert compare(model, net, (x,), loss, (y,)).ok()


# --- refusals --------------------------------------------------------------------------------

class _Shuffle(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 2)

    def forward(self, x):
        return self.lin(x[torch.randperm(x.shape[0])])


def test_dropout_is_a_seeded_random_op_and_others_are_refused_with_advice():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,))
    assert model.report.runs and any(n.op == "random" for n in model.graph)
    assert compare(model, net, (x,), F.cross_entropy, (y,)).ok()   # the same mask fed
    net.eval()                                  # eval(): dropout is the identity
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,))
    assert model.report.runs and not any(n.op == "random" for n in model.graph)
    with pytest.raises(TorchImportError, match="random op .*randperm.*pass them as an input"):
        from_torch(_Shuffle(), (x,), F.cross_entropy, targets=(y,))


class _Attention(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.att = nn.MultiheadAttention(8, 2, batch_first=True, dropout=dropout)

    def forward(self, x):
        return self.att(x, x, x, need_weights=False)[0]


def test_attention_kernel_without_dropout_is_not_taken_for_a_random_op():
    """PyTorch tags its fused attention kernels as seeded (for their dropout); at dropout 0
    the kernel is exact, so it imports (decomposed into matmul and softmax) and runs; with
    dropout it is refused."""
    torch.manual_seed(8)
    net, x, t = _Attention(0.0), torch.randn(2, 5, 8), torch.randn(2, 5, 8)

    def loss(o, t):        # (F.mse_loss on MHA's output: PyTorch's own capture fails on a view)
        return (o - t).pow(2).mean()
    model = from_torch(net, (x,), loss, targets=(t,), lr=LR)
    assert model.report.mapped["_scaled_dot_product_flash_attention_for_cpu"] == 1
    assert model.report.runs, model.report.opaque
    _assert_step_is_pytorchs(model, net, x, t, loss)
    with_dropout = _Attention(0.5)          # decomposed: its dropout a seeded random op
    model = from_torch(with_dropout, (x,), loss, targets=(t,))
    assert model.report.runs and any(n.op == "random" for n in model.graph)
    assert compare(model, with_dropout, (x,), loss, (t,)).ok()


class _InPlace(nn.Module):
    def __init__(self, on_input: bool):
        super().__init__()
        self.lin, self.on_input = nn.Linear(4, 2), on_input

    def forward(self, x):
        if self.on_input:
            x.mul_(2)                     # writes into the caller's tensor: refused
        h = self.lin(x)
        return h.relu_()                  # in place on an intermediate: functionalised away


def test_in_place_ops_are_functionalised_or_refused():
    torch.manual_seed(5)
    x, y = torch.randn(3, 4), torch.randint(0, 2, (3,))
    net = _InPlace(on_input=False)
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,), lr=LR)
    assert model.report.runs and "relu" in {n.op for n in model.graph}
    out = mg.Executor(model.graph, device="cpu").run(model.feeds(0))
    assert float(out[model.loss]) == pytest.approx(_pytorch_step(net, x, y)[0], rel=1e-6)
    with pytest.raises(TorchImportError, match="writes in place into its inputs"):
        from_torch(_InPlace(on_input=True), (x,), F.cross_entropy, targets=(y,))


def test_data_dependent_control_flow_is_refused():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x):
            h = self.lin(x)
            return h * 2 if h.sum() > 0 else h

    x, y = torch.randn(3, 4), torch.randint(0, 2, (3,))
    with pytest.raises(TorchImportError, match="could not capture"):
        from_torch(Branchy(), (x,), F.cross_entropy, targets=(y,))


def test_non_scalar_loss_and_bad_arguments_are_refused():
    net, x, y = _mlp()
    with pytest.raises(TorchImportError, match="could not capture"):
        from_torch(net, (x,), lambda out, t: F.cross_entropy(out, t, reduction="none"),
                   targets=(y,))
    with pytest.raises(TorchImportError, match="example_inputs"):
        from_torch(net, [x.numpy()], F.cross_entropy, targets=(y,))
    with pytest.raises(TorchImportError, match="nn.Module"):
        from_torch(lambda t: t, (x,), F.cross_entropy, targets=(y,))
    with pytest.raises(TorchImportError, match="lr must be a number"):
        from_torch(net, (x,), F.cross_entropy, targets=(y,), lr="fast")
    with pytest.raises(TorchImportError, match="not a model from from_torch"):
        report("mlp")


def test_dtype_numpy_lacks_is_refused():
    net = nn.Linear(4, 2).to(torch.bfloat16)
    x = torch.randn(3, 4, dtype=torch.bfloat16)
    with pytest.raises(TorchImportError, match="bfloat16"):
        from_torch(net, (x,), lambda out: out.float().pow(2).mean())


def test_missing_torch_raises_a_typed_error_saying_how_to_install(monkeypatch):
    net, x, y = _mlp()
    monkeypatch.setitem(sys.modules, "torch", None)          # `import torch` fails
    with pytest.raises(TorchMissingError, match=r"pip install 'minigraph\[torch\]'"):
        from_torch(net, (x,), F.cross_entropy, targets=(y,))
    assert issubclass(TorchMissingError, ImportError) and issubclass(TorchMissingError,
                                                                      mg.MinigraphError)


def test_report_is_a_plain_record():
    rep = ImportReport("Net", aten_nodes=3, mapped={"mm": 2}, opaque=[("a", "aten.b", "why")])
    assert not rep.runs and "opaque a (aten.b): why" in rep.lost()
    assert rep.kept()[0].startswith("2 of 3 ATen nodes")


# --- every rule honours its arguments or refuses the call --------------------------------------

class _Rounded(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.lin, self.mode = nn.Linear(4, 3), mode

    def forward(self, x):
        h = self.lin(x)
        return h + torch.div(h, 0.3, rounding_mode=self.mode)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_division_with_a_rounding_mode_is_rounded_not_plain(mode):
    torch.manual_seed(10)
    net, x, y = _Rounded(mode), torch.randn(5, 4), torch.randint(0, 3, (5,))
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,), lr=LR)
    assert "div_round" in {n.op for n in model.graph} and model.report.runs
    _assert_step_is_pytorchs(model, net, x, y)


def test_an_argument_its_rule_does_not_honour_makes_the_node_opaque(monkeypatch):
    from minigraph.fromtorch import aten
    monkeypatch.setitem(aten.ARGS, "div", frozenset({"self", "other"}))   # a rule that forgot
    torch.manual_seed(10)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    model = from_torch(_Rounded("floor"), (x,), F.cross_entropy, targets=(y,))
    (node, aten_op, why), = model.report.opaque
    assert aten_op == "aten.div.Tensor_mode" and not model.report.runs
    assert "rounding_mode='floor'" in why and "not honoured" in why


def _tensor_overloads(name):
    packet = getattr(torch.ops.aten, name)
    for ov in packet.overloads():
        schema = getattr(packet, ov)._schema
        if not schema.is_mutable and "-> Tensor" in str(schema).replace("(", "") and \
                "Dimname" not in str(schema) and not any(a.is_out for a in schema.arguments):
            yield ov, schema


def test_every_rule_declares_the_arguments_it_honours_against_atens_schemas():
    """A declared name must be an argument of the op (no typo hides an argument); every
    rule maps at least one overload whose required arguments it all honours; an overload
    with a required argument it does not honour (`mm.dtype`'s out_dtype) stays opaque."""
    from minigraph.fromtorch.aten import ARGS, NEUTRAL, RULES
    assert set(RULES) == set(ARGS)
    for name in sorted(RULES):
        schemas = dict(_tensor_overloads(name))
        assert schemas, name
        group = [n for n in RULES if RULES[n] is RULES[name]]    # one rule, several ops
        known = {a.name for n in group for s in dict(_tensor_overloads(n)).values()
                 for a in s.arguments}
        assert ARGS[name] <= known, (name, sorted(ARGS[name] - known))
        mapped = [ov for ov, s in schemas.items()
                  if all(a.name in ARGS[name] | NEUTRAL for a in s.arguments
                         if not a.has_default_value())]
        assert mapped, f"{name}: no overload has all its required arguments honoured"


# --- clear errors, naming the layer or the parameter ----------------------------------------------

class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head_a, self.head_b = nn.Linear(4, 4), nn.Linear(4, 3), nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.head_a(h), self.head_b(h)


def test_a_parameter_the_loss_does_not_use_is_frozen_and_the_report_says_so():
    torch.manual_seed(11)
    net, x, y = _TwoHeads(), torch.randn(5, 4), torch.randint(0, 3, (5,))
    model = from_torch(net, (x,), lambda out, t: F.cross_entropy(out[0], t), targets=(y,),
                       lr=LR)
    assert model.report.frozen == ["head_b_bias", "head_b_weight"] and model.report.runs
    note = next(s for s in model.report.kept() if "does not use" in s)
    assert "head_b_weight" in note and "requires_grad_(False)" in note
    assert all(p.requires_grad for p in net.parameters())         # the module is as it was
    assert set(model.params) == {"body_weight", "body_bias", "head_a_weight", "head_a_bias"}


def test_two_parameters_with_one_gradient_node_import():
    class Sum(nn.Module):          # d/da and d/db of x * (a + b) are one tensor in ATen
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Parameter(torch.randn(4)), nn.Parameter(torch.randn(4))

        def forward(self, x):
            return x * (self.a + self.b)
    torch.manual_seed(12)
    net, x, y = Sum(), torch.randn(3, 4), torch.randn(3, 4)
    model = from_torch(net, (x,), F.mse_loss, targets=(y,), lr=LR)
    _assert_step_is_pytorchs(model, net, x, y, F.mse_loss)


def test_a_tensor_from_outside_the_module_says_to_pass_it_as_a_target_or_buffer():
    net, x, y = _mlp()
    w = torch.tensor([1.0, 2.0, 0.5, 1.0])
    with pytest.raises(TorchImportError,
                       match=r"closes over .*targets=\(\.\.\.\).*register_buffer"):
        from_torch(net, (x,), lambda out, t: F.cross_entropy(out * w, t), targets=(y,))

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.scale = nn.Linear(8, 4), torch.ones(4)   # not a registered buffer

        def forward(self, x):
            return self.lin(x) * self.scale
    with pytest.raises(TorchImportError, match=r"Scaled\.scale is a plain tensor attribute.*"
                                               r"register_buffer\('scale'"):
        from_torch(Scaled(), (x,), F.cross_entropy, targets=(y,))


def test_batch_norm_without_momentum_is_refused_naming_the_layer():
    net = nn.Sequential(nn.Linear(8, 4), nn.BatchNorm1d(4, momentum=None))
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    with pytest.raises(TorchImportError, match=r"layer 1 \(BatchNorm1d\) has momentum=None"):
        from_torch(net, (x,), F.cross_entropy, targets=(y,))


@pytest.mark.parametrize("ignore", [-100, -1])
def test_labels_that_hit_ignore_index_are_decomposed_and_dropped(ignore):
    torch.manual_seed(13)
    net, x = nn.Linear(4, 3), torch.randn(4, 4)
    y = torch.tensor([0, ignore, 2, 1])
    loss = lambda o, t: F.cross_entropy(o, t, ignore_index=ignore)  # noqa: E731
    model = from_torch(net, (x,), loss, targets=(y,))
    assert model.report.runs, model.report.opaque     # PyTorch's decomposition drops them
    assert compare(model, net, (x,), loss, (y,)).ok()


def test_a_sparse_embedding_is_refused_naming_the_layer():
    net = nn.Sequential(nn.Embedding(5, 3, sparse=True), nn.Flatten(), nn.Linear(6, 2))
    with pytest.raises(TorchImportError, match=r"layer 0 \(Embedding\) has sparse=True"):
        from_torch(net, (torch.tensor([[0, 1], [2, 3]]),), F.cross_entropy,
                   targets=(torch.tensor([0, 1]),))


def test_parameters_named_like_what_the_import_makes_are_refused():
    class Clash(nn.Module):
        def __init__(self, a, b):
            super().__init__()
            self.register_parameter(a, nn.Parameter(torch.randn(4, 2)))
            self.register_parameter(b, nn.Parameter(torch.randn(4, 2)))

        def forward(self, x):
            return torch.tanh(sum(x @ p for p in self.parameters()))
    x, y = torch.randn(3, 4), torch.randint(0, 2, (3,))
    with pytest.raises(TorchImportError, match="'w_new' has the name minigraph gives the "
                                               "updated value of parameter 'w'"):
        from_torch(Clash("w", "w_new"), (x,), F.cross_entropy, targets=(y,))
    with pytest.raises(TorchImportError, match="'tanh_0' is named like the output of a node"):
        from_torch(Clash("tanh_0", "v"), (x,), F.cross_entropy, targets=(y,))


def test_planning_running_and_simulating_take_the_model_itself():
    net, x, y = _mlp()
    model = from_torch(net, (x,), F.cross_entropy, targets=(y,))
    rep = mg.plan_memory(model, planner="bestfit")
    assert rep.arena_bytes == mg.plan_memory(model.graph, planner="bestfit").arena_bytes
    out = mg.Executor(model, rep).run(model.feeds(0))
    assert np.isfinite(float(out[model.loss]))
    assert simulate(model, ratio=1.0).evictions == 0
    zoo = mg.models.mlp(batch=4, sizes=(8, 16, 4))                  # a zoo Model too
    assert mg.plan_memory(zoo).arena_bytes == mg.plan_memory(zoo.graph).arena_bytes
    assert mg.Executor(zoo).run(zoo.feeds(0)).keys() == set(zoo.graph.outputs)
