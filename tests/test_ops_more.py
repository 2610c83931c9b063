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
from minigraph.ops import gather as gx
from minigraph.ops.activations import clamp_grad
from minigraph.ops.registry import apply1
from minigraph.ops.unary_more import expm1, log1p, unary

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

# gather.py and unary_more.py (issue 47): minigraph's functions are not mg's names, so a
# case reads them through `_n(m)`: the ops modules for minigraph, PyTorch's for torch.
_NEW = types.SimpleNamespace(
    gather=gx.gather, scatter=gx.scatter, take=gx.take, index=gx.index,
    index_put=gx.index_put, flip=gx.flip, cumsum=gx.cumsum,
    sort=lambda x, axis=-1, descending=False, k=None: gx.sort(x, axis, descending, k)[0],
    gather_grad=lambda g, axis, i, shape: apply1("gather_grad", [g, i],
                                                 {"axis": axis, "shape": shape}),
    take_grad=lambda g, axis, i, shape: apply1("take_grad", [g, i],
                                               {"axis": axis, "shape": shape}),
    index_grad=lambda g, where, idx, shape: apply1("index_grad", [g, *idx],
                                                   {"where": where, "shape": shape}),
    log1p=log1p, expm1=expm1, unary=lambda op, x: unary(op, x))


def _n(m):
    return _NEW if m is mg else m


_PERM = np.array([[2, 0], [0, 1], [1, 2]])          # no position written twice
_I3 = np.array([[2, 0, 1, 2], [0, 0, 2, 1]])       # repeats: gather_grad sums them
CASES += [
    C("gather", [("x", (3, 4), "float"), ("i", (2, 4), _I3)],
      lambda m, x, i: _n(m).gather(x, 0, i)),
    C("gather_axis1_smaller", [("x", (3, 4), "float"), ("i", (2, 3), "labels:4")],
      lambda m, x, i: _n(m).gather(x, 1, i)),
    C("gather_grad", [("g", (2, 4), "float"), ("i", (2, 4), _I3)],
      lambda m, g, i: _n(m).gather_grad(g, 0, i, (3, 4))),
    C("scatter", [("x", (3, 2), "float"), ("i", (3, 2), _PERM), ("s", (3, 2), "float")],
      lambda m, x, i, s: _n(m).scatter(x, 0, i, s, "scatter")),
    C("scatter_add", [("x", (3, 4), "float"), ("i", (2, 4), _I3), ("s", (2, 4), "float")],
      lambda m, x, i, s: _n(m).scatter(x, 0, i, s, "scatter_add")),
    C("take", [("x", (3, 4), "float"), ("i", (5,), np.array([3, 0, 3, 1, 2]))],
      lambda m, x, i: _n(m).take(x, 1, i)),
    C("take_grad", [("g", (3, 5), "float"), ("i", (5,), np.array([3, 0, 3, 1, 2]))],
      lambda m, g, i: _n(m).take_grad(g, 1, i, (3, 4))),
    C("index", [("x", (2, 3, 4), "float"), ("i", (2, 1), np.array([[0], [2]])),
                ("j", (3,), np.array([3, 3, 1]))],
      lambda m, x, i, j: _n(m).index(x, (False, True, True), [i, j])),
    C("index_grad", [("g", (2, 2, 3), "float"), ("i", (2, 1), np.array([[0], [2]])),
                     ("j", (3,), np.array([3, 3, 1]))],
      lambda m, g, i, j: _n(m).index_grad(g, (False, True, True), [i, j], (2, 3, 4))),
    C("index_put_accumulate", [("x", (3, 4), "float"), ("i", (3,), np.array([2, 0, 2])),
                               ("v", (3, 4), "float")],
      lambda m, x, i, v: _n(m).index_put(x, (True,), [i], v, True)),
    C("index_put", [("x", (3, 4), "float"), ("i", (2,), np.array([2, 0])),
                    ("v", (4,), "float")],
      lambda m, x, i, v: _n(m).index_put(x, (True,), [i], v, False)),
    C("flip", [("x", (2, 3, 4), "float")], lambda m, x: _n(m).flip(x, (0, 2))),
    C("cumsum", [("x", (3, 4), "float")], lambda m, x: _n(m).cumsum(x, 1)),
    C("sort_descending", [("x", (3, 5), "float")],
      lambda m, x: _n(m).sort(x, 1, descending=True)),
    C("topk", [("x", (4, 3), "float")], lambda m, x: _n(m).sort(x, 0, True, 2)),
    C("log1p", [("x", (3, 4), "pos")], lambda m, x: _n(m).log1p(x)),
    C("expm1", X34, lambda m, x: _n(m).expm1(x)),
]
_RNG = np.random.default_rng(5)
_DOMAIN = {"asin": _RNG.uniform(-0.8, 0.8, (3, 4)), "acos": _RNG.uniform(-0.8, 0.8, (3, 4)),
           "atanh": _RNG.uniform(-0.8, 0.8, (3, 4)), "tan": _RNG.uniform(-1.0, 1.0, (3, 4)),
           "acosh": _RNG.uniform(1.2, 2.0, (3, 4)), "log2": "pos", "log10": "pos"}
CASES += [C(f"unary_{op}", [("x", (3, 4), _DOMAIN.get(op, "float"))],
            lambda m, x, op=op: _n(m).unary(op, x))
          for op in ("sin", "cos", "tan", "sinh", "cosh", "atan", "asin", "acos", "asinh",
                     "acosh", "atanh", "log2", "log10")]


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
            x, t, reduction=red[reduction], beta=beta),
        gather=torch.gather, take=torch.index_select, flip=torch.flip, cumsum=torch.cumsum,
        log1p=torch.log1p, expm1=torch.expm1, unary=lambda op, x: getattr(torch, op)(x),
        scatter=lambda x, a, i, s, mode: x.scatter_add(a, i, s) if mode == "scatter_add"
        else x.scatter(a, i, s),
        index=lambda x, where, idx: torch.ops.aten.index(x, _torch_index(where, idx)),
        index_put=lambda x, where, idx, v, acc: torch.ops.aten.index_put(
            x, _torch_index(where, idx), v, acc),
        sort=lambda x, axis=-1, descending=False, k=None: torch.sort(
            x, dim=axis, descending=descending, stable=True)[0] if k is None
        else torch.topk(x, k, axis)[0],
        gather_grad=lambda g, axis, i, shape: g.new_zeros(shape).scatter_add(axis, i, g),
        take_grad=lambda g, axis, i, shape: g.new_zeros(shape).index_add(axis, i, g),
        index_grad=lambda g, where, idx, shape: torch.ops.aten.index_put(
            g.new_zeros(shape), _torch_index(where, idx), g, True)))


def _torch_index(where, idx):
    """ATen's index list: the next index tensor where `where` says so, else None."""
    it = iter(idx)
    return [next(it) if w else None for w in where]


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
        h = h + _new_ops_of_issue_47(h)
        h64 = mg.cast(h, "float64")
        p = mg.cast(mg.mean(h64 * h64, axis=(2, 3)), "float32")
        loss = mg.bce_with_logits(p, t) + mg.smooth_l1(p, t, 0.5)
        return mg.training_graph(loss, [w, s, g, b], lr=0.1, name="more")


def _new_ops_of_issue_47(h: mg.Tensor) -> mg.Tensor:
    """A term using every op of gather.py, random.py and unary_more.py (and so, through
    the training graph, their gradient ops), for the zoo of tests/test_ops.py."""
    from minigraph.ops.random import random
    const = mg.constant
    flat = mg.reshape(h, (8, 36))
    i8 = const(np.array([[3, 0, 7, 3] * 9, [1, 1, 2, 6] * 9]), dtype="int64")   # [2, 36]
    perm = const(np.arange(36)[None, :].repeat(2, 0) % 8, dtype="int64")
    t = gx.gather(flat, 0, i8) + gx.take(flat, 1, const(np.array([5, 1, 5, 30]),
                                                        dtype="int64")).sum() * 0.01
    s = gx.scatter(flat, 0, perm, t, "scatter") + gx.scatter(flat, 0, i8, t, "scatter_add")
    rows, cols = const(np.array([[0], [7]]), dtype="int64"), const(np.array([2, 2, 9]),
                                                                     dtype="int64")
    picked = gx.index(s, (True, True), [rows, cols])                       # [2, 3]
    s = gx.index_put(s, (True, True), [rows, cols], picked * 2.0, True)
    s = gx.index_put(s, (True,), [const(np.array([4]), dtype="int64")], s[0], False)
    s = gx.cumsum(gx.flip(s, (1,)), 1) * 0.1 + gx.sort(s, 1, True)[0]
    top = gx.sort(s, 0, True, 3)[0]
    th = mg.tanh(s) * 0.9
    sq = s * s
    u = log1p(sq) + expm1(th) + top.sum() * 0.01
    for op in ("sin", "cos", "tan", "sinh", "cosh", "atan", "asin", "acos", "asinh",
               "atanh"):
        u = u + unary(op, th) * 0.01
    u = u + (unary("acosh", sq + 1.5) + unary("log2", sq + 0.5)
             + unary("log10", sq + 0.5)) * 0.01
    for op in ("floor", "ceil", "trunc", "round"):
        u = u + s * unary(op, s) * 0.001
    u = u * mg.cast(mg.logical_not(unary("isinf", s)), "float32")
    noise = (random(u, "uniform", u.shape, "float32") + random(u, "normal", u.shape, "float32")
             + random(u, "bernoulli", u.shape, "float32", p=0.3)) * 0.001
    return mg.reshape(u + noise, h.shape)


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
