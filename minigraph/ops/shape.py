"""Reductions and shape ops: sum, mean, broadcast_to, reshape, transpose.

Reshape is a real op with its own output buffer (not a view): every tensor in minigraph
owns its bytes, so the memory planner sees every value the program makes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..backend import on_cupy
from ..graph import Tensor
from . import cuda_rows
from .broadcast import broadcast_to
from .elementwise import mul_scalar
from .registry import apply1, defop, numel, shape_error


def _norm_axes(op: str, x, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(len(x.shape)))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -len(x.shape) <= a < len(x.shape):
            raise shape_error(op, [x], f"axis {a} out of range for {len(x.shape)} dims")
        out.append(int(a) % len(x.shape))
    return tuple(sorted(set(out)))


def _reduced_shape(shape, axes, keepdims) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _reduce_infer(op):
    def infer(attrs, x):
        axes = _norm_axes(op, x, attrs["axes"])
        return [(_reduced_shape(x.shape, axes, attrs["keepdims"]), x.dtype)]
    return infer


def _reduce_fw(fn):
    def forward(ctx, attrs, ins, outs):
        x, o = ins[0], outs[0]
        axes = tuple(attrs["axes"])
        if on_cupy(ctx.xp) and cuda_rows.supported(x, o):
            split = cuda_rows.trailing_split(x.shape, axes)
            if split:                                  # on a GPU: a row per warp
                return cuda_rows.row_sums(x, o, *split, mean=fn == "mean")
        getattr(ctx.xp, fn)(x, axis=axes, out=o.reshape(_reduced_shape(x.shape, axes, False)))
    return forward


def _expand_grad(g: Tensor, x, axes, keepdims) -> Tensor:
    """Broadcast a reduced gradient back to the input's shape."""
    if not keepdims:
        g = reshape(g, _reduced_shape(x.shape, axes, True))
    return broadcast_to(g, x.shape)


def _sum_grad(attrs, ins, outs, g):
    return [_expand_grad(g[0], ins[0], attrs["axes"], attrs["keepdims"])]


def _mean_grad(attrs, ins, outs, g):
    n = int(np.prod([ins[0].shape[a] for a in attrs["axes"]]))
    return [_expand_grad(mul_scalar(g[0], 1.0 / n), ins[0], attrs["axes"], attrs["keepdims"])]




def _in_elems(attrs, ins, outs):
    return numel(ins[0])


defop("sum", infer=_reduce_infer("sum"), forward=_reduce_fw("sum"), grad=_sum_grad,
      flops=_in_elems)
defop("mean", infer=_reduce_infer("mean"), forward=_reduce_fw("mean"), grad=_mean_grad,
      flops=_in_elems)


def sum(x: Tensor, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """x summed over `axis` (an int, a tuple of ints, or None: every axis; negative
    counts from the end), the axes kept with size 1 when `keepdims`. Gradient: dy
    broadcast back to x's shape."""
    return apply1("sum", [x], {"axes": _norm_axes("sum", x, axis), "keepdims": bool(keepdims)})


def mean(x: Tensor, axis=None, keepdims: bool = False) -> Tensor:
    """x averaged over `axis` (as `sum`): the sum times 1/n. Axes that hold no elements
    are refused (their mean is undefined) with a ShapeError."""
    axes = _norm_axes("mean", x, axis)
    if 0 in (x.shape[a] for a in axes):
        raise shape_error("mean", [x], f"axes {list(axes)} hold no elements: their mean is "
                          "undefined")
    return apply1("mean", [x], {"axes": axes, "keepdims": bool(keepdims)})


# --- reshape -----------------------------------------------------------------------------------

def _reshape_infer(attrs, x):
    shape = list(attrs["shape"])
    n = numel(x)
    if shape.count(-1) > 1:
        raise shape_error("reshape", [x], "at most one -1 in the new shape")
    if any(s < -1 for s in shape):
        raise shape_error("reshape", [x], f"negative dimension in {shape} (only -1, once)")
    if -1 in shape:
        rest = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if rest == 0 or n % rest:
            raise shape_error("reshape", [x], f"cannot reshape {n} elements to {shape}")
        shape[shape.index(-1)] = n // rest
    if int(np.prod(shape, dtype=np.int64)) != n:
        raise shape_error("reshape", [x], f"cannot reshape {n} elements to {shape}")
    return [(tuple(shape), x.dtype)]


def _reshape_fw(ctx, attrs, ins, outs):
    dst = outs[0].reshape(ins[0].shape)
    if not _same_bytes(dst, ins[0]):            # in place, the bytes are already there
        dst[...] = ins[0]


def _same_bytes(a, b) -> bool:
    """Two views of the same elements in the same layout (NumPy or CuPy)."""
    def start(x):
        return x.data.ptr if hasattr(x.data, "ptr") else x.__array_interface__["data"][0]
    return a.strides == b.strides and a.shape == b.shape and start(a) == start(b)


defop("reshape", infer=_reshape_infer, forward=_reshape_fw,
      grad=lambda a, ins, outs, g: [reshape(g[0], ins[0].shape)],
      inplace=((0, 0),), flops=lambda a, i, o: 0)


def reshape(x: Tensor, shape: Sequence[int]) -> Tensor:
    """x with a new shape of the same number of elements (one -1 is inferred). The same
    shape returns x itself; it may go in-place, and then it copies nothing."""
    shape = tuple(int(s) for s in shape)
    if x.shape == shape:
        return x
    return apply1("reshape", [x], {"shape": shape})


# --- transpose ---------------------------------------------------------------------------------

def _transpose_infer(attrs, x):
    perm = attrs["axes"]
    if sorted(perm) != list(range(len(x.shape))):
        raise shape_error("transpose", [x], f"axes {list(perm)} are not a permutation")
    return [(tuple(x.shape[p] for p in perm), x.dtype)]


def _transpose_fw(ctx, attrs, ins, outs):
    outs[0][...] = ctx.xp.transpose(ins[0], attrs["axes"])


def _transpose_grad(attrs, ins, outs, g):
    inv = tuple(int(i) for i in np.argsort(attrs["axes"]))
    return [transpose(g[0], inv)]


defop("transpose", infer=_transpose_infer, forward=_transpose_fw, grad=_transpose_grad,
      flops=lambda a, i, o: 0)


def transpose(x: Tensor, axes: Sequence[int] | None = None) -> Tensor:
    """Permute axes; default swaps the last two (matrix transpose, batched)."""
    if axes is None:
        n = len(x.shape)
        axes = tuple(range(n - 2)) + (n - 1, n - 2) if n >= 2 else (0,)
    return apply1("transpose", [x], {"axes": tuple(int(a) for a in axes)})
