"""Masks: comparisons, logical ops, `where`, and the triangular `tril` / `triu`.

An attention mask is built from these: a causal mask is `tril` of ones (or `arange(t)`
compared with itself), a padding mask a comparison of the token ids, and `masked_fill(x,
mask, -inf)` is `where(mask, -inf, x)` [Vaswani 2017]. Comparisons and logical ops make
bool tensors and have no gradient; `where` sends its gradient to the operand each element
came from; `tril`'s gradient is the `tril` of the gradient.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from ..graph import Tensor, check_same_dtype, constant
from .broadcast import sum_to
from .registry import apply1, defop, numel, shape_error

_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}
_LOGICAL = {"and": "logical_and", "or": "logical_or", "xor": "logical_xor"}


def _broadcast_shape(op: str, *ts: Tensor) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(t.shape for t in ts)))
    except ValueError:
        raise shape_error(op, ts, "shapes do not broadcast") from None


# --- comparisons: bool results, no gradient ---------------------------------------------------

defop("compare", infer=lambda a, x, y: [(_broadcast_shape(f"compare:{a['op']}", x, y), "bool")],
      forward=lambda ctx, a, ins, outs: getattr(ctx.xp, _COMPARE[a["op"]])(
          ins[0], ins[1], out=outs[0]), differentiable=())
defop("compare_scalar", infer=lambda a, x: [(x.shape, "bool")],
      forward=lambda ctx, a, ins, outs: getattr(ctx.xp, _COMPARE[a["op"]])(
          ins[0], a["c"], out=outs[0]), differentiable=())


def compare(x: Tensor, op: str, y: Tensor | float) -> Tensor:
    """x `op` y elementwise, as bools: op one of eq, ne, lt, le, gt, ge; y a tensor
    (broadcast) or a number."""
    if op not in _COMPARE:
        raise ValueError(f"compare({x.name}, {op!r}): op must be one of {', '.join(_COMPARE)}")
    if isinstance(y, Tensor):
        return apply1("compare", [x, y], {"op": op})
    return apply1("compare_scalar", [x], {"op": op, "c": y})


# --- logical ops ------------------------------------------------------------------------------

defop("logical", infer=lambda a, x, y: [(_broadcast_shape(f"logical_{a['op']}", x, y), "bool")],
      forward=lambda ctx, a, ins, outs: getattr(ctx.xp, _LOGICAL[a["op"]])(
          ins[0], ins[1], out=outs[0]), differentiable=())
defop("logical_not", infer=lambda a, x: [(x.shape, "bool")],
      forward=lambda ctx, a, ins, outs: ctx.xp.logical_not(ins[0], out=outs[0]),
      differentiable=())


def logical(x: Tensor, op: str, y: Tensor) -> Tensor:
    """x `op` y for op and, or, xor (nonzero counts as true); bools."""
    return apply1("logical", [x, y], {"op": op})


def logical_not(x: Tensor) -> Tensor:
    """not x, elementwise (nonzero counts as true); bools. No gradient: a mask is not
    differentiated."""
    return apply1("logical_not", [x])


# --- where: an element from a where the condition holds, from b elsewhere --------------------

def _where_infer(attrs, cond, a, b):
    if cond.dtype != "bool":
        raise DTypeError(f"where({cond.name}[{cond.dtype}], {a.name}, {b.name}): the "
                         "condition must be a bool tensor")
    dt = check_same_dtype("where", a, b)
    return [(_broadcast_shape("where", cond, a, b), dt)]


def _where_fw(ctx, attrs, ins, outs):
    # b everywhere, then a where the condition holds: the output may be b itself.
    xp, (cond, a, b), out = ctx.xp, ins, outs[0]
    if b is not out:
        xp.copyto(out, b)
    xp.copyto(out, a, where=cond)


def _where_grad(attrs, ins, outs, g):
    cond, a, b = ins
    zero = constant(np.zeros((), g[0].dtype), dtype=g[0].dtype)
    return [None, sum_to(where(cond, g[0], zero), a.shape),
            sum_to(where(cond, zero, g[0]), b.shape)]


defop("where", infer=_where_infer, forward=_where_fw, grad=_where_grad, inplace=((0, 2),),
      differentiable=(1, 2))


def where(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """a where `cond` holds, else b (all three broadcast); `masked_fill(x, m, v)` is
    `where(m, v, x)`."""
    return apply1("where", [cond, a, b])


# --- tril / triu: keep the lower (upper) triangle of the last two axes ------------------------

def _tri_infer(attrs, x):
    if x.ndim < 2:
        raise shape_error("tril" if not attrs["upper"] else "triu", [x],
                          "x needs at least two axes (the matrix is the last two)")
    return [(x.shape, x.dtype)]


def _tri_fw(ctx, attrs, ins, outs):
    # Element (i, j) is kept when j - i <= k (tril) or j - i >= k (triu), else zeroed.
    xp, x, out = ctx.xp, ins[0], outs[0]
    h, w = x.shape[-2:]
    diff = ctx.scratch((h, w), np.int64)
    drop = ctx.scratch((h, w), np.bool_)
    diff[...] = xp.arange(w, dtype=np.int64)[None, :]
    xp.subtract(diff, xp.arange(h, dtype=np.int64)[:, None], out=diff)
    (xp.less if attrs["upper"] else xp.greater)(diff, attrs["k"], out=drop)
    if x is not out:
        xp.copyto(out, x)
    xp.copyto(out, x.dtype.type(0), where=drop)


def _tri_ws(attrs, ins, outs):
    h, w = ins[0].shape[-2:]
    return h * w * 9 + (h + w) * 8


defop("tril", infer=_tri_infer, forward=_tri_fw, inplace=((0, 0),),
      grad=lambda a, ins, outs, g: [apply1("tril", [g[0]], a)],
      flops=lambda a, ins, outs: numel(outs[0]), workspace=_tri_ws)


def tril(x: Tensor, k: int = 0) -> Tensor:
    """x with the elements above diagonal k of its last two axes zeroed (`torch.tril`)."""
    return apply1("tril", [x], {"k": int(k), "upper": False})


def triu(x: Tensor, k: int = 0) -> Tensor:
    """x with the elements below diagonal k of its last two axes zeroed (`torch.triu`)."""
    return apply1("tril", [x], {"k": int(k), "upper": True})
