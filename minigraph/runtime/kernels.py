"""The one kernel runner: a node's kernel, run into output arrays its caller placed.

The arena executor, DTR's real mode and the CuPy pool measurement all run kernels this
way; each decides only *where* the arrays live (an arena view, a fresh buffer, a pool).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backend import on_cupy
from ..errors import GraphError
from ..graph import Node
from ..ops.opaque import OpaqueOpError
from ..ops.registry import KernelContext, get_op


def run_kernel(node: Node, inputs: Sequence[Any], outputs: Sequence[Any], ctx: KernelContext,
               during: str = "") -> KernelContext:
    """`get_op(node.op).forward(ctx, node.attr, inputs, outputs)`; returns `ctx`, its
    `workspace_bytes` counted. A failing kernel raises GraphError naming the node and its
    inputs (`during` says where, e.g. " under DTR")."""
    op = get_op(node.op)
    if op.inplace and on_cupy(ctx.xp):
        inputs = same_objects(op.inplace, inputs, outputs)
    try:
        op.forward(ctx, node.attr, inputs, outputs)
    except OpaqueOpError:            # it names the node and the ATen op itself
        raise
    except Exception as e:
        raise GraphError(f"kernel of {node.op} failed at node {node.name} "
                         f"({', '.join(node.inputs)}){during}: {e}") from e
    return ctx


def same_objects(pairs: Sequence[tuple[int, int]], inputs: Sequence[Any],
                 outputs: Sequence[Any]) -> list[Any]:
    """An in-place op's input in its output's very bytes, replaced by the output array
    itself: CuPy copies an input that overlaps an output unless it *is* that output (a
    view of the same bytes is not), which would be undeclared workspace."""
    inputs = list(inputs)
    for o, i in pairs:
        a, b = inputs[i], outputs[o]
        if a is not b and a.shape == b.shape and a.dtype == b.dtype and \
                a.strides == b.strides and a.data.ptr == b.data.ptr:
            inputs[i] = b
    return inputs


def kernel_context(xp: Any, node: Node, step: int = 0, seed: int = 0) -> KernelContext:
    """The plain context: scratch arrays are fresh buffers of `xp` (NumPy or CuPy)."""
    return KernelContext(xp, node.name, step, seed)
