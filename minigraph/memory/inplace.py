"""In-place: an output takes its input's bytes when that is provably safe [Chen 2016], [Huawei GE].

The rule, every clause of which a test names:
- the op declares the (output, input) pair in-place capable (its kernel reads element i
  before writing element i);
- the input's last reader is this op: no other reader runs later (the MXNet note's
  counter-example [Chen 2016]: B read by C = sigmoid(B) *and* by F may not be overwritten);
- input and output have the same dtype and the same number of bytes (a reshape keeps its
  bytes; a broadcast or a reduction does not);
- the input is planned: not a graph input, parameter, constant or graph output;
- the op reads the input through one operand only: `add_n(g, g, g)` adds its first two
  operands into the output and then reads the third, which it has just overwritten;
- each input hands its bytes to one output, each output takes one input.
Chains hand over repeatedly: three chained sigmoids need one buffer.
"""

from __future__ import annotations

from math import prod

from ..graph import Graph
from ..ops.registry import get_op
from .buffers import Buffer
from .liveness import Liveness


def inplace_pairs(graph: Graph, live: Liveness) -> list[tuple[str, str]]:
    """(input, output) tensor pairs that may share bytes, in schedule order."""
    pairs: list[tuple[str, str]] = []
    taken_in: set[str] = set()
    taken_out: set[str] = set()
    for step, name in enumerate(live.schedule):
        node = graph.node(name)
        for out_k, in_k in get_op(node.op).inplace:
            if out_k >= len(node.outputs) or in_k >= len(node.inputs):
                continue
            x, y = node.inputs[in_k], node.outputs[out_k]
            ix, iy = live.intervals[x], live.intervals[y]
            tx, ty = graph.tensors[x], graph.tensors[y]
            if (ix.planned and iy.planned and ix.end == step
                    and tx.dtype == ty.dtype and prod(tx.shape) == prod(ty.shape)
                    and node.inputs.count(x) == 1
                    and x not in taken_in and y not in taken_out):
                pairs.append((x, y))
                taken_in.add(x)
                taken_out.add(y)
    return pairs


def merge_inplace(buffers: list[Buffer], pairs: list[tuple[str, str]]
                  ) -> tuple[list[Buffer], dict[str, str]]:
    """Fuse each in-place chain into one buffer; returns buffers and tensor -> buffer id."""
    group = {b.id: b.id for b in buffers}
    if not pairs:
        return list(buffers), group
    for x, y in pairs:          # pairs come in schedule order, so x's group is final
        group[y] = group[x]
    span: dict[str, list] = {}  # group id -> [start, end, size, colour of its first tensor]
    for b in buffers:
        s = span.get(group[b.id])
        if s is None:
            span[group[b.id]] = [b.start, b.end, b.size, b.color]
        else:
            s[0], s[1], s[2] = min(s[0], b.start), max(s[1], b.end), max(s[2], b.size)
    return [Buffer(gid, *s) for gid, s in span.items()], group
