"""The immutable `Graph` value that symbolic tensors (tensor.py) become.

`Graph(outputs)` freezes everything reachable from the outputs into plain data: nodes and
tensors referring to each other by *name*. Planners, the executor and the drawing only ever
read that data.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType

from .errors import GraphError, ShapeError
from .graph_data import LEAF_KINDS, Node, TensorInfo, _freeze, check_plain_data, toposort  # noqa: F401
from .tensor import (  # noqa: F401  (building names, re-exported: `from minigraph.graph import input`)
    FROM_OPS,
    Call,
    Tensor,
    add_control_deps,
    as_dtype,
    as_shape,
    check_same_dtype,
    constant,
    input,
    make_call,
    name_scope,
    node_role,
    param,
)


class Graph:
    """An immutable graph: nodes in a stable topological order, tensors by name.
    `Graph(outputs)` collects everything the outputs depend on. Iterating yields nodes in
    order; `len(graph)` is the number of nodes; `print(graph)` gives a one-screen summary."""

    def __init__(self, outputs: Sequence[Tensor] | Tensor, name: str = "graph"):
        if isinstance(outputs, Tensor):
            outputs = [outputs]
        calls: dict[int, Call] = {}
        leaves: dict[int, Tensor] = {}
        stack = list(outputs)
        stack_calls: list[Call] = []
        while stack or stack_calls:
            if stack:
                t = stack.pop()
                if t.call is None:
                    leaves[id(t)] = t
                    continue
                c = t.call
            else:
                c = stack_calls.pop()
            if id(c) in calls:
                continue
            calls[id(c)] = c
            stack.extend(c.inputs)
            stack_calls.extend(c.deps)
        ordered = sorted(calls.values(), key=lambda c: c.seq)
        tensors: dict[str, TensorInfo] = {}

        def put(info: TensorInfo) -> None:
            if info.name in tensors:
                raise GraphError(f"two different tensors are named {info.name!r}; "
                                 "give one of them another name")
            tensors[info.name] = info

        for t in sorted(leaves.values(), key=lambda t: t.seq):
            put(TensorInfo(t.name, t.shape, t.dtype, t.kind, value=t.value, init=t.init))
        nodes = []
        for c in ordered:
            alias = c.attrs.get("_alias_of")
            for t in c.outputs:
                put(TensorInfo(t.name, t.shape, t.dtype, t.kind, producer=c.name, index=t.index,
                               alias_of=c.inputs[alias].name
                               if alias is not None and t.index == 0 else None))
            attrs = _freeze({k: v for k, v in c.attrs.items() if not k.startswith("_")})
            nodes.append(Node(c.name, c.op, attrs, tuple(t.name for t in c.inputs),
                              tuple(t.name for t in c.outputs), c.role,
                              tuple(d.name for d in c.deps)))
        self._init(name, nodes, tensors, tuple(t.name for t in outputs))

    # A second constructor from plain data, used by rewire() and by random-graph generators.
    @classmethod
    def from_nodes(cls, nodes: Sequence[Node], tensors: Mapping[str, TensorInfo],
                   outputs: Sequence[str], name: str = "graph") -> Graph:
        """Build from plain `Node`/`TensorInfo` data, checked first (`check_plain_data`:
        GraphError or ShapeError naming the tensor or node); sorts it, naming any cycle."""
        nodes = list(nodes)
        check_plain_data(nodes, tensors)
        g = cls.__new__(cls)
        g._init(name, toposort(nodes, tensors), dict(tensors), tuple(outputs))
        return g

    def _init(self, name: str, nodes: list[Node], tensors: dict[str, TensorInfo],
              outputs: tuple[str, ...]) -> None:
        self.name = name
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.tensors: Mapping[str, TensorInfo] = MappingProxyType(tensors)
        self.outputs = outputs
        self.node_index = MappingProxyType({n.name: i for i, n in enumerate(nodes)})
        if len(self.node_index) != len(nodes):
            raise GraphError("two nodes share a name")
        consumers: dict[str, list[str]] = {t: [] for t in tensors}
        for n in nodes:
            for i in n.inputs:
                if i not in tensors:
                    raise GraphError(f"node {n.name} reads unknown tensor {i!r}")
                if n.name not in consumers[i]:
                    consumers[i].append(n.name)
        for o in outputs:
            if o not in tensors:
                raise GraphError(f"graph output {o!r} is not a tensor of the graph")
        self.consumers: Mapping[str, tuple[str, ...]] = MappingProxyType(
            {k: tuple(v) for k, v in consumers.items()})

    # Reading --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[self.node_index[name]]
        except KeyError:
            raise GraphError(f"no node named {name!r} in {self.name}") from None

    def tensor(self, name: str) -> TensorInfo:
        try:
            return self.tensors[name]
        except KeyError:
            raise GraphError(f"no tensor named {name!r} in {self.name}") from None

    def leaves(self, *kinds: str) -> list[TensorInfo]:
        return [t for t in self.tensors.values() if t.is_leaf and (not kinds or t.kind in kinds)]

    @property
    def inputs(self) -> list[str]:
        return [t.name for t in self.leaves("input")]

    @property
    def params(self) -> list[str]:
        return [t.name for t in self.leaves("param")]

    def producer(self, tensor: str) -> Node | None:
        p = self.tensor(tensor).producer
        return None if p is None else self.node(p)

    def bytes_by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors.values():
            if t.alias_of is None:
                out[t.kind] = out.get(t.kind, 0) + t.nbytes
        return out

    def flops(self) -> int:
        """FLOPs of one run: each node's op counts its own (its registry `flops` rule)."""
        return sum(FROM_OPS["flops_of"](self, n) for n in self.nodes)

    # Editing returns a new graph -------------------------------------------------------
    def rewire(self, node: str, input_index: int, tensor: str) -> Graph:
        """A copy in which input `input_index` of `node` reads `tensor` instead; CycleError
        when `tensor` depends on `node` (the edit would close a loop)."""
        n = self.node(node)
        t = self.tensor(tensor)
        if isinstance(input_index, bool) or not hasattr(type(input_index), "__index__") \
                or not 0 <= input_index < len(n.inputs):      # -1 would pick the last input
            raise GraphError(f"rewire {node}: no input {input_index!r}; it has "
                             f"{len(n.inputs)}, numbered 0..{len(n.inputs) - 1}")
        old = self.tensor(n.inputs[input_index])
        if (t.shape, t.dtype) != (old.shape, old.dtype):
            raise ShapeError(f"rewire {node}: input {input_index} is {old.spec()} "
                             f"{old.dtype}, {t.spec()} {t.dtype} does not fit")
        ins = list(n.inputs)
        ins[input_index] = tensor
        nodes = [Node(n.name, n.op, n.attrs, tuple(ins), n.outputs, n.role, n.deps)
                 if m.name == node else m for m in self.nodes]
        return Graph.from_nodes(nodes, dict(self.tensors), self.outputs, self.name)

    # Printing ---------------------------------------------------------------------------
    def summary(self) -> str:
        roles = Counter(n.role for n in self.nodes)
        kb = self.bytes_by_kind()
        lines = [f"Graph {self.name!r}: {len(self.nodes)} nodes "
                 f"({', '.join(f'{v} {k}' for k, v in roles.items())}), "
                 f"{len(self.tensors)} tensors, {self.flops():,} FLOPs"]
        lines.append("  bytes: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in sorted(kb.items())))
        shown = self.nodes if len(self.nodes) <= 16 else self.nodes[:8] + self.nodes[-6:]
        for i, n in enumerate(shown):
            if len(self.nodes) > 16 and i == 8:
                lines.append(f"  ... {len(self.nodes) - 14} more nodes ...")
            outs = ", ".join(self.tensors[o].spec() for o in n.outputs)
            lines.append(f"  {n.role[0]} {outs} = {n.op}({', '.join(n.inputs)})")
        lines.append(f"  outputs: {', '.join(self.outputs)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<Graph {self.name!r}: {len(self.nodes)} nodes, {len(self.tensors)} tensors>"


def fmt_bytes(n: float) -> str:
    """Bytes for people: "512 B", then KiB, MiB, GiB (powers of 1024) with two decimals."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def as_graph(obj: object) -> object:
    """A model's graph (a zoo `Model`, an imported `TorchModel`: anything whose `.graph` is
    a Graph), else `obj` as it is: the entry points that take a graph call this first, so
    that `plan_memory(model)` works as `plan_memory(model.graph)`."""
    g = getattr(obj, "graph", None)
    return g if isinstance(g, Graph) and not isinstance(obj, Graph) else obj
