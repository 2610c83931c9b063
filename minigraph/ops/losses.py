"""More losses: binary cross-entropy on logits, and the smooth L1 (Huber) loss.

Both reduce to a scalar, by the mean (`reduction="mean"`, PyTorch's default) or the sum.
Their gradient nodes read the prediction and the target, never an intermediate, as the
losses of nn.py.

- `bce_with_logits(x, t)`: mean of max(x, 0) - x t + log(1 + exp(-|x|)), the stable form
  of -t log s(x) - (1 - t) log(1 - s(x)); its gradient is (s(x) - t) / n.
- `smooth_l1(x, t, beta)`: mean of 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta
  elsewhere, d = x - t [Girshick 2015]; beta = 0 is the L1 loss.
"""

from __future__ import annotations

import numpy as np

from ..graph import Tensor, check_same_dtype
from .elementwise import mul, mul_scalar, neg, sigmoid, sub
from .nn import _float_only
from .registry import apply1, defop, itemsize, numel, shape_error

_REDUCTIONS = ("mean", "sum")


def _loss_infer(op):
    def infer(attrs, x, t):
        check_same_dtype(op, x, t)
        _float_only(op, x, t)
        if x.shape != t.shape:
            raise shape_error(op, [x, t], "prediction and target shapes differ")
        if attrs["reduction"] not in _REDUCTIONS:
            raise ValueError(f"{op}: reduction must be 'mean' or 'sum', not "
                             f"{attrs['reduction']!r}")
        return [((), x.dtype)]
    return infer


def _reduce(xp, attrs, e, out) -> None:
    (xp.mean if attrs["reduction"] == "mean" else xp.sum)(e, out=out)


def _scale(attrs, x: Tensor) -> float:
    """d(reduction)/d(element): 1/n for the mean, 1 for the sum."""
    return 1.0 / max(numel(x), 1) if attrs["reduction"] == "mean" else 1.0


# --- binary cross-entropy on logits -----------------------------------------------------------

def _bce_fw(ctx, attrs, ins, outs):
    xp, (x, t) = ctx.xp, ins
    e = ctx.scratch(x.shape, x.dtype)
    a = ctx.scratch(x.shape, x.dtype)
    xp.abs(x, out=a)
    xp.negative(a, out=a)
    xp.exp(a, out=a)
    xp.log1p(a, out=a)                    # log(1 + exp(-|x|))
    xp.maximum(x, 0, out=e)
    xp.add(e, a, out=e)
    xp.multiply(x, t, out=a)
    xp.subtract(e, a, out=e)
    _reduce(xp, attrs, e, outs[0])


def _bce_grad(attrs, ins, outs, g):
    x, t = ins
    k = _scale(attrs, x)
    dx = mul_scalar(mul(sub(sigmoid(x), t), g[0]), k)
    dt = mul_scalar(mul(neg(x), g[0]), k)
    return [dx, dt]


defop("bce_with_logits", infer=_loss_infer("bce_with_logits"), forward=_bce_fw, grad=_bce_grad,
      flops=lambda a, ins, outs: 8 * numel(ins[0]),
      workspace=lambda a, ins, outs: 2 * numel(ins[0]) * itemsize(ins[0]))


def bce_with_logits(x: Tensor, t: Tensor, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of targets t in [0, 1] against sigmoid(x), computed from the
    logits x (`F.binary_cross_entropy_with_logits`)."""
    return apply1("bce_with_logits", [x, t], {"reduction": reduction})


# --- smooth L1 --------------------------------------------------------------------------------

def _sl1_fw(ctx, attrs, ins, outs):
    xp, (x, t), beta = ctx.xp, ins, attrs["beta"]
    f = x.dtype.type
    d = ctx.scratch(x.shape, x.dtype)
    a = ctx.scratch(x.shape, x.dtype)
    small = ctx.scratch(x.shape, np.bool_)
    xp.subtract(x, t, out=d)
    xp.abs(d, out=a)
    xp.less(a, f(beta), out=small)
    xp.subtract(a, f(0.5 * beta), out=a)          # |d| - beta / 2
    if beta > 0:
        xp.multiply(d, d, out=d)
        xp.multiply(d, f(0.5 / beta), out=d)      # d^2 / (2 beta)
        xp.copyto(a, d, where=small)
    _reduce(xp, attrs, a, outs[0])


def _sl1_grad_fw(ctx, attrs, ins, outs):
    # d/dx: d / beta where |d| < beta, sign(d) elsewhere; times g (and 1/n for the mean).
    xp, (g, x, t), dx, beta = ctx.xp, ins, outs[0], attrs["beta"]
    f = x.dtype.type
    s = ctx.scratch(x.shape, x.dtype)
    small = ctx.scratch(x.shape, np.bool_)
    k = ctx.scratch((), x.dtype)
    xp.subtract(x, t, out=dx)                     # d (x and t are not read again)
    if beta > 0:
        xp.abs(dx, out=s)
        xp.less(s, f(beta), out=small)
    xp.sign(dx, out=s)
    if beta > 0:
        xp.multiply(dx, f(1.0 / beta), out=dx)
        xp.copyto(s, dx, where=small)
    xp.multiply(g, f(_scale(attrs, x)), out=k)
    xp.multiply(s, k, out=dx)


def _sl1_grad(attrs, ins, outs, g):
    dx = apply1("smooth_l1_grad", [g[0], ins[0], ins[1]], attrs)
    return [dx, neg(dx)]


defop("smooth_l1", infer=_loss_infer("smooth_l1"), forward=_sl1_fw, grad=_sl1_grad,
      flops=lambda a, ins, outs: 6 * numel(ins[0]),
      workspace=lambda a, ins, outs: numel(ins[0]) * (2 * itemsize(ins[0]) + 1))
defop("smooth_l1_grad", infer=lambda a, g, x, t: [(x.shape, x.dtype)], forward=_sl1_grad_fw,
      inplace=((0, 1), (0, 2)), differentiable=(), flops=lambda a, ins, outs: 5 * numel(ins[1]),
      workspace=lambda a, ins, outs: numel(ins[1]) * (itemsize(ins[1]) + 1) + itemsize(ins[1]))


def smooth_l1(x: Tensor, t: Tensor, beta: float = 1.0, reduction: str = "mean") -> Tensor:
    """The smooth L1 loss of `F.smooth_l1_loss(x, t, beta=beta)`: quadratic below beta,
    linear above."""
    if beta < 0:
        raise ValueError(f"smooth_l1({x.name}, {t.name}): beta must be >= 0, not {beta}")
    return apply1("smooth_l1", [x, t], {"beta": float(beta), "reduction": reduction})
