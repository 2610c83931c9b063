"""The opaque op: a node minigraph can plan but not run (an imported ATen op it has no kernel for).

It carries what the planners, the validator, the online allocators and DTR's simulation
read: its output shapes and dtypes, its FLOPs (measured by PyTorch's FLOP counter when the
graph was imported), and which input a view output aliases in PyTorch (`view_of`, -1 for
none: minigraph still gives it its own buffer, a copy). Running it raises `OpaqueOpError`
naming the node and the ATen op, rather than computing anything made up.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import GraphError
from ..graph import Tensor, as_dtype, as_shape
from .registry import apply, defop


class OpaqueOpError(GraphError):
    """An opaque node (an imported ATen op without a minigraph kernel) was asked to run."""


def _opaque_infer(attrs, *ins):
    return [(tuple(int(d) for d in shape), str(dtype)) for shape, dtype in attrs["specs"]]


def _opaque_forward(ctx, attrs, ins, outs):
    raise OpaqueOpError(
        f"node {ctx.node or '?'} is opaque: minigraph has no kernel for the ATen op "
        f"{attrs['aten']} it was imported from, so the graph can be planned and simulated "
        "(shapes, bytes, FLOPs) but not run; " + (attrs.get("note") or
                                                  "rewrite that part of the model with "
                                                  "ops minigraph has"))


defop("opaque", infer=_opaque_infer, forward=_opaque_forward, differentiable=(),
      flops=lambda a, ins, outs: int(a["flops"]))


def opaque(inputs: Sequence[Tensor], aten: str, specs: Sequence[tuple], flops: int = 0,
           view_of: int = -1, note: str = "", name: str | None = None) -> tuple[Tensor, ...]:
    """One opaque node reading `inputs` with outputs of `specs` ((shape, dtype) pairs)."""
    clean = tuple((as_shape(s, as_dtype(d, aten), aten), as_dtype(d, aten)) for s, d in specs)
    if not clean:
        raise GraphError(f"opaque {aten}: an op needs at least one output")
    if not -1 <= view_of < len(inputs):
        raise GraphError(f"opaque {aten}: view_of={view_of} names no input "
                         f"(it has {len(inputs)})")
    return apply("opaque", inputs, {"aten": str(aten), "specs": clean, "flops": int(flops),
                                    "view_of": int(view_of), "note": str(note)}, name=name)
