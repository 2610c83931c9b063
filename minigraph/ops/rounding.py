"""Ops that change a value's type or round it: `cast` (a dtype conversion) and `div_round`
(division rounded down or toward zero, PyTorch's `div(a, b, rounding_mode=...)`).

A rounded quotient is constant between its steps, so `div_round` has no gradient (PyTorch's
is 0 too). A cast between floating types passes its gradient back cast the other way; a
cast to or from an integer or bool type passes none.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from ..graph import Tensor, as_dtype, check_same_dtype
from .registry import apply1, defop, itemsize, numel, shape_error


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f"


# --- cast -------------------------------------------------------------------------------------

def _cast_grad(attrs, ins, outs, g):
    if not (_is_float(ins[0].dtype) and _is_float(attrs["dtype"])):
        return [None]
    return [cast(g[0], ins[0].dtype)]


defop("cast", infer=lambda a, x: [(x.shape, a["dtype"])],
      forward=lambda ctx, a, ins, outs: ctx.xp.copyto(outs[0], ins[0], casting="unsafe"),
      grad=_cast_grad)


def cast(x: Tensor, dtype) -> Tensor:
    """x converted to `dtype` (floats to integers truncate, as NumPy and PyTorch)."""
    dtype = as_dtype(dtype, x.name)
    if dtype == x.dtype:
        return x
    return apply1("cast", [x], {"dtype": dtype})


# --- division, rounded ------------------------------------------------------------------------

def _div_round_infer(attrs, a, b):
    dt = check_same_dtype("div_round", a, b)
    if attrs["mode"] not in ("floor", "trunc"):
        raise ValueError(f"div_round: mode must be 'floor' or 'trunc', not {attrs['mode']!r}")
    if np.dtype(dt).kind not in "iuf":
        raise DTypeError(f"div_round({a.name}[{dt}], {b.name}[{dt}]): needs numbers")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise shape_error("div_round", [a, b], "shapes do not broadcast") from None
    return [(tuple(shape), dt)]


def _div_round_fw(ctx, attrs, ins, outs):
    # floor: Python's `//` (NumPy's floor_divide, as PyTorch's rounding_mode="floor").
    # trunc: floats, trunc(a / b); integers, (a - fmod(a, b)) / b, which divides exactly.
    xp, (a, b), out = ctx.xp, ins, outs[0]
    if attrs["mode"] == "floor":
        xp.floor_divide(a, b, out=out)
    elif _is_float(out.dtype):
        xp.divide(a, b, out=out)
        xp.trunc(out, out=out)
    else:
        r = ctx.scratch(out.shape, out.dtype)
        xp.fmod(a, b, out=r)
        xp.subtract(a, r, out=out)
        xp.floor_divide(out, b, out=out)


defop("div_round", infer=_div_round_infer, forward=_div_round_fw, inplace=((0, 0),),
      differentiable=(), flops=lambda a, ins, outs: 2 * numel(outs[0]),
      workspace=lambda a, ins, outs: 0 if _is_float(outs[0].dtype) or a["mode"] == "floor"
      else numel(outs[0]) * itemsize(outs[0]))


def div_round(a: Tensor, b: Tensor, mode: str = "floor") -> Tensor:
    """a / b rounded down (`mode="floor"`, Python's `//`) or toward zero (`"trunc"`)."""
    return apply1("div_round", [a, b], {"mode": mode})
