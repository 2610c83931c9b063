"""What the DTR runtime executes: a `Program` of op calls and releases over tensors.

A graph becomes a program by walking its schedule: one `call` per node, then a `release`
for every tensor whose last reader that node was (the moment a static planner would free
it). A trace in the DTR authors' JSON-lines format becomes one the same way (trace.py).
The runtime only ever sees this plain data, so both sources run through the same code.

What counts against the budget (the same split as `minigraph.memory`): the *planned*
tensors, i.e. activations and gradients that are not graph outputs, each rounded up to
the alignment, plus the declared workspace of the op that is running. Inputs, parameters,
constants, graph outputs and a parameter's updated value are *external*: they live outside
the arena for the whole run (like the static plans' "unplanned" bytes) and are never
evicted. So "budget = 0.5 x peak" means half of the arena a no-rematerialisation run needs,
with the same numbers `plan_memory` reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ...errors import GraphError
from ...graph import Graph, Node
from ...memory.buffers import align_up
from ...memory.liveness import PLANNED_KINDS, check_schedule
from ...ops.registry import flops_of, get_op, workspace_of


@dataclass(frozen=True)
class TensorSpec:
    """One tensor: `size` bytes in the arena (0 when external), its producer op index."""
    name: str
    size: int
    external: bool
    producer: int = -1
    kind: str = "activation"
    shape: tuple[int, ...] = ()
    dtype: str = "float32"


@dataclass(frozen=True)
class OpSpec:
    """One op: unique input tensors, outputs, cost, workspace bytes, whether it may run
    again (`replayable`; stateful ops may not), and external tensors it writes over."""
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    cost: float
    workspace: int = 0
    replayable: bool = True
    overwrites: tuple[int, ...] = ()
    args: tuple[int, ...] = ()      # the kernel's operands in order (duplicates kept)
    node: Node | None = field(default=None, repr=False, compare=False)
    role: str = "forward"           # forward / backward / update (static baselines use it)


@dataclass(frozen=True)
class Bounds:
    """Budgets that matter for one program (bytes of arena).

    `lower`: the largest single-op footprint (inputs + outputs + workspace resident at
    once) plus bytes that can never be evicted; no smaller budget can work, and the
    runtime refuses one at once. `safe`: a budget at which the runtime is guaranteed to
    finish (it rematerialises inputs in the order this bound assumes; see `Program`).
    `peak`: the arena a run without rematerialisation needs (budget ratio 1.0)."""
    lower: int
    safe: int
    peak: int

    def __repr__(self) -> str:
        return f"Bounds(lower={self.lower}, safe={self.safe}, peak={self.peak})"


class Program:
    """Tensors, ops and steps (`("call", op)`, `("release", tensor)`, `("get", tensor)`).

    Ops must be listed so that producers come before their consumers (program order).
    """

    def __init__(self, tensors: Sequence[TensorSpec], ops: Sequence[OpSpec],
                 steps: Sequence[tuple[str, int]], name: str = "program",
                 graph: Graph | None = None):
        self.tensors, self.ops, self.steps = list(tensors), list(ops), list(steps)
        self.name, self.graph = name, graph
        self.index = {t.name: k for k, t in enumerate(self.tensors)}
        n = len(self.tensors)
        self.arena = [not t.external and t.size > 0 for t in self.tensors]
        self.replayable = [self.arena[k] and t.producer >= 0 and
                           self.ops[t.producer].replayable
                           for k, t in enumerate(self.tensors)]
        self.consumers: list[list[int]] = [[] for _ in range(n)]
        for k, op in enumerate(self.ops):
            for i in op.inputs:
                self.consumers[i].append(k)
                p = self.tensors[i].producer
                if p >= k:
                    raise GraphError(f"op {op.name} (#{k}) reads {self.tensors[i].name}, "
                                     f"produced later by {self.ops[p].name} (#{p})")
        # Neighbours in the dependency graph (parents and children), arena tensors only:
        # the edges of DTR's evicted neighbourhoods.
        parents: list[list[int]] = [[] for _ in range(n)]
        children: list[list[int]] = [[] for _ in range(n)]
        for op in self.ops:
            ins = [i for i in op.inputs if self.arena[i]]
            for o in op.outputs:
                if not self.arena[o]:
                    continue
                for i in ins:
                    parents[o].append(i)
                    children[i].append(o)
        self.parents = [list(dict.fromkeys(a)) for a in parents]
        self.children = [list(dict.fromkeys(a)) for a in children]
        self.adj = [a + b for a, b in zip(self.parents, self.children)]
        self.cost_t = [self.ops[t.producer].cost if t.producer >= 0 else 0.0
                       for t in self.tensors]
        self.base_cost = float(sum(self.ops[k].cost for s, k in self.steps if s == "call"))
        self.calls = sum(1 for s, _ in self.steps if s == "call")
        self._bounds: Bounds | None = None
        self.order: list[list[int]] = []
        self.get_order: list[int] = []

    # The order in which an op's inputs are made resident, and the bounds ----------------
    def bounds(self) -> Bounds:
        """`Bounds` of this program (computed once).

        safe: R(op) = max(footprint(op), max_j (bytes of inputs before j + R(producer of
        input j))), inputs sorted by R - size, largest first (as Sethi-Ullman order
        registers): the memory a replay needs when everything unpinned may be evicted.
        The runtime resolves inputs in exactly this order, pinning each as it comes.
        """
        if self._bounds is not None:
            return self._bounds
        arena, size = self.arena, [t.size for t in self.tensors]
        pinned_total = sum(size[k] for k in range(len(size))
                           if arena[k] and not self.replayable[k])
        R = [0] * len(self.ops)
        lower = safe = 0
        self.order = []
        for k, op in enumerate(self.ops):
            ext = [i for i in op.inputs if not arena[i]]
            ins = [i for i in op.inputs if arena[i]]

            def r(i: int) -> int:
                return R[self.tensors[i].producer] if self.replayable[i] else 0
            ins.sort(key=lambda i: size[i] - r(i))
            self.order.append(ext + ins)
            outs = [o for o in op.outputs if arena[o]]
            fp = sum(size[i] for i in ins) + sum(size[o] for o in outs) + op.workspace
            need, prefix = fp, 0
            for i in ins:
                need = max(need, prefix + r(i))
                prefix += size[i]
            R[k] = need
            own_pinned = sum(size[t] for t in ins + outs if not self.replayable[t])
            lower = max(lower, fp + pinned_total - own_pinned)
            safe = max(safe, need + pinned_total - own_pinned)
        # "get" steps (a trace's outputs) are made resident one after the other and stay
        # pinned: they are fetched in the same order as an op's inputs.
        gets = [t for s, t in self.steps if s == "get" and arena[t]]

        def rg(t: int) -> int:
            return R[self.tensors[t].producer] if self.replayable[t] else 0
        gets.sort(key=lambda t: size[t] - rg(t))
        self.get_order = gets
        prefix = 0
        for t in gets:
            safe = max(safe, prefix + rg(t) + pinned_total)
            prefix += size[t]
        lower, safe = max(lower, prefix), max(safe, prefix + pinned_total)
        self._bounds = Bounds(lower, max(safe, lower), self.peak())
        return self._bounds

    def peak(self) -> int:
        """Arena bytes a run without rematerialisation needs: the largest sum of live
        planned bytes plus the running op's workspace (= the liveness theoretical minimum
        of `minigraph.memory` when no op declares workspace)."""
        live = best = 0
        alive = [False] * len(self.tensors)
        for s, x in self.steps:
            if s == "call":
                op = self.ops[x]
                for o in op.outputs:
                    if self.arena[o] and not alive[o]:
                        alive[o] = True
                        live += self.tensors[o].size
                best = max(best, live + op.workspace)
            elif s == "release" and alive[x]:
                alive[x] = False
                live -= self.tensors[x].size
        return best

    def __repr__(self) -> str:
        n_arena = sum(self.arena)
        return (f"<Program {self.name!r}: {self.calls} calls, {len(self.tensors)} tensors "
                f"({n_arena} in the arena), base cost {self.base_cost:g}>")


CostSpec = str | Mapping[str, float] | Callable[[Graph, Node], float]


def node_costs(graph: Graph, costs: CostSpec = "flops") -> dict[str, float]:
    """Cost of each node: "flops" (the ops' FLOP estimates), "unit" (1 each), a mapping
    node name -> cost (seconds, say), or a function (graph, node) -> cost."""
    if isinstance(costs, str):
        if costs == "flops":
            return {n.name: float(flops_of(graph, n)) for n in graph.nodes}
        if costs == "unit":
            return {n.name: 1.0 for n in graph.nodes}
        raise ValueError(f"costs must be 'flops', 'unit', a mapping or a function, "
                         f"not {costs!r}")
    if callable(costs):
        return {n.name: float(costs(graph, n)) for n in graph.nodes}
    missing = [n.name for n in graph.nodes if n.name not in costs]
    if missing:
        raise GraphError(f"costs has no entry for node {missing[0]!r}")
    return {n.name: float(costs[n.name]) for n in graph.nodes}


def program_from_graph(graph: Graph, schedule: Sequence[str] | None = None,
                       alignment: int = 512, costs: CostSpec = "flops") -> Program:
    """The program of a graph: its schedule's calls, with releases after last readers."""
    schedule = check_schedule(graph, schedule) if schedule is not None else \
        tuple(n.name for n in graph.nodes)
    cost = node_costs(graph, costs)
    outputs = set(graph.outputs)
    names = list(graph.tensors)
    index = {n: k for k, n in enumerate(names)}
    op_index = {n: k for k, n in enumerate(schedule)}
    tensors = []
    for name in names:
        t = graph.tensors[name]
        planned = t.kind in PLANNED_KINDS and name not in outputs and t.alias_of is None \
            and t.nbytes > 0
        tensors.append(TensorSpec(name, align_up(t.nbytes, alignment) if planned else 0,
                                  not planned, op_index[t.producer] if t.producer else -1,
                                  t.kind, t.shape, t.dtype))
    ops = []
    for name in schedule:
        node = graph.node(name)
        d = get_op(node.op)
        ws = workspace_of(graph, node)
        ops.append(OpSpec(
            name, tuple(dict.fromkeys(index[i] for i in node.inputs)),
            tuple(index[o] for o in node.outputs), cost[name],
            align_up(ws, alignment) if ws else 0, not d.stateful,
            tuple(index[graph.tensors[o].alias_of] for o in node.outputs
                  if graph.tensors[o].alias_of),
            tuple(index[i] for i in node.inputs), node, node.role))
    last_reader: dict[int, int] = {}
    for k, op in enumerate(ops):
        for i in op.inputs:
            last_reader[i] = k
    releases: dict[int, list[int]] = {}
    for k, t in enumerate(tensors):
        if t.external:
            continue
        when = last_reader.get(k, t.producer)        # never read: free right after
        releases.setdefault(when, []).append(k)
    steps: list[tuple[str, int]] = []
    for k in range(len(ops)):
        steps.append(("call", k))
        steps.extend(("release", t) for t in releases.get(k, ()))
    return Program(tensors, ops, steps, graph.name, graph)


def as_program(source: Graph | Program, schedule: Sequence[str] | None = None,
               alignment: int = 512, costs: CostSpec = "flops") -> Program:
    if isinstance(source, Program):
        return source
    if isinstance(source, Graph):
        return program_from_graph(source, schedule, alignment, costs)
    raise TypeError(f"expected a Graph or a Program, got {type(source).__name__}")


def budget_bounds(graph: Graph | Program, schedule: Sequence[str] | None = None,
                  alignment: int = 512, costs: CostSpec = "flops") -> Bounds:
    """`Bounds(lower, safe, peak)` of a graph (or program), in bytes of arena."""
    return as_program(graph, schedule, alignment, costs).bounds()


def resolve_budget(program: Program, budget: int | None, ratio: float | None) -> int:
    """A budget in bytes from exactly one of `budget` (bytes) or `ratio` (of the peak)."""
    if (budget is None) == (ratio is None):
        raise ValueError("give exactly one of budget= (bytes) or ratio= (of the peak)")
    if ratio is not None:
        if ratio <= 0:
            raise ValueError(f"ratio must be > 0, not {ratio}")
        return int(ratio * program.bounds().peak)
    return int(budget)
