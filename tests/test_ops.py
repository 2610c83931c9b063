"""The op library as a specification: values, errors, dropout's random stream, in-place safety.

Gradients are checked in test_gradcheck.py; here each test names one rule an op keeps.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import minigraph as mg
from minigraph.backend import array_module, resolve_device, to_numpy
from minigraph.errors import DTypeError, FeedError, ShapeError
from minigraph.ops import nn as nn_ops
from minigraph.ops.registry import OPS, KernelContext, flops_of, get_op, workspace_of

MY_MODULES = ("minigraph.ops.nn", "minigraph.ops.conv", "minigraph.ops.indexing")
rng = np.random.default_rng(0)


def run(outs, feeds=None, step=0, **kw):
    """Run a graph of `outs` and return their values in order."""
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    res = mg.Executor(mg.Graph(list(outs))).run(feeds or {}, step=step, **kw)
    return [res[o.name] for o in outs]


# ------------------------------------------------------------------------------------------
# Forward values against NumPy references
# ------------------------------------------------------------------------------------------

def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def np_conv2d(x, w, stride, padding):
    (sh, sw), (ph, pw) = stride, padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, _, h, wd = xp.shape
    o, _, kh, kw = w.shape
    ho, wo = (h - kh) // sh + 1, (wd - kw) // sw + 1
    y = np.zeros((n, o, ho, wo), x.dtype)
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            y[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return y


def np_pool(x, k, s, p, how):
    pad_value = -np.inf if how == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=pad_value)
    ho, wo = (xp.shape[2] - k) // s + 1, (xp.shape[3] - k) // s + 1
    y = np.zeros(x.shape[:2] + (ho, wo), x.dtype)
    for i in range(ho):
        for j in range(wo):
            win = xp[:, :, i * s:i * s + k, j * s:j * s + k]
            y[:, :, i, j] = win.max(axis=(2, 3)) if how == "max" else win.sum(axis=(2, 3)) / k**2
    return y


def np_norm(x, g, b, axes, eps=1e-5):
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _f(*shape):
    return rng.standard_normal(shape)


FORWARD = {
    # name: (inputs {name: array}, minigraph function, numpy reference)
    "softmax": ({"x": _f(3, 5)}, lambda x: mg.softmax(x), np_softmax),
    "softmax_axis0": ({"x": _f(3, 5)}, lambda x: mg.softmax(x, axis=0),
                      lambda x: np_softmax(x, 0)),
    "log_softmax": ({"x": _f(2, 3, 4)}, lambda x: mg.log_softmax(x, axis=1),
                    lambda x: np_log_softmax(x, 1)),
    "softmax_cross_entropy": (
        {"lo": _f(4, 6), "la": np.array([0, 5, 2, 2])},
        lambda lo, la: mg.softmax_cross_entropy(lo, la),
        lambda lo, la: -np_log_softmax(lo)[np.arange(4), la].mean()),
    "mse": ({"p": _f(3, 4), "t": _f(3, 4)}, lambda p, t: mg.mse(p, t),
            lambda p, t: ((p - t) ** 2).mean()),
    "layer_norm": ({"x": _f(2, 3, 8), "g": _f(8), "b": _f(8)},
                   lambda x, g, b: mg.layer_norm(x, g, b),
                   lambda x, g, b: np_norm(x, g, b, -1)),
    "batch_norm_2d": ({"x": _f(6, 3), "g": _f(3), "b": _f(3)},
                      lambda x, g, b: mg.batch_norm(x, g, b),
                      lambda x, g, b: np_norm(x, g, b, 0)),
    "batch_norm_4d": ({"x": _f(3, 2, 4, 4), "g": _f(2), "b": _f(2)},
                      lambda x, g, b: mg.batch_norm(x, g, b, eps=1e-3),
                      lambda x, g, b: np_norm(x, g.reshape(1, 2, 1, 1), b.reshape(1, 2, 1, 1),
                                              (0, 2, 3), 1e-3)),
    "conv2d": ({"x": _f(2, 3, 7, 6), "w": _f(4, 3, 3, 2)},
               lambda x, w: mg.conv2d(x, w, stride=(2, 1), padding=(1, 2)),
               lambda x, w: np_conv2d(x, w, (2, 1), (1, 2))),
    "conv2d_1x1": ({"x": _f(2, 3, 4, 4), "w": _f(5, 3, 1, 1)}, lambda x, w: mg.conv2d(x, w),
                   lambda x, w: np_conv2d(x, w, (1, 1), (0, 0))),
    "max_pool2d": ({"x": _f(2, 3, 7, 7)}, lambda x: mg.max_pool2d(x, 3, stride=2, padding=1),
                   lambda x: np_pool(x, 3, 2, 1, "max")),
    "avg_pool2d": ({"x": _f(2, 3, 7, 7)}, lambda x: mg.avg_pool2d(x, 3, stride=2, padding=1),
                   lambda x: np_pool(x, 3, 2, 1, "avg")),
    "embedding": ({"ids": np.array([[1, 0], [4, 1]]), "E": _f(5, 3)},
                  lambda ids, E: mg.embedding(ids, E), lambda ids, E: E[ids]),
    "concat": ({"a": _f(2, 3), "b": _f(2, 1)}, lambda a, b: mg.concat([a, b], axis=-1),
               lambda a, b: np.concatenate([a, b], axis=-1)),
    "max": ({"x": _f(2, 3, 4)}, lambda x: mg.max(x, axis=(0, 2)), lambda x: x.max(axis=(0, 2))),
    "max_keepdims": ({"x": _f(2, 3, 4)}, lambda x: mg.max(x, axis=-1, keepdims=True),
                     lambda x: x.max(axis=-1, keepdims=True)),
    "max_all": ({"x": _f(3, 4)}, lambda x: mg.max(x), lambda x: x.max()),
    "slice": ({"x": _f(4, 6)}, lambda x: mg.slice(x, 1, 1, None, 2), lambda x: x[:, 1::2]),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(FORWARD))
def test_forward_matches_numpy(name, dtype):
    arrays, f, ref = FORWARD[name]
    feeds = {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in arrays.items()}
    with mg.name_scope():
        ins = [mg.input(k, v.shape, v.dtype) for k, v in feeds.items()]
        out = f(*ins)
    (got,) = run(out, feeds)
    want = ref(*[v.astype(np.float64) if v.dtype.kind == "f" else v for v in feeds.values()])
    assert got.dtype == np.dtype(dtype) and got.shape == np.shape(want)
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


INDICES = [0, -1, (1, 2), (slice(None), 1), (slice(1, None, 2),), (slice(None, None, -1),),
           (slice(3, 0, -2), Ellipsis), (Ellipsis, 0), (Ellipsis, slice(-3, None)),
           (1, Ellipsis, slice(None, None, 3)), (slice(5, 1),), (slice(-100, 100),),
           (0, 1, 2)]


@pytest.mark.parametrize("idx", INDICES, ids=repr)
def test_getitem_matches_numpy_basic_indexing(idx):
    a = np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6)
    x = mg.input("x", a.shape, "float64")
    y = x[idx]
    (got,) = run(y, {"x": a})
    np.testing.assert_array_equal(got, a[idx])


def test_getitem_of_everything_is_the_tensor_itself():
    x = mg.input("x", (2, 3))
    assert x[...] is x and x[:] is x and x[:, :] is x


def test_softmax_family_is_stable_for_large_logits():
    a = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]], dtype=np.float32)
    x = mg.input("x", a.shape)
    y = mg.input("y", (2,), "int64")
    s, ls, ce = run([mg.softmax(x), mg.log_softmax(x), mg.softmax_cross_entropy(x, y)],
                    {"x": a, "y": np.array([2, 0])})
    assert np.isfinite(s).all() and np.isfinite(ls).all() and np.isfinite(ce)
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(ls, np_log_softmax(a.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(ce, (0.40760596 + 2000.0) / 2, rtol=1e-6)


def test_max_gradient_is_shared_equally_by_ties():
    x = mg.input("x", (2, 4), "float64")
    (g,) = mg.grad(mg.sum(mg.max(x, axis=1)), [x])
    (got,) = run(g, {"x": np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]])})
    np.testing.assert_array_equal(got, [[0, 0.5, 0.5, 0], [0.25, 0.25, 0.25, 0.25]])


def test_max_pool_gradient_is_shared_equally_by_ties():
    x = mg.input("x", (1, 1, 2, 4), "float64")
    (g,) = mg.grad(mg.sum(mg.max_pool2d(x, 2)), [x])
    (got,) = run(g, {"x": np.array([[[[1.0, 1.0, 0.0, 7.0], [1.0, 1.0, 0.0, 0.0]]]])})
    np.testing.assert_array_equal(got[0, 0], [[0.25, 0.25, 0, 1], [0.25, 0.25, 0, 0]])


def test_embedding_gradient_adds_repeated_ids():
    ids = mg.input("ids", (4,), "int64")
    table = mg.param("E", (3, 2), dtype="float64")
    out = mg.embedding(ids, table)
    r = np.arange(8.0).reshape(4, 2)
    (g,) = mg.grad(mg.sum(out * mg.constant(r, dtype="float64")), [table])
    (got,) = run(g, {"ids": np.array([2, 0, 2, 2])})     # the table itself is not read
    np.testing.assert_array_equal(got, [[2, 3], [0, 0], [0 + 4 + 6, 1 + 5 + 7]])


# ------------------------------------------------------------------------------------------
# Errors name the op, the operands and the rule
# ------------------------------------------------------------------------------------------

def test_matmul_shape_error_names_both_operands():
    h1, w2 = mg.input("h1", (64, 256)), mg.param("W2", (128, 10))
    with pytest.raises(ShapeError) as e:
        mg.matmul(h1, w2)
    assert f"{type(e.value).__name__}: {e.value}" == \
        "ShapeError: matmul(h1[64,256], W2[128,10]): inner dimensions 256 != 128"


def _t(name, shape, dtype="float32"):
    return mg.input(name, shape, dtype)


SHAPE_ERRORS = {
    "conv2d_channels": (lambda: mg.conv2d(_t("x", (2, 3, 8, 8)), _t("w", (4, 2, 3, 3))),
                        "conv2d(x[2,3,8,8], w[4,2,3,3]): input channels 3 != weight channels 2"),
    "conv2d_kernel_too_big": (lambda: mg.conv2d(_t("x", (1, 1, 2, 2)), _t("w", (1, 1, 3, 3))),
                              "conv2d(x[1,1,2,2], w[1,1,3,3]): kernel 3 is larger than the "
                              "padded input 2 on H"),
    "conv2d_rank": (lambda: mg.conv2d(_t("x", (3, 8, 8)), _t("w", (4, 3, 3, 3))),
                    "conv2d(x[3,8,8], w[4,3,3,3]): x must be [N,C,H,W] and w [O,C,kh,kw]"),
    "max_pool2d_padding": (lambda: mg.max_pool2d(_t("x", (1, 1, 8, 8)), 2, padding=2),
                           "max_pool2d(x[1,1,8,8]): padding 2 must be at most half the "
                           "kernel 2"),
    "avg_pool2d_rank": (lambda: mg.avg_pool2d(_t("x", (8, 8)), 2),
                        "avg_pool2d(x[8,8]): x must be [N,C,H,W]"),
    "concat": (lambda: mg.concat([_t("a", (2, 3)), _t("b", (3, 3))], axis=1),
               "concat(a[2,3], b[3,3]): sizes differ on axis 0 (2 != 3); only axis 1 may "
               "differ"),
    "concat_rank": (lambda: mg.concat([_t("a", (2, 3)), _t("b", (2, 3, 1))]),
                    "concat(a[2,3], b[2,3,1]): operands must have the same number of dims"),
    "sce_labels": (lambda: mg.softmax_cross_entropy(_t("logits", (4, 10)),
                                                    _t("y", (5,), "int64")),
                   "softmax_cross_entropy(logits[4,10], y[5]): labels must have shape [4] "
                   "(the logits without the class axis)"),
    "mse": (lambda: mg.mse(_t("p", (4, 1)), _t("t", (4,))),
            "mse(p[4,1], t[4]): prediction and target shapes differ"),
    "layer_norm_gamma": (lambda: mg.layer_norm(_t("x", (2, 5)), _t("g", (4,)), _t("b", (5,))),
                         "layer_norm(x[2,5], g[4], b[5]): g must have shape [5]"),
    "batch_norm_rank": (lambda: mg.batch_norm(_t("x", (2, 3, 4)), _t("g", (3,)),
                                              _t("b", (3,))),
                        "batch_norm(x[2,3,4], g[3], b[3]): x must be [N,C] or [N,C,H,W]"),
    "batch_norm_beta": (lambda: mg.batch_norm(_t("x", (2, 3)), _t("g", (3,)), _t("b", (2,))),
                        "batch_norm(x[2,3], g[3], b[2]): b must have shape [3]"),
    "embedding_table": (lambda: mg.embedding(_t("ids", (3,), "int64"), _t("E", (5,))),
                        "embedding(ids[3], E[5]): the table must be [V, D]"),
    "softmax_axis": (lambda: mg.softmax(_t("x", (2, 3)), axis=2),
                     "softmax(x[2,3]): axis 2 out of range for 2 dims"),
    "max_axis": (lambda: mg.max(_t("x", (2, 3)), axis=-3),
                 "max(x[2,3]): axis -3 out of range for 2 dims"),
    "max_empty": (lambda: mg.max(_t("x", (2, 0)), axis=1), "max(x[2,0]): max of an empty axis"),
    "getitem_too_many": (lambda: _t("x", (2, 3))[0, 1, 2],
                         "getitem(x[2,3]): too many indices (3) for 2 dims"),
    "getitem_out_of_range": (lambda: _t("x", (2, 3))[:, 3],
                             "getitem(x[2,3]): index 3 is out of range for axis 1 of size 3"),
    "getitem_none": (lambda: _t("x", (2, 3))[None],
                     "getitem(x[2,3]): index None is not supported: only ints, slices and "
                     "'...' (basic indexing)"),
    "getitem_list": (lambda: _t("x", (2, 3))[[0, 1]],
                     "getitem(x[2,3]): index [0, 1] is not supported: only ints, slices and "
                     "'...' (basic indexing)"),
    "getitem_step_zero": (lambda: _t("x", (2, 3))[::0],
                          "getitem(x[2,3]): slice step cannot be zero (axis 0)"),
    "getitem_two_ellipses": (lambda: _t("x", (2, 3))[..., 0, ...],
                             "getitem(x[2,3]): an index can have only one '...'"),
    "slice_axis": (lambda: mg.slice(_t("x", (2, 3)), 2, 0, 1),
                   "slice(x[2,3]): axis 2 out of range for 2 dims"),
}


@pytest.mark.parametrize("name", sorted(SHAPE_ERRORS))
def test_shape_errors_name_op_operands_and_rule(name):
    build, message = SHAPE_ERRORS[name]
    with mg.name_scope(), pytest.raises(ShapeError) as e:
        build()
    assert str(e.value) == message


DTYPE_ERRORS = {
    "sce_float_labels": (lambda: mg.softmax_cross_entropy(_t("logits", (4, 3)), _t("y", (4,))),
                         "softmax_cross_entropy(logits[float32], y[float32]): y must be an "
                         "integer tensor"),
    "sce_int_logits": (lambda: mg.softmax_cross_entropy(_t("logits", (4, 3), "int64"),
                                                        _t("y", (4,), "int64")),
                       "softmax_cross_entropy(logits[int64]): logits must be a floating "
                       "tensor"),
    "embedding_float_ids": (lambda: mg.embedding(_t("ids", (3,)), _t("E", (5, 2))),
                            "embedding(ids[float32], E[float32]): ids must be an integer "
                            "tensor"),
    "softmax_int": (lambda: mg.softmax(_t("x", (2, 3), "int64")),
                    "softmax(x[int64]): x must be a floating tensor"),
    "dropout_int": (lambda: mg.dropout(_t("x", (2, 3), "int32"), 0.5),
                    "dropout(x[int32]): x must be a floating tensor"),
    "conv2d_mixed": (lambda: mg.conv2d(_t("x", (1, 1, 3, 3)), _t("w", (1, 1, 3, 3), "float64")),
                     "conv2d(x[float32], w[float64]): operands must have the same dtype"),
    "layer_norm_mixed": (lambda: mg.layer_norm(_t("x", (2, 3)), _t("g", (3,), "float64"),
                                               _t("b", (3,))),
                         "layer_norm(x[float32], g[float64], b[float32]): operands must have "
                         "the same dtype"),
    "concat_mixed": (lambda: mg.concat([_t("a", (2,)), _t("b", (2,), "float64")]),
                     "concat(a[float32], b[float64]): operands must have the same dtype"),
    "mse_mixed": (lambda: mg.mse(_t("p", (2,)), _t("t", (2,), "float64")),
                  "mse(p[float32], t[float64]): operands must have the same dtype"),
}


@pytest.mark.parametrize("name", sorted(DTYPE_ERRORS))
def test_dtype_errors_name_the_operand(name):
    build, message = DTYPE_ERRORS[name]
    with mg.name_scope(), pytest.raises(DTypeError) as e:
        build()
    assert str(e.value) == message


def test_label_out_of_range_fails_at_run_time_naming_it():
    # A fed label is checked on the host as it is uploaded (FeedError naming the feed and
    # the node), before any kernel runs, on NumPy and on a GPU alike.
    logits, y = mg.input("logits", (3, 5)), mg.input("y", (3,), "int64")
    loss = mg.softmax_cross_entropy(logits, y)
    ex = mg.Executor(mg.Graph([loss]))
    for bad, where in (([0, 5, 1], "label 5 at position [1]"), ([0, 1, -2], "label -2 at "
                                                                           "position [2]")):
        with pytest.raises(FeedError, match="out of range") as e:
            ex.run(logits=np.zeros((3, 5), np.float32), y=np.array(bad))
        assert f"{where} is out of range [0, 5)" in str(e.value)
        assert "feed 'y'" in str(e.value) and loss.name in str(e.value)
    ex.load(logits=np.zeros((3, 5), np.float32), y=np.array([0, 1, 2]))
    with pytest.raises(FeedError, match="label 7 at position"):
        ex.step({"y": np.array([0, 7, 2])})


def test_embedding_id_out_of_range_fails_at_run_time_naming_it():
    ids, table = mg.input("ids", (2, 2), "int64"), mg.param("E", (7, 3))
    out = mg.embedding(ids, table)
    with pytest.raises(FeedError) as e:
        run(out, {"ids": np.array([[0, 1], [9, 2]]), "E": np.zeros((7, 3), np.float32)})
    assert "id 9 at position [1, 0] is out of range [0, 7)" in str(e.value)


def test_a_kernel_checks_indices_it_was_not_told_were_checked():
    # A label computed inside the graph (not fed) is checked by the kernel itself.
    ctx = KernelContext(np, "sce")
    logits, labels = np.zeros((2, 3), np.float32), np.array([0, 3])
    with pytest.raises(IndexError, match="label 3 at position \\[1\\] is out of range"):
        get_op("softmax_cross_entropy").forward(ctx, {}, [logits, labels],
                                                [np.zeros((), np.float32)])
    ctx.indices_checked = True               # the executor's word that it checked them
    get_op("softmax_cross_entropy").forward(ctx, {}, [logits, np.array([0, 2])],
                                            [np.zeros((), np.float32)])


def test_dropout_rejects_p_outside_0_1():
    x = mg.input("x", (3,))
    for p in (1.0, -0.1):
        with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
            mg.dropout(x, p)


# ------------------------------------------------------------------------------------------
# Dropout: a counter-based random stream keyed by (seed, node, step, element)
# ------------------------------------------------------------------------------------------

def _drop(shape=(64, 50), p=0.5, seed=0, name="drop"):
    with mg.name_scope():
        x = mg.input("x", shape)
        return x, mg.dropout(x, p, seed=seed, name=name)


def test_dropout_same_step_gives_the_same_mask():
    x, y = _drop()
    ones = np.ones(x.shape, np.float32)
    a = mg.Executor(mg.Graph([y])).run(x=ones, step=3)[y.name]
    b = mg.Executor(mg.Graph([y])).run(x=ones, step=3)[y.name]   # a fresh executor, too
    np.testing.assert_array_equal(a, b)


def test_dropout_different_steps_give_different_masks():
    x, y = _drop()
    ex, ones = mg.Executor(mg.Graph([y])), np.ones(x.shape, np.float32)
    masks = [ex.run(x=ones, step=s)[y.name] != 0 for s in range(4)]
    for i in range(4):
        for j in range(i + 1, 4):
            assert (masks[i] != masks[j]).mean() > 0.3     # about half differ for p = 0.5


def test_dropout_mask_depends_on_seed_and_node_name():
    ones = np.ones((64, 50), np.float32)

    def mask(**kw):
        x, y = _drop(**kw)
        return run(y, {"x": ones})[0] != 0

    base = mask()
    assert (base != mask(seed=1)).mean() > 0.3
    assert (base != mask(name="other")).mean() > 0.3
    x, y = _drop()
    ex_seeded = mg.Executor(mg.Graph([y]), seed=7).run(x=ones)[y.name] != 0
    assert (base != ex_seeded).mean() > 0.3


def test_dropout_keeps_one_minus_p_and_scales_by_its_inverse():
    x, y = _drop(shape=(400, 500), p=0.3)
    a = rng.standard_normal(x.shape).astype(np.float32)
    (got,) = run(y, {"x": a})
    kept = got != 0
    assert abs(kept.mean() - 0.7) < 0.005
    np.testing.assert_array_equal(got[kept], a[kept] * np.float32(1 / 0.7))


def test_dropout_zero_is_identity():
    x = mg.input("x", (3,))
    assert mg.dropout(x, 0.0) is x


def test_dropout_gradient_regenerates_the_forward_mask():
    x, y = _drop(shape=(20, 30), p=0.4)
    r = rng.standard_normal(x.shape).astype(np.float32)
    (g,) = mg.grad(mg.sum(y * mg.constant(r)), [x])
    graph = mg.Graph([y, g])
    node = graph.producer(g.name)
    assert node.op == "dropout_grad" and node.attr["key"] == zlib.crc32(b"drop")
    assert not set(node.inputs) & {x.name, y.name}        # no stored mask, no forward value
    for step in (0, 5):
        out = mg.Executor(graph).run(x=np.ones(x.shape, np.float32), step=step)
        mask = out[y.name] != 0
        np.testing.assert_array_equal(out[g.name], np.where(mask, r * np.float32(1 / 0.6), 0))


def test_dropout_mask_does_not_depend_on_the_chunking(monkeypatch):
    x, y = _drop(shape=(7, 13), p=0.5)
    a = rng.standard_normal(x.shape).astype(np.float32)
    (whole,) = run(y, {"x": a})
    monkeypatch.setattr(nn_ops, "_CHUNK", 10)
    (chunked,) = run(y, {"x": a})
    np.testing.assert_array_equal(whole, chunked)


# ------------------------------------------------------------------------------------------
# A zoo of small training graphs that use every op, run by a reference interpreter
# ------------------------------------------------------------------------------------------

def cnn_graph() -> mg.Graph:
    with mg.name_scope():
        x, y = mg.input("x", (2, 3, 6, 6)), mg.input("y", (2,), "int64")
        w1, w2 = mg.param("w1", (4, 3, 3, 3)), mg.param("w2", (4, 4, 3, 3))
        g1, b1 = mg.param("g1", (4,), init="ones"), mg.param("b1", (4,), init="zeros")
        W = mg.param("W", (8, 5))
        h = mg.relu(mg.batch_norm(mg.conv2d(x, w1, padding=1), g1, b1))
        h = mg.max_pool2d(h, 2)
        h = mg.avg_pool2d(mg.conv2d(h, w2, padding=1), 3, stride=1, padding=1)
        feats = mg.concat([mg.max(h, axis=(2, 3)), mg.mean(h, axis=(2, 3))], axis=1)
        logits = mg.dropout(feats, 0.25) @ W
        loss = mg.softmax_cross_entropy(logits, y)
        return mg.training_graph(loss, [w1, w2, g1, b1, W], lr=0.1, name="cnn")


def seq_graph() -> mg.Graph:
    with mg.name_scope():
        ids, t = mg.input("ids", (2, 4), "int64"), mg.input("t", (2, 4, 6))
        E, W1, W2 = mg.param("E", (7, 6)), mg.param("W1", (6, 6)), mg.param("W2", (6, 6))
        g, b = mg.param("g", (6,), init="ones"), mg.param("b", (6,), init="zeros")
        c = mg.param("c", (6,), init="zeros")
        e = mg.embedding(ids, E)
        att = mg.softmax(e @ mg.transpose(e) / 2.0)
        h = mg.layer_norm(att @ e + e, g, b)
        u = mg.gelu(h @ W1 + c)
        v = mg.sigmoid(u) * mg.tanh(u) - mg.exp(-mg.relu(u)) + 0.5 * (1.0 - u)
        v = mg.dropout(v, 0.1)
        z = mg.log_softmax(v @ W2)
        z = mg.concat([z[:, :2], z[:, 2:]], axis=1)
        pos = mg.sqrt(z ** 2 + 1.0)
        extra = mg.mean(mg.log(pos) / pos) + mg.mean(2.0 / pos) + mg.mean(pos - t) \
            + 0.01 * mg.sum(pos)
        loss = mg.mse(mg.reshape(z, (8, 6)), mg.reshape(t, (8, 6))) + extra
        return mg.training_graph(loss, [E, W1, W2, g, b, c], lr=0.1, name="seq")


def zoo_feeds(graph: mg.Graph) -> dict:
    r = np.random.default_rng(1)
    feeds = mg.init_params(graph, seed=0)
    for t in graph.leaves("input"):
        if t.name == "y":
            feeds[t.name] = r.integers(0, 5, t.shape)
        elif t.name == "ids":
            feeds[t.name] = r.integers(0, 7, t.shape)
        else:
            feeds[t.name] = r.standard_normal(t.shape).astype(t.dtype)
    return feeds


def interpret(graph: mg.Graph, feeds: dict, step: int = 0):
    """Every tensor's value and every node's scratch bytes, node by node in program order."""
    xp = array_module(resolve_device("auto"))
    arrays = {t.name: xp.asarray(t.value) for t in graph.leaves("const")}
    arrays.update({k: xp.asarray(v) for k, v in feeds.items()})
    scratch = {}
    for node in graph.nodes:
        outs = [xp.empty(graph.tensors[o].shape, graph.tensors[o].dtype) for o in node.outputs]
        ctx = KernelContext(xp, node.name, step, 0)
        OPS[node.op].forward(ctx, node.attr, [arrays[i] for i in node.inputs], outs)
        arrays.update(zip(node.outputs, outs))
        scratch[node.name] = ctx.workspace_bytes
    return arrays, scratch


@pytest.fixture(scope="module")
def zoo():
    out = []
    from test_ops_more import more_graph  # the ops of the newer op modules
    for graph in (cnn_graph(), seq_graph(), more_graph()):
        feeds = zoo_feeds(graph)
        arrays, scratch = interpret(graph, feeds, step=2)
        out.append((graph, feeds, arrays, scratch))
    return out


INPLACE_OPS = sorted(name for name, d in OPS.items() if d.inplace)


@pytest.mark.parametrize("op", INPLACE_OPS)
def test_inplace_pairs_give_bitwise_the_same_result(zoo, op):
    """Run the kernel with the output written over the input; compare with a fresh output."""
    tested = set()
    for graph, _, arrays, _ in zoo:
        xp = array_module(resolve_device("auto"))
        for node in (n for n in graph.nodes if n.op == op):
            for out_k, in_k in OPS[op].inplace:
                src, dst = graph.tensors[node.inputs[in_k]], graph.tensors[node.outputs[out_k]]
                if (src.nbytes, src.dtype) != (dst.nbytes, dst.dtype):
                    continue                  # e.g. add with a broadcast operand
                buf = arrays[src.name].copy()
                ins = [buf if i == src.name else arrays[i] for i in node.inputs]
                outs = [xp.empty(graph.tensors[o].shape, graph.tensors[o].dtype)
                        for o in node.outputs]
                outs[out_k] = buf.reshape(dst.shape)   # the same bytes, as in an arena
                OPS[op].forward(KernelContext(xp, node.name, 2, 0), node.attr, ins, outs)
                for o, a in zip(node.outputs, outs):
                    np.testing.assert_array_equal(to_numpy(a), to_numpy(arrays[o]),
                                                  err_msg=f"{node.name} ({op}) output {o} "
                                                          f"over input {src.name}")
                tested.add((out_k, in_k))
    assert tested, f"the zoo has no {op} node whose in-place pair could be tried"
    if op in ("add", "sub", "mul", "add_n", "mse_grad"):
        assert tested == set(OPS[op].inplace)


def test_zoo_uses_every_op(zoo):
    used = {n.op for graph, *_ in zoo for n in graph.nodes}
    assert set(OPS) - used == {"opaque"}    # no kernel to run: tests/test_fromtorch.py


def test_declared_workspace_covers_the_scratch_kernels_take(zoo):
    for graph, _, _, scratch in zoo:
        for node in graph.nodes:
            declared = workspace_of(graph, node, resolve_device("auto"))
            assert scratch[node.name] <= declared, f"{node.name} ({node.op})"
            if OPS[node.op].forward.__module__ in MY_MODULES:
                assert scratch[node.name] == declared, f"{node.name} ({node.op})"


def test_executor_agrees_with_the_reference_interpreter(zoo):
    for graph, feeds, arrays, _ in zoo:
        got = mg.Executor(graph).run(feeds, step=2)
        for name in graph.outputs:
            np.testing.assert_array_equal(got[name], to_numpy(arrays[name]), err_msg=name)


@pytest.mark.parametrize("planner", ["none", "refcount"])
def test_planned_run_with_inplace_matches_unplanned_bitwise(zoo, planner):
    for graph, feeds, _, _ in zoo:
        report = mg.plan_memory(graph, mg.MemoryOptions(inplace=True, planner=planner,
                                                        alignment=8))
        assert report.plan.inplace                 # some of the declared pairs were used
        plain = mg.Executor(graph).run(feeds, step=1)
        for _ in range(2):                         # and again: nothing leaks between runs
            planned = mg.Executor(graph, report.plan).run(feeds, step=1)
            for name in graph.outputs:
                np.testing.assert_array_equal(planned[name], plain[name], err_msg=name)


# ------------------------------------------------------------------------------------------
# Gradient nodes read only the forward values they need
# ------------------------------------------------------------------------------------------

def _reads(build, grad_op, wanted):
    """The forward tensors read by the `grad_op` node of d sum(out) / d inputs."""
    with mg.name_scope():
        ins, out = build()
        fwd = mg.Graph([out])
        loss = mg.sum(out) if out.size > 1 else out
        grads = mg.grad(loss, [ins[k] for k in wanted])
    node = next(n for n in mg.Graph(grads).nodes if n.op == grad_op)
    names = {t.name for t in fwd.tensors.values() if t.kind != "const"}
    return set(node.inputs) & names, fwd, ins, out


def _x(*shape, dtype="float32", name="x"):
    return mg.input(name, shape, dtype)


READS = {
    # grad op: (build -> (inputs by name, output), inputs to differentiate, expected reads)
    "softmax_grad": (lambda: ({"x": (x := _x(2, 3))}, mg.softmax(x)), ["x"], {"out"}),
    "log_softmax_grad": (lambda: ({"x": (x := _x(2, 3))}, mg.log_softmax(x)), ["x"], {"out"}),
    "softmax_cross_entropy_grad": (
        lambda: ({"lo": (lo := _x(2, 3, name="lo")), "la": (la := _x(2, dtype="int64",
                                                                      name="la"))},
                 mg.softmax_cross_entropy(lo, la)), ["lo"], {"lo", "la"}),
    "mse_grad": (lambda: ({"p": (p := _x(3, name="p")), "t": (t := _x(3, name="t"))},
                          mg.mse(p, t)), ["p"], {"p", "t"}),
    "max_grad": (lambda: ({"x": (x := _x(2, 3))}, mg.max(x, axis=1)), ["x"], {"x", "out"}),
    "max_pool2d_grad": (lambda: ({"x": (x := _x(1, 1, 4, 4))}, mg.max_pool2d(x, 2)), ["x"],
                        {"x", "out"}),
    "avg_pool2d_grad": (lambda: ({"x": (x := _x(1, 1, 4, 4))}, mg.avg_pool2d(x, 2)), ["x"],
                        set()),
    "conv2d_grad_x": (lambda: ({"x": (x := _x(1, 2, 4, 4)), "w": (w := _x(3, 2, 3, 3, name="w"))},
                               mg.conv2d(x, w)), ["x", "w"], {"w"}),
    "conv2d_grad_w": (lambda: ({"x": (x := _x(1, 2, 4, 4)), "w": (w := _x(3, 2, 3, 3, name="w"))},
                               mg.conv2d(x, w)), ["x", "w"], {"x"}),
    "embedding_grad": (lambda: ({"ids": (i := _x(4, dtype="int64", name="ids")),
                                 "E": (e := _x(5, 2, name="E"))}, mg.embedding(i, e)),
                       ["E"], {"ids"}),
    "getitem_grad": (lambda: ({"x": (x := _x(4, 3))}, x[1:, 0]), ["x"], set()),
    "dropout_grad": (lambda: ({"x": (x := _x(4, 3))}, mg.dropout(x, 0.5)), ["x"], set()),
    "layer_norm_grad": (lambda: ({"x": (x := _x(2, 3)), "g": (g := _x(3, name="g")),
                                 "b": (b := _x(3, name="b"))}, mg.layer_norm(x, g, b)),
                        ["x", "g", "b"], {"x", "g", "out:1", "out:2"}),
    "batch_norm_grad": (lambda: ({"x": (x := _x(4, 3)), "g": (g := _x(3, name="g")),
                                 "b": (b := _x(3, name="b"))}, mg.batch_norm(x, g, b)),
                        ["x", "g", "b"], {"x", "g", "out:1", "out:2"}),
}


@pytest.mark.parametrize("grad_op", sorted(READS))
def test_gradient_node_reads_only_what_it_needs(grad_op):
    build, wanted, expected = READS[grad_op]
    reads, fwd, ins, out = _reads(build, grad_op, wanted)
    names = {k: v.name for k, v in ins.items()}
    names.update({"out": out.name, "out:1": f"{out.name}:1", "out:2": f"{out.name}:2"})
    assert reads == {names[e] for e in expected}


def test_unread_statistics_die_right_after_their_step():
    with mg.name_scope():
        x, g, b = _x(4, 6), _x(6, name="g"), _x(6, name="b")
        y = mg.relu(mg.layer_norm(x, g, b))
    graph = mg.Graph([y])
    node = next(n for n in graph.nodes if n.op == "layer_norm")
    live = mg.liveness(graph)
    for stat in node.outputs[1:]:
        iv = live.intervals[stat]
        assert iv.planned and iv.start == iv.end == graph.node_index[node.name]


# ------------------------------------------------------------------------------------------
# FLOPs and workspace numbers
# ------------------------------------------------------------------------------------------

def test_conv2d_flops_and_im2col_workspace():
    x, w = _x(2, 3, 8, 8), _x(4, 3, 3, 3, name="w")
    y = mg.conv2d(x, w, stride=2, padding=1)                  # [2, 4, 4, 4]
    (gx, gw) = mg.grad(mg.sum(y), [x, w])
    graph = mg.Graph([y, gx, gw])
    k, n_out = 3 * 3 * 3, 2 * 4 * 4 * 4
    for op in ("conv2d", "conv2d_grad_x", "conv2d_grad_w"):
        node = next(n for n in graph.nodes if n.op == op)
        assert flops_of(graph, node) == 2 * n_out * k
    conv = graph.producer(y.name)
    assert workspace_of(graph, conv) == 2 * k * 4 * 4 * 4       # N * C*kh*kw * Ho*Wo floats


def test_matmul_and_softmax_flops():
    a, b = _x(5, 7, name="a"), _x(7, 3, name="b")
    s = mg.softmax(a @ b)
    graph = mg.Graph([s])
    assert flops_of(graph, graph.producer(s.name)) == 4 * 15
    mm = next(n for n in graph.nodes if n.op == "matmul")
    assert flops_of(graph, mm) == 2 * 7 * 15


# --- issue 15: build-time checks (refuse when building, or run correctly) ----------------------

@pytest.mark.parametrize("op", ["sigmoid", "tanh", "gelu"])
def test_activations_of_an_integer_tensor_are_refused_when_building(op):
    with mg.name_scope(), pytest.raises(DTypeError, match=rf"{op}\(i\[int64\]\): i must be a "
                                        "floating tensor"):
        getattr(mg, op)(_t("i", (2, 3), "int64"))


def test_an_integer_tensor_takes_only_whole_constants():
    i = _t("i", (2,), "int64")
    for build in (lambda: i * 0.5, lambda: i + 0.5, lambda: 1.5 - i, lambda: i / 2,
                  lambda: 2 / i, lambda: i / i, lambda: i ** 0.5, lambda: i ** -1):
        with pytest.raises(DTypeError, match="i\\[int64\\]"):
            build()                       # the kernel would cast 0.5 to 0: a wrong answer
    g = mg.Graph([i * 2 + 1, 3 - i, i ** 2])
    out = mg.Executor(g, device="cpu").run(i=np.array([1, 2]))
    assert [v.tolist() for v in out.values()] == [[3, 5], [2, 1], [1, 4]]


def test_conv2d_with_no_output_or_input_channels_is_refused_when_building():
    with mg.name_scope(), pytest.raises(ShapeError, match="at least one output and one input"):
        mg.conv2d(_t("x", (1, 1, 4, 4)), _t("w", (0, 1, 3, 3)))
    with mg.name_scope(), pytest.raises(ShapeError, match="at least one output and one input"):
        mg.conv2d(_t("x", (1, 0, 4, 4)), _t("w", (2, 0, 3, 3)))


def _train_on_empty_batch(x_shape, build):
    """A training step on a batch of 0 examples: the loss is 0, the gradients are 0."""
    with mg.name_scope():
        x = mg.input("x", x_shape)
        loss, params = build(x)
        g = mg.training_graph(loss, params, lr=1.0)
    feeds = mg.random_feeds(g)
    return feeds, mg.Executor(g, device="cpu").run(feeds)


def test_conv2d_and_pooling_on_a_batch_of_0_run_correctly():
    def build(x):
        w = mg.param("w", (3, 2, 3, 3))
        y = mg.conv2d(x, w, padding=1)
        assert y.shape == (0, 3, 5, 5)
        return mg.sum(mg.max_pool2d(y, 2)) + mg.sum(mg.avg_pool2d(y, 2)), [w]
    feeds, out = _train_on_empty_batch((0, 2, 5, 5), build)
    assert out["add_0"] == 0 and np.array_equal(out["w_new"], feeds["w"])   # dW = 0


def test_layer_norm_on_a_batch_of_0_runs_correctly():
    def build(x):
        gamma, beta = mg.param("g", (4,), "ones"), mg.param("b", (4,), "zeros")
        return mg.sum(mg.layer_norm(x, gamma, beta)), [gamma, beta]
    feeds, out = _train_on_empty_batch((0, 4), build)
    assert out["sum_0"] == 0 and np.array_equal(out["g_new"], feeds["g"])
    assert np.array_equal(out["b_new"], feeds["b"])


def test_statistics_over_no_elements_are_refused_when_building():
    with mg.name_scope(), pytest.raises(ShapeError, match="last axis of at least one element"):
        mg.layer_norm(_t("x", (3, 0)), _t("g", (0,)), _t("b", (0,)))
    with mg.name_scope(), pytest.raises(ShapeError, match="x has no elements"):
        mg.batch_norm(_t("x", (0, 3)), _t("g", (3,)), _t("b", (3,)))
    with mg.name_scope(), pytest.raises(ShapeError, match="mean is undefined"):
        mg.mean(_t("x", (0, 3)))
    with mg.name_scope():
        assert mg.mean(_t("x", (0, 3)), axis=1).shape == (0,)   # no rows: nothing undefined
