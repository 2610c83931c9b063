"""The ops of activations.py, masking.py, rounding.py, conv_more.py, normalization.py and
losses.py, specified as tests/test_gradcheck.py specifies the core ops:

- every differentiable op's gradient against float64 central differences, and its value
  and gradient against PyTorch (`CASES`; test_gradcheck's coverage test counts them);
- `more_graph()`: one training graph that uses every new op, which tests/test_ops.py adds
  to its zoo (in-place pairs run bitwise equal, declared workspace covers the scratch);
- the rules that a gradient check cannot see: GELU's erf against `math.erf`, hardtanh's
  strict boundaries against clamp's inclusive ones, rounded division of integers.
"""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
from test_gradcheck import C, Case, assert_finite_differences, build, torch_namespace

import minigraph as mg
from minigraph.ops.activations import clamp_grad

X34 = [("x", (3, 4), "float")]
XT34 = [("x", (3, 4), "float"), ("t", (3, 4), "float")]

CASES = [
    C("gelu_erf", X34, lambda m, x: m.gelu_erf(x)),
    C("silu", X34, lambda m, x: m.silu(x)),
    C("clamp", X34, lambda m, x: m.clamp(x, -0.5, 0.7)),
    C("clamp_below_only", [("x", (3, 4), "away0")], lambda m, x: m.clamp(x, 0.0)),
    C("leaky_relu", [("x", (3, 4), "away0")], lambda m, x: m.leaky_relu(x, 0.1)),
    C("abs", [("x", (3, 4), "away0")], lambda m, x: m.abs(x)),
    C("where_broadcast", [("c", (3, 4), "float"), ("a", (3, 4), "float"), ("b", (4,), "float")],
      lambda m, c, a, b: m.where(m.compare(c, "gt", 0.0), a, b), wrt=["a", "b"]),
    C("cast_of_a_mask", [("x", (3, 4), "away0")],
      lambda m, x: x * m.cast(m.compare(x, "gt", 0.0), "float64")),
    C("tril", [("x", (2, 4, 4), "float")], lambda m, x: m.tril(x)),
    C("triu_k1", [("x", (4, 5), "float")], lambda m, x: m.triu(x, 1)),
    C("conv2d_grouped_dilated", [("x", (2, 4, 6, 6), "float"), ("w", (6, 2, 3, 3), "float")],
      lambda m, x, w: m.conv2d_grouped(x, w, padding=2, dilation=2, groups=2)),
    C("conv2d_depthwise_strided", [("x", (1, 3, 5, 6), "float"), ("w", (3, 1, 3, 2), "float")],
      lambda m, x, w: m.conv2d_grouped(x, w, stride=2, padding=1, groups=3)),
    C("group_norm", [("x", (2, 4, 3, 3), "float"), ("g", (4,), "float"), ("b", (4,), "float")],
      lambda m, x, g, b: m.group_norm(x, 2, g, b)),
    C("group_norm_3d", [("x", (3, 6, 4), "float"), ("g", (6,), "float"), ("b", (6,), "float")],
      lambda m, x, g, b: m.group_norm(x, 3, g, b, eps=1e-3)),
    C("bce_with_logits", XT34, lambda m, x, t: m.bce_with_logits(x, t)),
    C("bce_with_logits_sum", XT34, lambda m, x, t: m.bce_with_logits(x, t, "sum")),
    C("smooth_l1", XT34, lambda m, x, t: m.smooth_l1(x, t, 0.5)),
    C("smooth_l1_as_l1", XT34, lambda m, x, t: m.smooth_l1(x, t, 0.0, "sum")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradient_matches_finite_differences(case: Case) -> None:
    assert_finite_differences(case)


def more_namespace(torch, case: Case, data: dict):
    """test_gradcheck's PyTorch namespace, with the new ops' names."""
    F = torch.nn.functional
    base = torch_namespace(torch, case, data)
    red = {"mean": "mean", "sum": "sum"}
    return types.SimpleNamespace(**vars(base), **dict(
        gelu_erf=F.gelu, silu=F.silu, abs=torch.abs,
        clamp=lambda x, lo=None, hi=None: torch.clamp(x, lo, hi),
        leaky_relu=F.leaky_relu, where=torch.where,
        compare=lambda x, op, y: getattr(torch, op)(x, y),
        cast=lambda x, dt: x.to(getattr(torch, dt)),
        tril=torch.tril, triu=torch.triu,
        conv2d_grouped=lambda x, w, stride=1, padding=0, dilation=1, groups=1: F.conv2d(
            x, w, None, stride, padding, dilation, groups),
        group_norm=lambda x, g, gamma, beta, eps=1e-5: F.group_norm(x, g, gamma, beta, eps),
        bce_with_logits=lambda x, t, reduction="mean": F.binary_cross_entropy_with_logits(
            x, t, reduction=red[reduction]),
        smooth_l1=lambda x, t, beta=1.0, reduction="mean": F.smooth_l1_loss(
            x, t, reduction=red[reduction], beta=beta)))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradient_matches_torch(case: Case) -> None:
    torch = pytest.importorskip("torch")
    loss, out, wrt, grads, data, r = build(case)
    got = mg.Executor(mg.Graph([out, loss, *grads])).run(data)
    tin = {n: torch.tensor(v, requires_grad=n in case.diff_names()) for n, v in data.items()}
    tout = case.f(more_namespace(torch, case, data), *tin.values())
    (tout * torch.as_tensor(r)).sum().backward()
    np.testing.assert_allclose(got[out.name], tout.detach().numpy(), rtol=1e-7, atol=1e-10,
                               err_msg=f"forward value of {case.name}")
    for t, g in zip(wrt, grads):
        np.testing.assert_allclose(got[g.name], tin[t.name].grad.numpy(), rtol=1e-6,
                                   atol=1e-9, err_msg=f"d loss / d {t.name} for {case.name}")


# --- one graph with every new op, for tests/test_ops.py's zoo ---------------------------------

def more_graph() -> mg.Graph:
    """A training graph using every op of the new modules (and so their gradient ops)."""
    with mg.name_scope():
        x, t = mg.input("x", (2, 4, 6, 6)), mg.input("t", (2, 4))
        w, s = mg.param("w", (4, 2, 3, 3)), mg.param("s", (1, 4, 1, 1), init="ones")
        g, b = mg.param("g", (4,), init="ones"), mg.param("b", (4,), init="zeros")
        h = mg.conv2d_grouped(x * s, w, padding=2, dilation=2, groups=2)
        h = mg.group_norm(h, 2, g, b)
        h = mg.silu(h) + mg.leaky_relu(h, 0.2) + mg.gelu_erf(h) + mg.abs(mg.clamp(h, -1.0, 1.0))
        h = mg.tril(h) + mg.triu(h, 2)
        big = mg.logical(mg.compare(h, "gt", 0.5), "and",
                         mg.logical_not(mg.compare(h, "gt", mg.exp(h) - 1.0)))
        h = mg.where(big, h, h * 0.5) + mg.sign(h) * 0.1
        steps = mg.div_round(h, mg.constant(np.full((6,), 0.75, np.float32)), "floor")
        h = h + steps * 0.01
        h64 = mg.cast(h, "float64")
        p = mg.cast(mg.mean(h64 * h64, axis=(2, 3)), "float32")
        loss = mg.bce_with_logits(p, t) + mg.smooth_l1(p, t, 0.5)
        return mg.training_graph(loss, [w, s, g, b], lr=0.1, name="more")


def test_more_graph_uses_every_new_op():
    from minigraph.ops import activations, conv_more, losses, masking, normalization, rounding
    from minigraph.ops.registry import OPS
    mods = {m.__name__ for m in (activations, conv_more, losses, masking, normalization,
                                 rounding)}
    new = {name for name, d in OPS.items() if d.forward.__module__ in mods}
    assert new - {n.op for n in more_graph()} == set()


# --- what a gradient check cannot see ----------------------------------------------------------

def test_gelu_erf_is_x_times_the_normal_cdf():
    x = np.linspace(-6, 6, 101)
    with mg.name_scope():
        xi = mg.input("x", x.shape, "float64")
        y = mg.gelu_erf(xi)
    got = mg.Executor(mg.Graph([y])).run(x=x)[y.name]
    want = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)


def test_hardtanh_gradient_is_zero_on_its_bounds_and_clamps_is_not():
    x = np.array([-1.0, -0.5, 0.0, 1.0, 2.0])
    with mg.name_scope():
        xi, dy = mg.input("x", (5,), "float64"), mg.input("dy", (5,), "float64")
        strict = clamp_grad(dy, xi, -1.0, 1.0, inclusive=False)
        loose = clamp_grad(dy, xi, -1.0, 1.0)
    out = mg.Executor(mg.Graph([strict, loose])).run(x=x, dy=np.ones(5))
    assert out[strict.name].tolist() == [0, 1, 1, 0, 0]       # PyTorch's hardtanh_backward
    assert out[loose.name].tolist() == [1, 1, 1, 1, 0]        # PyTorch's clamp backward


@pytest.mark.parametrize("dtype", ["int64", "float32"])
@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_round_is_pytorchs(mode, dtype):
    torch = pytest.importorskip("torch")
    a = np.array([7, -7, 7, -7, 6, 0, -1], dtype)
    b = np.array([2, 2, -2, -2, 3, 5, 4], dtype)
    with mg.name_scope():
        ai, bi = mg.input("a", a.shape, dtype), mg.input("b", b.shape, dtype)
        q = mg.div_round(ai, bi, mode)
    got = mg.Executor(mg.Graph([q])).run(a=a, b=b)[q.name]
    want = torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=mode).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_cast_between_floats_passes_its_gradient_back_cast():
    with mg.name_scope():
        x = mg.input("x", (3,), "float32")
        y = mg.cast(x, "float64")
        (dx,) = mg.grad(mg.sum(y * y), [x])
    out = mg.Executor(mg.Graph([dx])).run(x=np.array([1.0, -2.0, 0.5], np.float32))
    assert out[dx.name].dtype == np.float32
    np.testing.assert_array_equal(out[dx.name], [2.0, -4.0, 1.0])


def test_new_ops_refuse_shapes_that_do_not_fit():
    x = mg.input("x", (2, 4, 5, 5))
    with pytest.raises(mg.ShapeError, match="groups=3"):
        mg.conv2d_grouped(x, mg.input("w", (6, 2, 3, 3)), groups=3)
    with pytest.raises(mg.ShapeError, match="multiple of groups=3"):
        mg.group_norm(x, 3, mg.input("g", (4,)), mg.input("b", (4,)))
    with pytest.raises(mg.DTypeError, match="bool"):
        mg.where(x, x, x)
    with pytest.raises(mg.ShapeError, match="two axes"):
        mg.tril(mg.input("v", (3,)))
