"""Every differentiable op's gradient rule, checked two ways on tiny float64 graphs.

Each case is one op application `f(m, *inputs)` written once against a namespace `m`:
minigraph itself, or a small PyTorch adapter with the same function names. The loss is
`sum(f(...) * R)` for a fixed random R, so every output element gets its own weight.

- `test_gradient_matches_finite_differences`: `mg.grad` + `mg.Executor` against central
  differences (float64, eps 1e-6). Needs nothing but NumPy.
- `test_gradient_matches_torch`: the same values and gradients against PyTorch autograd
  (skipped where torch is not installed).
- `test_every_differentiable_op_has_a_case`: a new op with a gradient rule must get a case.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

import minigraph as mg
from minigraph.ops.registry import OPS

EPS, RTOL, ATOL = 1e-6, 1e-4, 1e-6


@dataclass
class Case:
    """One op under test: inputs as (name, shape, kind); kind: float, pos (> 0), away0
    (|x| > 0.1, for kinks at 0), labels:C or ids:V (int64 in range), or an array."""
    name: str
    inputs: list
    f: Callable
    wrt: list | None = None                     # default: every float input
    seed: int = 0
    extra: dict = field(default_factory=dict)

    def data(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        out = {}
        for name, shape, kind in self.inputs:
            if isinstance(kind, np.ndarray):
                out[name] = kind.astype(kind.dtype)
            elif kind == "float":
                out[name] = rng.standard_normal(shape)
            elif kind == "pos":
                out[name] = rng.uniform(0.5, 2.0, shape)
            elif kind == "away0":
                v = rng.uniform(0.1, 1.5, shape)
                out[name] = v * rng.choice([-1.0, 1.0], shape)
            else:
                hi = int(kind.split(":")[1])
                out[name] = rng.integers(0, hi, shape).astype(np.int64)
        return out

    def diff_names(self) -> list[str]:
        if self.wrt is not None:
            return self.wrt
        return [n for n, _, k in self.inputs
                if (k.dtype.kind == "f" if isinstance(k, np.ndarray) else ":" not in k)]


def C(name, inputs, f, **kw) -> Case:
    return Case(name, inputs, f, **kw)


X34 = [("x", (3, 4), "float")]
XY34 = [("x", (3, 4), "float"), ("y", (3, 4), "float")]

CASES = [
    # --- elementwise, with broadcasting both ways
    C("add", XY34, lambda m, x, y: x + y),
    C("add_broadcast", [("x", (3, 4), "float"), ("y", (4,), "float")], lambda m, x, y: x + y),
    C("add_broadcast_left", [("x", (3, 1), "float"), ("y", (2, 3, 4), "float")],
      lambda m, x, y: x + y),
    C("sub", [("x", (2, 1, 4), "float"), ("y", (3, 1), "float")], lambda m, x, y: x - y),
    C("mul", [("x", (3, 4), "float"), ("y", (1, 4), "float")], lambda m, x, y: x * y),
    C("div", [("x", (3, 4), "float"), ("y", (3, 1), "pos")], lambda m, x, y: x / y),
    C("add_n", [("x", (2, 3), "float"), ("y", (2, 3), "float"), ("z", (2, 3), "float")],
      lambda m, x, y, z: m.add_n(x, y, z)),
    C("sum_to", [("x", (2, 3, 4), "float")], lambda m, x: m.sum_to(x, (3, 1))),
    C("add_scalar", X34, lambda m, x: x + 1.5),
    C("mul_scalar", X34, lambda m, x: 0.7 * x),
    C("div_scalar", X34, lambda m, x: x / 4.0),
    C("rsub_scalar", X34, lambda m, x: 2.5 - x),
    C("rdiv_scalar", [("x", (3, 4), "pos")], lambda m, x: 3.0 / x),
    C("pow_2", X34, lambda m, x: x ** 2),
    C("pow_3", X34, lambda m, x: x ** 3),
    C("pow_half", [("x", (3, 4), "pos")], lambda m, x: x ** 0.5),
    C("pow_0_at_0", [("x", (3, 4), np.array([[0.0, 1.5, -2.0, 0.0]] * 3))], lambda m, x: x ** 0),
    C("neg", X34, lambda m, x: -x),
    C("exp", X34, lambda m, x: m.exp(x)),
    C("log", [("x", (3, 4), "pos")], lambda m, x: m.log(x)),
    C("sqrt", [("x", (3, 4), "pos")], lambda m, x: m.sqrt(x)),
    C("relu", [("x", (3, 4), "away0")], lambda m, x: m.relu(x)),
    C("sigmoid", X34, lambda m, x: m.sigmoid(x)),
    C("tanh", X34, lambda m, x: m.tanh(x)),
    C("gelu", X34, lambda m, x: m.gelu(x)),
    # --- reductions and shapes
    C("sum_all", X34, lambda m, x: m.sum(x)),
    C("sum_axis", [("x", (2, 3, 4), "float")], lambda m, x: m.sum(x, axis=(0, 2))),
    C("sum_keepdims", [("x", (2, 3, 4), "float")], lambda m, x: m.sum(x, axis=1, keepdims=True)),
    C("mean_all", X34, lambda m, x: m.mean(x)),
    C("mean_axis", [("x", (2, 3, 4), "float")], lambda m, x: m.mean(x, axis=-1)),
    C("mean_keepdims", [("x", (2, 3, 4), "float")],
      lambda m, x: m.mean(x, axis=0, keepdims=True)),
    C("broadcast_to", [("x", (3, 1), "float")], lambda m, x: m.broadcast_to(x, (2, 3, 4))),
    C("reshape", [("x", (2, 6), "float")], lambda m, x: m.reshape(x, (3, 2, 2))),
    C("transpose", [("x", (2, 3, 4), "float")], lambda m, x: m.transpose(x)),
    C("transpose_perm", [("x", (2, 3, 4), "float")], lambda m, x: m.transpose(x, (2, 0, 1))),
    # --- matmul: plain, batched, broadcast, transpose flags
    C("matmul", [("a", (3, 4), "float"), ("b", (4, 2), "float")], lambda m, a, b: a @ b),
    C("matmul_batched", [("a", (2, 3, 4), "float"), ("b", (2, 4, 5), "float")],
      lambda m, a, b: a @ b),
    C("matmul_batch_broadcast", [("a", (2, 1, 3, 4), "float"), ("b", (3, 4, 2), "float")],
      lambda m, a, b: a @ b),
    C("matmul_shared_weight", [("a", (2, 3, 4), "float"), ("b", (4, 5), "float")],
      lambda m, a, b: a @ b),
    C("matmul_shared_weight_tb", [("a", (2, 3, 4), "float"), ("b", (5, 4), "float")],
      lambda m, a, b: m.matmul(a, b, tb=True)),
    C("matmul_2d_times_batched", [("a", (3, 4), "float"), ("b", (2, 4, 5), "float")],
      lambda m, a, b: a @ b),
    C("matmul_ta", [("a", (4, 3), "float"), ("b", (4, 2), "float")],
      lambda m, a, b: m.matmul(a, b, ta=True)),
    C("matmul_tb", [("a", (3, 4), "float"), ("b", (2, 4), "float")],
      lambda m, a, b: m.matmul(a, b, tb=True)),
    C("matmul_ta_tb", [("a", (2, 4, 3), "float"), ("b", (2, 5, 4), "float")],
      lambda m, a, b: m.matmul(a, b, ta=True, tb=True)),
    C("matmul_ta_batched_shared", [("a", (2, 4, 3), "float"), ("b", (4, 5), "float")],
      lambda m, a, b: m.matmul(a, b, ta=True)),
    # --- selection
    C("max_all", X34, lambda m, x: m.max(x)),
    C("max_axis", [("x", (2, 3, 4), "float")], lambda m, x: m.max(x, axis=1)),
    C("max_axes_keepdims", [("x", (2, 3, 4), "float")],
      lambda m, x: m.max(x, axis=(0, 2), keepdims=True)),
    C("getitem_int_slice", [("x", (4, 5), "float")], lambda m, x: x[1, 1:4]),
    C("getitem_steps", [("x", (5, 6), "float")], lambda m, x: x[::2, 1::3]),
    C("getitem_negative_step", [("x", (5, 6), "float")], lambda m, x: x[4:0:-2, ::-1]),
    C("getitem_ellipsis", [("x", (2, 3, 4), "float")], lambda m, x: x[..., -1]),
    C("slice", [("x", (3, 6), "float")], lambda m, x: m.slice(x, 1, 2, 5)),
    C("concat", [("x", (2, 3), "float"), ("y", (2, 2), "float"), ("z", (2, 1), "float")],
      lambda m, x, y, z: m.concat([x, y, z], axis=1)),
    C("concat_axis0", [("x", (1, 3), "float"), ("y", (2, 3), "float")],
      lambda m, x, y: m.concat([x, y], axis=0)),
    # --- neural-network ops
    C("softmax", X34, lambda m, x: m.softmax(x)),
    C("softmax_axis0", [("x", (3, 2, 4), "float")], lambda m, x: m.softmax(x, axis=0)),
    C("log_softmax", X34, lambda m, x: m.log_softmax(x)),
    C("log_softmax_axis1", [("x", (2, 3, 4), "float")], lambda m, x: m.log_softmax(x, axis=1)),
    C("softmax_cross_entropy", [("logits", (4, 5), "float"), ("labels", (4,), "labels:5")],
      lambda m, lo, la: m.softmax_cross_entropy(lo, la)),
    C("softmax_cross_entropy_3d", [("logits", (2, 3, 4), "float"),
                                   ("labels", (2, 3), "labels:4")],
      lambda m, lo, la: m.softmax_cross_entropy(lo, la)),
    C("mse", XY34, lambda m, x, y: m.mse(x, y)),
    C("layer_norm", [("x", (3, 5), "float"), ("g", (5,), "float"), ("b", (5,), "float")],
      lambda m, x, g, b: m.layer_norm(x, g, b)),
    C("layer_norm_3d", [("x", (2, 3, 4), "float"), ("g", (4,), "float"),
                        ("b", (4,), "float")],
      lambda m, x, g, b: m.layer_norm(x, g, b, eps=1e-3)),
    C("batch_norm_2d", [("x", (5, 3), "float"), ("g", (3,), "float"), ("b", (3,), "float")],
      lambda m, x, g, b: m.batch_norm(x, g, b)),
    C("batch_norm_4d", [("x", (3, 2, 3, 3), "float"), ("g", (2,), "float"),
                        ("b", (2,), "float")],
      lambda m, x, g, b: m.batch_norm(x, g, b)),
    C("conv2d", [("x", (2, 2, 5, 5), "float"), ("w", (3, 2, 3, 3), "float")],
      lambda m, x, w: m.conv2d(x, w)),
    C("conv2d_stride_padding", [("x", (2, 2, 6, 5), "float"), ("w", (3, 2, 3, 2), "float")],
      lambda m, x, w: m.conv2d(x, w, stride=2, padding=1)),
    C("conv2d_asymmetric", [("x", (1, 3, 5, 6), "float"), ("w", (2, 3, 2, 3), "float")],
      lambda m, x, w: m.conv2d(x, w, stride=(1, 2), padding=(2, 1))),
    C("max_pool2d", [("x", (2, 2, 4, 4), "float")], lambda m, x: m.max_pool2d(x, 2)),
    C("max_pool2d_overlap_pad", [("x", (1, 2, 5, 5), "float")],
      lambda m, x: m.max_pool2d(x, 3, stride=2, padding=1)),
    C("avg_pool2d", [("x", (2, 2, 4, 4), "float")], lambda m, x: m.avg_pool2d(x, 2)),
    C("avg_pool2d_overlap_pad", [("x", (1, 2, 5, 5), "float")],
      lambda m, x: m.avg_pool2d(x, 3, stride=2, padding=1)),
    C("embedding", [("ids", (2, 3), np.array([[0, 2, 2], [4, 0, 2]])),
                    ("table", (5, 3), "float")],
      lambda m, ids, table: m.embedding(ids, table), wrt=["table"]),
    C("dropout", [("x", (4, 6), "float")], lambda m, x: m.dropout(x, 0.4, name="drop")),
]


# --------------------------------------------------------------------------------------------
# Running a case with minigraph
# --------------------------------------------------------------------------------------------

def build(case: Case):
    """The loss sum(f(inputs) * R), its gradients, feeds, and the op's output tensor."""
    data = case.data()
    with mg.name_scope():
        ins = {n: mg.input(n, data[n].shape, data[n].dtype) for n, _, _ in case.inputs}
        out = case.f(mg, *ins.values())
        r = np.random.default_rng(case.seed + 1).standard_normal(out.shape)
        loss = mg.sum(out * mg.constant(r, name="R", dtype="float64"))
        wrt = [ins[n] for n in case.diff_names()]
        grads = mg.grad(loss, wrt)
    return loss, out, wrt, grads, data, r


def numeric_grad(ex: mg.Executor, loss: str, feeds: dict, name: str) -> np.ndarray:
    x = feeds[name]
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + EPS
        hi = ex.run(feeds)[loss]
        x[i] = old - EPS
        lo = ex.run(feeds)[loss]
        x[i] = old
        g[i] = (hi - lo) / (2 * EPS)
    return g


def assert_finite_differences(case: Case, rtol: float = RTOL, atol: float = ATOL) -> None:
    """The case's gradients (the backward graph's) against central differences of its
    loss, per input it differentiates (also used by tests/test_ops_more.py)."""
    loss, out, wrt, grads, data, _ = build(case)
    got = mg.Executor(mg.Graph([loss, *grads])).run(data)
    fwd = mg.Executor(mg.Graph([loss]))
    feeds = {k: v.copy() for k, v in data.items()}
    for t, g in zip(wrt, grads):
        num = numeric_grad(fwd, loss.name, feeds, t.name)
        assert got[g.name].shape == t.shape
        np.testing.assert_allclose(got[g.name], num, rtol=rtol, atol=atol,
                                   err_msg=f"d loss / d {t.name} for {case.name}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradient_matches_finite_differences(case: Case) -> None:
    assert_finite_differences(case)


def test_every_differentiable_op_has_a_case() -> None:
    from test_ops_more import CASES as MORE  # the newer op modules' cases
    covered = set()
    for case in CASES + MORE:
        _, out, _, _, _, _ = build(case)
        covered |= {n.op for n in mg.Graph([out]).nodes}
    wanted = {name for name, d in OPS.items()
              if d.grad is not None and d.differentiable != () and not d.stateful}
    assert wanted - covered == set()


# --------------------------------------------------------------------------------------------
# The same cases in PyTorch
# --------------------------------------------------------------------------------------------

def torch_namespace(torch, case: Case, data: dict):
    """Functions with minigraph's names and conventions, computed by torch."""
    F = torch.nn.functional

    def axes(x, axis):
        return tuple(range(x.dim())) if axis is None else axis

    def sum_to(x, shape):
        lead = x.dim() - len(shape)
        x = x.sum(dim=tuple(range(lead))) if lead else x
        dims = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
        return x.sum(dim=dims, keepdim=True) if dims else x

    def matmul(a, b, ta=False, tb=False):
        return (a.transpose(-1, -2) if ta else a) @ (b.transpose(-1, -2) if tb else b)

    def transpose(x, perm=None):
        return x.transpose(-1, -2) if perm is None else x.permute(*perm)

    def sce(logits, labels):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    def batch_norm(x, g, b, eps=1e-5):
        return F.batch_norm(x, None, None, g, b, training=True, eps=eps)

    def dropout(x, p, name):
        # the mask minigraph draws (a counter-based hash, not torch's generator)
        with mg.name_scope():
            ones = mg.input("ones", tuple(x.shape), "float64")
            y = mg.dropout(ones, p, name=name)
        mask = mg.Executor(mg.Graph([y])).run(ones=np.ones(tuple(x.shape)))[y.name] != 0
        return x * torch.as_tensor(mask) / (1 - p)

    return types.SimpleNamespace(
        exp=torch.exp, log=torch.log, sqrt=torch.sqrt, relu=torch.relu,
        sigmoid=torch.sigmoid, tanh=torch.tanh,
        gelu=lambda x: F.gelu(x, approximate="tanh"),
        add_n=lambda *xs: sum(xs[1:], xs[0]), sum_to=sum_to,
        sum=lambda x, axis=None, keepdims=False: x.sum(dim=axes(x, axis), keepdim=keepdims),
        mean=lambda x, axis=None, keepdims=False: x.mean(dim=axes(x, axis), keepdim=keepdims),
        max=lambda x, axis=None, keepdims=False: x.amax(dim=axes(x, axis), keepdim=keepdims),
        broadcast_to=lambda x, s: x.expand(*s), reshape=lambda x, s: x.reshape(s),
        transpose=transpose, matmul=matmul,
        slice=lambda x, axis, a, b: x.narrow(axis, a, b - a),
        concat=lambda xs, axis=0: torch.cat(xs, dim=axis),
        softmax=lambda x, axis=-1: torch.softmax(x, dim=axis),
        log_softmax=lambda x, axis=-1: torch.log_softmax(x, dim=axis),
        softmax_cross_entropy=sce, mse=F.mse_loss,
        layer_norm=lambda x, g, b, eps=1e-5: F.layer_norm(x, (x.shape[-1],), g, b, eps),
        batch_norm=batch_norm, conv2d=F.conv2d,
        max_pool2d=lambda x, k, stride=None, padding=0: F.max_pool2d(x, k, stride, padding),
        avg_pool2d=lambda x, k, stride=None, padding=0: F.avg_pool2d(x, k, stride, padding),
        embedding=F.embedding, dropout=dropout,
    )


class TorchIndexable:
    """A torch tensor whose `[]` also takes negative steps (torch's own does not)."""

    def __init__(self, t):
        self.t = t

    def __getitem__(self, idx):
        import torch
        idx = idx if isinstance(idx, tuple) else (idx,)
        if Ellipsis in idx:
            k = idx.index(Ellipsis)
            idx = idx[:k] + (slice(None),) * (self.t.dim() - len(idx) + 1) + idx[k + 1:]
        x, d = self.t, 0
        for i in idx:
            if isinstance(i, slice):
                pick = list(range(*i.indices(x.shape[d])))
                x = x.index_select(d, torch.tensor(pick, dtype=torch.long))
                d += 1
            else:
                x = x.select(d, i)
        return x


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradient_matches_torch(case: Case) -> None:
    torch = pytest.importorskip("torch")
    loss, out, wrt, grads, data, r = build(case)
    got = mg.Executor(mg.Graph([out, loss, *grads])).run(data)
    tin = {n: torch.tensor(v, requires_grad=n in case.diff_names()) for n, v in data.items()}
    args = [TorchIndexable(t) if case.name.startswith("getitem") else t for t in tin.values()]
    tout = case.f(torch_namespace(torch, case, data), *args)
    (tout * torch.as_tensor(r)).sum().backward()
    np.testing.assert_allclose(got[out.name], tout.detach().numpy(), rtol=1e-7, atol=1e-10,
                               err_msg=f"forward value of {case.name}")
    for t, g in zip(wrt, grads):
        np.testing.assert_allclose(got[g.name], tin[t.name].grad.numpy(), rtol=1e-6,
                                   atol=1e-9, err_msg=f"d loss / d {t.name} for {case.name}")


def test_the_gradient_of_x_to_the_0_is_0_even_at_0() -> None:
    """d(x**0)/dx is 0 everywhere, as in PyTorch; the rule p * x**(p-1) gives 0 * inf = NaN
    at x = 0."""
    with mg.name_scope():
        x = mg.input("x", (3,), "float64")
        (dx,) = mg.grad(mg.sum(x ** 0 * x), [x])      # d/dx = 0 * x + x**0 = 1
    got = mg.Executor(mg.Graph([dx])).run(x=np.array([0.0, -0.0, 2.0]))[dx.name]
    assert np.array_equal(got, [1.0, 1.0, 1.0])
