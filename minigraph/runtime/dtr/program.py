"""What the DTR runtime executes: a `Program` of op calls and releases over tensors.

A graph becomes a program by walking its schedule: one `call` per node, then a `release`
for every tensor whose last reader that node was (the moment a static planner would free
it). A trace in the DTR authors' JSON-lines format becomes one the same way (the research
wing's `minigraph.dtr_research.simrd_log`), so both sources run through the same code.

The budget is *working memory* (the one counting of every technique, `footprint.py`):
the planned tensors (activations and gradients that are not graph outputs, aligned) plus
the running op's declared workspace. Inputs, parameters, constants, graph outputs and
updated parameters are *outside* (`external`): their own buffers, never evicted.

Budget ratios (`ratio_of`), computed in one place, `Bounds.arena_budget` (bounds.py): by
default a fraction of the *total* peak of the unmodified run, weights included, as the DTR
paper gives them [Kirisame 2021, section 5]: `budget = ratio * (outside + peak) - outside`,
where `peak` is the highest address a no-evict run reaches under this runtime's first-fit
allocator, workspace included (so ratio 1.0 never evicts). `ratio_of="arena"` takes
`ratio * peak`; `ratio_of="baseline"` is the DTR authors' simulator's, ratio x (external +
live bytes of the unbudgeted run), which `replay_trace` uses by default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...errors import BudgetError, GraphError
from ...graph import Graph, Node
from ...memory.buffers import align_up, alignment_value
from ...memory.footprint import outside_bytes
from ...memory.inplace import declared_pairs, operand_refusal
from ...memory.liveness import PLANNED_KINDS, check_schedule
from ...ops.registry import flops_of, get_op, workspace_of
from .bounds import Bounds, budget_bytes, budget_ratio, live_peak, program_bounds


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
    again (`replayable`; stateful ops may not), external tensors it writes over, and
    `inplace`: (input, output) pairs that may share one block (`op_inplace_pairs`)."""
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
    inplace: tuple[tuple[int, int], ...] = ()


class Program:
    """Tensors, ops and steps (`("call", op)`, `("release", tensor)`, `("get", tensor)`),
    the ops listed so that producers come before their consumers (program order)."""

    def __init__(self, tensors: Sequence[TensorSpec], ops: Sequence[OpSpec],
                 steps: Sequence[tuple[str, int]], name: str = "program",
                 graph: Graph | None = None, external_bytes: int | None = None):
        self.tensors, self.ops, self.steps = list(tensors), list(ops), list(steps)
        # bytes outside the arena (a trace's constants too): in the total peak, never evicted
        self.external_bytes = int(external_bytes) if external_bytes is not None else \
            sum(t.size for t in self.tensors if t.external)
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
            for o in (o for o in op.outputs if self.arena[o]):
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
        # a trace's storages (the tensor each view aliases, else itself) and simrd's
        # end-of-run order (parse_trace sets both; a graph's program has neither)
        self.storage: list[int] | None = None
        self.pin_order: list[int] = []
        self.baseline_peak: int | None = None   # simrd's unbudgeted peak (a trace's)
        self.order: list[list[int]] = []
        self.get_order: list[int] = []

    # The bounds, and the order in which an op's inputs are made resident ---------------
    def bounds(self) -> Bounds:
        """`Bounds` of this program, computed once (`bounds.program_bounds`, a plain walk
        over the steps). Also sets `order` (each op's inputs in the order the runtime makes
        them resident) and `get_order` (the final gets), as `safe` assumes them."""
        if self._bounds is None:
            self._bounds, self.order, self.get_order = program_bounds(self)
        return self._bounds

    def peak(self) -> int:
        """The arena a run without rematerialisation needs (`bounds().peak`)."""
        return self.bounds().peak

    def live_peak(self) -> int:
        """The no-rematerialisation peak with an ideal allocator (`bounds.live_peak`)."""
        return live_peak(self)

    def __repr__(self) -> str:
        return (f"<Program {self.name!r}: {self.calls} calls, {len(self.tensors)} tensors "
                f"({sum(self.arena)} in the arena), base cost {self.base_cost:g}>")


CostSpec = str | Mapping[str, float] | Callable[[Graph, Node], float]


def node_costs(graph: Graph, costs: CostSpec = "flops") -> dict[str, float]:
    """Cost of each node: "flops" (the ops' FLOP estimates, at least one unit per output
    element), "unit" (1 each), a mapping node name -> cost (seconds, say), or a function
    (graph, node) -> cost. The floor matters: copies (reshape, a slice) count 0 FLOPs, and
    a zero-cost tensor scores 0 under every DTR-style heuristic, so it would always be
    evicted first; the DTR paper measures times, and no kernel takes zero time."""
    if isinstance(costs, str):
        if costs == "flops":
            return {n.name: float(max(flops_of(graph, n), _elements_written(graph, n)))
                    for n in graph.nodes}
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


def _elements_written(graph: Graph, node: Node) -> int:
    return sum(math.prod(int(d) for d in graph.tensors[o].shape) for o in node.outputs)


def program_from_graph(graph: Graph, schedule: Sequence[str] | None = None,
                       alignment: int = 512, costs: CostSpec = "flops") -> Program:
    """The program of a graph: its schedule's calls, with releases after last readers."""
    alignment = alignment_value(alignment)
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
    ops = [replace(op, inplace=op_inplace_pairs(graph, op, k, tensors, index,
                                                   last_reader))
           for k, op in enumerate(ops)]
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
    return Program(tensors, ops, steps, graph.name, graph, outside_bytes(graph))


def op_inplace_pairs(graph: Graph, op: OpSpec, k: int, tensors: Sequence[TensorSpec],
                     index: Mapping[str, int], last_reader: Mapping[int, int]
                     ) -> tuple[tuple[int, int], ...]:
    """(input, output) pairs of op `k` that may share one block, by the in-place rule of
    `minigraph.memory.inplace` [Chen 2016] (its `declared_pairs` and `operand_refusal`),
    and in the program's terms: both in the arena, the op x's last reader, each input
    going to one output and each output taking one input."""
    node = op.node
    if node is None:
        return ()
    pairs: list[tuple[int, int]] = []
    for xn, yn in declared_pairs(node):
        x, y = index[xn], index[yn]
        if tensors[x].external or tensors[y].external or last_reader.get(x) != k or \
                any(x == a or y == b for a, b in pairs) or \
                operand_refusal(graph, node, xn, yn):
            continue
        pairs.append((x, y))
    return tuple(pairs)


def as_program(source: Graph | Program, schedule: Sequence[str] | None = None,
               alignment: int = 512, costs: CostSpec = "flops") -> Program:
    if isinstance(source, Program):
        return source
    if isinstance(source, Graph):
        return program_from_graph(source, schedule, alignment, costs)
    raise TypeError(f"expected a Graph or a Program, got {type(source).__name__}")


def budget_bounds(graph: Graph | Program, schedule: Sequence[str] | None = None,
                  alignment: int = 512, costs: CostSpec = "flops") -> Bounds:
    """`Bounds(lower, safe, peak, external, live)` of a graph (or program): bytes of arena,
    and the external bytes that make up the total peak with it."""
    return as_program(graph, schedule, alignment, costs).bounds()


def resolve_budget(program: Program, budget: int | None, ratio: float | None,
                   ratio_of: str = "total") -> int:
    """Arena bytes from exactly one of `budget` (bytes of arena) or `ratio` (of the peak
    `ratio_of` names, module docstring; "baseline" uses a trace's `baseline_peak` when it
    has one). BudgetError when the external bytes alone exceed the ratio's budget."""
    if (budget is None) == (ratio is None):
        raise BudgetError("give exactly one of budget= (bytes) or ratio= (of the peak)")
    if ratio is not None:
        ratio = budget_ratio(ratio)
        b = program.bounds()
        arena = b.arena_budget(ratio, ratio_of, program.baseline_peak)
        if arena < 0:
            raise BudgetError(
                f"{ratio:g} x the total peak {b.total:,} B of {program.name} is below its "
                f"{b.external:,} B of parameters, inputs and outputs (never evicted): no "
                f"arena is left", minimum=b.lower)
        return arena
    return budget_bytes(budget)
