"""ATen ops to minigraph ops: one small rule per ATen op of the joint graph.

Each rule gets the converter (`c`) and the FX node and returns the minigraph value(s) of
that node's output(s): one `Tensor`, a tuple for several outputs, `None` for an output
PyTorch leaves undefined. A rule that cannot express this particular call (a dilated
convolution, an erf GELU, a loss with class weights) raises `Unmapped` with the reason,
and the node becomes an `opaque` node instead (see `minigraph.ops.opaque`).

View ops (view, t, permute, expand, slice, ...) become minigraph's copying ops: minigraph
gives every tensor its own buffer, so PyTorch's aliasing is not kept; the converter counts
the bytes so the report can say how much.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops
from ..graph import Tensor, constant
from ..ops.registry import apply, apply1


class Unmapped(Exception):
    """This call of the ATen op has no minigraph equivalent; the message says why."""


class Dropped:
    """An output the import does not keep (a running statistic's new value); reading it fails."""

    def __init__(self, what: str):
        self.what = what


class PoolIndices:
    """max_pool2d's int64 indices: minigraph's max_pool2d_grad rereads x and y instead."""

    def __init__(self, y: Tensor, x: Tensor):
        self.y, self.x = y, x


RULES: dict[str, Callable[[Any, Any], Any]] = {}


def is_view(n: Any) -> bool:
    """Whether ATen's schema says the op's output aliases its first input (`Tensor(a)`)."""
    schema = getattr(n.target, "_schema", None)
    if schema is None or not schema.returns or not schema.arguments:
        return False
    ret, first = schema.returns[0].alias_info, schema.arguments[0].alias_info
    return ret is not None and not ret.is_write and first is not None and \
        bool(set(ret.before_set) & set(first.before_set))


def rule(*names: str):
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


def _one(value: float, what: str) -> None:
    if value != 1:
        raise Unmapped(f"{what}={value} (only 1 maps)")


# --- identities and views (copies in minigraph) ---------------------------------------------

@rule("detach", "alias", "clone", "lift_fresh_copy", "contiguous")
def _identity(c, n):
    return c.arg(n, 0)


@rule("_to_copy")
def _to_copy(c, n):
    x = c.arg(n, 0)
    if c.spec(n)[1] != x.dtype:
        raise Unmapped(f"a dtype conversion {x.dtype} -> {c.spec(n)[1]}")
    return x


@rule("view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "flatten")
def _reshape(c, n):
    return ops.reshape(c.arg(n, 0), c.spec(n)[0])


def _permuted(x: Tensor, perm: tuple[int, ...]) -> Tensor:
    """transpose(x, perm), folding a transpose of a transpose into one (or none)."""
    if x.call is not None and x.call.op == "transpose":
        inner = tuple(x.call.attrs["axes"])
        x, perm = x.call.inputs[0], tuple(inner[p] for p in perm)
    if perm == tuple(range(x.ndim)):
        return x
    return ops.transpose(x, perm)


@rule("t")
def _t(c, n):
    x = c.arg(n, 0)
    return _permuted(x, (1, 0)) if x.ndim == 2 else x


@rule("transpose")
def _transpose(c, n):
    x = c.arg(n, 0)
    perm = list(range(x.ndim))
    a, b = c.arg(n, 1) % x.ndim, c.arg(n, 2) % x.ndim
    perm[a], perm[b] = perm[b], perm[a]
    return _permuted(x, tuple(perm))


@rule("permute")
def _permute(c, n):
    x = c.arg(n, 0)
    return _permuted(x, tuple(d % x.ndim for d in c.arg(n, 1)))


@rule("expand")
def _expand(c, n):
    return ops.broadcast_to(c.arg(n, 0), c.spec(n)[0])


def _slice_of(x: Tensor, dim: int, start, end, step) -> Tensor:
    size = x.shape[dim]
    start = 0 if start is None else start
    end = size if end is None else min(end, size)
    return ops.slice(x, dim, start, end, step)


@rule("slice")
def _slice(c, n):
    x = c.arg(n, 0)
    dim, start, end, step = (c.arg(n, k, d) for k, d in ((1, 0), (2, None), (3, None), (4, 1)))
    return _slice_of(x, dim % x.ndim, start, end, step)


@rule("select")
def _select(c, n):
    x = c.arg(n, 0)
    dim = c.arg(n, 1) % x.ndim
    return ops.getitem(x, (slice(None),) * dim + (c.arg(n, 2),))


@rule("split", "split_with_sizes")
def _split(c, n):
    x, sizes = c.arg(n, 0), c.arg(n, 1)
    dim = c.arg(n, 2, 0) % x.ndim
    if isinstance(sizes, int):
        sizes = [sizes] * (-(-x.shape[dim] // sizes))
    out, at = [], 0
    for s in sizes:
        out.append(_slice_of(x, dim, at, at + s, 1))
        at += s
    return tuple(out)


@rule("unbind")
def _unbind(c, n):
    x = c.arg(n, 0)
    dim = c.arg(n, 1, 0) % x.ndim
    return tuple(ops.getitem(x, (slice(None),) * dim + (k,)) for k in range(x.shape[dim]))


@rule("cat")
def _cat(c, n):
    xs = c.arg(n, 0)
    return ops.concat(list(xs), c.arg(n, 1, 0))


@rule("stack")
def _stack(c, n):
    xs = list(c.arg(n, 0))
    axis = c.arg(n, 1, 0) % (xs[0].ndim + 1)
    # stack = concat of the inputs, each with a new axis of length 1 (a reshape: a copy)
    return ops.concat([ops.reshape(x, (*x.shape[:axis], 1, *x.shape[axis:])) for x in xs],
                      axis)


# --- constants -------------------------------------------------------------------------------

def _const(c, n, value: float):
    shape, dtype = c.spec(n)
    return constant(np.full(shape, value, dtype=dtype), dtype=dtype)


@rule("ones_like", "ones")
def _ones(c, n):
    return _const(c, n, 1.0)


@rule("zeros_like", "zeros", "new_zeros")
def _zeros(c, n):
    return _const(c, n, 0.0)


@rule("full", "full_like", "scalar_tensor", "new_full")
def _full(c, n):
    k = {"full": 1, "full_like": 1, "scalar_tensor": 0, "new_full": 2}[c.short(n)]
    return _const(c, n, float(c.arg(n, k)))


# --- elementwise -----------------------------------------------------------------------------

def _binary(fn):
    def go(c, n):
        a, b = c.arg(n, 0), c.arg(n, 1)
        alpha = c.kwarg(n, "alpha", 1)
        if alpha != 1:
            b = ops.mul_scalar(b, alpha) if isinstance(b, Tensor) else b * alpha
        if not isinstance(a, Tensor):
            raise Unmapped("a number as the first operand")
        return fn(a, b)
    return go


rule("add")(_binary(ops.add))
rule("sub")(_binary(ops.sub))
rule("mul")(_binary(ops.mul))
rule("div")(_binary(ops.div))


@rule("rsub")
def _rsub(c, n):
    a, b = c.arg(n, 0), c.arg(n, 1)
    _one(c.kwarg(n, "alpha", 1), "alpha")
    return ops.sub(b, a)


_UNARY = {"neg": ops.neg, "exp": ops.exp, "log": ops.log, "sqrt": ops.sqrt, "relu": ops.relu,
          "tanh": ops.tanh, "sigmoid": ops.sigmoid}
for _name, _fn in _UNARY.items():
    rule(_name)(lambda c, n, _fn=_fn: _fn(c.arg(n, 0)))


@rule("rsqrt")
def _rsqrt(c, n):
    return ops.pow(c.arg(n, 0), -0.5)


@rule("pow")
def _pow(c, n):
    p = c.arg(n, 1)
    if isinstance(p, Tensor):
        raise Unmapped("a tensor exponent")
    return ops.pow(c.arg(n, 0), float(p))


@rule("threshold_backward")
def _threshold_backward(c, n):
    if c.arg(n, 2) != 0:
        raise Unmapped(f"threshold {c.arg(n, 2)} (relu's 0 maps)")
    return apply1("relu_grad", [c.arg(n, 0), c.arg(n, 1)])


@rule("tanh_backward")
def _tanh_backward(c, n):
    return apply1("tanh_grad", [c.arg(n, 0), c.arg(n, 1)])


@rule("sigmoid_backward")
def _sigmoid_backward(c, n):
    return apply1("sigmoid_grad", [c.arg(n, 0), c.arg(n, 1)])


def _tanh_gelu(c, n, k: int) -> None:
    approx = c.kwarg(n, "approximate", c.arg(n, k, "none"))
    if approx != "tanh":
        raise Unmapped(f"GELU with approximate={approx!r}: minigraph's gelu is the tanh "
                       "approximation (use nn.GELU(approximate='tanh'))")


@rule("gelu")
def _gelu(c, n):
    _tanh_gelu(c, n, 1)
    return ops.gelu(c.arg(n, 0))


@rule("gelu_backward")
def _gelu_backward(c, n):
    _tanh_gelu(c, n, 2)
    return apply1("gelu_grad", [c.arg(n, 0), c.arg(n, 1)])


# --- reductions ------------------------------------------------------------------------------

def _dims(c, n, x: Tensor):
    dims = c.arg(n, 1, None)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return None
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(d % x.ndim for d in dims)


@rule("sum")
def _sum(c, n):
    x = c.arg(n, 0)
    if c.kwarg(n, "dtype", None) is not None:
        raise Unmapped("a sum with a dtype conversion")
    return ops.sum(x, axis=_dims(c, n, x), keepdims=bool(c.arg(n, 2, False)))


@rule("mean")
def _mean(c, n):
    x = c.arg(n, 0)
    return ops.mean(x, axis=_dims(c, n, x), keepdims=bool(c.arg(n, 2, False)))


# --- matrix products (a transpose feeding a product becomes the product's flag) -------------

def _untransposed(x: Tensor) -> tuple[Tensor, bool]:
    call = x.call
    if call is not None and call.op == "transpose" and x.ndim >= 2 and \
            tuple(call.attrs["axes"]) == tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2):
        return call.inputs[0], True
    return x, False


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    (a, ta), (b, tb) = _untransposed(a), _untransposed(b)
    return ops.matmul(a, b, ta=ta, tb=tb)


@rule("mm", "bmm")
def _mm(c, n):
    return _matmul(c.arg(n, 0), c.arg(n, 1))


@rule("addmm")
def _addmm(c, n):
    _one(c.kwarg(n, "beta", 1), "beta")
    _one(c.kwarg(n, "alpha", 1), "alpha")
    return ops.add(_matmul(c.arg(n, 1), c.arg(n, 2)), c.arg(n, 0))


# --- softmax, losses -------------------------------------------------------------------------

@rule("_softmax", "_log_softmax")
def _softmax(c, n):
    x = c.arg(n, 0)
    fn = ops.softmax if c.short(n) == "_softmax" else ops.log_softmax
    return fn(x, axis=c.arg(n, 1))


@rule("_softmax_backward_data", "_log_softmax_backward_data")
def _softmax_backward(c, n):
    op = "softmax_grad" if c.short(n) == "_softmax_backward_data" else "log_softmax_grad"
    y = c.arg(n, 1)
    return apply1(op, [c.arg(n, 0), y], {"axis": c.arg(n, 2) % y.ndim})


def _nll_checks(c, n, x: Tensor, weight, reduction: int, ignore_index: int) -> None:
    if weight is not None:
        raise Unmapped("class weights")
    if reduction not in (1, 2):
        raise Unmapped("reduction='none'")
    # An ignore_index that no valid label can equal changes nothing (a label out of range
    # is refused when the graph runs); one inside [0, C) would drop rows minigraph keeps.
    if x.ndim == 2 and 0 <= ignore_index < x.shape[1]:
        raise Unmapped(f"ignore_index={ignore_index} (a class of the [N, {x.shape[1]}] "
                       "input): minigraph's cross-entropy ignores no rows")
    if x.ndim != 2 or x.call is None or x.call.op != "log_softmax" or x.call.attrs["axis"] != 1:
        raise Unmapped("nll_loss maps only on the [N, C] output of log_softmax over the classes")


def _through_detach(c, fx_node):
    """The FX node a chain of detach/alias nodes starts from (they are identities)."""
    while c.short(fx_node) in ("detach", "alias"):
        fx_node = fx_node.args[0]
    return fx_node


@rule("nll_loss_forward")
def _nll_loss(c, n):
    x, labels, weight, reduction, ignore_index = (c.arg(n, k) for k in range(5))
    _nll_checks(c, n, x, weight, reduction, ignore_index)
    # On log-probabilities, log-softmax is the identity: the cross-entropy of x is nll(x).
    loss = ops.softmax_cross_entropy(x, labels)
    if reduction == 2:
        loss = ops.mul_scalar(loss, float(x.shape[0]))
    rows = constant(np.array(float(x.shape[0]), dtype=x.dtype), dtype=x.dtype)
    return loss, rows


@rule("nll_loss_backward")
def _nll_loss_backward(c, n):
    g, x, labels, weight, reduction, ignore_index = (c.arg(n, k) for k in range(6))
    _nll_checks(c, n, x, weight, reduction, ignore_index)
    fx_x = _through_detach(c, n.args[1])
    for user in n.users:
        if c.short(user) != "_log_softmax_backward_data" or \
                _through_detach(c, user.args[1]) is not fx_x:
            raise Unmapped("nll_loss_backward maps only when log_softmax's backward reads it")
    # (softmax(x) - onehot) g / N differs from nll's -onehot g / N by softmax(x) g / N, which
    # the log-softmax backward that follows removes: the gradient of x's input is exact.
    if reduction == 2:
        g = ops.mul_scalar(g, float(x.shape[0]))
    return apply1("softmax_cross_entropy_grad", [g, x, labels])


@rule("mse_loss")
def _mse_loss(c, n):
    if c.arg(n, 2, 1) != 1:
        raise Unmapped("mse_loss with reduction other than 'mean'")
    return ops.mse(c.arg(n, 0), c.arg(n, 1))


@rule("mse_loss_backward")
def _mse_loss_backward(c, n):
    if c.arg(n, 3, 1) != 1:
        raise Unmapped("mse_loss with reduction other than 'mean'")
    return apply1("mse_grad", [c.arg(n, 0), c.arg(n, 1), c.arg(n, 2)])


# --- convolution and pooling -----------------------------------------------------------------

def _conv_checks(x: Tensor, stride, padding, dilation, transposed, out_pad, groups) -> None:
    if x.ndim != 4:
        raise Unmapped(f"a {x.ndim - 2}-d convolution (conv2d maps)")
    if transposed or any(out_pad):
        raise Unmapped("a transposed convolution")
    if groups != 1:
        raise Unmapped(f"groups={groups}")
    if any(d != 1 for d in dilation):
        raise Unmapped(f"dilation={list(dilation)}")
    if len(stride) != 2 or len(padding) != 2:
        raise Unmapped("stride and padding must be pairs")


@rule("convolution")
def _convolution(c, n):
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = \
        (c.arg(n, k) for k in range(9))
    _conv_checks(x, stride, padding, dilation, transposed, out_pad, groups)
    y = ops.conv2d(x, w, stride=tuple(stride), padding=tuple(padding))
    return y if b is None else ops.add(y, ops.reshape(b, (b.shape[0], 1, 1)))


@rule("convolution_backward")
def _convolution_backward(c, n):
    g, x, w, _, stride, padding, dilation, transposed, out_pad, groups, mask = \
        (c.arg(n, k) for k in range(11))
    _conv_checks(x, stride, padding, dilation, transposed, out_pad, groups)
    base = {"stride": tuple(stride), "padding": tuple(padding)}
    dx = apply1("conv2d_grad_x", [g, w], {**base, "x_shape": x.shape}) if mask[0] else None
    dw = apply1("conv2d_grad_w", [g, x], {**base, "w_shape": w.shape}) if mask[1] else None
    db = ops.sum(g, axis=(0, 2, 3)) if mask[2] else None
    return dx, dw, db


def _pool_args(c, n, k0: int) -> tuple:
    kernel = tuple(c.arg(n, k0))
    stride = tuple(c.arg(n, k0 + 1, ())) or kernel
    padding = c.arg(n, k0 + 2, 0)
    padding = tuple(padding) if isinstance(padding, (list, tuple)) else (padding, padding)
    return kernel, stride, padding


@rule("max_pool2d_with_indices")
def _max_pool(c, n):
    x = c.arg(n, 0)
    kernel, stride, padding = _pool_args(c, n, 1)
    dilation, ceil = c.arg(n, 4, 1), c.arg(n, 5, False)
    if ceil or any(d != 1 for d in ([dilation] if isinstance(dilation, int) else dilation)):
        raise Unmapped("max-pooling with ceil_mode or dilation")
    y = ops.max_pool2d(x, kernel, stride if len(stride) == 2 else stride * 2,
                       padding if len(padding) == 2 else padding * 2)
    return y, PoolIndices(y, x)


@rule("max_pool2d_with_indices_backward")
def _max_pool_backward(c, n):
    g, x, idx = c.arg(n, 0), c.arg(n, 1), c.arg(n, 7)
    if not isinstance(idx, PoolIndices) or idx.x is not x:
        raise Unmapped("max-pool indices that do not come from max_pool2d of the same input")
    return apply1("max_pool2d_grad", [g, x, idx.y], idx.y.call.attrs)


@rule("avg_pool2d")
def _avg_pool(c, n):
    x = c.arg(n, 0)
    kernel, stride, padding = _pool_args(c, n, 1)
    if c.arg(n, 4, False) or c.arg(n, 6, None) is not None or \
            (any(padding) and not c.arg(n, 5, True)):
        raise Unmapped("avg-pooling with ceil_mode, divisor_override or count_include_pad=False")
    return ops.avg_pool2d(x, kernel, stride, padding)


@rule("avg_pool2d_backward")
def _avg_pool_backward(c, n):
    g, x = c.arg(n, 0), c.arg(n, 1)
    kernel, stride, padding = _pool_args(c, n, 2)
    if c.arg(n, 5, False) or c.arg(n, 7, None) is not None or \
            (any(padding) and not c.arg(n, 6, True)):
        raise Unmapped("avg-pooling with ceil_mode, divisor_override or count_include_pad=False")
    attrs = ops.avg_pool2d(x, kernel, stride, padding).call.attrs   # the same attributes
    return apply1("avg_pool2d_grad", [g], {**attrs, "x_shape": x.shape})


def _adaptive(x: Tensor, out_hw) -> tuple[int, int]:
    h, w = x.shape[2:]
    oh, ow = out_hw
    if x.ndim != 4 or h % oh or w % ow:
        raise Unmapped(f"adaptive pooling of {h}x{w} to {oh}x{ow} (only whole windows map)")
    return h // oh, w // ow


@rule("_adaptive_avg_pool2d")
def _adaptive_avg_pool(c, n):
    x = c.arg(n, 0)
    kh, kw = _adaptive(x, c.arg(n, 1))
    if (kh, kw) == tuple(x.shape[2:]):
        return ops.mean(x, axis=(2, 3), keepdims=True)
    return ops.avg_pool2d(x, (kh, kw))


@rule("_adaptive_avg_pool2d_backward")
def _adaptive_avg_pool_backward(c, n):
    g, x = c.arg(n, 0), c.arg(n, 1)
    kh, kw = _adaptive(x, g.shape[2:])
    if (kh, kw) == tuple(x.shape[2:]):
        return ops.broadcast_to(ops.mul_scalar(g, 1.0 / (kh * kw)), x.shape)
    attrs = ops.avg_pool2d(x, (kh, kw)).call.attrs
    return apply1("avg_pool2d_grad", [g], {**attrs, "x_shape": x.shape})


# --- normalisation and embedding -------------------------------------------------------------

def _affine(c, x: Tensor, w, b, channels: int) -> tuple[Tensor, Tensor]:
    if w is None:
        w = constant(np.ones((channels,), x.dtype), dtype=x.dtype)
    if b is None:
        b = constant(np.zeros((channels,), x.dtype), dtype=x.dtype)
    return w, b


@rule("_native_batch_norm_legit_functional", "native_batch_norm")
def _batch_norm(c, n):
    x, w, b, rm, rv, training, _, eps = (c.arg(n, k) for k in range(8))
    if not training:
        raise Unmapped("batch norm in eval mode (running statistics)")
    w, b = _affine(c, x, w, b, x.shape[1])
    y, mean, rstd = apply("batch_norm", [x, w, b], {"eps": float(eps)})
    new = tuple(Dropped(f"the new running statistic {k} of batch norm at {n.name}")
                for k in range(len(c.specs(n)) - 3))
    return (y, mean, rstd) + new


def _running(x: Tensor, rm: Tensor, rv: Tensor, eps: float) -> tuple[Tensor, Tensor, tuple]:
    """Eval mode: per-channel 1/sqrt(running var + eps), shaped to broadcast over x, with
    the running mean likewise, and the axes a per-channel sum reduces."""
    if x.ndim < 2 or rm is None or rv is None:
        raise Unmapped("eval-mode batch norm needs [N, C, ...] and running statistics")
    bshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    rstd = ops.reshape(ops.pow(ops.add(rv, float(eps)), -0.5), bshape)
    return rstd, ops.reshape(rm, bshape), (0,) + tuple(range(2, x.ndim))


@rule("_native_batch_norm_legit_no_training")
def _batch_norm_eval(c, n):
    x, w, b, rm, rv, _, eps = (c.arg(n, k) for k in range(7))
    w, b = _affine(c, x, w, b, x.shape[1])
    rstd, mean, _ = _running(x, rm, rv, eps)
    bshape = mean.shape
    y = ops.mul(ops.sub(x, mean), ops.mul(rstd, ops.reshape(w, bshape)))
    y = ops.add(y, ops.reshape(b, bshape))
    return (y,) + tuple(None if s is None else constant(np.zeros(s[0], s[1]), dtype=s[1])
                        for s in c.specs(n)[1:])     # PyTorch's empty saved statistics


@rule("native_batch_norm_backward")
def _batch_norm_backward(c, n):
    # args 3 and 4 are the running statistics (read in eval mode only; dropped in training)
    g, x, w, train, eps, mask = (c.arg(n, k) for k in (0, 1, 2, 7, 8, 9))
    w, _ = _affine(c, x, w, None, x.shape[1])
    if train:
        return apply("batch_norm_grad", [g, x, w, c.arg(n, 5), c.arg(n, 6)])
    rstd, mean, axes = _running(x, c.arg(n, 3), c.arg(n, 4), eps)
    # y = (x - mean) * rstd * w + b with constant mean and rstd: elementwise gradients
    dx = ops.mul(g, ops.mul(rstd, ops.reshape(w, mean.shape))) if mask[0] else None
    dw = ops.sum(ops.mul(g, ops.mul(ops.sub(x, mean), rstd)), axis=axes) if mask[1] else None
    db = ops.sum(g, axis=axes) if mask[2] else None
    return dx, dw, db


def _saved_stat(t: Tensor) -> Tensor:
    """layer_norm's saved mean/rstd without the [..., 1] reshape PyTorch's shape needs."""
    if t.call is not None and t.call.op == "reshape":
        return t.call.inputs[0]
    return t


@rule("native_layer_norm")
def _layer_norm(c, n):
    x, shape, w, b, eps = (c.arg(n, k) for k in range(5))
    if len(shape) != 1:
        raise Unmapped(f"layer norm over {len(shape)} axes (the last axis maps)")
    w, b = _affine(c, x, w, b, x.shape[-1])
    y, mean, rstd = apply("layer_norm", [x, w, b], {"eps": float(eps)})
    stat_shape = c.specs(n)[1][0]
    return y, ops.reshape(mean, stat_shape), ops.reshape(rstd, stat_shape)


@rule("native_layer_norm_backward")
def _layer_norm_backward(c, n):
    g, x, shape, mean, rstd, w = (c.arg(n, k) for k in range(6))
    if len(shape) != 1:
        raise Unmapped(f"layer norm over {len(shape)} axes (the last axis maps)")
    w, _ = _affine(c, x, w, None, x.shape[-1])
    return apply("layer_norm_grad", [g, x, w, _saved_stat(mean), _saved_stat(rstd)])


@rule("embedding")
def _embedding(c, n):
    table, ids = c.arg(n, 0), c.arg(n, 1)
    if c.arg(n, 2, -1) != -1:
        raise Unmapped("padding_idx")
    return ops.embedding(ids, table)


@rule("embedding_dense_backward")
def _embedding_backward(c, n):
    g, ids, vocab, pad, scale = (c.arg(n, k) for k in range(5))
    if pad != -1 or scale:
        raise Unmapped("padding_idx or scale_grad_by_freq")
    return apply1("embedding_grad", [g, ids], {"vocab": int(vocab)})
