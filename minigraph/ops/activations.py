"""More activations: GELU in its exact (erf) form, SiLU, clamp (ReLU6 is `clamp(x, 0, 6)`),
leaky ReLU, abs and sign.

Each op is one `defop` block, as in elementwise.py: shape rule, kernel writing into `outs`,
gradient rule (backward nodes), in-place pairs. The gradient nodes read x, not y: these
functions are not invertible from their output the way relu, sigmoid and tanh are.
GELU's exact form is x * Phi(x), Phi the standard normal CDF [Hendrycks 2016]; SiLU is
x * sigmoid(x) [Elfwing 2018]; leaky ReLU keeps a small slope below 0 [Maas 2013].
"""

from __future__ import annotations

import math

import numpy as np

from ..graph import Tensor
from .elementwise import _float, _same, mul
from .registry import apply1, defop, itemsize, numel


def _erf(xp, x, out) -> None:
    """out = erf(x): SciPy's ufunc on NumPy, CuPy's own on a GPU (NumPy has none)."""
    if getattr(xp, "__name__", "") == "cupy":
        from cupyx.scipy.special import erf
    else:
        from scipy.special import erf
    erf(x, out=out)


def _bytes_of_x(a, ins, outs, k: int = 1) -> int:
    return k * numel(ins[-1]) * itemsize(ins[-1])


# --- GELU, exact: 0.5 x (1 + erf(x / sqrt 2)) ------------------------------------------------

_RSQRT2, _RSQRT2PI = 1.0 / math.sqrt(2.0), 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_erf_fw(ctx, a, ins, outs):
    xp, x = ctx.xp, ins[0]
    t = ctx.scratch(x.shape, x.dtype)
    xp.multiply(x, x.dtype.type(_RSQRT2), out=t)
    _erf(xp, t, t)
    xp.add(t, 1, out=t)
    xp.multiply(t, x, out=t)
    xp.multiply(t, x.dtype.type(0.5), out=outs[0])


def _gelu_erf_grad_fw(ctx, a, ins, outs):
    # d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
    xp, (dy, x) = ctx.xp, ins
    f = x.dtype.type
    t = ctx.scratch(x.shape, x.dtype)
    d = ctx.scratch(x.shape, x.dtype)
    xp.multiply(x, f(_RSQRT2), out=t)
    _erf(xp, t, t)
    xp.add(t, 1, out=t)
    xp.multiply(t, f(0.5), out=t)                  # Phi(x)
    xp.multiply(x, x, out=d)
    xp.multiply(d, f(-0.5), out=d)
    xp.exp(d, out=d)
    xp.multiply(d, x, out=d)
    xp.multiply(d, f(_RSQRT2PI), out=d)            # x phi(x)
    xp.add(t, d, out=d)
    xp.multiply(dy, d, out=outs[0])                # dy is read last: it may be the output


defop("gelu_erf", infer=_float("gelu_erf"), forward=_gelu_erf_fw,
      grad=lambda a, ins, outs, g: [apply1("gelu_erf_grad", [g[0], ins[0]])],
      flops=lambda a, i, o: 6 * numel(o[0]), workspace=_bytes_of_x)
defop("gelu_erf_grad", infer=lambda a, dy, x: [(x.shape, x.dtype)], forward=_gelu_erf_grad_fw,
      inplace=((0, 0),), differentiable=(), flops=lambda a, i, o: 12 * numel(o[0]),
      workspace=lambda a, ins, outs: _bytes_of_x(a, ins, outs, 2))


def gelu_erf(x: Tensor) -> Tensor:
    """GELU in its exact form, x * Phi(x) (PyTorch's default `nn.GELU()`); `gelu` is the tanh
    approximation GPT-2 uses."""
    return apply1("gelu_erf", [x])


# --- SiLU (swish): x * sigmoid(x) ------------------------------------------------------------

def _sigmoid_into(xp, x, s) -> None:
    xp.negative(x, out=s)
    xp.exp(s, out=s)
    xp.add(s, 1, out=s)
    xp.reciprocal(s, out=s)


def _silu_fw(ctx, a, ins, outs):
    x = ins[0]
    s = ctx.scratch(x.shape, x.dtype)
    _sigmoid_into(ctx.xp, x, s)
    ctx.xp.multiply(x, s, out=outs[0])             # elementwise: the output may be x


def _silu_grad_fw(ctx, a, ins, outs):
    # d/dx x s(x) = s (1 + x (1 - s)).
    xp, (dy, x) = ctx.xp, ins
    s = ctx.scratch(x.shape, x.dtype)
    d = ctx.scratch(x.shape, x.dtype)
    _sigmoid_into(xp, x, s)
    xp.subtract(1, s, out=d)
    xp.multiply(d, x, out=d)
    xp.add(d, 1, out=d)
    xp.multiply(d, s, out=d)
    xp.multiply(dy, d, out=outs[0])


defop("silu", infer=_float("silu"), forward=_silu_fw, inplace=((0, 0),),
      grad=lambda a, ins, outs, g: [apply1("silu_grad", [g[0], ins[0]])],
      flops=lambda a, i, o: 5 * numel(o[0]), workspace=_bytes_of_x)
defop("silu_grad", infer=lambda a, dy, x: [(x.shape, x.dtype)], forward=_silu_grad_fw,
      inplace=((0, 0),), differentiable=(), flops=lambda a, i, o: 9 * numel(o[0]),
      workspace=lambda a, ins, outs: _bytes_of_x(a, ins, outs, 2))


def silu(x: Tensor) -> Tensor:
    """x * sigmoid(x) (`nn.SiLU`, swish)."""
    return apply1("silu", [x])


# --- clamp: min(max(x, lo), hi); ReLU6 and hardtanh are clamps ------------------------------

def _clamp_fw(ctx, a, ins, outs):
    lo, hi = a["lo"], a["hi"]
    if lo is None and hi is None:
        outs[0][...] = ins[0]
        return
    ctx.xp.clip(ins[0], lo, hi, out=outs[0])


def _clamp_grad_fw(ctx, a, ins, outs):
    # dy where lo <= x <= hi (clamp) or lo < x < hi (hardtanh: `inclusive` False), else 0.
    xp, (dy, x) = ctx.xp, ins
    keep = ctx.scratch(x.shape, np.bool_)
    side = ctx.scratch(x.shape, np.bool_)
    keep.fill(True)
    for bound, inside in ((a["lo"], xp.greater_equal if a["inclusive"] else xp.greater),
                          (a["hi"], xp.less_equal if a["inclusive"] else xp.less)):
        if bound is not None:
            inside(x, bound, out=side)
            xp.logical_and(keep, side, out=keep)
    xp.multiply(dy, keep, out=outs[0])


def _clamp_infer(attrs, x):
    return _same(attrs, x)


defop("clamp", infer=_clamp_infer, forward=_clamp_fw, inplace=((0, 0),),
      grad=lambda a, ins, outs, g: [apply1("clamp_grad", [g[0], ins[0]],
                                           {"lo": a["lo"], "hi": a["hi"], "inclusive": True})])
defop("clamp_grad", infer=lambda a, dy, x: [(x.shape, dy.dtype)], forward=_clamp_grad_fw,
      inplace=((0, 0),), differentiable=(), flops=lambda a, i, o: 3 * numel(o[0]),
      workspace=lambda a, ins, outs: 2 * numel(ins[1]))


def _bound(v):
    return None if v is None else float(v)


def clamp(x: Tensor, lo: float | None = None, hi: float | None = None) -> Tensor:
    """x limited to [lo, hi] (either may be None); the gradient passes where lo <= x <= hi.
    `clamp(x, 0, 6)` is ReLU6."""
    return apply1("clamp", [x], {"lo": _bound(lo), "hi": _bound(hi)})


def clamp_grad(dy: Tensor, x: Tensor, lo, hi, inclusive: bool = True) -> Tensor:
    """dy where x is inside [lo, hi] (or (lo, hi), as hardtanh's backward), else 0."""
    return apply1("clamp_grad", [dy, x], {"lo": _bound(lo), "hi": _bound(hi),
                                          "inclusive": bool(inclusive)})


# --- leaky ReLU: x for x > 0, slope * x below -------------------------------------------------

def _slope_factor(ctx, x, slope):
    """A scratch array of 1 where x > 0, `slope` elsewhere."""
    xp = ctx.xp
    pos = ctx.scratch(x.shape, np.bool_)
    f = ctx.scratch(x.shape, x.dtype)
    xp.greater(x, 0, out=pos)
    xp.multiply(pos, x.dtype.type(1.0 - slope), out=f)
    xp.add(f, x.dtype.type(slope), out=f)
    return f


def _leaky_fw(ctx, a, ins, outs):
    ctx.xp.multiply(ins[0], _slope_factor(ctx, ins[0], a["slope"]), out=outs[0])


def _leaky_grad_fw(ctx, a, ins, outs):
    dy, x = ins
    ctx.xp.multiply(dy, _slope_factor(ctx, x, a["slope"]), out=outs[0])


def _leaky_ws(a, ins, outs):
    x = ins[-1]
    return numel(x) * (1 + itemsize(x))


defop("leaky_relu", infer=_float("leaky_relu"), forward=_leaky_fw, inplace=((0, 0),),
      grad=lambda a, ins, outs, g: [apply1("leaky_relu_grad", [g[0], ins[0]], a)],
      flops=lambda a, i, o: 3 * numel(o[0]), workspace=_leaky_ws)
defop("leaky_relu_grad", infer=lambda a, dy, x: [(x.shape, dy.dtype)], forward=_leaky_grad_fw,
      inplace=((0, 0),), differentiable=(), flops=lambda a, i, o: 3 * numel(o[0]),
      workspace=_leaky_ws)


def leaky_relu(x: Tensor, slope: float = 0.01) -> Tensor:
    """x where x > 0, slope * x elsewhere (`nn.LeakyReLU(negative_slope)`)."""
    return apply1("leaky_relu", [x], {"slope": float(slope)})


# --- abs and sign -----------------------------------------------------------------------------

defop("sign", infer=_same, forward=lambda ctx, a, ins, outs: ctx.xp.sign(ins[0], out=outs[0]),
      inplace=((0, 0),), differentiable=())
defop("abs", infer=_same, forward=lambda ctx, a, ins, outs: ctx.xp.abs(ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [mul(g[0], sign(ins[0]))], inplace=((0, 0),))


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of x (PyTorch's `sgn` on real tensors); no gradient (it is 0)."""
    return apply1("sign", [x])


def abs(x: Tensor) -> Tensor:  # noqa: A001
    """|x|; its gradient is dy * sign(x) (0 at 0, as PyTorch)."""
    return apply1("abs", [x])
