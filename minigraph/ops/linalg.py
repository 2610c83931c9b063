"""Batched matrix multiply, with transpose flags so the backward pass needs no copies."""

from __future__ import annotations

import numpy as np

from ..graph import Tensor, check_same_dtype
from .broadcast import sum_to
from .cuda import matmul_into
from .registry import apply1, defop, numel, shape_error
from .shape import reshape


def _mats(x, t):
    """(rows, cols) of operand x as the product sees it (after the transpose flag)."""
    r, c = x.shape[-2], x.shape[-1]
    return (c, r) if t else (r, c)


def _matmul_infer(attrs, a, b):
    dt = check_same_dtype("matmul", a, b)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise shape_error("matmul", [a, b], "operands need at least 2 dimensions")
    (m, k1), (k2, n) = _mats(a, attrs["ta"]), _mats(b, attrs["tb"])
    if k1 != k2:
        raise shape_error("matmul", [a, b], f"inner dimensions {k1} != {k2}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise shape_error("matmul", [a, b], "batch dimensions do not broadcast") from None
    return [(tuple(batch) + (m, n), dt)]


def _matmul_fw(ctx, attrs, ins, outs):
    a, b = ins
    out = outs[0]
    if (b.ndim == 2 and a.ndim > 2 and not attrs["ta"] and a.flags.c_contiguous
            and out.flags.c_contiguous):
        # [..., m, k] @ [k, n]: fold the batch into rows, one GEMM instead of one per batch
        matmul_into(ctx.xp, a.reshape(-1, a.shape[-1]), b, out.reshape(-1, out.shape[-1]),
                    tb=attrs["tb"])
        return
    matmul_into(ctx.xp, a, b, out, attrs["ta"], attrs["tb"])   # the flags read transposed


def _matmul_flops(attrs, ins, outs):
    k = _mats(ins[0], attrs["ta"])[1]
    return 2 * k * numel(outs[0])


def _matmul_grad(attrs, ins, outs, g):
    a, b = ins
    gy = g[0]
    ta, tb = attrs["ta"], attrs["tb"]
    # C = op(A) op(B). dop(A) = G op(B)^T, dop(B) = op(A)^T G; undo the flags.
    if not ta:
        da = matmul(gy, b, tb=not tb)
    else:
        da = matmul(b, gy, ta=tb, tb=True)
    if len(b.shape) == 2 and len(gy.shape) > 2 and not ta:
        # A shared weight under a batch: fold the batch into rows (one GEMM, no big temp).
        a2 = reshape(a, (-1, a.shape[-1]))
        g2 = reshape(gy, (-1, gy.shape[-1]))
        db = matmul(g2, a2, ta=True) if tb else matmul(a2, g2, ta=True)
    elif not tb:
        db = matmul(a, gy, ta=not ta)
    else:
        db = matmul(gy, a, ta=True, tb=ta)
    return [sum_to(da, a.shape), sum_to(db, b.shape)]


defop("matmul", infer=_matmul_infer, forward=_matmul_fw, grad=_matmul_grad,
      flops=_matmul_flops)


def matmul(a: Tensor, b: Tensor, ta: bool = False, tb: bool = False) -> Tensor:
    """a @ b over the last two axes (batched, broadcasting); `ta`/`tb` transpose first."""
    return apply1("matmul", [a, b], {"ta": bool(ta), "tb": bool(tb)})
