"""Neural-network ops: softmax family, losses, normalisation, embedding, dropout.

Each block is one `defop`: shape rule, kernel writing into `outs`, gradient rule, in-place
pairs, FLOPs and workspace. Two habits matter for memory [Chen 2016]:
- a gradient node reads only what it needs: softmax's reads the output y, not x; the
  losses read the logits or predictions and the labels, never an intermediate;
- a kernel's temporaries are either row-sized or declared as `workspace` and taken from
  `ctx.scratch`, so the bytes the executor reports are the bytes really used. On a GPU,
  softmax, layer norm and batch norm hand their work to `cuda_rows.py` (fewer passes, no
  strided reductions), whose own scratch is declared as `workspace_gpu`.
Normalisation ops have several outputs: y, and the mean and 1/std their gradient needs.
Outputs nobody reads (the statistics at inference) die right after their step.
"""

from __future__ import annotations

import numbers
import zlib

import numpy as np

from ..errors import ArgumentError, DTypeError
from ..graph import Tensor, check_same_dtype
from ..tensor import _auto_name
from . import cuda_rows
from .cuda import on_cupy
from .elementwise import neg
from .registry import apply, apply1, defop, itemsize, no_workspace, numel, shape_error


def _float_only(op: str, *ts: Tensor) -> None:
    for t in ts:
        if np.dtype(t.dtype).kind != "f":
            raise DTypeError(f"{op}({', '.join(f'{u.name}[{u.dtype}]' for u in ts)}): "
                             f"{t.name} must be a floating tensor")


def _int_only(op: str, t: Tensor, operands) -> None:
    if np.dtype(t.dtype).kind not in "iu":
        raise DTypeError(f"{op}({', '.join(f'{u.name}[{u.dtype}]' for u in operands)}): "
                         f"{t.name} must be an integer tensor")


def _temp(ctx, a):
    """Count an array a NumPy/CuPy call made itself (no `out=` exists) as workspace."""
    ctx.workspace_bytes += a.nbytes
    return a


def _axis(op: str, x: Tensor, axis: int) -> int:
    if not -len(x.shape) <= axis < len(x.shape):
        raise shape_error(op, [x], f"axis {axis} out of range for {len(x.shape)} dims")
    return axis % len(x.shape)


def _kept(shape, axis) -> tuple[int, ...]:
    return tuple(1 if i == axis else s for i, s in enumerate(shape))


def _row_bytes(attrs, x) -> int:
    """Bytes of one value per row (the input reduced over `axis`)."""
    return numel(x) // max(x.shape[attrs["axis"]], 1) * itemsize(x)


# --- softmax and log_softmax ------------------------------------------------------------------

def _same_float(op):
    def infer(attrs, x, *rest):
        _float_only(op, x)
        return [(x.shape, x.dtype)]
    return infer


def _last_axis_on_gpu(ctx, attrs, *arrays) -> bool:
    """Whether the softmax's rows are the last axis and the GPU's row kernels take them."""
    return on_cupy(ctx.xp) and attrs["axis"] == arrays[0].ndim - 1 and \
        cuda_rows.supported(*arrays)


def _softmax_ws_gpu(attrs, ins, outs):
    last = attrs["axis"] == len(ins[0].shape) - 1 and cuda_rows.takes(ins[0].dtype)
    return 0 if last else _row_bytes(attrs, ins[0])


def _softmax_fw(ctx, attrs, ins, outs):
    xp, x, y, ax = ctx.xp, ins[0], outs[0], attrs["axis"]
    if _last_axis_on_gpu(ctx, attrs, x, y):       # on a GPU: a row per warp, no scratch
        return cuda_rows.softmax(x, y)
    s = ctx.scratch(_kept(x.shape, ax), x.dtype)
    xp.max(x, axis=ax, keepdims=True, out=s)
    xp.subtract(x, s, out=y)          # shift by the row maximum: exp cannot overflow
    xp.exp(y, out=y)
    xp.sum(y, axis=ax, keepdims=True, out=s)
    xp.divide(y, s, out=y)


def _softmax_grad_fw(ctx, attrs, ins, outs):
    # dx = y * (dy - sum(dy * y)): reads y, never x.
    xp, (dy, y), dx, ax = ctx.xp, ins, outs[0], attrs["axis"]
    if _last_axis_on_gpu(ctx, attrs, y, dy, dx):
        return cuda_rows.softmax_grad(dy, y, dx)
    s = ctx.scratch(_kept(y.shape, ax), y.dtype)
    xp.multiply(dy, y, out=dx)
    xp.sum(dx, axis=ax, keepdims=True, out=s)
    xp.subtract(dy, s, out=dx)
    xp.multiply(dx, y, out=dx)


defop("softmax", infer=_same_float("softmax"), forward=_softmax_fw, inplace=((0, 0),),
      grad=lambda a, ins, outs, g: [apply1("softmax_grad", [g[0], outs[0]],
                                           {"axis": a["axis"]})],
      flops=lambda a, ins, outs: 4 * numel(ins[0]),
      workspace=lambda a, ins, outs: _row_bytes(a, ins[0]), workspace_gpu=_softmax_ws_gpu)
defop("softmax_grad", infer=lambda a, dy, y: [(y.shape, dy.dtype)], forward=_softmax_grad_fw,
      differentiable=(), flops=lambda a, ins, outs: 4 * numel(ins[0]),
      workspace=lambda a, ins, outs: _row_bytes(a, ins[0]), workspace_gpu=_softmax_ws_gpu)


def _log_softmax_fw(ctx, attrs, ins, outs):
    # y = (x - m) - log(sum(exp(x - m))), m the row maximum. x - m is computed twice so
    # that no full-size temporary is needed (and the rounding matches the usual formula).
    xp, x, y, ax = ctx.xp, ins[0], outs[0], attrs["axis"]
    m = ctx.scratch(_kept(x.shape, ax), x.dtype)
    s = ctx.scratch(_kept(x.shape, ax), x.dtype)
    xp.max(x, axis=ax, keepdims=True, out=m)
    xp.subtract(x, m, out=y)
    xp.exp(y, out=y)
    xp.sum(y, axis=ax, keepdims=True, out=s)
    xp.log(s, out=s)
    xp.subtract(x, m, out=y)
    xp.subtract(y, s, out=y)


def _log_softmax_grad_fw(ctx, attrs, ins, outs):
    # dx = dy - exp(y) * sum(dy): reads y (the output); may overwrite y.
    xp, (dy, y), dx, ax = ctx.xp, ins, outs[0], attrs["axis"]
    s = ctx.scratch(_kept(y.shape, ax), y.dtype)
    xp.sum(dy, axis=ax, keepdims=True, out=s)
    xp.exp(y, out=dx)
    xp.multiply(dx, s, out=dx)
    xp.subtract(dy, dx, out=dx)


defop("log_softmax", infer=_same_float("log_softmax"), forward=_log_softmax_fw,
      grad=lambda a, ins, outs, g: [apply1("log_softmax_grad", [g[0], outs[0]],
                                           {"axis": a["axis"]})],
      flops=lambda a, ins, outs: 5 * numel(ins[0]),
      workspace=lambda a, ins, outs: 2 * _row_bytes(a, ins[0]))
defop("log_softmax_grad", infer=lambda a, dy, y: [(y.shape, dy.dtype)],
      forward=_log_softmax_grad_fw, inplace=((0, 1),), differentiable=(),
      flops=lambda a, ins, outs: 3 * numel(ins[0]),
      workspace=lambda a, ins, outs: _row_bytes(a, ins[0]))


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis`, shifted by the maximum for stability."""
    return apply1("softmax", [x], {"axis": _axis("softmax", x, axis)})


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """log(softmax(x)) computed as (x - max) - log(sum(exp(x - max))): never log(0)."""
    return apply1("log_softmax", [x], {"axis": _axis("log_softmax", x, axis)})


# --- softmax cross-entropy --------------------------------------------------------------------

def _sce_infer(attrs, logits, labels):
    ops = [logits, labels]
    _float_only("softmax_cross_entropy", logits)
    _int_only("softmax_cross_entropy", labels, ops)
    if len(logits.shape) < 1 or logits.shape[-1] < 1:
        raise shape_error("softmax_cross_entropy", ops, "logits need a class axis [..., C]")
    if tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise shape_error("softmax_cross_entropy", ops, f"labels must have shape "
                          f"{list(logits.shape[:-1])} (the logits without the class axis)")
    return [((), logits.dtype)]


def _check_labels(ctx, labels, classes: int) -> None:
    """Labels must lie in [0, C); say which one does not (two reductions, no temporary).
    Skipped where the executor checked these labels on the host as they were fed
    (`index_inputs`): on a GPU, reading the reductions back would stall every step."""
    if not ctx.indices_checked:
        check_index_values(ctx.xp, labels, classes)


def check_index_values(xp, labels, classes: int, what: str = "label") -> None:
    """IndexError naming the first value of `labels` outside [0, classes) and its place."""
    if labels.size == 0:
        return
    if int(xp.min(labels)) >= 0 and int(xp.max(labels)) < classes:
        return
    flat = labels.reshape(-1)
    k = int(xp.argmax((flat < 0) | (flat >= classes)))
    pos = tuple(int(i) for i in np.unravel_index(k, labels.shape))
    raise IndexError(f"{what} {int(flat[k])} at position {list(pos)} is out of range "
                     f"[0, {classes})")


def _flat_label_index(ctx, labels, rows: int, classes: int):
    """Flat positions row * C + label of the correct class in the [rows, C] logits."""
    xp = ctx.xp
    idx = ctx.scratch((rows,), np.int64)
    xp.multiply(_temp(ctx, xp.arange(rows, dtype=np.int64)), classes, out=idx)
    xp.add(idx, labels.reshape(-1), out=idx, casting="unsafe")   # any integer label dtype
    return idx


def _sce_fw(ctx, attrs, ins, outs):
    # loss_i = log(sum_c exp(L_ic - m_i)) - (L_i,y_i - m_i); the mean over rows.
    xp, (logits, labels) = ctx.xp, ins
    classes = logits.shape[-1]
    L = logits.reshape(-1, classes)
    rows = L.shape[0]
    _check_labels(ctx, labels, classes)
    e = ctx.scratch((rows, classes), L.dtype)
    m = ctx.scratch((rows, 1), L.dtype)
    r = ctx.scratch((rows, 1), L.dtype)
    picked = ctx.scratch((rows,), L.dtype)
    xp.max(L, axis=1, keepdims=True, out=m)
    xp.subtract(L, m, out=e)
    xp.exp(e, out=e)
    xp.sum(e, axis=1, keepdims=True, out=r)
    xp.log(r, out=r)
    xp.take(L.reshape(-1), _flat_label_index(ctx, labels, rows, classes), out=picked)
    xp.subtract(picked, m[:, 0], out=picked)
    xp.subtract(r[:, 0], picked, out=r[:, 0])
    xp.mean(r, out=outs[0])


def _sce_ws(attrs, ins, outs):
    rows = numel(ins[1])
    return (rows * ins[0].shape[-1] + 3 * rows) * itemsize(ins[0]) + 2 * rows * 8


def _sce_grad_fw(ctx, attrs, ins, outs):
    # dL = (softmax(L) - onehot(y)) * g / rows; recomputes softmax from the logits, and
    # may write over the logits (read once, at the start, for the row maximum and shift).
    xp, (g, logits, labels) = ctx.xp, ins
    classes = logits.shape[-1]
    d = outs[0].reshape(-1, classes)
    L = d if logits is outs[0] else logits.reshape(-1, classes)   # in place: one object
    rows = L.shape[0]
    _check_labels(ctx, labels, classes)
    m = ctx.scratch((rows, 1), L.dtype)
    xp.max(L, axis=1, keepdims=True, out=m)
    xp.subtract(L, m, out=d)
    xp.exp(d, out=d)
    xp.sum(d, axis=1, keepdims=True, out=m)
    xp.divide(d, m, out=d)
    flat = d.reshape(-1)
    idx = _flat_label_index(ctx, labels, rows, classes)
    p = ctx.scratch((rows,), L.dtype)
    xp.take(flat, idx, out=p)         # p of the correct class, one position per row
    xp.subtract(p, 1, out=p)
    flat[idx] = p
    scale = ctx.scratch((), L.dtype)
    xp.divide(g, L.dtype.type(max(rows, 1)), out=scale)
    xp.multiply(d, scale, out=d)


defop("softmax_cross_entropy", infer=_sce_infer, forward=_sce_fw, differentiable=(0,),
      grad=lambda a, ins, outs, g: [apply1("softmax_cross_entropy_grad",
                                           [g[0], ins[0], ins[1]]), None],
      flops=lambda a, ins, outs: 5 * numel(ins[0]), workspace=_sce_ws,
      index_inputs=lambda a, ins: {1: ins[0].shape[-1]})
defop("softmax_cross_entropy_grad", infer=lambda a, g, logits, labels:
      [(logits.shape, logits.dtype)], forward=_sce_grad_fw, inplace=((0, 1),),
      differentiable=(), flops=lambda a, ins, outs: 5 * numel(ins[1]),
      index_inputs=lambda a, ins: {2: ins[1].shape[-1]},
      workspace=lambda a, ins, outs: numel(ins[2]) * (2 * itemsize(ins[1]) + 16)
      + itemsize(ins[1]))


def softmax_cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean over rows of -log softmax(logits)[label]: logits [..., C] float, labels int [...].

    A label outside [0, C) raises at run time, naming the label and its position.
    """
    return apply1("softmax_cross_entropy", [logits, labels])


# --- mean squared error -----------------------------------------------------------------------

def _mse_infer(attrs, pred, target):
    check_same_dtype("mse", pred, target)
    _float_only("mse", pred, target)
    if pred.shape != target.shape:
        raise shape_error("mse", [pred, target], "prediction and target shapes differ")
    return [((), pred.dtype)]


def _mse_fw(ctx, attrs, ins, outs):
    xp, (p, t) = ctx.xp, ins
    d = ctx.scratch(p.shape, p.dtype)
    xp.subtract(p, t, out=d)
    xp.multiply(d, d, out=d)
    xp.mean(d, out=outs[0])


def _mse_grad_fw(ctx, attrs, ins, outs):
    # d mean((p - t)^2) / dp = 2 (p - t) / n; elementwise, so it may overwrite p or t.
    xp, (g, p, t), dp = ctx.xp, ins, outs[0]
    scale = ctx.scratch((), p.dtype)
    xp.multiply(g, p.dtype.type(2.0 / max(p.size, 1)), out=scale)
    xp.subtract(p, t, out=dp)
    xp.multiply(dp, scale, out=dp)


def _mse_grad(attrs, ins, outs, g):
    dp = apply1("mse_grad", [g[0], ins[0], ins[1]])
    return [dp, neg(dp)]


defop("mse", infer=_mse_infer, forward=_mse_fw, grad=_mse_grad,
      flops=lambda a, ins, outs: 3 * numel(ins[0]),
      workspace=lambda a, ins, outs: numel(ins[0]) * itemsize(ins[0]))
defop("mse_grad", infer=lambda a, g, p, t: [(p.shape, p.dtype)], forward=_mse_grad_fw,
      inplace=((0, 1), (0, 2)), differentiable=(),
      flops=lambda a, ins, outs: 2 * numel(ins[1]),
      workspace=lambda a, ins, outs: itemsize(ins[1]))


def mse(pred: Tensor, target: Tensor) -> Tensor:
    """Mean squared error, a scalar: mean((pred - target)^2)."""
    return apply1("mse", [pred, target])


# --- layer norm -------------------------------------------------------------------------------

def _norm_params(op, x, gamma, beta, channels):
    ops = [x, gamma, beta]
    check_same_dtype(op, *ops)
    _float_only(op, x)
    for p in (gamma, beta):
        if tuple(p.shape) != (channels,):
            raise shape_error(op, ops, f"{p.name} must have shape [{channels}]")


def _ln_infer(attrs, x, gamma, beta):
    if len(x.shape) < 1 or x.shape[-1] == 0:   # no rows (batch 0) is fine: zero outputs
        raise shape_error("layer_norm", [x, gamma, beta], "x needs a last axis of at least "
                          "one element (the mean of no elements is undefined)")
    _norm_params("layer_norm", x, gamma, beta, x.shape[-1])
    stats = tuple(x.shape[:-1])
    return [(x.shape, x.dtype), (stats, x.dtype), (stats, x.dtype)]


def standardize(xp, x, y, mu, rs, axis, eps: float) -> None:
    """y = (x - mean) / sqrt(var + eps) over `axis`, the statistics written to `mu` and
    `rs` (1/std, keepdims shapes): what layer, batch and group norm share before their
    scale and shift. y holds the squared deviations for a moment."""
    xp.mean(x, axis=axis, keepdims=True, out=mu)
    xp.subtract(x, mu, out=y)
    xp.multiply(y, y, out=y)
    xp.mean(y, axis=axis, keepdims=True, out=rs)
    xp.add(rs, x.dtype.type(eps), out=rs)
    xp.sqrt(rs, out=rs)
    xp.reciprocal(rs, out=rs)
    xp.subtract(x, mu, out=y)
    xp.multiply(y, rs, out=y)


def _ln_fw(ctx, attrs, ins, outs):
    # Outputs: y, and the row mean and 1/std that the gradient reads (saved statistics).
    xp, (x, gamma, beta), (y, mean, rstd) = ctx.xp, ins, outs
    if on_cupy(xp) and cuda_rows.supported(x, gamma, beta, y, mean, rstd):
        return cuda_rows.layer_norm(x, gamma, beta, y, mean, rstd, attrs["eps"])
    d = x.shape[-1]
    x2, y2 = x.reshape(-1, d), y.reshape(-1, d)
    mu, rs = mean.reshape(-1, 1), rstd.reshape(-1, 1)
    standardize(xp, x2, y2, mu, rs, 1, attrs["eps"])
    xp.multiply(y2, gamma, out=y2)
    xp.add(y2, beta, out=y2)


def _ln_grad_fw(ctx, attrs, ins, outs):
    # With xh = (x - mean) * rstd and gy = dy * gamma:
    #   dx = rstd * (gy - mean(gy) - xh * mean(gy * xh)), dgamma = sum(dy * xh), dbeta = sum(dy).
    # x is read once, first: dx may overwrite x.
    xp, (dy, x, gamma, mean, rstd), (dx, dgamma, dbeta) = ctx.xp, ins, outs
    if on_cupy(xp) and cuda_rows.supported(*ins, *outs):
        return cuda_rows.layer_norm_grad(ctx, dy, x, gamma, mean, rstd, dx, dgamma, dbeta)
    d = x.shape[-1]
    dx2 = dx.reshape(-1, d)
    dy2, x2 = dy.reshape(-1, d), dx2 if x is dx else x.reshape(-1, d)   # (in place: one object)
    mu, rs = mean.reshape(-1, 1), rstd.reshape(-1, 1)
    rows = dy2.shape[0]
    t = ctx.scratch((rows, d), dy.dtype)
    a = ctx.scratch((rows, 1), dy.dtype)
    b = ctx.scratch((rows, 1), dy.dtype)
    xp.sum(dy2, axis=0, out=dbeta)
    xp.subtract(x2, mu, out=dx2)
    xp.multiply(dx2, rs, out=dx2)                  # dx holds xh
    xp.multiply(dy2, dx2, out=t)
    xp.sum(t, axis=0, out=dgamma)
    xp.multiply(t, gamma, out=t)
    xp.mean(t, axis=1, keepdims=True, out=b)       # mean(gy * xh)
    xp.multiply(dy2, gamma, out=t)
    xp.mean(t, axis=1, keepdims=True, out=a)       # mean(gy)
    xp.multiply(dx2, b, out=dx2)
    xp.subtract(t, dx2, out=dx2)
    xp.subtract(dx2, a, out=dx2)
    xp.multiply(dx2, rs, out=dx2)


def _norm_grad(grad_op: str):
    """Gradient rule of layer_norm / batch_norm: one `grad_op` node that reads dy, x, gamma
    and the saved mean and rstd (outputs 1 and 2) and gives dx, dgamma, dbeta."""
    def grad(attrs, ins, outs, g):
        if g[0] is None:
            return [None, None, None]
        dx, dgamma, dbeta = apply(grad_op, [g[0], ins[0], ins[1], outs[1], outs[2]])
        return [dx, dgamma, dbeta]
    return grad


_ln_grad = _norm_grad("layer_norm_grad")


def _ln_grad_ws(attrs, ins, outs):
    return (numel(ins[0]) + 2 * numel(ins[3])) * itemsize(ins[0])


def _ln_grad_ws_gpu(attrs, ins, outs):
    x = ins[1]
    if not cuda_rows.takes(x.dtype):
        return _ln_grad_ws(attrs, ins, outs)
    d = x.shape[-1]
    return cuda_rows.parts_bytes(cuda_rows.column_parts(numel(x) // d, d, 2), itemsize(x))


def _ln_grad_infer(attrs, dy, x, gamma, mean, rstd):
    return [(x.shape, x.dtype), (gamma.shape, x.dtype), (gamma.shape, x.dtype)]


defop("layer_norm", infer=_ln_infer, forward=_ln_fw, grad=_ln_grad,
      flops=lambda a, ins, outs: 8 * numel(ins[0]))
defop("layer_norm_grad", infer=_ln_grad_infer, forward=_ln_grad_fw, inplace=((0, 1),),
      differentiable=(), flops=lambda a, ins, outs: 12 * numel(ins[0]),
      workspace=_ln_grad_ws, workspace_gpu=_ln_grad_ws_gpu)


def layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis (biased variance)."""
    return apply("layer_norm", [x, gamma, beta], {"eps": float(eps)})[0]


# --- batch norm (training mode: batch statistics) ---------------------------------------------

def _bn_layout(shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Reduced axes and the broadcast shape of per-channel values for [N,C] or [N,C,H,W]."""
    if len(shape) == 2:
        return (0,), (1, shape[1])
    return (0, 2, 3), (1, shape[1], 1, 1)


def _bn_infer(attrs, x, gamma, beta):
    if len(x.shape) not in (2, 4):
        raise shape_error("batch_norm", [x, gamma, beta], "x must be [N,C] or [N,C,H,W]")
    _norm_params("batch_norm", x, gamma, beta, x.shape[1])
    if numel(x) == 0:
        raise shape_error("batch_norm", [x, gamma, beta], "x has no elements: the batch "
                          "statistics (a mean over N, H, W) are undefined")
    c = (x.shape[1],)
    return [(x.shape, x.dtype), (c, x.dtype), (c, x.dtype)]


def _bn_fw(ctx, attrs, ins, outs):
    # Training mode: the statistics of this batch (biased variance), saved as outputs.
    xp, (x, gamma, beta), (y, mean, rstd) = ctx.xp, ins, outs
    if on_cupy(xp) and cuda_rows.supported(*ins, *outs):
        return cuda_rows.batch_norm(ctx, x, gamma, beta, y, mean, rstd, attrs["eps"])
    axes, bshape = _bn_layout(x.shape)
    mu, rs = mean.reshape(bshape), rstd.reshape(bshape)
    standardize(xp, x, y, mu, rs, axes, attrs["eps"])
    xp.multiply(y, gamma.reshape(bshape), out=y)
    xp.add(y, beta.reshape(bshape), out=y)


def _bn_grad_fw(ctx, attrs, ins, outs):
    # dx = gamma * rstd * (dy - mean(dy) - xh * mean(dy * xh)), with mean(dy) = dbeta / m and
    # mean(dy * xh) = dgamma / m: only per-channel scratch, xh is recomputed from x.
    xp, (dy, x, gamma, mean, rstd), (dx, dgamma, dbeta) = ctx.xp, ins, outs
    if on_cupy(xp) and cuda_rows.supported(*ins, *outs):
        return cuda_rows.batch_norm_grad(ctx, dy, x, gamma, mean, rstd, dx, dgamma, dbeta)
    axes, bshape = _bn_layout(x.shape)
    m = x.dtype.type(numel(x) // x.shape[1])
    mu, rs = mean.reshape(bshape), rstd.reshape(bshape)
    k = ctx.scratch(bshape, x.dtype)
    xp.sum(dy, axis=axes, out=dbeta)
    xp.subtract(x, mu, out=dx)
    xp.multiply(dx, rs, out=dx)
    xp.multiply(dx, dy, out=dx)
    xp.sum(dx, axis=axes, out=dgamma)
    xp.subtract(x, mu, out=dx)
    xp.multiply(dx, rs, out=dx)                    # xh
    xp.divide(dgamma.reshape(bshape), m, out=k)
    xp.multiply(dx, k, out=dx)
    xp.subtract(dy, dx, out=dx)
    xp.divide(dbeta.reshape(bshape), m, out=k)
    xp.subtract(dx, k, out=dx)
    xp.multiply(rs, gamma.reshape(bshape), out=k)
    xp.multiply(dx, k, out=dx)


_bn_grad = _norm_grad("batch_norm_grad")


def _bn_grad_ws(attrs, ins, outs):
    return ins[1].shape[1] * itemsize(ins[1])


def _bn_ws_gpu(sums: int, plain):
    """The GPU workspace of batch norm: the parts of its `sums` two-stage channel sums
    (`plain`, the NumPy form's, where the kernels take no such dtype)."""
    def rule(attrs, ins, outs):
        x = ins[0] if sums == 1 else ins[1]
        if not cuda_rows.takes(x.dtype):
            return plain(attrs, ins, outs)
        return cuda_rows.parts_bytes(cuda_rows.channel_parts(tuple(x.shape), sums),
                                     itemsize(x))
    return rule


defop("batch_norm", infer=_bn_infer, forward=_bn_fw, grad=_bn_grad,
      flops=lambda a, ins, outs: 8 * numel(ins[0]),
      workspace_gpu=_bn_ws_gpu(1, no_workspace))
defop("batch_norm_grad", infer=_ln_grad_infer, forward=_bn_grad_fw, differentiable=(),
      flops=lambda a, ins, outs: 12 * numel(ins[0]),
      workspace=_bn_grad_ws, workspace_gpu=_bn_ws_gpu(2, _bn_grad_ws))


def batch_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """Training-mode batch norm over N (and H, W) for [N,C] or [N,C,H,W]; no running stats."""
    return apply("batch_norm", [x, gamma, beta], {"eps": float(eps)})[0]


# --- embedding --------------------------------------------------------------------------------

def _emb_infer(attrs, ids, table):
    ops = [ids, table]
    _int_only("embedding", ids, ops)
    _float_only("embedding", table)
    if len(table.shape) != 2:
        raise shape_error("embedding", ops, "the table must be [V, D]")
    return [(tuple(ids.shape) + (table.shape[1],), table.dtype)]


def _emb_fw(ctx, attrs, ins, outs):
    xp, (ids, table) = ctx.xp, ins
    _check_ids(ctx, ids, table.shape[0])
    xp.take(table, ids.reshape(-1), axis=0, out=outs[0].reshape(-1, table.shape[1]))


def _check_ids(ctx, ids, vocab: int) -> None:
    if not ctx.indices_checked:
        check_index_values(ctx.xp, ids, vocab, "id")


def _emb_grad_fw(ctx, attrs, ins, outs):
    # Scatter-add the rows of dy into the table's gradient; repeated ids add up.
    xp, (dy, ids), dt = ctx.xp, ins, outs[0]
    _check_ids(ctx, ids, dt.shape[0])
    dt.fill(0)
    rows, flat = dy.reshape(-1, dt.shape[1]), ids.reshape(-1)
    if xp is np:
        np.add.at(dt, flat, rows)      # sequential, in id order: bitwise reproducible
    else:                              # CuPy: atomics, so repeated ids may sum in any order
        import cupyx  # type: ignore
        cupyx.scatter_add(dt, flat, rows)


defop("embedding", infer=_emb_infer, forward=_emb_fw, differentiable=(1,),
      grad=lambda a, ins, outs, g: [None, apply1("embedding_grad", [g[0], ins[0]],
                                                 {"vocab": ins[1].shape[0]})],
      flops=lambda a, ins, outs: 0, index_inputs=lambda a, ins: {0: ins[1].shape[0]})
defop("embedding_grad", infer=lambda a, dy, ids: [((a["vocab"], dy.shape[-1]), dy.dtype)],
      forward=_emb_grad_fw, differentiable=(), index_inputs=lambda a, ins: {1: a["vocab"]},
      flops=lambda a, ins, outs: numel(ins[0]))


def embedding(ids: Tensor, table: Tensor) -> Tensor:
    """Rows of `table` [V, D] picked by integer `ids` [...] -> [..., D]. Gradient: table only."""
    return apply1("embedding", [ids, table])


# --- dropout: a counter-based random mask, regenerated instead of stored ----------------------

_M64 = (1 << 64) - 1
_GOLDEN, _C1, _C2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_CHUNK = 1 << 18     # elements hashed at once: bounds the workspace for big tensors


def _mix64(z: int) -> int:
    """SplitMix64's finaliser on a Python int (used to build the per-run key)."""
    z = (z + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * _C1) & _M64
    z = ((z ^ (z >> 27)) * _C2) & _M64
    return z ^ (z >> 31)


def _dropout_key(ctx, attrs) -> int:
    """One 64-bit key per (op seed, executor seed, node key, step)."""
    k = _mix64(attrs["seed"] & _M64)
    for part in (ctx.seed, attrs["key"], ctx.step):
        k = _mix64(k ^ (int(part) & _M64))
    return k


def _dropout_apply(ctx, attrs, x, out) -> None:
    """out = x * mask / (1 - p), mask_i = hash(key, i) >= p * 2^64 (counter-based RNG).

    The mask is a pure function of (seed, node key, step, element index): running the node
    again (rematerialisation, or the gradient) gives the same mask without storing it.
    Elementwise: out may be x itself.
    """
    xp, p = ctx.xp, attrs["p"]
    of = out.reshape(-1)
    xf = of if x is out else x.reshape(-1)        # in place: one object (see run_kernel)
    if p == 0:
        of[...] = xf
        return
    n = xf.shape[0]
    if n == 0:
        return
    u64 = np.uint64
    key, thr = u64(_dropout_key(ctx, attrs)), u64(min(int(p * 2.0 ** 64), _M64))
    scale = x.dtype.type(1.0 / (1.0 - p))
    chunk = min(n, _CHUNK)
    h = ctx.scratch((chunk,), np.uint64)
    t = ctx.scratch((chunk,), np.uint64)
    keep = ctx.scratch((chunk,), np.bool_)
    base = _temp(ctx, xp.arange(1, chunk + 1, dtype=np.uint64))
    for a in range(0, n, chunk):
        c = min(chunk, n - a)
        hh, tt, kk = h[:c], t[:c], keep[:c]
        # SplitMix64 output number i+1 of the stream keyed by `key`: z = key + (i+1) * golden
        xp.add(base[:c], u64(a), out=hh)
        xp.multiply(hh, u64(_GOLDEN), out=hh)
        xp.add(hh, key, out=hh)
        xp.right_shift(hh, u64(30), out=tt)
        xp.bitwise_xor(hh, tt, out=hh)
        xp.multiply(hh, u64(_C1), out=hh)
        xp.right_shift(hh, u64(27), out=tt)
        xp.bitwise_xor(hh, tt, out=hh)
        xp.multiply(hh, u64(_C2), out=hh)
        xp.right_shift(hh, u64(31), out=tt)
        xp.bitwise_xor(hh, tt, out=hh)
        xp.greater_equal(hh, thr, out=kk)
        dst = of[a:a + c]
        xp.multiply(dst if xf is of else xf[a:a + c], scale, out=dst)
        xp.multiply(dst, kk, out=dst)


def _dropout_ws(attrs, ins, outs) -> int:
    if attrs["p"] == 0:
        return 0
    return min(numel(ins[0]), _CHUNK) * (8 + 8 + 1 + 8)


def _dropout_infer(attrs, x):
    _float_only("dropout", x)
    return [(x.shape, x.dtype)]


_DROPOUT_ATTRS = ("p", "seed", "key")

defop("dropout", infer=_dropout_infer, inplace=((0, 0),),
      forward=lambda ctx, a, ins, outs: _dropout_apply(ctx, a, ins[0], outs[0]),
      grad=lambda a, ins, outs, g: [apply1("dropout_grad", [g[0]],
                                           {k: a[k] for k in _DROPOUT_ATTRS})],
      flops=lambda a, ins, outs: 12 * numel(ins[0]), workspace=_dropout_ws)
# The gradient is the same masked scaling, regenerated from the forward node's key.
defop("dropout_grad", infer=_dropout_infer, inplace=((0, 0),), differentiable=(),
      forward=lambda ctx, a, ins, outs: _dropout_apply(ctx, a, ins[0], outs[0]),
      flops=lambda a, ins, outs: 12 * numel(ins[0]), workspace=_dropout_ws)


def dropout(x: Tensor, p: float, seed: int = 0, name: str | None = None) -> Tensor:
    """Zero each element with probability p, scale the rest by 1/(1-p) (training mode).

    The mask depends on (seed, this node's name, the executor's step and seed, element
    index) only; `Executor.run(step=k)` changes it from step to step. p = 0 is identity.
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p < 1.0:
        raise ArgumentError(f"dropout({x.name}): p must be in [0, 1), not {p!r} "
                            "(a number; p = 1 would drop every element and scale by 1/0)")
    p = float(p)
    if p == 0.0:
        return x
    name = name or _auto_name("dropout")
    key = zlib.crc32(name.encode())            # stable across processes, unlike hash()
    return apply1("dropout", [x], {"p": p, "seed": int(seed), "key": key}, name=name)
