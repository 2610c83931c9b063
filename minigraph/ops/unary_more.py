"""More elementwise functions of the Core ATen opset: log1p and expm1, which PyTorch's
decompositions produce, and the trigonometric, hyperbolic and rounding functions.

`log1p(x) = log(1 + x)` and `expm1(x) = exp(x) - 1`, each computed without the rounding
that forming `1 + x` (or subtracting 1) costs when x is small: BCE's decomposition reads
`log1p(exp(-|x|))` and ELU's `expm1(x)`. Their gradients are graph nodes: 1 / (1 + x) and
y + 1 (expm1's reads its output, so x may be freed).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError
from ..graph import Tensor
from .elementwise import add_scalar, div, mul, mul_scalar, neg, pow
from .registry import apply1, defop


def _float(op):
    def infer(attrs, x):
        if np.dtype(x.dtype).kind != "f":
            raise DTypeError(f"{op}({x.name}[{x.dtype}]): {x.name} must be a floating tensor")
        return [(x.shape, x.dtype)]
    return infer


defop("log1p", infer=_float("log1p"), inplace=((0, 0),),
      forward=lambda ctx, a, ins, outs: ctx.xp.log1p(ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [div(g[0], add_scalar(ins[0], 1.0))])
defop("expm1", infer=_float("expm1"), inplace=((0, 0),),
      forward=lambda ctx, a, ins, outs: ctx.xp.expm1(ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [mul(g[0], add_scalar(outs[0], 1.0))])


def log1p(x: Tensor) -> Tensor:
    """log(1 + x), exact for small x."""
    return apply1("log1p", [x])


def expm1(x: Tensor) -> Tensor:
    """exp(x) - 1, exact for small x."""
    return apply1("expm1", [x])


# --- trigonometric, hyperbolic and base-2/10 logarithms: float ops with their gradients ---
# Each gradient is graph nodes of x (or of y, where y gives it more cheaply).

def _d(fn):
    """The gradient rule of a unary op whose derivative is fn(x, y)."""
    return lambda a, ins, outs, g: [mul(g[0], fn(ins[0], outs[0]))]


def _inv(t: Tensor) -> Tensor:
    return div(1.0, t)


def rsub_scalar(x: Tensor, c: float) -> Tensor:
    """c - x."""
    return apply1("rsub_scalar", [x], {"c": float(c)})


_SMOOTH = {
    "sin": lambda x, y: unary("cos", x),
    "cos": lambda x, y: neg(unary("sin", x)),
    "tan": lambda x, y: add_scalar(mul(y, y), 1.0),
    "sinh": lambda x, y: unary("cosh", x),
    "cosh": lambda x, y: unary("sinh", x),
    "atan": lambda x, y: _inv(add_scalar(mul(x, x), 1.0)),
    "asin": lambda x, y: pow(rsub_scalar(mul(x, x), 1.0), -0.5),
    "acos": lambda x, y: neg(pow(rsub_scalar(mul(x, x), 1.0), -0.5)),
    "asinh": lambda x, y: pow(add_scalar(mul(x, x), 1.0), -0.5),
    "acosh": lambda x, y: pow(add_scalar(mul(x, x), -1.0), -0.5),
    "atanh": lambda x, y: _inv(rsub_scalar(mul(x, x), 1.0)),
    "log2": lambda x, y: _inv(mul_scalar(x, math.log(2.0))),
    "log10": lambda x, y: _inv(mul_scalar(x, math.log(10.0))),
}
_XP = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
       "acosh": "arccosh", "atanh": "arctanh"}
for _op, _grad in _SMOOTH.items():
    _fn = _XP.get(_op, _op)
    defop(_op, infer=_float(_op), inplace=((0, 0),), grad=_d(_grad),
          forward=lambda ctx, a, ins, outs, _f=_fn: getattr(ctx.xp, _f)(ins[0], out=outs[0]))
# Piecewise constant: zero gradient almost everywhere (PyTorch's too), so none is built.
_STEPS = {"floor": "floor", "ceil": "ceil", "trunc": "trunc", "round": "rint"}
for _op, _f in _STEPS.items():
    defop(_op, infer=_float(_op), inplace=((0, 0),), differentiable=(),
          forward=lambda ctx, a, ins, outs, _f=_f: getattr(ctx.xp, _f)(ins[0], out=outs[0]))
defop("isinf", infer=lambda a, x: [(x.shape, "bool")], differentiable=(),
      forward=lambda ctx, a, ins, outs: ctx.xp.isinf(ins[0], out=outs[0]))

UNARY = (*_SMOOTH, *_STEPS, "isinf")


def unary(op: str, x: Tensor) -> Tensor:
    """One of `UNARY` applied elementwise: sin, cos, tan, sinh, cosh, atan, asin, acos,
    asinh, acosh, atanh, log2, log10 (with gradients), floor, ceil, trunc, round (to the
    nearest even, as PyTorch; no gradient) and isinf (bool)."""
    return apply1(op, [x])
