"""Cases for the GPU's reduction kernels (`minigraph/ops/cuda_rows.py`), shared by the two
tests that hold them equal to their NumPy twins: `test_gpu.py` on a real GPU, and
`test_cuda_emulated.py` on the CPU, where the same CUDA text runs under an emulation.

Each case runs one op's forward twice, through `KernelContext(np)` (the plain twin) and
through a context whose array module is CuPy (or the emulation's stand-in), and the
shapes are chosen to reach every edge of the kernels: rows shorter and longer than a
warp, column counts that are not a multiple of 32, more rows or channel elements than
one chunk (two-stage sums with several parts), in-place outputs, and sums that the
column kernel cannot take (the twin's own code then runs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from minigraph.ops.registry import OPS, KernelContext, get_op


def cases(dtype: Any) -> list[tuple[str, str, dict, list, list]]:
    """(label, op, attrs, inputs, output specs); an output spec of "in:k" is input k itself
    (the op writes in place)."""
    rng = np.random.default_rng(7)
    out: list[tuple[str, str, dict, list, list]] = []

    def r(*shape, scale=1.0, shift=0.0):
        return (scale * rng.standard_normal(shape) + shift).astype(dtype)

    for shape in [(3, 5), (2, 9, 33), (7, 64), (1, 1), (4, 100)]:
        x, dy, d, st = r(*shape, scale=3), r(*shape), shape[-1], shape[:-1]
        a = {"axis": len(shape) - 1}
        y = np.exp(x - x.max(-1, keepdims=True))
        y = (y / y.sum(-1, keepdims=True)).astype(dtype)
        out.append((f"softmax {shape}", "softmax", a, [x], [(shape, dtype)]))
        out.append((f"softmax in place {shape}", "softmax", a, [x.copy()], ["in:0"]))
        out.append((f"softmax_grad {shape}", "softmax_grad", a, [dy, y], [(shape, dtype)]))
        gamma, beta = r(d), r(d)
        mean = x.mean(-1).astype(dtype)
        rstd = (1 / np.sqrt(x.var(-1) + 1e-5)).astype(dtype)
        out.append((f"layer_norm {shape}", "layer_norm", {"eps": 1e-5}, [x, gamma, beta],
                    [(shape, dtype), (st, dtype), (st, dtype)]))
        ins = [dy, x, gamma, mean, rstd]
        grads = [(shape, dtype), ((d,), dtype), ((d,), dtype)]
        out.append((f"layer_norm_grad {shape}", "layer_norm_grad", {}, ins, grads))
        out.append((f"layer_norm_grad in place {shape}", "layer_norm_grad", {},
                    [dy, x.copy(), gamma, mean, rstd], ["in:1", ((d,), dtype), ((d,), dtype)]))
    for shape in [(4, 3, 5, 7), (2, 6), (3, 2, 1, 1), (9, 4, 33, 17), (300, 5)]:
        x, dy, c = r(*shape, scale=2, shift=1), r(*shape), shape[1]
        gamma, beta = r(c), r(c)
        axes = (0,) if len(shape) == 2 else (0, 2, 3)
        mean = x.mean(axes).astype(dtype)
        rstd = (1 / np.sqrt(x.var(axes) + 1e-5)).astype(dtype)
        specs = [(shape, dtype), ((c,), dtype), ((c,), dtype)]
        out.append((f"batch_norm {shape}", "batch_norm", {"eps": 1e-5}, [x, gamma, beta],
                    specs))
        out.append((f"batch_norm_grad {shape}", "batch_norm_grad", {},
                    [dy, x, gamma, mean, rstd], specs))
    for g_shape, shape in [((5, 7), (7,)), ((5, 7), (1, 7)), ((3, 4, 5), (5,)),
                           ((3, 4, 5), (4, 5)), ((3, 4, 5), (1, 1, 5)), ((1, 4, 5), (1, 1, 5)),
                           ((4, 1, 5), (1, 1, 5)), ((3, 4, 5), (3, 1, 5)),
                           ((3, 4, 5), (1, 4, 1)), ((700, 40), (40,)), ((6, 3), ())]:
        out.append((f"sum_to {g_shape} -> {shape}", "sum_to", {"shape": shape},
                    [r(*g_shape)], [(shape, dtype)]))
    for axes, shape in [((2,), (4, 5)), ((0, 2), (5,)), ((0, 1, 2), ()), ((1, 2), (4,)),
                        ((2, 1), (4,))]:
        for op in ("mean", "sum"):
            out.append((f"{op} over {axes}", op, {"axes": axes, "keepdims": False},
                        [r(4, 5, 60)], [(shape, dtype)]))
    return out


class _Spec:
    """What a workspace rule reads of a tensor: its shape and dtype."""

    def __init__(self, a: Any):
        self.shape, self.dtype = tuple(a.shape), a.dtype


def run_case(xp: Any, case: tuple, to_xp: Callable, to_host: Callable) -> tuple[list, int, int]:
    """The op of `case` run through module `xp`: (outputs on the host, the scratch bytes
    the kernel took, the bytes its GPU workspace rule declares)."""
    _, op, attrs, ins, specs = case
    ins = [to_xp(a.copy()) for a in ins]
    outs = [ins[int(s[3:])] if isinstance(s, str) else to_xp(np.full(s[0], np.nan, s[1]))
            for s in specs]
    ctx = KernelContext(xp, op)
    get_op(op).forward(ctx, attrs, ins, outs)
    d = OPS[op]
    rule = d.workspace_gpu if d.workspace_gpu is not None else d.workspace
    declared = int(rule(attrs, [_Spec(a) for a in ins], [_Spec(a) for a in outs]))
    return [to_host(o) for o in outs], ctx.workspace_bytes, declared


def check_all(xp: Any, to_xp: Callable, to_host: Callable) -> list[str]:
    """Every case through `xp` against NumPy; the failures, one line each."""
    failures = []
    for dtype, tol in ((np.float32, 1e-4), (np.float64, 1e-10)):
        for case in cases(dtype):
            want, _, _ = run_case(np, case, lambda a: a, lambda a: a)
            got, used, declared = run_case(xp, case, to_xp, to_host)
            for k, (g, w) in enumerate(zip(got, want)):
                if g.shape != w.shape or not np.allclose(g, w, rtol=tol, atol=tol):
                    off = np.nanmax(np.abs(g - w)) if g.shape == w.shape else g.shape
                    failures.append(f"{case[0]} {np.dtype(dtype)}: output {k} differs by {off}")
            if used > declared:
                failures.append(f"{case[0]} {np.dtype(dtype)}: took {used} B of scratch, "
                                f"declared {declared} B")
    return failures
