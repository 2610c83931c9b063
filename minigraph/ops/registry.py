"""The op registry: a plain dict from op name to its definition (as in Autodidax).

An op is one small record: its shape/dtype rule, a forward kernel that writes into output
buffers it is given (`out=`, the same `xp` code for NumPy and CuPy), a gradient rule that
builds *graph nodes* for the backward pass, which outputs may overwrite which inputs
(in-place capability), a FLOP estimate and the bytes of scratch space it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShapeError, UnknownOpError
from ..graph import Tensor, make_call

Spec = tuple[tuple[int, ...], str]  # (shape, dtype) of one output


def numel(t: Any) -> int:
    """Number of elements of a tensor or array (anything with a `shape`); the one copy
    that every op's flops and workspace rules use."""
    return int(np.prod(t.shape, dtype=np.int64))


def itemsize(t: Any) -> int:
    """Bytes of one element of a tensor or array (anything with a `dtype`)."""
    return np.dtype(t.dtype).itemsize


def default_flops(attrs: dict, ins: Sequence[Any], outs: Sequence[Any]) -> int:
    """One operation per output element: right for elementwise ops."""
    return sum(numel(o) for o in outs)


def no_workspace(attrs: dict, ins: Sequence[Any], outs: Sequence[Any]) -> int:
    return 0


@dataclass(frozen=True)
class OpDef:
    name: str
    infer: Callable[..., list[Spec]]            # (attrs, *inputs) -> output specs
    forward: Callable[..., None]                # (ctx, attrs, ins, outs) -> None, writes outs
    grad: Callable[..., Sequence[Tensor | None]] | None = None
    # (attrs, inputs, outputs, output grads) -> one gradient (or None) per input
    inplace: tuple[tuple[int, int], ...] = ()   # (output index, input index) pairs
    flops: Callable[..., int] = default_flops
    workspace: Callable[..., int] = no_workspace  # scratch bytes (im2col and the like)
    # Scratch bytes on a GPU, where the op's one-kernel CuPy form (ops/cuda.py) differs
    workspace_gpu: Callable[..., int] | None = None
    stateful: bool = False                      # must run exactly once (no DTR replay)
    differentiable: tuple[int, ...] | None = None  # inputs that take gradients (None: all)
    # Inputs whose values index something (labels, ids): (attrs, inputs) -> {position:
    # bound}; a GPU run checks such a feed on the host, so no kernel reads a result back.
    index_inputs: Callable[[dict, Sequence[Any]], dict[int, int]] | None = None


OPS: dict[str, OpDef] = {}


def defop(name: str, **kw: Any) -> OpDef:
    """Register an op; returns its definition."""
    OPS[name] = OpDef(name, **kw)
    return OPS[name]


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise UnknownOpError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") \
            from None


def apply(op: str, inputs: Sequence[Tensor], attrs: dict | None = None,
          name: str | None = None) -> tuple[Tensor, ...]:
    """Apply a registered op to tensor handles: infer output specs, record the node."""
    attrs = dict(attrs or {})
    return make_call(op, inputs, attrs, get_op(op).infer(attrs, *inputs), name=name)


def apply1(op: str, inputs: Sequence[Tensor], attrs: dict | None = None,
           name: str | None = None) -> Tensor:
    return apply(op, inputs, attrs, name)[0]


def shape_error(op: str, operands: Sequence[Any], why: str) -> ShapeError:
    """`matmul(h1[64,256], W2[128,10]): inner dimensions 256 != 128`."""
    return ShapeError(f"{op}({', '.join(t.spec() for t in operands)}): {why}")


def flops_of(graph: Any, node: Any) -> int:
    d = get_op(node.op)
    ins = [graph.tensors[i] for i in node.inputs]
    outs = [graph.tensors[o] for o in node.outputs]
    return int(d.flops(node.attr, ins, outs))


def index_bounds(graph: Any, node: Any) -> dict[int, int]:
    """{input position: bound} of the node's inputs that index something (`index_inputs`)."""
    d = get_op(node.op)
    if d.index_inputs is None:
        return {}
    return d.index_inputs(node.attr, [graph.tensors[i] for i in node.inputs])


def workspace_of(graph: Any, node: Any, device: str = "cpu") -> int:
    """Scratch bytes the node's kernel takes while it runs, on `device` ("cpu" or "gpu")."""
    d = get_op(node.op)
    ins = [graph.tensors[i] for i in node.inputs]
    outs = [graph.tensors[o] for o in node.outputs]
    rule = d.workspace_gpu if device == "gpu" and d.workspace_gpu is not None else d.workspace
    return int(rule(node.attr, ins, outs))


class KernelContext:
    """What a kernel may use besides its buffers: the array module, the step, scratch space."""

    def __init__(self, xp: Any, node: str = "", step: int = 0, seed: int = 0):
        self.xp, self.node, self.step, self.seed = xp, node, step, seed
        self.workspace_bytes = 0
        self.indices_checked = False    # the executor checked the index inputs' values

    def scratch(self, shape: Sequence[int], dtype: Any) -> Any:
        """A temporary array (counted as workspace, freed when the kernel returns)."""
        a = self.xp.empty(tuple(shape), dtype=dtype)
        self.workspace_bytes += a.nbytes
        return a
