"""Broadcasting and its adjoint: `broadcast_to` copies a tensor along new or size-1 axes, and
`sum_to` sums a gradient back over those axes. Each is the other's gradient, which is why
they live together (every op that broadcasts its operands, `add` or `mul` say, reduces its
gradients with `sum_to`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..backend import on_cupy
from ..graph import Tensor
from . import cuda_rows
from .registry import apply1, defop, itemsize, numel, shape_error

# --- sum_to: the adjoint of broadcasting -------------------------------------------------------

def sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Reduce a broadcast gradient back to `shape` (the adjoint of broadcast_to)."""
    if g.shape == tuple(shape):
        return g
    return apply1("sum_to", [g], {"shape": tuple(shape)})


def _sum_to_infer(attrs, g):
    shape = tuple(attrs["shape"])
    try:
        if tuple(np.broadcast_shapes(shape, g.shape)) != g.shape:
            raise ValueError
    except ValueError:
        raise shape_error("sum_to", [g], f"cannot reduce to {list(shape)}") from None
    return [(shape, g.dtype)]


def _sum_to_forward(ctx, attrs, ins, outs):
    g, out = ins[0], outs[0]
    if on_cupy(ctx.xp) and cuda_rows.supported(g, out):
        split = cuda_rows.leading_split(g.shape, out.shape)
        if split:                                  # on a GPU: coalesced column sums
            return cuda_rows.column_sums(ctx, g, out, *split)
    lead = g.ndim - out.ndim
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(out.shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    kept = tuple(s for i, s in enumerate(g.shape) if i not in axes)
    ctx.xp.sum(g, axis=axes, out=out.reshape(kept))


def _sum_to_ws_gpu(attrs, ins, outs):
    split = cuda_rows.leading_split(tuple(ins[0].shape), tuple(outs[0].shape))
    if split is None or not cuda_rows.takes(ins[0].dtype):
        return 0                                   # CuPy's own sum: no scratch
    return cuda_rows.parts_bytes(cuda_rows.column_parts(*split, 1), itemsize(ins[0]))


defop("sum_to", infer=_sum_to_infer, forward=_sum_to_forward,
      grad=lambda a, ins, outs, g: [broadcast_to(g[0], ins[0].shape)],
      flops=lambda a, ins, outs: numel(ins[0]), workspace_gpu=_sum_to_ws_gpu)


# --- broadcast_to: x copied along the axes where it has size 1 (or lacks them) --------------

def _bcast_infer(attrs, x):
    shape = tuple(attrs["shape"])
    try:
        ok = tuple(np.broadcast_shapes(x.shape, shape)) == shape
    except ValueError:
        ok = False
    if not ok:
        raise shape_error("broadcast_to", [x], f"cannot broadcast to {list(shape)}")
    return [(shape, x.dtype)]


def _bcast_fw(ctx, attrs, ins, outs):
    outs[0][...] = ins[0]


def _bcast_grad(attrs, ins, outs, g):
    return [sum_to(g[0], ins[0].shape)]


defop("broadcast_to", infer=_bcast_infer, forward=_bcast_fw, grad=_bcast_grad,
      flops=lambda a, i, o: 0)


def broadcast_to(x: Tensor, shape: Sequence[int]) -> Tensor:
    """x repeated to `shape` by NumPy's broadcasting rules (x's shape its suffix, size-1
    axes stretched); the same shape returns x itself. Gradient: dy summed back to x's
    shape (sum_to)."""
    shape = tuple(int(s) for s in shape)
    if x.shape == shape:
        return x
    return apply1("broadcast_to", [x], {"shape": shape})
