"""The SGD update: `W_new = W - lr * dW`, written over W itself (in place on the parameter).

The planner never reuses a parameter's bytes, so this in-place write is the executor's
business: the new value *is* the parameter buffer (`TensorInfo.alias_of`). It is stateful:
it must run exactly once per step, after every other reader of W (a control dependency),
and DTR never replays it.
"""

from __future__ import annotations

from ..graph import Tensor, add_control_deps, check_same_dtype, node_role
from .registry import apply1, defop, itemsize, numel, shape_error


def _sgd_infer(attrs, w, dw):
    check_same_dtype("sgd_update", w, dw)
    if w.shape != dw.shape:
        raise shape_error("sgd_update", [w, dw], "gradient shape differs from the parameter")
    return [(w.shape, w.dtype)]


def _sgd_fw(ctx, attrs, ins, outs):
    w, dw = ins
    step = ctx.scratch(dw.shape, dw.dtype)
    ctx.xp.multiply(dw, dw.dtype.type(attrs["lr"]), out=step)
    ctx.xp.subtract(w, step, out=outs[0])


defop("sgd_update", infer=_sgd_infer, forward=_sgd_fw, inplace=((0, 0),), stateful=True,
      differentiable=(), flops=lambda a, i, o: 2 * numel(o[0]),
      workspace=lambda a, ins, outs: _nbytes(ins[1]))


def _nbytes(t) -> int:
    return numel(t) * itemsize(t)


def sgd_update(w: Tensor, dw: Tensor, lr: float, readers: list[Tensor] = ()) -> Tensor:
    """New value of parameter `w`; runs after the producers of `readers` (W's other readers)."""
    with node_role("update"):
        out = apply1("sgd_update", [w, dw], {"lr": float(lr), "_alias_of": 0},
                     name=f"{w.name}_new")
    add_control_deps(out, readers)
    return out
