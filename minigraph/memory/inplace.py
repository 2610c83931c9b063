"""In-place: an output takes its input's bytes when that is provably safe [Chen 2016], [Huawei GE].

Two rules, named by `INPLACE_RULES`; every clause of each is named by a test:
- "last-reader" (nnvm's PlanMemory [NNVM 2016], `inplace=True`): the op is the input's
  *last* reader in the schedule. In the MXNet note's counter-example [Chen 2016] (B read
  by C = sigmoid(B), then by F) it lets F overwrite B, never C. Safe for the schedule
  planned; C and F, unordered by the graph, could run at once in a parallel schedule
  (`MemoryPlan.parallel_hazards` finds that).
- "strict" (`inplace="strict"`): the op is the input's *only* reader, as the MXNet note
  ("out-degree 1") and the GE blog ("the unique consumer") say: safe under every
  schedule, at the price of fewer hand-overs.

Both rules also require:
- the op declares the (output, input) pair in-place capable (its kernel reads element i
  before writing element i);
- input and output have the same dtype and the same number of bytes (a reshape keeps its
  bytes; a broadcast or a reduction does not);
- the input is planned: not a graph input, parameter, constant or graph output;
- the op reads the input through one operand only: `add_n(g, g, g)` adds its first two
  operands into the output and then reads the third, which it has just overwritten;
- each input hands its bytes to one output, each output takes one input;
- input and output have the same colour (`colors=k`): a hand-over fuses the two tensors
  into one buffer, and buffers of different colours never share bytes, so a chain stops
  where the colour changes.
Chains hand over repeatedly: three chained sigmoids need one buffer.

`inplace_pairs` proposes the pairs; `inplace_refusal` is the same rule asked of one given
pair, which is how `MemoryPlan.validate` checks a plan's hand-over list against its graph,
under the rule the plan records (`MemoryPlan.inplace_rule`).
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod

from ..errors import PlanError
from ..graph import Graph, Node
from ..ops.registry import get_op
from .buffers import Buffer
from .liveness import Liveness

#: The in-place rules (module docstring).
INPLACE_RULES = ("last-reader", "strict")


def check_rule(rule: str) -> str:
    """`rule` if it names an in-place rule, else PlanError naming it and the known ones."""
    if not isinstance(rule, str) or rule not in INPLACE_RULES:
        raise PlanError(f"unknown in-place rule {rule!r}; known: {', '.join(INPLACE_RULES)}")
    return rule


def _clause_broken(graph: Graph, live: Liveness, node: Node, step: int, x: str, y: str,
                   colors: Mapping[str, int], rule: str = "last-reader") -> str:
    """The first clause (after the op's declaration) that forbids y taking x's bytes at
    `step`, where `node` runs, under `rule`; "" when none does."""
    ix, iy = live.intervals[x], live.intervals[y]
    for iv in (ix, iy):
        if not iv.planned:
            return f"{iv.name} is not planned (it is a graph {iv.kind})"
    readers = graph.consumers[x]
    if rule == "strict" and tuple(readers) != (node.name,):
        return (f"{x} has {len(readers)} readers ({', '.join(readers)}); the strict rule "
                f"wants {node.name} to be its only one")
    if ix.end != step:
        return f"{x} is read after step {step} (its last reader runs at step {ix.end})"
    if ix.start >= step:
        return f"{x} is not born before step {step}"
    why = operand_refusal(graph, node, x, y)
    if why:
        return why
    if colors.get(x, 0) != colors.get(y, 0):
        return f"{x} has colour {colors.get(x, 0)} and {y} colour {colors.get(y, 0)}"
    return ""


def declared_pairs(node: Node) -> list[tuple[str, str]]:
    """(input, output) tensor names of `node` whose op declares the pair in-place capable
    (its kernel reads element i before writing element i), in the op's order."""
    return [(node.inputs[in_k], node.outputs[out_k])
            for out_k, in_k in get_op(node.op).inplace
            if out_k < len(node.outputs) and in_k < len(node.inputs)]


def operand_refusal(graph: Graph, node: Node, x: str, y: str) -> str:
    """The clauses on the two tensors themselves, whatever the schedule: x and y have one
    dtype and one element count, and `node` reads x through one operand only. Returns
    the first one broken ("" when both hold). The graph planner (here) and the DTR
    program (`runtime.dtr.program`) both ask it."""
    tx, ty = graph.tensors[x], graph.tensors[y]
    if tx.dtype != ty.dtype or prod(tx.shape) != prod(ty.shape):
        return (f"{x} ({tx.dtype}{list(tx.shape)}) and {y} ({ty.dtype}{list(ty.shape)}) "
                "differ in dtype or size")
    if node.inputs.count(x) != 1:
        return f"{node.name} reads {x} through {node.inputs.count(x)} operands"
    return ""


def inplace_pairs(graph: Graph, live: Liveness, colors: Mapping[str, int] | None = None,
                  rule: str = "last-reader") -> list[tuple[str, str]]:
    """(input, output) tensor pairs that may share bytes under `rule` (`INPLACE_RULES`), in
    schedule order. With `colors` (tensor -> colour), only pairs within one colour."""
    check_rule(rule)
    colors = colors or {}
    pairs: list[tuple[str, str]] = []
    taken_in, taken_out = set(), set()
    for step, name in enumerate(live.schedule):
        node = graph.node(name)
        for x, y in declared_pairs(node):
            if x not in taken_in and y not in taken_out and \
                    not _clause_broken(graph, live, node, step, x, y, colors, rule):
                pairs.append((x, y))
                taken_in.add(x)
                taken_out.add(y)
    return pairs


def inplace_refusal(graph: Graph, live: Liveness, x: str, y: str,
                    colors: Mapping[str, int] | None = None, rule: str = "last-reader") -> str:
    """Why the hand-over x -> y breaks `rule` under `live`'s schedule ("" if it keeps
    it): y's producer must declare in-place for (y, x), and every clause above must hold.
    Uniqueness (one output per input and back) is the buffer validator's to check."""
    check_rule(rule)
    for t in (x, y):
        if t not in graph.tensors:
            return f"{t} is not a tensor of this graph"
    node_name = graph.tensors[y].producer
    if node_name is None:
        return f"{y} has no producer (it is a {graph.tensors[y].kind})"
    node = graph.node(node_name)
    if x not in node.inputs:
        return f"{x} is not an input of {node.name} ({node.op}), which produces {y}"
    out_k, in_ks = node.outputs.index(y), [k for k, i in enumerate(node.inputs) if i == x]
    if not any((out_k, k) in get_op(node.op).inplace for k in in_ks):
        return (f"{node.op} ({node.name}) does not declare that its output {out_k} ({y}) "
                f"may overwrite its input {in_ks[0]} ({x})")
    step = live.intervals[y].start              # the step where y's producer runs
    return _clause_broken(graph, live, node, step, x, y, colors or {}, rule)


def merge_inplace(buffers: list[Buffer], pairs: list[tuple[str, str]]
                  ) -> tuple[list[Buffer], dict[str, str]]:
    """Fuse each in-place chain into one buffer; returns buffers and tensor -> buffer id.
    A chain keeps one colour (`inplace_pairs` never hands over across colours); a pair
    that would mix colours is refused with PlanError."""
    group = {b.id: b.id for b in buffers}
    if not pairs:
        return list(buffers), group
    for x, y in pairs:          # pairs come in schedule order, so x's group is final
        group[y] = group[x]
    span: dict[str, list] = {}  # group id -> [start, end, size, colour]
    for b in buffers:
        s = span.get(group[b.id])
        if s is None:
            span[group[b.id]] = [b.start, b.end, b.size, b.color]
        elif s[3] != b.color:
            raise PlanError(f"in-place chain {group[b.id]} -> {b.id} mixes colours {s[3]} "
                            f"and {b.color}: buffers of different colours never share bytes")
        else:
            s[0], s[1], s[2] = min(s[0], b.start), max(s[1], b.end), max(s[2], b.size)
    return [Buffer(gid, *s) for gid, s in span.items()], group
