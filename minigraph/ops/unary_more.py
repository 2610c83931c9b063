"""Two more elementwise functions PyTorch's decompositions produce: log1p and expm1.

`log1p(x) = log(1 + x)` and `expm1(x) = exp(x) - 1`, each computed without the rounding
that forming `1 + x` (or subtracting 1) costs when x is small: BCE's decomposition reads
`log1p(exp(-|x|))` and ELU's `expm1(x)`. Their gradients are graph nodes: 1 / (1 + x) and
y + 1 (expm1's reads its output, so x may be freed).
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from ..graph import Tensor
from .elementwise import add_scalar, div, mul
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
