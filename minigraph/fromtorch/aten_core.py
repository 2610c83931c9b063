"""Rules for the Core ATen ops that PyTorch's decompositions leave (issue 47), in the manner
of aten.py: index ops (gather, scatter, scatter_add, index_select, index, index_put, flip,
cumsum, sort, topk), the elementwise ops decompositions produce (maximum, minimum, log1p,
expm1, isnan, elu, clamp with tensor bounds), adaptive max-pooling, vector norms, and the
random ops (dropout's mask, rand, randn, bernoulli) as minigraph's seeded random ops
(`minigraph.ops.random`: the same draw when a node runs again).

Where a rule is a composition of minigraph ops (maximum as a `where`), the joint graph's
own backward nodes carry the gradient: the composition is exact in value, and its
gradient is never taken. Importing this module registers its rules in `aten.RULES`.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from ..graph import Tensor, constant
from ..ops import gather as gx
from ..ops.random import random
from ..ops.registry import apply1
from ..ops.unary_more import UNARY, expm1, log1p, unary
from .aten import PoolIndices, Unmapped, cast_to, rule, scalar
from .aten_more import _clamp as _clamp_numbers

# --- random ops: seeded draws, the same when DTR runs the node again -----------------------

#: The random ATen ops these rules draw (every other random op is refused, with advice).
SEEDED = frozenset({"native_dropout", "rand_like", "rand", "randn_like", "randn",
                    "bernoulli"})


def _anchor(c, n) -> Tensor:
    """The tensor a random node hangs from: its first tensor argument, else a 0-d constant."""
    first = c.arg(n, 0) if n.args else None
    return first if isinstance(first, Tensor) else scalar(0.0, "float32")


def _draw(c, n, kind: str, p: float = 0.5) -> Tensor:
    shape, dtype = c.spec(n) if len(c.specs(n)) == 1 else c.specs(n)[0]
    if np.dtype(dtype).kind != "f":
        raise Unmapped(f"a random draw of dtype {dtype} (floating draws map)")
    return random(_anchor(c, n), kind, shape, dtype, p=p)


@rule("native_dropout", args="input p train")
def _native_dropout(c, n):
    # PyTorch's own decomposition: mask = rand_like(x) > p; out = mask * x / (1 - p).
    x, p, train = c.arg(n, 0), float(c.arg(n, 1)), c.arg(n, 2)
    if train is False or p == 0:
        return x, constant(np.ones(x.shape, bool), dtype="bool")
    keep = ops.compare(random(x, "uniform", x.shape, x.dtype), "gt", p)
    out = ops.mul_scalar(ops.mul(ops.cast(keep, x.dtype), x), 1.0 / (1.0 - p))
    return out, keep


@rule("rand_like", "rand", args="self size dtype")
def _rand(c, n):
    return _draw(c, n, "uniform")


@rule("randn_like", "randn", args="self size dtype")
def _randn(c, n):
    return _draw(c, n, "normal")


@rule("bernoulli", args="self p")
def _bernoulli(c, n):
    p = c.arg(n, 1, None)
    if p is None:                        # bernoulli(probabilities): 1 where u < x
        x = c.arg(n, 0)
        u = random(x, "uniform", x.shape, x.dtype)
        return ops.cast(ops.compare(u, "lt", x), x.dtype)
    return _draw(c, n, "bernoulli", float(p))


# --- elementwise ops of the decompositions -------------------------------------------------

def _pair(c, n) -> tuple[Tensor, Tensor]:
    dt = c.spec(n)[1]
    a, b = cast_to(c.arg(n, 0), dt), cast_to(c.arg(n, 1), dt)
    return (a if isinstance(a, Tensor) else scalar(a, dt)), \
        (b if isinstance(b, Tensor) else scalar(b, dt))


def _extreme(a: Tensor, b: Tensor, op: str) -> Tensor:
    # NaN in either operand gives NaN, as PyTorch's maximum/minimum.
    pick = ops.where(ops.compare(a, op, b), a, b)
    nan = ops.compare(a, "ne", a)
    return ops.where(nan, a, pick)


@rule("maximum", "fmax", args="self other")
def _maximum(c, n):
    return _extreme(*_pair(c, n), "gt")


@rule("minimum", "fmin", args="self other")
def _minimum(c, n):
    return _extreme(*_pair(c, n), "lt")


@rule("clamp", "clamp_min", "clamp_max", args="self min max")
def _clamp(c, n):
    short = c.short(n)
    lo = c.arg(n, 1) if short in ("clamp", "clamp_min") else None
    hi = c.arg(n, 2 if short == "clamp" else 1) if short in ("clamp", "clamp_max") else None
    if not isinstance(lo, Tensor) and not isinstance(hi, Tensor):
        return _clamp_numbers(c, n)                 # number bounds: minigraph's clamp op
    dt = c.spec(n)[1]
    y = cast_to(c.arg(n, 0), dt)
    if lo is not None:          # PyTorch: min(max(x, lo), hi), NaN bounds propagate
        y = _extreme(y, cast_to(lo, dt) if isinstance(lo, Tensor) else scalar(lo, dt), "gt")
    if hi is not None:
        y = _extreme(y, cast_to(hi, dt) if isinstance(hi, Tensor) else scalar(hi, dt), "lt")
    return y


@rule("log1p", args="self")
def _log1p(c, n):
    return log1p(c.arg(n, 0))


@rule("expm1", args="self")
def _expm1(c, n):
    return expm1(c.arg(n, 0))


@rule("isnan", args="self")
def _isnan(c, n):
    x = c.arg(n, 0)
    return ops.compare(x, "ne", x)


@rule("elu", args="self alpha scale input_scale")
def _elu(c, n):
    # scale * (x if x > 0 else alpha * expm1(input_scale * x)), ATen's definition
    x, alpha, scale, in_scale = (c.arg(n, k, d) for k, d in enumerate((None, 1.0, 1.0, 1.0)))
    neg = ops.mul_scalar(expm1(ops.mul_scalar(x, float(in_scale))), float(alpha))
    y = ops.where(ops.compare(x, "gt", 0.0), x, neg)
    return y if scale == 1 else ops.mul_scalar(y, float(scale))


@rule("linalg_vector_norm", args="self ord dim keepdim dtype")
def _vector_norm(c, n):
    x, order = c.arg(n, 0), c.arg(n, 1, 2)
    if order != 2:
        raise Unmapped(f"a vector norm of order {order} (the 2-norm maps)")
    x = ops.cast(x, c.spec(n)[1])
    dims = c.arg(n, 2, None)
    axes = None if not dims else tuple(d % x.ndim for d in dims)
    return ops.sqrt(ops.sum(ops.mul(x, x), axis=axes, keepdims=bool(c.arg(n, 3, False))))


# --- index ops -----------------------------------------------------------------------------

@rule("gather", args="self dim index sparse_grad")
def _gather(c, n):
    return gx.gather(c.arg(n, 0), c.arg(n, 1), c.arg(n, 2))


def _src(c, n, x: Tensor, idx: Tensor) -> Tensor:
    src = c.arg(n, 3)
    if not isinstance(src, Tensor):
        return ops.broadcast_to(scalar(src, x.dtype), idx.shape)
    if tuple(src.shape) != tuple(idx.shape):
        raise Unmapped(f"a scatter source {list(src.shape)} larger than its indices "
                       f"{list(idx.shape)}")
    return cast_to(src, x.dtype)


@rule("scatter", args="self dim index src value")
def _scatter(c, n):
    x, dim, idx = c.arg(n, 0), c.arg(n, 1), c.arg(n, 2)
    return gx.scatter(x, dim, idx, _src(c, n, x, idx), "scatter")


@rule("scatter_add", args="self dim index src")
def _scatter_add(c, n):
    x, dim, idx = c.arg(n, 0), c.arg(n, 1), c.arg(n, 2)
    return gx.scatter(x, dim, idx, _src(c, n, x, idx), "scatter_add")


@rule("index_select", args="self dim index")
def _index_select(c, n):
    x, idx = c.arg(n, 0), c.arg(n, 2)
    if idx.ndim == 0:
        idx = ops.reshape(idx, (1,))
    return gx.take(x, c.arg(n, 1), idx)


def _indices(idx) -> tuple[list[bool], list[Tensor]]:
    where = [t is not None for t in idx]
    tensors = [t for t in idx if t is not None]
    if any(t.dtype == "bool" for t in tensors):
        raise Unmapped("a bool mask as an index (its shape depends on the data)")
    return where, tensors


@rule("index", "_unsafe_index", args="self indices")
def _index(c, n):
    where, idx = _indices(c.arg(n, 1))
    return gx.index(c.arg(n, 0), where, idx)


@rule("index_put", "_unsafe_index_put", args="self indices values accumulate")
def _index_put(c, n):
    x, (where, idx), v = c.arg(n, 0), _indices(c.arg(n, 1)), c.arg(n, 2)
    v = cast_to(v, x.dtype) if isinstance(v, Tensor) else scalar(v, x.dtype)
    return gx.index_put(x, where, idx, v, bool(c.arg(n, 3, False)))


@rule("flip", args="self dims")
def _flip(c, n):
    return gx.flip(c.arg(n, 0), c.arg(n, 1))


@rule("cumsum", args="self dim dtype")
def _cumsum(c, n):
    return gx.cumsum(ops.cast(c.arg(n, 0), c.spec(n)[1]), c.arg(n, 1))


@rule("sort", args="self dim descending")
def _sort(c, n):
    return gx.sort(c.arg(n, 0), c.arg(n, 1, -1), bool(c.arg(n, 2, False)))


@rule("topk", args="self k dim largest sorted")
def _topk(c, n):
    x, k, dim = c.arg(n, 0), int(c.arg(n, 1)), c.arg(n, 2, -1)
    return gx.sort(x, dim, descending=bool(c.arg(n, 3, True)), k=k)


# --- adaptive max-pooling of whole windows: max_pool2d -----------------------------------

@rule("adaptive_max_pool2d", args="self output_size")
def _adaptive_max_pool(c, n):
    x = c.arg(n, 0)
    h, w = x.shape[2:]
    oh, ow = c.arg(n, 1)
    if x.ndim != 4 or h % oh or w % ow:
        raise Unmapped(f"adaptive max-pooling of {h}x{w} to {oh}x{ow} (whole windows map)")
    y = ops.max_pool2d(x, (h // oh, w // ow), (h // oh, w // ow), (0, 0))
    return y, PoolIndices(y, x)


@rule("adaptive_max_pool2d_backward", args="grad_output self indices")
def _adaptive_max_pool_backward(c, n):
    g, x, idx = c.arg(n, 0), c.arg(n, 1), c.arg(n, 2)
    if not isinstance(idx, PoolIndices) or idx.x is not x:
        raise Unmapped("max-pool indices that do not come from the pooling of the same input")
    return apply1("max_pool2d_grad", [g, x, idx.y], idx.y.call.attrs)


@rule("any", args="self dim keepdim")
def _any(c, n):
    # any(x) over axes: the largest of (x != 0) as 0/1 floats, above one half
    x = c.arg(n, 0)
    dims = c.arg(n, 1, None)
    dims = [dims] if isinstance(dims, int) else dims
    axes = None if not dims else tuple(d % x.ndim for d in dims)
    nonzero = ops.cast(ops.compare(x, "ne", 0) if x.dtype != "bool" else x, "float32")
    return ops.compare(ops.max(nonzero, axis=axes, keepdims=bool(c.arg(n, 2, False))), "gt",
                       0.5)


@rule(*UNARY, args="self")
def _unary(c, n):
    return unary(c.short(n), c.arg(n, 0))


# --- compositions of minigraph ops (the joint graph carries their gradients) ----------------

@rule("amin", args="self dim keepdim")
def _amin(c, n):
    x = c.arg(n, 0)
    dims = c.arg(n, 1, None)
    axes = None if not dims else tuple(d % x.ndim for d in dims)
    return ops.neg(ops.max(ops.neg(x), axis=axes, keepdims=bool(c.arg(n, 2, False))))


def _first_of_sorted(x: Tensor, dim, keepdim: bool, largest: bool) -> tuple[Tensor, Tensor]:
    """(values, int64 indices) of the max (min) along `dim`, the first of ties (a stable
    sort keeps them in order, as PyTorch's argmax returns the first)."""
    if dim is None:
        x, dim = ops.reshape(x, (-1,)), 0
    dim = dim % x.ndim
    values, indices = gx.sort(x, dim, descending=largest, k=1)
    if keepdim:
        return values, indices
    shape = [s for k, s in enumerate(x.shape) if k != dim]
    return ops.reshape(values, shape), ops.reshape(indices, shape)


@rule("max", "min", args="self dim keepdim")
def _max_dim(c, n):
    if len(n.args) < 2:
        raise Unmapped("max/min over every element (aten.max.default: amax maps)")
    return _first_of_sorted(c.arg(n, 0), c.arg(n, 1), bool(c.arg(n, 2, False)),
                            c.short(n) == "max")


@rule("argmax", "argmin", args="self dim keepdim")
def _argmax(c, n):
    x, dim, keep = c.arg(n, 0), c.arg(n, 1, None), bool(c.arg(n, 2, False))
    if dim is None and keep:
        raise Unmapped("argmax over every element with keepdim=True")
    return _first_of_sorted(x, dim, keep, c.short(n) == "argmax")[1]


@rule("constant_pad_nd", args="self pad value")
def _constant_pad(c, n):
    x, pad, value = c.arg(n, 0), list(c.arg(n, 1)), float(c.arg(n, 2, 0))
    y = x
    for k in range(len(pad) // 2):                 # pad pairs from the last axis
        axis, (lo, hi) = y.ndim - 1 - k, pad[2 * k:2 * k + 2]
        if lo < 0 or hi < 0:
            y = ops.slice(y, axis, max(0, -lo), y.shape[axis] - max(0, -hi), 1)
        parts = []
        for width in (lo, hi):
            shape = list(y.shape)
            shape[axis] = max(0, width)
            parts.append(constant(np.full(shape, value, dtype=y.dtype), dtype=y.dtype)
                         if width > 0 else None)
        y = ops.concat([p for p in (parts[0], y, parts[1]) if p is not None], axis) \
            if any(p is not None for p in parts) else y
    return y


@rule("repeat", args="self repeats")
def _repeat(c, n):
    x, reps = c.arg(n, 0), [int(r) for r in c.arg(n, 1)]
    x = ops.reshape(x, (1,) * (len(reps) - x.ndim) + tuple(x.shape))
    inter = tuple(d for s in x.shape for d in (1, s))
    wide = tuple(d for r, s in zip(reps, x.shape) for d in (r, s))
    return ops.reshape(ops.broadcast_to(ops.reshape(x, inter), wide), c.spec(n)[0])


@rule("copy", args="self src non_blocking")
def _copy(c, n):
    x, src = c.arg(n, 0), c.arg(n, 1)
    return ops.broadcast_to(cast_to(src, x.dtype), x.shape)


def _placed(x: Tensor, src: Tensor, dim: int, entry: tuple) -> Tensor:
    """x with src written at `entry` along `dim`: the positions as a constant mask."""
    mask = np.zeros(x.shape, bool)
    where = [slice(None)] * x.ndim
    where[dim] = entry[1] if entry[0] == "i" else slice(entry[1], entry[1] + entry[2] *
                                                         entry[3], entry[2])
    mask[tuple(where)] = True
    return ops.where(constant(mask, dtype="bool"),
                     _scatter_into(cast_to(src, x.dtype), x.shape, dim, entry), x)


def _scatter_into(src: Tensor, shape, dim: int, entry: tuple) -> Tensor:
    index = tuple(entry if k == dim else ("s", 0, 1, s) for k, s in enumerate(shape))
    return apply1("getitem_grad", [src], {"index": index, "shape": tuple(shape)})


@rule("select_scatter", args="self src dim index")
def _select_scatter(c, n):
    x, src, dim, index = (c.arg(n, k) for k in range(4))
    dim = dim % x.ndim
    return _placed(x, src, dim, ("i", index % x.shape[dim]))


@rule("slice_scatter", args="self src dim start end step")
def _slice_scatter(c, n):
    x, src = c.arg(n, 0), c.arg(n, 1)
    dim, start, end, step = (c.arg(n, k, d) for k, d in ((2, 0), (3, None), (4, None), (5, 1)))
    dim = dim % x.ndim
    begin, stop, step = slice(start, end, step).indices(x.shape[dim])
    return _placed(x, src, dim, ("s", begin, step, len(range(begin, stop, step))))


@rule("remainder", "fmod", args="self other")
def _remainder(c, n):
    # a - round(a / b) * b, rounded down (remainder: Python's %) or toward zero (fmod)
    a, b = _pair(c, n)
    mode = "floor" if c.short(n) == "remainder" else "trunc"
    return ops.sub(a, ops.mul(ops.div_round(a, b, mode), b))
